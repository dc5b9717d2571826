package cloud

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gateway/gateway/cloudapi"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// commits gathers what a webhook waits for before its answer: each event it hands on carries
// one of its Dones, called once what the event carries is durable; a failure (of a Done, or of
// a write here) makes the answer a 503, and Meta sends the notification again. An item the
// gateway refuses as invalid (domain.ErrValidation: a message with no id, say) is not a
// failure: sent again it would be refused again, for the 7 days Meta retries, and hold back
// the answer for the rest of the notification. It is skipped, and the webhook logs it.
type commits struct {
	mu      sync.Mutex
	n       int  // Dones given and not called yet
	sealed  bool // every event handed on
	err     error
	invalid []error       // items refused as invalid: skipped, logged
	all     chan struct{} // closed once sealed and n is 0
}

func newCommits() *commits { return &commits{all: make(chan struct{})} }

// add returns the Done of one more event (a second call of it is ignored).
func (w *commits) add() network.Done {
	w.mu.Lock()
	w.n++
	w.mu.Unlock()
	var once sync.Once
	return func(err error) {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.failLocked(err)
			w.n--
			w.closeIfDone()
		})
	}
}

// fail records that something the notification carries was not made durable.
func (w *commits) fail(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.failLocked(err)
}

func (w *commits) failLocked(err error) {
	switch {
	case err == nil:
	case errors.Is(err, domain.ErrValidation):
		w.invalid = append(w.invalid, err)
	case w.err == nil:
		w.err = err
	}
}

// skipped is what was refused as invalid (once wait returned).
func (w *commits) skipped() []error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.invalid
}

func (w *commits) closeIfDone() {
	if w.sealed && w.n == 0 {
		close(w.all)
	}
}

// wait seals w and waits, at most d, until every event's Done was called: nil when all of it
// is durable, else domain.ErrUnavailable.
func (w *commits) wait(d time.Duration) error {
	w.mu.Lock()
	w.sealed = true
	w.closeIfDone()
	w.mu.Unlock()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-w.all:
	case <-t.C:
		return fmt.Errorf("%w: what the notification carries was not recorded within %s", domain.ErrUnavailable, d)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return fmt.Errorf("%w: what the notification carries was not recorded: %w", domain.ErrUnavailable, w.err)
	}
	return nil
}

// deliver turns one change of a webhook into the port's events, in order: incoming messages
// (and reactions), then statuses. Each carries a Done of w.
func (c *Client) deliver(v cloudapi.Value, w *commits) {
	acct, sends, _ := c.state()
	names := map[string]string{}
	for _, ct := range v.Contacts {
		if ct.Profile != nil && ct.WaID != "" {
			names[ct.WaID] = ct.Profile.Name
		}
	}
	for _, m := range v.Messages {
		o := network.Origin{ID: m.ID, From: m.From, PushName: names[m.From], At: cloudapi.Time(m.Timestamp)}
		if o.At.IsZero() {
			o.At = c.n.o.Now()
		}
		if m.Type == cloudapi.TypeReaction && m.Reaction != nil {
			c.emitDone(network.Reaction{Origin: o, Target: c.ourID(sends, m.Reaction.MessageID), Emoji: m.Reaction.Emoji, Done: w.add()})
			continue
		}
		msg := m.Message()
		if msg.ReplyTo != nil {
			msg.ReplyTo.ID = c.ourID(sends, msg.ReplyTo.ID)
			msg.ReplyTo.FromMe = m.Context.From == acct.Phone || m.Context.From == ""
		}
		c.emitDone(network.Incoming{Origin: o, Message: msg, Done: w.add()})
	}
	for _, st := range v.Statuses {
		c.status(sends, st, w)
	}
	for _, e := range v.Errors {
		c.n.log.Warn("cloud webhook error", "session_id", c.sessionID, "code", e.Code, "err", e.Error())
	}
}

// emitDone emits an event that carries a Done, which is told the session was closed when the
// event could not be handed on.
func (c *Client) emitDone(ev network.Event) {
	if c.emit(ev) {
		return
	}
	network.DoneOf(ev).Call(fmt.Errorf("%w: the session %s is closed here", domain.ErrUnavailable, c.sessionID))
}

// ourID is the gateway's id of a message Meta names by its id (a sent one), else the id as it is.
func (c *Client) ourID(sends network.SendLog, metaID string) string {
	if sends == nil || metaID == "" {
		return metaID
	}
	if id, ok, err := sends.ByNetworkID(metaID); err == nil && ok {
		return id
	}
	return metaID
}

// status reports one status of a sent message: the gateway's id from the callback data (or
// the send log), the send log told Meta took it, then a receipt; a failure fails the message,
// unless it is Meta's rate limit, after which it is sent again.
func (c *Client) status(sends network.SendLog, st cloudapi.Status, w *commits) {
	id := st.BizOpaqueCallbackData
	if id == "" {
		id = c.ourID(sends, st.ID)
	}
	at := cloudapi.Time(st.Timestamp)
	if at.IsZero() {
		at = c.n.o.Now()
	}
	category := ""
	if st.Pricing != nil {
		category = st.Pricing.Category
	}
	ctx := context.Background()
	if st.Status != cloudapi.StatusFailed && sends != nil && id != st.ID {
		if rec, ok, err := sends.Get(id); err == nil && ok && rec.NetworkID != st.ID {
			if err := sends.Taken(ctx, id, st.ID); err != nil {
				c.n.log.Warn("cloud: send log", "session_id", c.sessionID, "message_id", id, "err", err)
				w.fail(err)
			}
		}
	}
	r := network.MessageReceipt{IDs: []string{id}, From: st.RecipientID, At: at, Category: category}
	switch st.Status {
	case cloudapi.StatusSent:
		r.Status = network.StatusSent
	case cloudapi.StatusDelivered:
		r.Status = network.StatusDelivered
	case cloudapi.StatusRead:
		r.Status = network.StatusRead
	case cloudapi.StatusPlayed:
		r.Status = network.StatusPlayed
	case cloudapi.StatusFailed:
		ge := &cloudapi.Error{Code: cloudapi.CodeGeneric, Message: "failed"}
		if len(st.Errors) > 0 {
			ge = &st.Errors[0]
		}
		if retryable(ge.Code) {
			w.fail(c.resendLater(id, st.ID, ge))
			return
		}
		r.Status, r.Err = network.StatusFailed, failure(ge)
	default:
		return
	}
	r.Done = w.add()
	c.emitDone(r)
}

