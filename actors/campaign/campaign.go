// Package campaign is the actor of one bulk send: it sends a campaign's numbers one at a time,
// in order, waits the campaign's delay between sends on a timer (never a sleep in Receive), and
// persists its progress with every number, so a restart resumes where it stopped and never
// sends a number twice (each number's message id is derived from the campaign id and index).
//
// Storage that refuses writes (a full disk) stalls a campaign, never fails it: a number that was
// not accepted is tried again every second with its reservation kept, progress not saved is
// saved with the next write that lands, and the campaign ends (its record final, its view
// done) only once its final record is durable. One line is logged when it stalls and one when
// it goes on.
//
// Imports: domain and hollywood; what the actor needs from the rest of the gateway is declared
// here as interfaces (Store, Clock, Numbers, Sender, Outbox, Allowance, Publisher, Observer).
// Only the engine imports it: it spawns one actor per running campaign and implements those
// interfaces.
//
// Concurrency: every field of Campaign is owned by the actor's goroutine. A number's send runs
// on a worker goroutine whose outcome comes back as a message; the progress record is written
// from Receive (it must be durable before the next number starts).
package campaign

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/domain"
)

// ErrSessionNotReady is returned by a Sender when the campaign's session is not connected yet
// (it reconnects after a restart or a dropped link). The number was not sent and keeps its
// reservation: the campaign waits and tries it again, up to campaignSessionWait.
var ErrSessionNotReady = fmt.Errorf("%w: waiting for the session to connect", domain.ErrNotConnected)

// campaignSessionWait is how long a campaign waits for its session before failing a number.
const campaignSessionWait = 2 * time.Minute

// storageRetry is how often a campaign stalled by storage tries again.
const storageRetry = time.Second

// Store persists campaigns: the record and, with it, the detail of one number.
type Store interface {
	SaveCampaign(ctx context.Context, s domain.Campaign, detail *domain.CampaignDetail, final bool) error
	// LoadCampaign reads the persisted campaign with its details: a restart after a panic
	// resumes from it, not from the state the actor was spawned with.
	LoadCampaign(id string) (domain.Campaign, error)
}

// Clock is the actor's time: the cadence of the sends and the records' times.
type Clock interface {
	Now() time.Time
}

// Numbers turns a campaign's numbers into recipients and message ids.
type Numbers interface {
	// Normalize turns a number as given into digits, or an error (a failed entry).
	Normalize(number string) (string, error)
	// MessageID is the message id of a campaign's number (deterministic: id and index).
	MessageID(campaignID string, idx int) string
}

// Sender sends the campaign's messages. It is called from a worker goroutine.
type Sender interface {
	// Send sends one message of the campaign under the given id (allowance already reserved)
	// and returns the outbox entry with its outcome. An error wrapping ErrSessionNotReady or
	// domain.ErrUnavailable (the message was not accepted: storage refused it) leaves the
	// number's reservation to the campaign, which tries it again.
	Send(ctx context.Context, s domain.Campaign, to, msgID string) (domain.OutboxEntry, error)
}

// Outbox finds what became of a number's message sent before (by an earlier run of the
// campaign, before a crash).
type Outbox interface {
	// Outcome looks a message up in the outbox: found with an outcome, found pending, or absent.
	Outcome(msgID string) (e domain.OutboxEntry, found bool)
}

// Allowance takes back what the campaign reserved at its start and did not use.
type Allowance interface {
	// Release gives back n messages of the user's allowance.
	Release(userID string, n int64)
}

// Publisher receives each new view of the campaign (progress reads cost no round trip). It is
// called from the actor's goroutine and must not block.
type Publisher interface {
	Publish(s domain.Campaign)
}

// Audience is what the store loop asks of every number (DESIGN.md section 18): whether the
// phone is on the owner's suppression list (skipped: opted_out, nothing charged) and whether
// the owner's quiet hours hold the campaign now (it waits until they end).
type Audience interface {
	OptedOut(uid, phone string) bool
	QuietUntil(uid string, t time.Time) (time.Time, bool)
}

// Observer is told how late each delay timer was handled (scheduling drift), for metrics.
type Observer interface {
	TimerLate(late time.Duration)
}

