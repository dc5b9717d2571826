package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gateway/gateway/domain"

	"github.com/anthdm/hollywood/actor"
)

// ErrSessionNotReady: the campaign's session is not connected yet (it reconnects after a
// restart or a dropped link). The number was not sent and keeps its reservation: the campaign
// waits and tries it again, up to campaignSessionWait.
var ErrSessionNotReady = fmt.Errorf("%w: waiting for the session to connect", ErrNotConnected)

// campaignSessionWait is how long a campaign waits for its session before failing a number.
const campaignSessionWait = 2 * time.Minute

// Campaign statuses and records, declared in domain.
const (
	CampaignQueued    = domain.CampaignQueued
	CampaignRunning   = domain.CampaignRunning
	CampaignCompleted = domain.CampaignCompleted
	CampaignCancelled = domain.CampaignCancelled
	CampaignFailed    = domain.CampaignFailed
)

type (
	CampaignDetail = domain.CampaignDetail
	CampaignState  = domain.Campaign
)

// CampaignStore persists campaigns: the record and, with it, the detail of one number.
type CampaignStore interface {
	SaveCampaign(ctx context.Context, s CampaignState, detail *CampaignDetail, final bool) error
}

// CampaignDeps are a campaign actor's collaborators.
type CampaignDeps struct {
	Store CampaignStore
	Now   func() time.Time
	Log   *slog.Logger
	// Normalize turns a number as given into digits, or an error (a failed entry).
	Normalize func(string) (string, error)
	// MessageID is the message id of a campaign's number (deterministic: id and index).
	MessageID func(campaignID string, idx int) string
	// Send sends one message of the campaign under the given id (allowance already reserved)
	// and returns the outbox entry with its outcome.
	Send func(ctx context.Context, s CampaignState, to, msgID string) (OutboxEntry, error)
	// Outcome looks a message up in the outbox: found with an outcome, found pending, or absent.
	Outcome func(msgID string) (e OutboxEntry, found bool)
	// Release gives back allowance the campaign reserved and did not use.
	Release func(userID string, n int64)
	// Publish receives each new view (progress reads cost no round trip).
	Publish func(CampaignState)
	// TimerLate is told how late each delay timer was handled (scheduling drift).
	TimerLate func(time.Duration)
	// Load reads the persisted campaign with its details: a restart after a panic resumes from
	// it, not from the state the actor was spawned with.
	Load func(id string) (CampaignState, error)
}

// Campaign-actor messages.
type (
	// CancelCampaign stops the campaign before its next number; the reply comes once no send is
	// in flight, so nothing is delivered after it.
	CancelCampaign struct{ Reply chan CampaignState }

	campaignNext struct{ due time.Time } // due: when the timer was meant to fire (zero: not a timer)
	campaignSent struct {
		idx   int
		entry OutboxEntry
		err   error
	}
)

// Campaign is the actor of one bulk send: it sends one number at a time, in order, waits Delay
// between sends on a timer (never a sleep in Receive), and persists its progress with every
// number. All fields are owned by the actor's goroutine.
type Campaign struct {
	deps    CampaignDeps
	st      CampaignState
	sending bool
	started time.Time // when the send of the current number started
	// waitingSince is when the campaign began waiting for its session to connect.
	waitingSince time.Time
	timer        *time.Timer
	cancels      []chan CampaignState
}

// NewCampaign returns the producer of a campaign actor from its state.
func NewCampaign(st CampaignState, deps CampaignDeps) actor.Producer {
	return func() actor.Receiver { return &Campaign{deps: deps, st: st} }
}

// Receive implements actor.Receiver.
func (c *Campaign) Receive(ctx *actor.Context) {
	switch m := ctx.Message().(type) {
	case actor.Started:
		c.resume(ctx)
	case campaignNext:
		if !m.due.IsZero() && c.deps.TimerLate != nil {
			c.deps.TimerLate(c.deps.Now().Sub(m.due))
		}
		c.step(ctx)
	case campaignSent:
		c.sent(ctx, m)
	case *CancelCampaign:
		if c.st.Done() {
			m.Reply <- c.view()
			return
		}
		c.st.Status = CampaignCancelled
		if c.sending {
			c.cancels = append(c.cancels, m.Reply)
			return
		}
		c.finish(ctx)
		m.Reply <- c.view()
	case actor.Stopped:
		if c.timer != nil {
			c.timer.Stop()
		}
	}
}

// resume starts a new campaign or picks a persisted one up where it stopped.
func (c *Campaign) resume(ctx *actor.Context) {
	if c.deps.Load != nil {
		if st, err := c.deps.Load(c.st.ID); err == nil {
			c.st = st
		}
	}
	c.sending = false
	if c.st.Done() {
		c.publish()
		return
	}
	c.st.Status = CampaignRunning
	c.publish()
	c.scheduleNext(ctx)
}

