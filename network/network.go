// Package network is the messaging-network port: what a session actor needs from a messaging
// network (link a device by QR or phone code, keep it connected, send every message kind
// (replies, reactions, polls, edits and revokes included: domain.Message carries them all),
// mark messages read, look numbers up, run groups, log out), and what the network reports
// (links, receipts, messages people write, their reactions, edits, revokes and poll votes). Implementations live in sub-packages: sim (the embedded default) and whatsapp
// (whatsmeow). This package imports only domain; adapters import only this and domain.
package network

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/gateway/gateway/domain"
)

// Receipt is the network's acknowledgement of a sent message.
type Receipt struct {
	ID string    // the network's message id (equals Message.ID where the network honours it)
	At time.Time // server time of the acknowledgement
	// LID is the recipient's network-internal id the message was addressed to ("" for a
	// group, or a network without one).
	LID string
}

// Event is something that happened to a linked device; a Client reports events through the
// sink given to Network.Open, in order, from one goroutine. Sinks must not block.
type Event interface{ isEvent() }

// QRCode: a new QR code to show (the text to encode in the QR image). Codes rotate.
type QRCode struct{ Code string }

// QRTimeout: the QR codes ran out without a scan; Connect again for new ones.
type QRTimeout struct{}

// Paired: a phone scanned the QR or entered the pair code; Phone is its number (digits).
type Paired struct{ Phone string }

// Connected: the device is online and can send. It also ends every Disconnected (whatever
// its StatusReason) and a PhoneOffline warning is not cleared by it (see PhoneOffline).
type Connected struct{ Phone string }

// StatusReason says why a session is not connected, in words the API shows as
// `statusReason` next to the SPEC's four client statuses (which do not change).
type StatusReason string

// Status reasons of Disconnected and LoggedOut.
const (
	// ReasonNetwork: the link dropped (socket closed, server restarting, connect failed); the
	// client reconnects by itself (Reconnecting true).
	ReasonNetwork StatusReason = "network"
	// ReasonKeepalive: the server stopped answering keepalives; the link looks open but
	// nothing gets through. The client is recovering by itself (Reconnecting true); Connected
	// follows when keepalives are answered again. Sends meanwhile end in ErrUnknownOutcome or
	// ErrNotConnected, never in a definite failure.
	ReasonKeepalive StatusReason = "keepalive"
	// ReasonBanned: the account is temporarily banned (Until: when it ends, zero if the network
	// did not say). The client reconnects by itself when Until passes (Reconnecting true while
	// an end is known); without an end only a new Connect tries again.
	ReasonBanned StatusReason = "banned"
	// ReasonOutdated: the network refuses this client version (WhatsApp's 405). Stays down:
	// the gateway must be upgraded (or restarted, which fetches the current version).
	ReasonOutdated StatusReason = "outdated"
	// ReasonReplaced: another client took over the device's connection. Stays down until the
	// next Connect (so two gateways never fight over one device).
	ReasonReplaced StatusReason = "replaced"
	// ReasonLoggedOut: the device was unlinked (LoggedOut carries it); a new link is needed.
	ReasonLoggedOut StatusReason = "logged_out"
	// ReasonTokenInvalid: the network refused the session's access token (the Cloud API's
	// error 190: expired or revoked). Stays down until the session is given a new token; its
	// queue waits.
	ReasonTokenInvalid StatusReason = "token_invalid"
)

// Disconnected: the connection dropped. Reconnecting tells whether the client is reconnecting
// by itself (a transient drop, the end of a ban) or stays down (stream replaced, a ban with no
// known end, outdated client). StatusReason is the machine-readable cause; Reason is the
// human-readable detail for logs and the dashboard.
type Disconnected struct {
	Reason       string
	Reconnecting bool
	StatusReason StatusReason
	// Until: the ban's end (StatusReason banned); zero when unknown or not a ban.
	Until time.Time
}

// LoggedOut: the device was unlinked (from the phone or by Logout); a new QR scan is needed.
// Its status reason is always ReasonLoggedOut.
type LoggedOut struct{ Reason string }

