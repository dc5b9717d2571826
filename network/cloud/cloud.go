// Package cloud is the messaging-network port over Meta's official WhatsApp Cloud API
// (DESIGN.md section 17): a session of kind cloud is a Cloud API phone number, not a linked
// device. It sends every kind the Cloud API has through the Graph API's own payloads
// (package cloudapi), uploads media, reads the number and the WABA's templates, and turns
// Meta's webhooks (statuses, incoming messages) into the port's events. Graph errors map to
// the port's errors as section 17 says: 131047 a failure outside_service_window, 130429 and
// 131056 a wait (never a failure), 131026 recipient_not_reachable, 190 the session down with
// reason token_invalid.
//
// Meta assigns message ids of its own (wamids) and does not dedupe on the gateway's: every send
// is begun in the session's SendLog before it goes, and the gateway's id rides in
// biz_opaque_callback_data, which every status of the message carries back. A send whose
// answer was lost (a crash, a timeout) is not made again until Meta's status naming it has had
// InDoubt to arrive; Meta retries webhooks it could not deliver, so after a restart the status
// settles it instead of a second message. A message Meta failed for its rate limits in a
// status webhook is sent again after the backoff; a SendLog that is also a ResendLog keeps it
// meanwhile, and the session's next client (after a restart, on another node) sends it when it
// connects.
//
// Imports domain, network (the port) and cloudapi (the wire shapes).
package cloud

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/gateway/gateway/cloudapi"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// Options configure the network.
type Options struct {
	// GraphURL is the Graph API (default cloudapi.DefaultGraphURL; tests point it at a fake);
	// Version its version (default cloudapi.DefaultVersion).
	GraphURL string
	Version  string
	// HTTPClient makes the Graph calls (default: one with a 30 s timeout).
	HTTPClient *http.Client
	Logger     *slog.Logger
	// InDoubt is how long a send whose answer was lost waits for Meta's status naming it
	// before it is sent again (default 2 minutes).
	InDoubt time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// CommitWait bounds how long a webhook waits for what it carries to be recorded before
	// it answers (default DefaultCommitWait): then 503, and Meta sends it again.
	CommitWait time.Duration
}

// DefaultCommitWait is Options.CommitWait's default. The commits take milliseconds; this bounds
// the wait when the store fails or stalls (Meta then retries, for days).
const DefaultCommitWait = 10 * time.Second

// DefaultInDoubt is Options.InDoubt's default.
const DefaultInDoubt = 2 * time.Minute

// Network is the Cloud API network: one Client per cloud session, found again by the phone
// number id a webhook names.
type Network struct {
	o     Options
	graph *graph
	log   *slog.Logger

	mu       sync.RWMutex
	clients  map[string]*Client // by session id
	byNumber map[string]*Client // by phone number id
}