// step processes the number at the cursor, or ends the campaign. The outbox is asked first:
// a number whose send was under way when the process died is resolved there, under the same
// message id, and never sent twice.
func (c *Campaign) step(ctx *actor.Context) {
	if c.st.Done() || c.sending {
		return
	}
	if c.st.Cursor >= c.st.Granted {
		c.st.Status = CampaignCompleted
		c.finish(ctx)
		return
	}
	idx := c.st.Cursor
	id := c.deps.MessageID(c.st.ID, idx)
	if e, found := c.deps.Outcome(id); found {
		if e.Status == MsgQueued {
			// Pending in the outbox: the session re-sends it at boot; poll for its outcome.
			engine, self := ctx.Engine(), ctx.PID()
			c.timer = time.AfterFunc(200*time.Millisecond, func() { engine.Send(self, campaignNext{}) })
			return
		}
		// Settled by the outbox (the account counted it then): give back its reservation.
		var err error
		if e.Status == MsgFailed {
			err = errors.New(e.Error)
		}
		c.deps.Release(c.st.UserID, 1)
		c.started = e.CreatedAt.Time() // the next number keeps its delay after this one's send
		c.sending = true
		c.sent(ctx, campaignSent{idx: idx, entry: e, err: err})
		return
	}
	to, err := c.deps.Normalize(c.st.Numbers[idx])
	if err != nil {
		// An invalid number is a failed entry, not a failed campaign; its share of the
		// allowance goes back.
		c.deps.Release(c.st.UserID, 1)
		c.sending = true
		c.sent(ctx, campaignSent{idx: idx, err: err})
		return
	}
	c.sending = true
	c.started = c.deps.Now()
	snap := c.st
	snap.Details = nil
	send, engine, self := c.deps.Send, ctx.Engine(), ctx.PID()
	go func() {
		e, err := send(context.Background(), snap, to, id)
		engine.Send(self, campaignSent{idx: idx, entry: e, err: err})
	}()
}

// sent records one number's outcome, persists the progress, and schedules the next number.
func (c *Campaign) sent(ctx *actor.Context, m campaignSent) {
	c.sending = false
	if m.idx != c.st.Cursor {
		return
	}
	if errors.Is(m.err, ErrSessionNotReady) && len(c.cancels) == 0 && c.st.Status != CampaignCancelled {
		now := c.deps.Now()
		if c.waitingSince.IsZero() {
			c.waitingSince = now
		}
		if now.Sub(c.waitingSince) < campaignSessionWait {
			engine, self := ctx.Engine(), ctx.PID()
			c.timer = time.AfterFunc(500*time.Millisecond, func() { engine.Send(self, campaignNext{}) })
			return
		}
	}
	c.waitingSince = time.Time{}
	if errors.Is(m.err, ErrSessionNotReady) {
		c.deps.Release(c.st.UserID, 1) // never sent: its reservation goes back
	}
	d := CampaignDetail{Number: c.st.Numbers[m.idx], MessageID: m.entry.ID}
	if m.err != nil {
		d.Error = m.err.Error()
		c.st.Failed++
	} else {
		d.Success = true
		c.st.Successful++
	}
	c.st.Details = append(c.st.Details, d)
	c.st.Cursor++
	c.st.UpdatedAt = c.deps.Now().UTC()
	c.st.NextAt = time.Time{}
	if c.st.Delay > 0 && !c.started.IsZero() {
		c.st.NextAt = c.started.Add(time.Duration(c.st.Delay * float64(time.Second))).UTC()
	}
	c.save(ctx, &d, false)
	c.publish()
	if len(c.cancels) > 0 || c.st.Status == CampaignCancelled {
		c.st.Status = CampaignCancelled
		c.finish(ctx)
		return
	}
	// Sends start every Delay: the pause is measured from the start of the previous send, so
	// the time the send itself took does not add up into drift.
	if c.st.Cursor >= c.st.Granted {
		ctx.Engine().Send(ctx.PID(), campaignNext{})
		return
	}
	c.scheduleNext(ctx)
}

// scheduleNext runs the next step at NextAt (at once when it has passed or is unset).
func (c *Campaign) scheduleNext(ctx *actor.Context) {
	engine, self := ctx.Engine(), ctx.PID()
	wait := c.st.NextAt.Sub(c.deps.Now())
	if c.st.NextAt.IsZero() || wait <= 0 {
		engine.Send(self, campaignNext{})
		return
	}
	due := c.st.NextAt
	c.timer = time.AfterFunc(wait, func() { engine.Send(self, campaignNext{due: due}) })
}

// finish ends the campaign: the final record, the unused allowance released, everyone waiting
// answered, and the actor stopped.
func (c *Campaign) finish(ctx *actor.Context) {
	if c.timer != nil {
		c.timer.Stop()
	}
	c.st.UpdatedAt = c.deps.Now().UTC()
	c.save(ctx, nil, true)
	if unused := int64(c.st.Granted - c.st.Cursor); unused > 0 {
		c.deps.Release(c.st.UserID, unused)
	}
	c.publish()
	v := c.view()
	for _, w := range c.cancels {
		w <- v
	}
	c.cancels = nil
	ctx.Engine().Poison(ctx.PID())
}

// save writes the record (and a number's detail) synchronously: progress is durable before the
// next number starts. A failure is logged; the in-flight mark still protects the next step.
func (c *Campaign) save(_ *actor.Context, d *CampaignDetail, final bool) {
	snap := c.st
	snap.Details = nil
	if err := c.deps.Store.SaveCampaign(context.Background(), snap, d, final); err != nil {
		c.deps.Log.Error("campaign: save progress", "campaign_id", c.st.ID, "err", err)
	}
}

func (c *Campaign) view() CampaignState {
	v := c.st
	v.Details = append([]CampaignDetail(nil), c.st.Details...)
	return v
}

func (c *Campaign) publish() {
	if c.deps.Publish != nil {
		c.deps.Publish(c.view())
	}
}