// Timelock: the network's reach-out timelock changed. While Active, messages to contacts who
// never wrote to the account are refused (error 463) until Until (zero: end not given). The
// session stays connected; the core pauses the session's queue until Until (or until a
// Timelock with Active false), and never re-sends meanwhile.
type Timelock struct {
	Active bool
	Until  time.Time
	Kind   string // the network's enforcement type, for the dashboard ("" if not given)
}

// ReceiptStatus is how far a sent message got on the recipient's side.
type ReceiptStatus string

// Receipt statuses, in order: a later one implies the earlier ones.
const (
	StatusDelivered ReceiptStatus = "delivered" // on the recipient's device
	StatusRead      ReceiptStatus = "read"      // opened (only where the recipient sends read receipts)
	StatusPlayed    ReceiptStatus = "played"    // a voice note or video was played
	// StatusSent: the network reports a message it took (the Cloud API's status webhooks);
	// it only carries the pricing Category, the message being sent already.
	StatusSent ReceiptStatus = "sent"
	// StatusFailed: the network could not deliver a message it had taken (Err says why: the
	// Cloud API reports most delivery errors so).
	StatusFailed ReceiptStatus = "failed"
)

// MessageReceipt: the recipient's device reported on sent messages. IDs are Message.ID values
// (the network uses the caller's ids). From is the recipient's phone (digits) when the network
// tells it, else "". Receipts can arrive more than once and out of order: keep the furthest.
type MessageReceipt struct {
	IDs    []string
	Status ReceiptStatus
	From   string
	At     time.Time
	// Category is the pricing category the network charged the messages under (the Cloud
	// API's pricing.category; "" elsewhere).
	Category string
	// Err is why the messages failed (Status StatusFailed): a domain error where the gateway
	// has a code for it (domain.ErrOutsideServiceWindow...).
	Err error
	// Done, when set, is called once what the receipt changes is durable (nil) or could not
	// be made so (see Done).
	Done Done `json:"-"`
}

// Origin is who did something on the network, and where: the header of every event a contact
// causes (a message, a reaction, an edit, a revoke, a vote).
type Origin struct {
	ID       string // the network's id of the message that carried it
	From     string // the sender's phone (digits); "" when the network hides it and no LID map knows it
	FromLID  string // the sender's network-internal id where the network has one (WhatsApp's LID user)
	PushName string // the name the sender set on their profile
	// Group is the group it happened in (a domain.IsGroup id); "" in a direct conversation.
	Group string
	At    time.Time // when the sender did it (network time)
}

// Incoming: someone wrote to the session's number (or in one of its groups). Message carries the
// content: its Kind (KindOther for what the port has no kind for) and fields, ReplyTo when it
// quotes a message; media bytes are not downloaded (Size says how large).
type Incoming struct {
	Origin
	Message domain.Message
	// Done, when set, is called once the message is kept and what it answers is recorded
	// (nil), or could not be (see Done).
	Done Done `json:"-"`
}

// Done is how a network that must not acknowledge an event to its sender before the event is
// durable (the Cloud API answers Meta's webhook only then: Meta never sends again what it got
// a 200 for) learns that it is: whoever takes the event calls it exactly once, with nil once
// everything the event carries is committed, else with the error (WhatsApp's adapter acks a
// message or receipt to the server only then). Callers go through Call.
type Done func(error)

// Call calls d, when set.
func (d Done) Call(err error) {
	if d != nil {
		d(err)
	}
}

// Join returns a Done to call n times; d is called once, after the n-th call, with the first
// error given. Join(d, 1) is d; with d nil it returns nil.
func Join(d Done, n int) Done {
	if d == nil || n == 1 {
		return d
	}
	if n <= 0 {
		d(nil)
		return nil
	}
	var (
		mu    sync.Mutex
		first error
	)
	return func(err error) {
		mu.Lock()
		if err != nil && first == nil {
			first = err
		}
		n--
		last, e := n == 0, first
		mu.Unlock()
		if last {
			d(e)
		}
	}
}

// KindOther is the kind of an incoming message the port has no kind for (a view-once message,
// a live location, buttons...).
const KindOther domain.Kind = "other"

// Reaction: someone reacted to a message (Target, a message id) with Emoji; "" takes their
// reaction back.
type Reaction struct {
	Origin
	Target string
	Emoji  string
	// Done, when set, is called once the reaction is recorded on its message (see Done).
	Done Done `json:"-"`
}