// Deps are a campaign actor's collaborators.
type Deps struct {
	Store     Store
	Clock     Clock
	Log       *slog.Logger
	Numbers   Numbers
	Sender    Sender
	Outbox    Outbox
	Allowance Allowance
	Publisher Publisher // optional
	Observer  Observer  // optional
	Audience  Audience  // optional
	// AfterFunc runs f once d has passed by Clock (the pauses, a campaign's start, quiet hours);
	// nil = time.AfterFunc. Tests that move Clock give one that fires when they move it.
	AfterFunc func(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer = interface{ Stop() bool }

// Campaign-actor messages.
type (
	// Cancel stops the campaign before its next number; the reply comes once no send is
	// in flight, so nothing is delivered after it.
	Cancel struct{ Reply chan domain.Campaign }

	campaignNext      struct{ due time.Time } // due: when the timer was meant to fire (zero: not a timer)
	campaignSaveFinal struct{}
	campaignSent      struct {
		idx      int
		entry    domain.OutboxEntry
		err      error
		optedOut bool // skipped: on the suppression list
	}
)

// Campaign is the actor of one bulk send: it sends one number at a time, in order, waits Delay
// between sends on a timer (never a sleep in Receive), and persists its progress with every
// number. All fields are owned by the actor's goroutine.
type Campaign struct {
	deps    Deps
	st      domain.Campaign
	sending bool
	started time.Time // when the send of the current number started
	// waitingSince is when the campaign began waiting for its session to connect.
	waitingSince time.Time
	timer        Timer
	cancels      []chan domain.Campaign
	// unsaved are the details of numbers whose progress is not durable yet (storage refused
	// the write): they go with the next write.
	unsaved []domain.CampaignDetail
	// stalled: storage refuses the campaign's writes (logged once each way).
	stalled bool
	// ending: the campaign is over and waits for its final record to be durable.
	ending bool
}

// New returns the producer of a campaign actor from its state.
func New(st domain.Campaign, deps Deps) actor.Producer {
	return func() actor.Receiver { return &Campaign{deps: deps, st: st} }
}

// Receive implements actor.Receiver.
func (a *Campaign) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		a.resume(c)
	case campaignNext:
		if !m.due.IsZero() && a.deps.Observer != nil {
			a.deps.Observer.TimerLate(a.deps.Clock.Now().Sub(m.due))
		}
		a.step(c)
	case campaignSent:
		a.sent(c, m)
	case campaignSaveFinal:
		a.finish(c)
	case *Cancel:
		if a.st.Done() || a.ending {
			m.Reply <- a.view()
			return
		}
		a.st.Status = domain.CampaignCancelled
		if a.sending {
			a.cancels = append(a.cancels, m.Reply)
			return
		}
		a.finish(c)
		m.Reply <- a.view()
	case actor.Stopped:
		if a.timer != nil {
			a.timer.Stop()
		}
	}
}

// resume starts a new campaign or picks a persisted one up where it stopped.
func (a *Campaign) resume(c *actor.Context) {
	if st, err := a.deps.Store.LoadCampaign(a.st.ID); err == nil {
		a.st = st
	}
	a.sending = false
	if a.st.Done() {
		a.publish()
		return
	}
	if a.st.Status != domain.CampaignScheduled || !a.st.StartAt.After(a.deps.Clock.Now()) {
		a.st.Status = domain.CampaignRunning
	}
	a.publish()
	a.scheduleNext(c)
}

