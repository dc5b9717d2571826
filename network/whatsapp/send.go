package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// Server error codes of a message acknowledgement.
const (
	// ackReachoutTimelock: this recipient is refused for now (a cold contact without a privacy
	// token), or, while the reach-out timelock notice is in force, every new contact is
	// (timelock.go).
	ackReachoutTimelock = 463
)

// Backoffs the adapter suggests with network.RetryLaterError. Conservative on purpose: on
// WhatsApp, pressing on after a refusal is what gets accounts restricted.
const (
	// rateLimitBackoff: after a 429 "rate-overlimit" (lookups, prekey fetches).
	rateLimitBackoff = 15 * time.Minute
	// refusedBackoff: after ack error 479 or another refusal of one message.
	refusedBackoff = 5 * time.Minute
	// noLIDBackoff: the server knows no LID for the number: it may be new or gone.
	noLIDBackoff = time.Hour
)

// IsOnNetwork tells whether a number has a WhatsApp account. Answers are cached per number.
func (c *client) IsOnNetwork(ctx context.Context, phone string) (bool, error) {
	digits, err := phoneDigits(phone)
	if err != nil {
		return false, err
	}
	if r, ok := c.lookups.get(digits, time.Now()); ok {
		return r.in, nil
	}
	wa, err := c.ready(ctx)
	if err != nil {
		return false, err
	}
	r, err := c.lookup(ctx, wa, digits)
	if err != nil {
		return false, err
	}
	return r.in, nil
}

// lookup asks the network about a number and caches the answer.
func (c *client) lookup(ctx context.Context, wa *whatsmeow.Client, digits string) (lookupResult, error) {
	found, err := c.lookupMany(ctx, wa, []string{digits})
	if err != nil {
		return lookupResult{}, err
	}
	return found[digits], nil
}

// lookupMany asks the network about numbers in one query and caches each answer (a number the
// answer does not name is not on WhatsApp).
func (c *client) lookupMany(ctx context.Context, wa *whatsmeow.Client, digits []string) (map[string]lookupResult, error) {
	ask := make([]string, len(digits))
	for i, d := range digits {
		ask[i] = "+" + d
	}
	res, err := wa.IsOnWhatsApp(ctx, ask)
	if err != nil {
		return nil, fmt.Errorf("whatsapp: look up %s: %w", strings.Join(digits, ", "), classifyError(err))
	}
	// Today the answer's JID is the user's LID and PhoneNumber the number asked about;
	// whatsmeow has stored the pair in its LID map, which SendMessage reads. The adapter keeps
	// the phone-number JID: sends go to the number and whatsmeow addresses them to the LID
	// (with the number as peer_recipient_pn), as WhatsApp clients do since 2026.
	found := make(map[string]lookupResult, len(digits))
	for _, d := range digits {
		found[d] = lookupResult{}
	}
	for _, info := range res {
		d := strings.TrimPrefix(info.Query, "+")
		if info.PhoneNumber.Server == types.DefaultUserServer {
			d = info.PhoneNumber.User
		}
		if _, asked := found[d]; !asked || !info.IsIn || info.JID.IsEmpty() {
			continue
		}
		r := lookupResult{in: true, jid: types.NewJID(d, types.DefaultUserServer)}
		if info.JID.Server == types.HiddenUserServer {
			r.lid = info.JID
		}
		found[d] = r
	}
	now := time.Now()
	for d, r := range found {
		c.lookups.put(d, r, now)
	}
	return found, nil
}

// Send sends one message and waits for the server's acknowledgement. A number is looked up
// first (cached) and the message goes to the LID the network returned; a group id goes to the
// group. m.ID is the WhatsApp message id, so a re-send after a crash is recognised as the same
// message.
func (c *client) Send(ctx context.Context, m domain.Message) (network.Receipt, error) {
	if m.ID == "" {
		return network.Receipt{}, errors.New("whatsapp: send: empty message id")
	}
	if !supportedKind(m.Kind) {
		return network.Receipt{}, fmt.Errorf("whatsapp: send %q: %w", m.Kind, network.ErrUnsupported)
	}
	ctx, cancel := context.WithTimeout(ctx, c.n.sendTimeout)
	defer cancel()
	wa, err := c.ready(ctx)
	if err != nil {
		return network.Receipt{}, err
	}
	to, lid, err := c.recipient(ctx, wa, m.To)
	if err != nil {
		return network.Receipt{}, err
	}
	if m, err = c.n.prepareAudio(ctx, m); err != nil {
		return network.Receipt{}, fmt.Errorf("whatsapp: send %s: %w", m.Kind, err)
	}
	msg, err := c.compose(ctx, wa, to, m, time.Now())
	if err != nil {
		return network.Receipt{}, fmt.Errorf("whatsapp: send %s: %w", m.Kind, classifyError(err))
	}
	if m.Typing {
		if err := typing(ctx, wa, to, m); err != nil {
			return network.Receipt{}, fmt.Errorf("whatsapp: send %s %s: %w", m.Kind, m.ID, err)
		}
	}
	resp, err := wa.SendMessage(ctx, to, msg, whatsmeow.SendRequestExtra{
		ID:      types.MessageID(m.ID),
		Timeout: c.n.sendTimeout,
	})
	if err != nil {
		return network.Receipt{}, fmt.Errorf("whatsapp: send %s %s to %s: %w", m.Kind, m.ID, m.To, c.classifySendError(ctx, err))
	}
	if m.Kind == domain.KindPoll {
		c.polls.put(m.ID, m.Options)
	}
	at := resp.Timestamp
	if at.IsZero() {
		at = time.Now()
	}
	return network.Receipt{ID: string(resp.ID), At: at.UTC(), LID: lid}, nil
}