// DoneOf is the Done an event carries (nil when it carries none).
func DoneOf(ev Event) Done {
	if c, ok := ev.(carrier); ok {
		return c.done()
	}
	return nil
}

// WithDone is ev carrying d, for the events that carry a Done (ok false: ev carries none).
func WithDone(ev Event, d Done) (_ Event, ok bool) {
	if c, ok := ev.(carrier); ok {
		return c.withDone(d), true
	}
	return ev, false
}

// carrier is an event that carries a Done: what a contact does (a message, a reaction, an
// edit, a revoke, a vote) and a receipt.
type carrier interface {
	done() Done
	withDone(Done) Event
}

func (e Incoming) done() Done       { return e.Done }
func (e MessageReceipt) done() Done { return e.Done }
func (e Reaction) done() Done       { return e.Done }
func (e Edited) done() Done         { return e.Done }
func (e Revoked) done() Done        { return e.Done }
func (e PollVote) done() Done       { return e.Done }

func (e Incoming) withDone(d Done) Event       { e.Done = d; return e }
func (e MessageReceipt) withDone(d Done) Event { e.Done = d; return e }
func (e Reaction) withDone(d Done) Event       { e.Done = d; return e }
func (e Edited) withDone(d Done) Event         { e.Done = d; return e }
func (e Revoked) withDone(d Done) Event        { e.Done = d; return e }
func (e PollVote) withDone(d Done) Event       { e.Done = d; return e }

// Edited: someone changed the text of a message they wrote (Target); Message is the new content.
type Edited struct {
	Origin
	Target  string
	Message domain.Message
	// Done, when set, is called once the edit is recorded on its message (see Done).
	Done Done `json:"-"`
}

// Revoked: someone deleted a message they wrote (Target) for everyone.
type Revoked struct {
	Origin
	Target string
	// Done, when set, is called once the revoke is recorded on its message (see Done).
	Done Done `json:"-"`
}

// PollVote: someone voted in a poll (Poll, its message id) for Options (the options' names,
// decrypted where the network encrypts votes); it replaces their earlier vote. No options: the
// vote was taken back.
type PollVote struct {
	Origin
	Poll    string
	Options []string
	// Done, when set, is called once the vote is recorded on its poll and read as the answer
	// of an order's confirmation it may be (see Done).
	Done Done `json:"-"`
}

// PhoneOffline: the phone the device is linked to has not been seen for a while; WhatsApp
// unlinks companion devices after about 14 days without the phone. LogoutAt is the expected
// unlink; the warning stands until a PhoneOnline.
type PhoneOffline struct {
	LastSeen time.Time
	LogoutAt time.Time
}

// PhoneOnline: the phone was seen again; a PhoneOffline warning is over.
type PhoneOnline struct{}

func (QRCode) isEvent()         {}
func (QRTimeout) isEvent()      {}
func (Paired) isEvent()         {}
func (Connected) isEvent()      {}
func (Disconnected) isEvent()   {}
func (LoggedOut) isEvent()      {}
func (Timelock) isEvent()       {}
func (MessageReceipt) isEvent() {}
func (Incoming) isEvent()       {}
func (Reaction) isEvent()       {}
func (Edited) isEvent()         {}
func (Revoked) isEvent()        {}
func (PollVote) isEvent()       {}
func (PhoneOffline) isEvent()   {}
func (PhoneOnline) isEvent()    {}

// MessageSource gives the network adapter back a message it sent earlier, by id: the core's
// outbox implements it. WhatsApp asks for a message again when a recipient's device could not
// decrypt it (a retry receipt), possibly days later; the adapter re-encrypts it from this.
// Media messages need their Data. Implementations must be safe for concurrent use and quick
// (they are called from the network's receive path).
type MessageSource interface {
	Message(ctx context.Context, id string) (domain.Message, bool)
}