// step processes the number at the cursor, or ends the campaign. The outbox is asked first:
// a number whose send was under way when the process died is resolved there, under the same
// message id, and never sent twice.
func (a *Campaign) step(c *actor.Context) {
	if a.st.Done() || a.sending || a.ending {
		return
	}
	if a.st.Status == domain.CampaignScheduled {
		a.st.Status = domain.CampaignRunning // its time has come
		a.publish()
	}
	if a.st.Cursor >= a.st.Granted {
		a.st.Status = domain.CampaignCompleted
		a.finish(c)
		return
	}
	if au := a.deps.Audience; au != nil {
		if until, quiet := au.QuietUntil(a.st.UserID, a.deps.Clock.Now()); quiet {
			// The owner's quiet hours: the next number waits until they end.
			a.after(c, until.Sub(a.deps.Clock.Now()), campaignNext{due: until})
			return
		}
	}
	idx := a.st.Cursor
	id := a.deps.Numbers.MessageID(a.st.ID, idx)
	if e, found := a.deps.Outbox.Outcome(id); found {
		if e.Status == domain.MsgQueued {
			// Pending in the outbox: the session re-sends it at boot; poll for its outcome.
			a.after(c, 200*time.Millisecond, campaignNext{})
			return
		}
		// Settled by the outbox (the account counted it then): give back its reservation.
		var err error
		if e.Status == domain.MsgFailed {
			err = errors.New(e.Error)
		}
		a.deps.Allowance.Release(a.st.UserID, 1)
		a.started = e.CreatedAt.Time() // the next number keeps its delay after this one's send
		a.sending = true
		a.sent(c, campaignSent{idx: idx, entry: e, err: err})
		return
	}
	to, err := a.deps.Numbers.Normalize(a.st.Numbers[idx])
	if err != nil {
		// An invalid number is a failed entry, not a failed campaign; its share of the
		// allowance goes back.
		a.deps.Allowance.Release(a.st.UserID, 1)
		a.sending = true
		a.sent(c, campaignSent{idx: idx, err: err})
		return
	}
	if au := a.deps.Audience; au != nil && au.OptedOut(a.st.UserID, to) {
		// On the suppression list: skipped, its share of the allowance back, no pause after it.
		a.deps.Allowance.Release(a.st.UserID, 1)
		a.sending, a.started = true, time.Time{}
		a.sent(c, campaignSent{idx: idx, entry: domain.OutboxEntry{}, optedOut: true})
		return
	}
	a.sending = true
	a.started = a.deps.Clock.Now()
	snap := a.st
	snap.Details = nil
	sender, hw, self := a.deps.Sender, c.Engine(), c.PID()
	go func() {
		e, err := sender.Send(context.Background(), snap, to, id)
		hw.Send(self, campaignSent{idx: idx, entry: e, err: err})
	}()
}

// sent records one number's outcome, persists the progress, and schedules the next number.
func (a *Campaign) sent(c *actor.Context, m campaignSent) {
	a.sending = false
	if m.idx != a.st.Cursor {
		return
	}
	if errors.Is(m.err, ErrSessionNotReady) && len(a.cancels) == 0 && a.st.Status != domain.CampaignCancelled {
		now := a.deps.Clock.Now()
		if a.waitingSince.IsZero() {
			a.waitingSince = now
		}
		if now.Sub(a.waitingSince) < campaignSessionWait {
			a.after(c, 500*time.Millisecond, campaignNext{})
			return
		}
	}
	a.waitingSince = time.Time{}
	if errors.Is(m.err, domain.ErrUnavailable) && len(a.cancels) == 0 && a.st.Status != domain.CampaignCancelled {
		// Not accepted (storage refuses writes): the same number again, with its reservation,
		// however long storage takes to come back.
		a.stall(m.err)
		a.after(c, storageRetry, campaignNext{})
		return
	}
	if errors.Is(m.err, ErrSessionNotReady) || errors.Is(m.err, domain.ErrUnavailable) {
		a.deps.Allowance.Release(a.st.UserID, 1) // never sent: its reservation goes back
	}
	d := domain.CampaignDetail{Number: a.st.Numbers[m.idx], MessageID: m.entry.ID}
	switch {
	case m.optedOut:
		d.Status, d.Error = domain.DetailOptedOut, "opted_out: the recipient is on the suppression list (replied STOP)"
		a.st.OptedOut++
	case m.err != nil:
		d.Status, d.Error = domain.DetailFailed, m.err.Error()
		if errors.Is(m.err, domain.ErrOptedOut) { // opted out while the number was sent
			d.Status = domain.DetailOptedOut
			a.st.OptedOut++
			break
		}
		a.st.Failed++
	default:
		d.Status, d.Success = domain.DetailSent, true
		a.st.Successful++
	}
	a.st.Details = append(a.st.Details, d)
	a.st.Cursor++
	a.st.UpdatedAt = a.deps.Clock.Now().UTC()
	a.st.NextAt = time.Time{}
	if a.st.Delay > 0 && !a.started.IsZero() {
		a.st.NextAt = a.started.Add(time.Duration(a.st.Delay * float64(time.Second))).UTC()
	}
	a.unsaved = append(a.unsaved, d)
	a.save(false)
	a.publish()
	if len(a.cancels) > 0 || a.st.Status == domain.CampaignCancelled {
		a.st.Status = domain.CampaignCancelled
		a.finish(c)
		return
	}
	// Sends start every Delay: the pause is measured from the start of the previous send, so
	// the time the send itself took does not add up into drift.
	if a.st.Cursor >= a.st.Granted {
		c.Engine().Send(c.PID(), campaignNext{})
		return
	}
	a.scheduleNext(c)
}