// recipient is where a message to "to" goes: a group, or a number's LID (its phone-number JID
// when the network gave no LID), looked up first (cached); lid is the number's LID.
func (c *client) recipient(ctx context.Context, wa *whatsmeow.Client, to string) (jid types.JID, lid string, err error) {
	if domain.IsGroup(to) {
		jid, err = groupJID(to)
		return jid, "", err
	}
	digits, err := phoneDigits(to)
	if err != nil {
		return types.JID{}, "", err
	}
	r, ok := c.lookups.get(digits, time.Now())
	if !ok {
		if r, err = c.lookup(ctx, wa, digits); err != nil {
			return types.JID{}, "", err
		}
	}
	if !r.in {
		return types.JID{}, "", fmt.Errorf("whatsapp: send to %s: %w", digits, network.ErrNotOnNetwork)
	}
	if !r.lid.IsEmpty() {
		return r.lid, r.lid.User, nil // a DM goes to the LID; whatsmeow adds the number as peer_recipient_pn
	}
	return r.jid, "", nil
}

// compose builds the WhatsApp message of m for chat to: its content (media uploaded), a
// reaction, edit or revoke of its target, or a poll; a reply's quote.
func (c *client) compose(ctx context.Context, wa *whatsmeow.Client, to types.JID, m domain.Message, now time.Time) (*waE2E.Message, error) {
	var msg *waE2E.Message
	var err error
	switch m.Kind {
	case domain.KindReaction, domain.KindEdit, domain.KindRevoke:
		return operation(ctx, wa, to, m, now)
	case domain.KindPoll:
		if msg, err = pollMessage(wa, m); err != nil {
			return nil, err
		}
		// A poll built again (a retry receipt) keeps the secret its votes are encrypted with.
		pn, lid := ownJIDs(wa)
		for _, own := range []types.JID{lid, pn} {
			if secret, _, err := wa.Store.MsgSecrets.GetMessageSecret(ctx, to, own, m.ID); err == nil && secret != nil {
				msg.MessageContextInfo.MessageSecret = secret
				break
			}
		}
	default:
		if msg, err = buildMessage(ctx, wa.Upload, m, now); err != nil {
			return nil, err
		}
	}
	if m.ReplyTo != nil && m.ReplyTo.ID != "" {
		msg = withContext(msg, replyContext(wa, to, *m.ReplyTo))
	}
	return msg, nil
}

// classifyError maps whatsmeow's errors of a query (a lookup, a pair code request) or of a
// step before a message leaves (media upload) onto the port's sentinels, keeping the original
// in the chain for detail. Nothing was sent when these happen.
func classifyError(err error) error {
	var disc *whatsmeow.DisconnectedError
	switch {
	case err == nil:
		return nil
	case errors.Is(err, whatsmeow.ErrIQRateOverLimit):
		return &network.RetryLaterError{Err: network.ErrRateLimited, Code: 429, After: rateLimitBackoff, Detail: err}
	case errors.Is(err, whatsmeow.ErrNotConnected), errors.Is(err, whatsmeow.ErrNotLoggedIn),
		errors.As(err, &disc), errors.Is(err, whatsmeow.ErrIQTimedOut):
		return fmt.Errorf("%w: %w", domain.ErrNotConnected, err)
	case errors.Is(err, whatsmeow.ErrMessageTimedOut):
		return fmt.Errorf("no answer from the network: %w", err)
	}
	return err
}