// ClientOptions are the per-session settings of Network.Open.
type ClientOptions struct {
	// Messages answers re-send requests for sent messages (see MessageSource). Nil: the adapter
	// keeps what it can itself (WhatsApp: a store of the last 7 days of sent messages).
	Messages MessageSource
	// Proxy carries the session's connections to the network: "socks5://user:pass@host:port"
	// or "http://host:port" ("" = direct). Adapters that have no network connection ignore it.
	Proxy string
	// Account is the session's credentials at a network that has an account instead of a
	// linked device (the Cloud API's phone number, token and app secret); nil elsewhere.
	Account *domain.CloudAccount
	// Sends records the sends of a network that does not dedupe on the caller's message id
	// (the Cloud API), so a send whose answer was lost is not made twice (see SendLog). Nil:
	// the adapter remembers nothing across restarts.
	Sends SendLog
}

// SendLog keeps, for a network that assigns message ids of its own and does not dedupe on the
// caller's (the Cloud API), what became of each send: begun (the request went out, no answer
// yet) and the network's id once it took the message. An adapter begins every send durably
// before it goes; after a crash, a send begun but not taken waits for the network's status
// report naming it before it is sent again. It also maps the network's ids back to the
// gateway's (a reply or a reaction to a sent message names the network's id). Implementations
// must be safe for concurrent use.
type SendLog interface {
	// Begin records that message id is about to be sent at at, and returns what an earlier
	// try recorded (zero when none).
	Begin(ctx context.Context, id string, at time.Time) (SendRecord, error)
	// Taken records that the network took message id as networkID.
	Taken(ctx context.Context, id, networkID string) error
	// Get returns message id's record (ok false: never begun).
	Get(id string) (rec SendRecord, ok bool, err error)
	// ByNetworkID returns the id of the message the network knows as networkID.
	ByNetworkID(networkID string) (id string, ok bool, err error)
	// Forget drops message id's record, so it is sent anew (the network failed it in a way
	// that calls for a new try).
	Forget(ctx context.Context, id string) error
}

// SendRecord is one message's send, as a SendLog keeps it: Begun (the first try went out
// then), NetworkID (the network's id, once it took the message).
type SendRecord = domain.SendRecord

// WithAccount sets ClientOptions.Account.
func WithAccount(a domain.CloudAccount) Option {
	return func(o *ClientOptions) { o.Account = &a }
}

// WithSendLog sets ClientOptions.Sends.
func WithSendLog(l SendLog) Option {
	return func(o *ClientOptions) { o.Sends = l }
}

// Option sets a ClientOptions field.
type Option func(*ClientOptions)

// WithMessageSource sets ClientOptions.Messages.
func WithMessageSource(src MessageSource) Option {
	return func(o *ClientOptions) { o.Messages = src }
}

// WithProxy sets ClientOptions.Proxy.
func WithProxy(proxyURL string) Option {
	return func(o *ClientOptions) { o.Proxy = proxyURL }
}

// Options applies opts in order (adapters call it in Open).
func Options(opts ...Option) ClientOptions {
	var o ClientOptions
	for _, f := range opts {
		if f != nil {
			f(&o)
		}
	}
	return o
}

// Network opens clients, one per gateway session.
type Network interface {
	// Open returns the client of a gateway session, creating its device state if it has none.
	// Events are delivered to sink. Open does no network I/O. Opening an open session again
	// returns the same client with the new sink and options.
	Open(sessionID string, sink func(Event), opts ...Option) (Client, error)
	// Close disconnects every client (pairings are kept).
	Close() error
}