// scheduleNext runs the next step at NextAt (at once when it has passed or is unset).
func (a *Campaign) scheduleNext(c *actor.Context) {
	wait := a.st.NextAt.Sub(a.deps.Clock.Now())
	if a.st.NextAt.IsZero() || wait <= 0 {
		c.Engine().Send(c.PID(), campaignNext{})
		return
	}
	a.after(c, wait, campaignNext{due: a.st.NextAt})
}

// after sends msg to the actor once d has passed (on a.timer, which finish stops).
func (a *Campaign) after(c *actor.Context, d time.Duration, msg any) {
	hw, self := c.Engine(), c.PID()
	if a.deps.AfterFunc != nil {
		a.timer = a.deps.AfterFunc(d, func() { hw.Send(self, msg) })
		return
	}
	a.timer = time.AfterFunc(d, func() { hw.Send(self, msg) })
}

// finish ends the campaign: the final record, the unused allowance released, everyone waiting
// answered, and the actor stopped. While storage refuses the final record, the campaign keeps
// its last running view (so reads see it, not the stored record behind it) and tries again
// every second; only a durable final record publishes the end.
func (a *Campaign) finish(c *actor.Context) {
	if a.timer != nil {
		a.timer.Stop()
	}
	if !a.ending {
		a.ending = true
		if unused := int64(a.st.Granted - a.st.Cursor); unused > 0 {
			a.deps.Allowance.Release(a.st.UserID, unused)
		}
		v := a.view()
		for _, w := range a.cancels {
			w <- v
		}
		a.cancels = nil
	}
	a.st.UpdatedAt = a.deps.Clock.Now().UTC()
	if !a.save(true) {
		a.after(c, storageRetry, campaignSaveFinal{})
		return
	}
	a.publish()
	c.Engine().Poison(c.PID())
}

// save writes the record with the details not written yet (each with the record, in order),
// synchronously: progress is durable before the next number starts. A write storage refuses
// leaves them for the next save (a crash meanwhile resumes from the last durable cursor, and
// the outbox answers for the numbers after it: nothing is sent twice). It reports whether
// everything is durable.
func (a *Campaign) save(final bool) bool {
	snap := a.st
	snap.Details = nil
	write := func(d *domain.CampaignDetail, final bool) bool {
		err := a.deps.Store.SaveCampaign(context.Background(), snap, d, final)
		if err != nil {
			a.stall(err)
		}
		return err == nil
	}
	for len(a.unsaved) > 0 {
		if !write(&a.unsaved[0], final && len(a.unsaved) == 1) {
			return false
		}
		a.unsaved = a.unsaved[1:]
		if final && len(a.unsaved) == 0 {
			a.resumed()
			return true
		}
	}
	if final && !write(nil, true) {
		return false
	}
	a.resumed()
	return true
}

// stall notes that storage refused a write (logged once per stall).
func (a *Campaign) stall(err error) {
	if !a.stalled {
		a.stalled = true
		a.deps.Log.Warn("campaign: storage refuses its writes; waiting, it goes on by itself", "campaign_id", a.st.ID, "cursor", a.st.Cursor, "err", err)
	}
}

// resumed notes that a write landed again.
func (a *Campaign) resumed() {
	if a.stalled {
		a.stalled = false
		a.deps.Log.Info("campaign: storage accepts its writes again; going on", "campaign_id", a.st.ID, "cursor", a.st.Cursor)
	}
}

func (a *Campaign) view() domain.Campaign {
	v := a.st
	v.Details = append([]domain.CampaignDetail(nil), a.st.Details...)
	return v
}

func (a *Campaign) publish() {
	if a.deps.Publisher != nil {
		a.deps.Publisher.Publish(a.view())
	}
}