// classifySendError maps an error of SendMessage. The rule (DESIGN.md section 9): an error
// after which the message may have reached the server is ErrUnknownOutcome, never a failure;
// a refusal in the acknowledgement is definite and says when to try again.
func (c *client) classifySendError(ctx context.Context, err error) error {
	switch code := serverErrorCode(err); {
	case code == ackReachoutTimelock:
		return c.classify463(ctx, err)
	case code == 429:
		return &network.RetryLaterError{Err: network.ErrRateLimited, Code: code, After: rateLimitBackoff, Detail: err}
	case code != 0: // 479 and the rest: this message was refused
		return &network.RetryLaterError{Err: network.ErrRefused, Code: code, After: refusedBackoff, Detail: err}
	}
	var disc *whatsmeow.DisconnectedError
	switch {
	case strings.Contains(err.Error(), "failed to send message node"):
		// The frame never left (no socket, or the write failed).
		return fmt.Errorf("%w: %w", domain.ErrNotConnected, err)
	case strings.Contains(err.Error(), "no LID found for"):
		return &network.RetryLaterError{Err: network.ErrRefused, After: noLIDBackoff, Detail: err}
	case errors.Is(err, whatsmeow.ErrMessageTimedOut), errors.As(err, &disc),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// Sent, or perhaps sent: the acknowledgement did not come (a dead link, a drop while
		// waiting, the caller's deadline).
		return fmt.Errorf("%w: %w", network.ErrUnknownOutcome, err)
	}
	return classifyError(err)
}

// serverErrorCode extracts the code of whatsmeow's "server returned error N" (an error
// attribute on the message acknowledgement), or 0.
func serverErrorCode(err error) int {
	if !errors.Is(err, whatsmeow.ErrServerReturnedError) {
		return 0
	}
	s := err.Error()
	prefix := whatsmeow.ErrServerReturnedError.Error() + " "
	i := strings.Index(s, prefix)
	if i < 0 {
		return 0
	}
	s = s[i+len(prefix):]
	end := 0
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	code, _ := strconv.Atoi(s[:end])
	return code
}

// phoneDigits normalises a number to its digits (country code included, no plus sign).
func phoneDigits(phone string) (string, error) {
	var b strings.Builder
	for _, r := range phone {
		switch {
		case r >= '0' && r <= '9':
			b.WriteRune(r)
		case r == '+' || r == ' ' || r == '-' || r == '(' || r == ')' || r == '.':
		default:
			return "", fmt.Errorf("whatsapp: invalid phone number %q", phone)
		}
	}
	d := b.String()
	if len(d) < 8 || len(d) > 15 || d[0] == '0' {
		return "", fmt.Errorf("whatsapp: invalid phone number %q: want 8 to 15 digits with the country code", phone)
	}
	return d, nil
}

// lookupResult is a cached answer to "is this number on WhatsApp".
type lookupResult struct {
	in  bool
	jid types.JID // the phone-number JID messages are addressed to
	lid types.JID // the user's LID, as the network answered (empty if it gave none)
}

// lookupCache keeps IsOnWhatsApp answers per number, positive ones longer than negative ones,
// and at most maxEntries entries.
type lookupCache struct {
	ttl, negTTL time.Duration
	maxEntries  int

	mu sync.Mutex
	m  map[string]lookupEntry
}

type lookupEntry struct {
	r       lookupResult
	expires time.Time
}

func newLookupCache(ttl, negTTL time.Duration, maxEntries int) *lookupCache {
	return &lookupCache{ttl: ttl, negTTL: negTTL, maxEntries: maxEntries, m: make(map[string]lookupEntry)}
}

func (lc *lookupCache) get(digits string, now time.Time) (lookupResult, bool) {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	e, ok := lc.m[digits]
	if !ok || !now.Before(e.expires) {
		return lookupResult{}, false
	}
	return e.r, true
}

func (lc *lookupCache) put(digits string, r lookupResult, now time.Time) {
	ttl := lc.ttl
	if !r.in {
		ttl = lc.negTTL
	}
	lc.mu.Lock()
	defer lc.mu.Unlock()
	if _, ok := lc.m[digits]; !ok && len(lc.m) >= lc.maxEntries {
		lc.evict(now)
	}
	lc.m[digits] = lookupEntry{r: r, expires: now.Add(ttl)}
}

// evict drops expired entries, then arbitrary ones down to 90 % of maxEntries. Called with mu held.
func (lc *lookupCache) evict(now time.Time) {
	for k, e := range lc.m {
		if !now.Before(e.expires) {
			delete(lc.m, k)
		}
	}
	for k := range lc.m {
		if len(lc.m) < lc.maxEntries*9/10 {
			break
		}
		delete(lc.m, k)
	}
}

func (lc *lookupCache) clear() {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	clear(lc.m)
}