// Client is one session's device on the network. Every method may do network I/O and is called
// from a worker goroutine, never from an actor's Receive.
type Client interface {
	// Connect connects a paired device, or starts linking an unpaired one (QRCode events
	// follow). It returns once the attempt has started; the outcome arrives as events.
	Connect(ctx context.Context) error
	// PairPhone starts linking by phone number instead of QR and returns the code the user
	// types on the phone (eight characters).
	PairPhone(ctx context.Context, phone string) (string, error)
	// Lookup tells, for each number (digits), whether it has an account on the network and
	// its LID where the network gives one; in the order asked.
	Lookup(ctx context.Context, phones []string) ([]domain.NumberCheck, error)
	// Send sends a message of any kind and waits for the network's acknowledgement: m.To is a
	// number or a group id; m.ReplyTo quotes a message; m.Target is what a reaction, an edit or
	// a revoke is about; m.Typing shows "typing…" for 1-3 s first (TypingFor). Its error says
	// what the caller may do next (see the errors below): a definite failure, a wait
	// (timelock, rate limit), or ErrUnknownOutcome (send it again later under the same id).
	Send(ctx context.Context, m domain.Message) (Receipt, error)
	// MarkRead tells the sender of an incoming message (ref: its id, sender and group) that
	// it was read, with the messages before it.
	MarkRead(ctx context.Context, ref domain.MessageRef) error
	// Groups lists the groups the device's account is in.
	Groups(ctx context.Context) ([]domain.Group, error)
	// CreateGroup makes a group with the account as its admin and participants (numbers).
	CreateGroup(ctx context.Context, name string, participants []string) (domain.Group, error)
	// UpdateParticipants adds and removes participants (numbers) of a group the account
	// administers, and returns the group as it stands (domain.ErrGroupNotFound,
	// domain.ErrNotGroupAdmin).
	UpdateParticipants(ctx context.Context, group string, add, remove []string) (domain.Group, error)
	// InviteLink returns the link that joins a group the account administers.
	InviteLink(ctx context.Context, group string) (string, error)
	// Logout unlinks the device; a new QR scan is needed afterwards. Call it before a session
	// changes owner or is deleted, so the previous owner's account is not left linked.
	Logout(ctx context.Context) error
	// Disconnect closes the connection and keeps the pairing.
	Disconnect()
	// Paired tells whether the device is paired (linked to a phone), and to which phone.
	Paired() (phone string, ok bool)
}

// Errors reported by clients. Adapters wrap them with detail; callers test with errors.Is.
// What the core's deliverer does with each:
//
//   - ErrNotOnNetwork, ErrUnsupported, ErrRefused (after its backoff, once), ErrAlreadyPaired:
//     definite failures of this message; report `failed`.
//   - ErrNotConnected: nothing was sent; keep the message queued until the session is
//     Connected again (fail it only if the session is logged out).
//   - ErrUnknownOutcome: the message may have reached the network; never report it failed.
//     Keep it queued and send it again under the same id (the network dedupes on the id), or
//     settle it when a MessageReceipt for the id arrives.
//   - ErrNotReachable: the network refuses this one recipient (WhatsApp's 463 with no
//     account-wide timelock notice in force). Try the message at most twice in all, then fail
//     it (code recipient_not_reachable) and mark the recipient; never hold the queue for it.
//   - ErrTimelock (a *TimelockError, with Until): an account-wide reach-out timelock is in
//     force (the network sent its notice): hold first messages to new contacts until Until
//     (or a Timelock{Active: false} event); messages to contacts who wrote still go.
//   - ErrRateLimited (a *RetryLaterError, with After): pause the session's queue for After,
//     then send again under the same id.
//   - ErrBanned, ErrOutdated: the session is down (a Disconnected event says why and until
//     when); keep the queue until Connected.
var (
	// ErrNotOnNetwork: the recipient has no account on the network.
	ErrNotOnNetwork = errors.New("recipient is not on the network")
	// ErrNotReachable: the network refused this recipient for now (WhatsApp's ack error 463
	// while no account-wide timelock notice is in force: in 2026 WhatsApp also answers 463 per
	// recipient, for cold contacts without a privacy token). Adapters return it wrapped with
	// detail; it says nothing about other recipients.
	ErrNotReachable = errors.New("the network refuses messages to this recipient for now")
	// ErrTimelock: the network refuses messages to new contacts for now (WhatsApp's reach-out
	// timelock, ack error 463, while the account-wide timelock notice is in force). Returned as
	// a *TimelockError carrying the end when known.
	ErrTimelock = errors.New("account is temporarily restricted from messaging new contacts")
	// ErrBanned: the account is temporarily banned.
	ErrBanned = errors.New("account is temporarily banned by the network")
	// ErrOutdated: the network refuses this client version (WhatsApp's 405 "client outdated").
	ErrOutdated = errors.New("the network refuses this client version; the gateway needs an update")
	// ErrRateLimited: the network asks the account to slow down (HTTP-429-class answers to
	// lookups, the IQ "rate-overlimit"). Returned as a *RetryLaterError with a backoff.
	ErrRateLimited = errors.New("the network asks the account to slow down")
	// ErrRefused: the network refused this message stanza (WhatsApp's ack error 479,
	// "smax-invalid", and other ack errors). Returned as a *RetryLaterError: one more try after
	// the backoff, then a definite failure.
	ErrRefused = errors.New("the network refused the message")
	// ErrUnknownOutcome: the message went to the network but no answer came back (ack timeout,
	// the link dropped or the caller's context ended while waiting): it may have been
	// delivered. Never report it failed; send it again under the same id.
	ErrUnknownOutcome = errors.New("the outcome of the send is unknown (no acknowledgement)")
	// ErrUnsupported: the network cannot send this kind of message (or this media format).
	ErrUnsupported = errors.New("message kind not supported by the network")
	// ErrAlreadyPaired: linking was asked for a device that is already paired.
	ErrAlreadyPaired = errors.New("device is already paired")
)