// New returns the network.
func New(o Options) *Network {
	if o.GraphURL == "" {
		o.GraphURL = cloudapi.DefaultGraphURL
	}
	if o.Version == "" {
		o.Version = cloudapi.DefaultVersion
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: 30 * time.Second}
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.InDoubt <= 0 {
		o.InDoubt = DefaultInDoubt
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.CommitWait <= 0 {
		o.CommitWait = DefaultCommitWait
	}
	return &Network{o: o, log: o.Logger, clients: map[string]*Client{}, byNumber: map[string]*Client{},
		graph: &graph{base: strings.TrimRight(o.GraphURL, "/") + "/" + o.Version, client: o.HTTPClient}}
}

// Open returns a cloud session's client; its account (network.WithAccount) is required.
// Opening it again takes the new sink, account and options (a new token, say).
func (n *Network) Open(sessionID string, sink func(network.Event), opts ...network.Option) (network.Client, error) {
	o := network.Options(opts...)
	if o.Account == nil || o.Account.PhoneNumberID == "" || o.Account.AccessToken == "" {
		return nil, fmt.Errorf("cloud: session %s has no Cloud API account", sessionID)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.clients[sessionID]
	if c == nil {
		c = &Client{n: n, sessionID: sessionID}
		n.clients[sessionID] = c
	}
	c.mu.Lock()
	if old := c.acct.PhoneNumberID; old != "" && old != o.Account.PhoneNumberID && n.byNumber[old] == c {
		delete(n.byNumber, old)
	}
	c.sink, c.acct, c.sends, c.msgs, c.closed = sink, *o.Account, o.Sends, o.Messages, false
	c.mu.Unlock()
	n.byNumber[o.Account.PhoneNumberID] = c
	return c, nil
}

// Close disconnects every client.
func (n *Network) Close() error {
	n.mu.RLock()
	defer n.mu.RUnlock()
	for _, c := range n.clients {
		c.Disconnect()
	}
	return nil
}

// Check reads a phone number with the account's token: what connect shows, and proof that the
// token and the number go together.
func (n *Network) Check(ctx context.Context, acct domain.CloudAccount) (domain.CloudNumber, error) {
	var pn cloudapi.PhoneNumber
	q := url.Values{"fields": {cloudapi.PhoneNumberFields}}
	if err := n.graph.call(ctx, acct.AccessToken, http.MethodGet, acct.PhoneNumberID, q, nil, "", &pn); err != nil {
		return domain.CloudNumber{}, mapCheck(err)
	}
	num := domain.CloudNumber{PhoneNumberID: acct.PhoneNumberID, WABAID: acct.WABAID, DisplayPhone: pn.DisplayPhoneNumber,
		VerifiedName: pn.VerifiedName, Quality: pn.QualityRating, Throughput: pn.Throughput.MessagesPerSecond()}
	if num.Throughput == 0 {
		num.Throughput = domain.DefaultThroughput
	}
	return num, nil
}

// mapCheck is a number or template read's error as the gateway answers it: a refused token or
// a wrong id is the caller's (400), anything else Meta being unavailable (503).
func mapCheck(err error) error {
	return graphError(err, func(ge *cloudapi.Error) error {
		return fmt.Errorf("%w: Meta refused the access token: %s", domain.ErrValidation, ge.Message)
	})
}

// graphError is a failed Graph call's error (not a send's): a refused token is what token
// makes of it, another 4xx the caller's (ErrValidation), anything else Meta being unavailable.
func graphError(err error, token func(*cloudapi.Error) error) error {
	if ge, ok := cloudapi.AsError(err); ok {
		if ge.Code == cloudapi.CodeAccessToken {
			return token(ge)
		}
		if ge.HTTPStatus < 500 {
			return fmt.Errorf("%w: Meta answered: %v", domain.ErrValidation, ge)
		}
	}
	return fmt.Errorf("%w: the Graph API: %v", domain.ErrUnavailable, err)
}

// templatePages bounds a template sync.
const templatePages = 50

// Templates reads every message template of the account's WABA.
func (n *Network) Templates(ctx context.Context, acct domain.CloudAccount) ([]domain.CloudTemplate, error) {
	var out []domain.CloudTemplate
	q := url.Values{"limit": {"100"}, "fields": {"id,name,language,status,category,parameter_format,components"}}
	for range templatePages {
		var page cloudapi.TemplateList
		if err := n.graph.call(ctx, acct.AccessToken, http.MethodGet, acct.WABAID+"/message_templates", q, nil, "", &page); err != nil {
			return nil, mapCheck(err)
		}
		for _, t := range page.Data {
			comps, _ := json.Marshal(t.Components)
			out = append(out, domain.CloudTemplate{ID: t.ID, Name: t.Name, Language: t.Language, Category: t.Category,
				Status: t.Status, ParameterFormat: t.ParameterFormat, Body: t.BodyText(), Components: comps})
		}
		if page.Paging == nil || page.Paging.Next == "" || page.Paging.Cursors == nil || page.Paging.Cursors.After == "" {
			break
		}
		q.Set("after", page.Paging.Cursors.After)
	}
	return out, nil
}

// Webhook takes a webhook Meta posted: its X-Hub-Signature-256 is checked on the raw body
// against the app secrets of the open sessions before anything else (domain.ErrInvalidSignature
// when none matches: nothing is read), then each change goes to the session of the number it
// names, if that session's app secret is the one that signed it. A notification none of whose
// numbers has a session open here is domain.ErrUnavailable (Meta retries).
//
// It returns only once everything the notification carries is durable: the incoming messages
// kept (with what they answer) and the statuses recorded on their messages. Meta never sends
// again a notification it got a 200 for, so one whose writes fail or take longer than
// Options.CommitWait is domain.ErrUnavailable (a 503: Meta sends it again, and a message or a
// status seen twice is recorded once).
func (n *Network) Webhook(body []byte, signature string) error {
	n.mu.RLock()
	secrets := map[string]bool{}
	for _, c := range n.clients {
		c.mu.Lock()
		if !c.closed && c.acct.AppSecret != "" {
			secrets[c.acct.AppSecret] = true
		}
		c.mu.Unlock()
	}
	n.mu.RUnlock()
	secret := ""
	for s := range secrets {
		if cloudapi.VerifySignature(body, signature, s) {
			secret = s
			break
		}
	}
	if secret == "" {
		if len(secrets) == 0 {
			return fmt.Errorf("%w: no Cloud API number is open on this gateway yet", domain.ErrUnavailable)
		}
		return domain.ErrInvalidSignature
	}
	var note cloudapi.Notification
	if err := json.Unmarshal(body, &note); err != nil {
		return fmt.Errorf("%w: %v", domain.ErrInvalidPayload, err)
	}
	delivered, unknown := 0, 0
	w := newCommits()
	for _, e := range note.Entry {
		for _, ch := range e.Changes {
			if ch.Field != cloudapi.FieldMessages {
				continue
			}
			n.mu.RLock()
			c := n.byNumber[ch.Value.Metadata.PhoneNumberID]
			n.mu.RUnlock()
			if c == nil || !c.open(secret) {
				unknown++
				n.log.Warn("cloud webhook for a number with no session open here", "phone_number_id", ch.Value.Metadata.PhoneNumberID)
				continue
			}
			c.deliver(ch.Value, w)
			delivered++
		}
	}
	err := w.wait(n.o.CommitWait)
	for _, e := range w.skipped() {
		n.log.Warn("cloud webhook: an item refused as invalid, skipped (Meta is not asked to send it again)", "err", e)
	}
	if err != nil {
		n.log.Warn("cloud webhook answered 503: Meta sends it again", "err", err)
		return err
	}
	if delivered == 0 && unknown > 0 {
		return fmt.Errorf("%w: the number's session is not open on this gateway", domain.ErrUnavailable)
	}
	return nil
}

// Client is one cloud session's number.
type Client struct {
	n         *Network
	sessionID string

	mu     sync.Mutex
	sink   func(network.Event)
	acct   domain.CloudAccount
	sends  network.SendLog
	msgs   network.MessageSource
	up     bool          // Connect found the number and the token good
	closed bool          // disconnected
	slow   time.Duration // the 130429 backoff in force (0: none)
	retry  *time.Timer   // the next connect try after a failed one
	tries  int
	// resending: the messages Meta failed for its rate limits whose next try is scheduled.
	resending map[string]bool
}

var _ network.Client = (*Client)(nil)

// open tells whether the client is open here with this app secret (a closed one's session
// runs elsewhere now, or nowhere).
func (c *Client) open(secret string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.closed && c.acct.AppSecret == secret
}

func (c *Client) state() (domain.CloudAccount, network.SendLog, func(network.Event)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.acct, c.sends, c.sink
}

// emit hands ev to the session's sink; false when the client is closed (nothing was).
func (c *Client) emit(ev network.Event) bool {
	c.mu.Lock()
	sink, closed := c.sink, c.closed
	c.mu.Unlock()
	if sink == nil || closed {
		return false
	}
	sink(ev)
	return true
}

// connectRetry bounds the wait between connect tries after Meta could not be reached.
const (
	connectRetryFirst = 5 * time.Second
	connectRetryMax   = 5 * time.Minute
)

// Connect checks the number with its token: Connected when both are good; Disconnected with
// reason token_invalid (staying down until a new token) when Meta refuses the token; when
// Meta cannot be reached, Disconnected and another try later, by itself.
func (c *Client) Connect(ctx context.Context) error {
	acct, _, _ := c.state()
	_, err := c.n.Check(ctx, acct)
	c.mu.Lock()
	if c.retry != nil {
		c.retry.Stop()
		c.retry = nil
	}
	c.mu.Unlock()
	switch {
	case err == nil:
		c.mu.Lock()
		c.up, c.tries = true, 0
		c.mu.Unlock()
		c.emit(network.Connected{Phone: acct.Phone})
		c.resumeResends()
		return nil
	case errors.Is(err, domain.ErrValidation):
		c.tokenInvalid(err)
		return nil
	}
	c.mu.Lock()
	c.up = false
	c.tries++
	wait := min(connectRetryFirst<<min(c.tries-1, 10), connectRetryMax)
	if !c.closed {
		c.retry = time.AfterFunc(wait, func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_ = c.Connect(ctx)
		})
	}
	c.mu.Unlock()
	c.emit(network.Disconnected{Reason: err.Error(), Reconnecting: true, StatusReason: network.ReasonNetwork})
	return nil
}

// tokenInvalid takes the session down until it is given a new token (190).
func (c *Client) tokenInvalid(err error) {
	c.mu.Lock()
	c.up = false
	c.mu.Unlock()
	c.n.log.Warn("cloud session: Meta refused the access token", "session_id", c.sessionID, "err", err)
	c.emit(network.Disconnected{Reason: "Meta refused the access token (expired or revoked): connect the number again with a new token",
		StatusReason: network.ReasonTokenInvalid})
}

// PairPhone: a cloud number is connected with its token, not linked by a code.
func (c *Client) PairPhone(context.Context, string) (string, error) {
	return "", fmt.Errorf("%w: a Cloud API number is connected with POST /api/client/cloud/connect, not by a pair code", domain.ErrNotOnCloud)
}

// Lookup: the Cloud API has no number lookup (its contacts endpoint is gone).
func (c *Client) Lookup(context.Context, []string) ([]domain.NumberCheck, error) {
	return nil, fmt.Errorf("%w: number lookups", domain.ErrNotOnCloud)
}

// Groups, CreateGroup, UpdateParticipants, InviteLink: groups are not the Cloud API's.
func (c *Client) Groups(context.Context) ([]domain.Group, error) {
	return nil, fmt.Errorf("%w: groups", domain.ErrNotOnCloud)
}

func (c *Client) CreateGroup(context.Context, string, []string) (domain.Group, error) {
	return domain.Group{}, fmt.Errorf("%w: groups", domain.ErrNotOnCloud)
}

func (c *Client) UpdateParticipants(context.Context, string, []string, []string) (domain.Group, error) {
	return domain.Group{}, fmt.Errorf("%w: groups", domain.ErrNotOnCloud)
}

func (c *Client) InviteLink(context.Context, string) (string, error) {
	return "", fmt.Errorf("%w: groups", domain.ErrNotOnCloud)
}

// MarkRead marks an incoming message (ref.ID, Meta's id) read: blue ticks for its sender.
func (c *Client) MarkRead(ctx context.Context, ref domain.MessageRef) error {
	acct, _, _ := c.state()
	req := cloudapi.SendRequest{MessagingProduct: cloudapi.Product, Status: cloudapi.StatusRead, MessageID: ref.ID}
	var out cloudapi.SuccessResponse
	if err := c.n.graph.postJSON(ctx, acct.AccessToken, acct.PhoneNumberID+"/messages", req, &out); err != nil {
		return c.callError(err)
	}
	return nil
}

// callError is a failed call's error (not a send's) on a connected number: a refused token
// also marks the session's token invalid.
func (c *Client) callError(err error) error {
	return graphError(err, func(*cloudapi.Error) error {
		c.tokenInvalid(err)
		return fmt.Errorf("%w: Meta refused the access token", domain.ErrNotConnected)
	})
}

// Logout forgets the number here (nothing is undone at Meta: the number stays registered to
// the Cloud API, for the next connect).
func (c *Client) Logout(context.Context) error {
	c.mu.Lock()
	c.up = false
	c.mu.Unlock()
	c.emit(network.LoggedOut{Reason: "the Cloud API number was disconnected from the gateway"})
	return nil
}

// Disconnect stops the client (its account is kept for the next Open).
func (c *Client) Disconnect() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.up, c.closed = false, true
	if c.retry != nil {
		c.retry.Stop()
		c.retry = nil
	}
}

// Paired: a cloud number is always "paired" (its token is its link); its phone is the
// number's digits.
func (c *Client) Paired() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.acct.Phone, true
}