// ResendLog is a SendLog that also keeps the messages Meta failed for its rate limits until
// they are sent again, so a restart or a move of the session to another node before the backoff
// ends does not lose them (persist.SendLog is one). Without it they are kept in memory only.
type ResendLog interface {
	ResendLater(ctx context.Context, sessionID, id string, r domain.CloudResend) error
	Resent(ctx context.Context, sessionID, id string) error
	Resends(sessionID string, fn func(id string, r domain.CloudResend) error) error
}

// resendLater sends a message Meta failed for its rate limits (failed: the id Meta gave the
// try it failed) again, after the backoff, under the same id (never failed for it), until
// Meta takes it or fails it for another reason; the send log keeps it meanwhile. The error is
// the send log's: the resend is scheduled in memory all the same.
func (c *Client) resendLater(id, failed string, ge *cloudapi.Error) error {
	_, sends, _ := c.state()
	wait := pairRateWait
	if ge.Code == cloudapi.CodeThroughput {
		wait = c.slower()
	}
	var err error
	c.n.log.Info("cloud: Meta failed a message for its rate limit; sending it again", "session_id", c.sessionID, "message_id", id, "code", ge.Code, "after", wait)
	if rl, ok := sends.(ResendLog); ok {
		r := domain.CloudResend{Due: c.n.o.Now().Add(wait).UTC(), Failed: failed}
		if err = rl.ResendLater(context.Background(), c.sessionID, id, r); err != nil {
			c.n.log.Warn("cloud: send log", "session_id", c.sessionID, "message_id", id, "err", err)
		}
	}
	c.schedule(id, failed, wait)
	return err
}

// resumeResends schedules the messages the send log keeps to send again (Meta failed them for
// its rate limits before a restart, or on the node the session ran on before).
func (c *Client) resumeResends() {
	_, sends, _ := c.state()
	rl, ok := sends.(ResendLog)
	if !ok {
		return
	}
	now := c.n.o.Now()
	err := rl.Resends(c.sessionID, func(id string, r domain.CloudResend) error {
		c.schedule(id, r.Failed, max(r.Due.Sub(now), 0))
		return nil
	})
	if err != nil {
		c.n.log.Warn("cloud: send log", "session_id", c.sessionID, "err", err)
	}
}

// schedule sends message id again after wait, unless it is already scheduled.
func (c *Client) schedule(id, failed string, wait time.Duration) {
	c.mu.Lock()
	if c.resending[id] {
		c.mu.Unlock()
		return
	}
	if c.resending == nil {
		c.resending = map[string]bool{}
	}
	c.resending[id] = true
	c.mu.Unlock()
	time.AfterFunc(wait, func() {
		c.mu.Lock()
		delete(c.resending, id)
		c.mu.Unlock()
		c.resend(id, failed)
	})
}

// resend sends message id again (see resendLater).
func (c *Client) resend(id, failed string) {
	c.mu.Lock()
	msgs, closed := c.msgs, c.closed
	c.mu.Unlock()
	if closed || msgs == nil {
		return // the send log keeps it for the session's next client
	}
	_, sends, _ := c.state()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if sends != nil {
		// The failed try is forgotten (its answer may have been recorded after the status
		// came), so this one goes to Meta anew; a later try Meta took is kept.
		if rec, ok, err := sends.Get(id); err == nil && ok && (rec.NetworkID == "" || rec.NetworkID == failed) {
			if err := sends.Forget(ctx, id); err != nil {
				c.n.log.Warn("cloud: send log", "session_id", c.sessionID, "message_id", id, "err", err)
			}
		}
	}
	done := func() {
		if rl, ok := sends.(ResendLog); ok {
			if err := rl.Resent(ctx, c.sessionID, id); err != nil {
				c.n.log.Warn("cloud: send log", "session_id", c.sessionID, "message_id", id, "err", err)
			}
		}
	}
	m, ok := msgs.Message(ctx, id)
	if !ok {
		c.n.log.Warn("cloud: a message to send again is gone", "session_id", c.sessionID, "message_id", id)
		done()
		return
	}
	_, err := c.Send(ctx, m)
	switch {
	case err == nil:
		done()
	case errors.Is(err, network.ErrRateLimited), errors.Is(err, network.ErrUnknownOutcome), errors.Is(err, domain.ErrNotConnected):
		// Not a refusal of the message: try again later, never fail it for this.
		_ = c.resendLater(id, failed, &cloudapi.Error{Code: cloudapi.CodeThroughput, Message: fmt.Sprintf("again: %v", err)}) // logged; the resend is scheduled
	default:
		done()
		c.emit(network.MessageReceipt{IDs: []string{id}, Status: network.StatusFailed, At: c.n.o.Now(), Err: err})
	}
}