// TypingFor is how long the recipient sees "typing…" before m when m.Typing: 1 s, and a
// second more for every 50 characters, at most 3 s (WAHA's advice: show typing for a time
// that depends on the message's length).
func TypingFor(m domain.Message) time.Duration {
	d := time.Second + time.Duration(len([]rune(m.Text+m.Caption+m.Question)))*time.Second/50
	return min(d, 3*time.Second)
}

// TimelockError is ErrTimelock with the end of the timelock (zero: the network did not say;
// wait for a Timelock event, or retry after a conservative pause such as an hour).
type TimelockError struct {
	Until  time.Time
	Code   int   // the network's code (463), 0 if none
	Detail error // the adapter's error, for logs
}

func (e *TimelockError) Error() string {
	msg := ErrTimelock.Error()
	if !e.Until.IsZero() {
		msg += " until " + e.Until.UTC().Format(time.RFC3339)
	}
	if e.Detail != nil {
		msg += ": " + e.Detail.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrTimelock) true.
func (e *TimelockError) Is(target error) bool { return target == ErrTimelock }
func (e *TimelockError) Unwrap() error        { return e.Detail }

// RetryLaterError is ErrRateLimited or ErrRefused with the wait the network (or the adapter's
// policy) suggests before the next try.
type RetryLaterError struct {
	Err    error         // ErrRateLimited or ErrRefused
	Code   int           // the network's code (429, 479...), 0 if none
	After  time.Duration // wait at least this long before sending on this session again
	Detail error         // the adapter's error, for logs
}

func (e *RetryLaterError) Error() string {
	msg := e.Err.Error()
	if e.Code != 0 {
		msg += " (code " + strconv.Itoa(e.Code) + ")"
	}
	msg += "; retry after " + e.After.String()
	if e.Detail != nil {
		msg += ": " + e.Detail.Error()
	}
	return msg
}

// Is makes errors.Is(err, e.Err) true.
func (e *RetryLaterError) Is(target error) bool { return target == e.Err }
func (e *RetryLaterError) Unwrap() error        { return e.Detail }

// TimelockUntil returns the end carried by a timelock error (ok false if err is not one).
func TimelockUntil(err error) (until time.Time, ok bool) {
	var te *TimelockError
	if errors.As(err, &te) {
		return te.Until, true
	}
	return time.Time{}, errors.Is(err, ErrTimelock)
}

// RetryAfter returns the backoff carried by a rate-limit or refusal error.
func RetryAfter(err error) (time.Duration, bool) {
	var re *RetryLaterError
	if errors.As(err, &re) {
		return re.After, true
	}
	return 0, false
}

// Pacing is how fast one session may send (DESIGN.md section 9: the deliverer applies it per
// session queue; `--pace-*` flags, plans and the admin API override it). Zero fields mean no
// limit.
type Pacing struct {
	MinGap    time.Duration // at least this between two sends of a session
	Jitter    time.Duration // plus a random extra in [0, Jitter)
	PerMinute int           // at most this many sends a minute
	// NewContactsPerDay caps first messages to numbers the session never wrote to or heard
	// from, per day; a newly linked account starts at NewContactsFirstDay and ramps up
	// linearly to NewContactsPerDay over RampDays.
	NewContactsPerDay   int
	NewContactsFirstDay int
	RampDays            int
}

// PacingDefaulter is implemented by networks that come with pacing defaults (WhatsApp); a
// network without it (the sim) has none.
type PacingDefaulter interface {
	DefaultPacing() Pacing
}
