package session

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// Deliveries is what a session's deliverer reports to: the engine's message facet, which owns
// each message's reservation, its waiters and its durable outcome.
type Deliveries interface {
	// Outcome is told the network's final word on an entry: sent (err nil) or failed. It is
	// called from the deliverer's worker goroutine, in queue order, and must not block long.
	Outcome(e domain.OutboxEntry, err error)
	// Receipt is told the recipient's device reported on a sent message (delivered, read).
	Receipt(id string, status domain.MessageStatus, at time.Time)
}

// Contacts remembers which numbers a session wrote to before, for the new-contact pacing cap.
type Contacts interface {
	// Known tells whether the session wrote to phone before.
	Known(sessionID, phone string) (bool, error)
	// Remember records phone as known to the session.
	Remember(sessionID, phone string) error
}

// Deliverer messages.
type (
	// Enqueue hands an accepted (durably queued) entry to the session's delivery queue.
	Enqueue struct{ Entry domain.OutboxEntry }
	// SetPacing changes the pacing the session inherits (the network's and its owner's plan's).
	SetPacing struct{ Pacing domain.Pacing }
	// Update changes the session's own settings, persisted: its pacing override (when
	// SetPacing; nil removes it) and its proxy (when Proxy is set; applies from the next
	// connect).
	Update struct {
		SetPacing bool
		Pacing    *domain.Pacing
		Proxy     *string
		Reply     chan Reply
	}

	deliverTick struct{}
	batchDone   struct {
		sent int       // entries whose outcome is known (sent or failed), in order
		last time.Time // when the last of them was sent
		rest []domain.OutboxEntry
		// pause: the network asked to hold the queue until then (a timelock, a ban, a rate
		// limit); otherwise an unknown outcome backs off on its own schedule.
		pause time.Time
	}
)

// deliverBatch is how many entries one worker run takes when the session has no pacing: in
// order, one after another, without a round trip through the actor between them.
const deliverBatch = 32

// Backoff of a queue whose head had an unknown outcome (the network did not say, the link
// dropped mid-send): sent again under the same id, 1 s, 2 s, ... at most a minute apart.
const (
	retryFirst = time.Second
	retryMax   = time.Minute
)

// queue is a session's ordered delivery queue and its pacing state; the session actor owns it.
type queue struct {
	items    []domain.OutboxEntry
	busy     bool
	timerAt  time.Time // a deliverTick is scheduled for then (zero: none)
	pause    time.Time // nothing is sent before it
	retry    time.Duration
	base     domain.Pacing // inherited: the network's and the owner's plan's
	pacing   domain.Pacing // in force: base with the session's own override over it
	lastSend time.Time
	gap      time.Duration // the gap drawn after lastSend
	window   []time.Time   // sends of the last minute, oldest first (PerMinute)
	day      string        // UTC day of newToday
	newToday int
}

// Stats describes the queue for views and metrics.
func (q *queue) stats() domain.QueueStats {
	if len(q.items) == 0 {
		return domain.QueueStats{}
	}
	return domain.QueueStats{Depth: len(q.items), OldestAt: q.items[0].CreatedAt}
}

// pump starts the next send when the session is connected, nothing is in flight, and pacing
// allows; otherwise it schedules itself for when pacing will.
func (s *Session) pump(c *actor.Context) {
	q := &s.q
	if q.busy || len(q.items) == 0 || s.st.Status != domain.StatusConnected || s.client == nil {
		return
	}
	now := s.deps.Clock.Now()
	if wait := s.paceWait(now); wait > 0 {
		s.schedule(c, now.Add(wait))
		return
	}
	n := 1
	if q.pacing.IsZero() {
		n = min(len(q.items), deliverBatch)
	}
	if q.pacing.NewContactsPerDay > 0 && s.deps.Contacts != nil {
		to := q.items[0].Message.To
		known, err := s.deps.Contacts.Known(s.st.ID, to)
		if err == nil && !known {
			q.newToday++
			err = s.deps.Contacts.Remember(s.st.ID, to)
		}
		if err != nil {
			s.deps.Log.Warn("deliverer: contact book", "session_id", s.st.ID, "err", err)
		}
	}
	batch := make([]domain.OutboxEntry, n)
	copy(batch, q.items[:n])
	q.items = q.items[n:]
	q.busy = true
	client, deps, hw, self := s.client, s.deps, c.Engine(), c.PID()
	s.inflight.Add(1)
	go func() {
		defer s.inflight.Done()
		hw.Send(self, deliver(client, deps, batch))
	}()
}

// paceWait is how long pacing holds the queue's head.
func (s *Session) paceWait(now time.Time) time.Duration {
	q := &s.q
	var wait time.Duration
	if now.Before(q.pause) {
		wait = q.pause.Sub(now)
	}
	if !q.lastSend.IsZero() {
		wait = max(wait, q.lastSend.Add(q.gap).Sub(now))
	}
	if p := q.pacing.PerMinute; p > 0 {
		cut := now.Add(-time.Minute)
		for len(q.window) > 0 && !q.window[0].After(cut) {
			q.window = q.window[1:]
		}
		if len(q.window) >= p {
			wait = max(wait, q.window[0].Add(time.Minute).Sub(now))
		}
	}
	if q.pacing.NewContactsPerDay > 0 {
		day := now.UTC().Format(time.DateOnly)
		if day != q.day {
			q.day, q.newToday = day, 0
		}
		linkedDays := 0
		if !s.st.CreatedAt.IsZero() {
			linkedDays = int(now.Sub(s.st.CreatedAt) / (24 * time.Hour))
		}
		if q.newToday >= q.pacing.NewContactCap(linkedDays) && s.deps.Contacts != nil {
			// Only a first message to a new number waits for tomorrow; the queue keeps its
			// order, so everything behind it waits too (documented in the README).
			if known, _ := s.deps.Contacts.Known(s.st.ID, q.items[0].Message.To); !known {
				y, m, d := now.UTC().Date()
				wait = max(wait, time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC).Sub(now))
			}
		}
	}
	return wait
}

func (s *Session) schedule(c *actor.Context, at time.Time) {
	if !s.q.timerAt.IsZero() && !s.q.timerAt.After(at) {
		return // an earlier tick is coming
	}
	s.q.timerAt = at
	hw, self := c.Engine(), c.PID()
	time.AfterFunc(at.Sub(s.deps.Clock.Now()), func() { hw.Send(self, deliverTick{}) })
}

// batchDone takes a worker's report: entries it could not settle go back to the queue's head
// in their order, and pacing records the sends.
func (s *Session) batchDone(c *actor.Context, m batchDone) {
	q := &s.q
	q.busy = false
	if m.sent > 0 {
		q.lastSend = m.last
		q.gap = q.pacing.Gap()
		if q.pacing.PerMinute > 0 {
			for range m.sent {
				q.window = append(q.window, m.last)
			}
		}
		q.retry = 0
		s.touch()
	}
	if len(m.rest) > 0 {
		q.items = append(m.rest, q.items...)
		if m.pause.IsZero() {
			q.retry = min(max(2*q.retry, retryFirst), retryMax)
			m.pause = s.deps.Clock.Now().Add(q.retry)
		}
		q.pause = m.pause
		s.deps.Log.Info("deliverer: queue held", "session_id", s.st.ID, "until", q.pause, "depth", len(q.items))
	}
	s.publishQueue()
	s.pump(c)
}

// deliver sends a batch in order and reports each final outcome to the message facet. It stops
// at the first entry whose outcome is unknown, or that the network asks to hold: that entry and
// those behind it go back to the queue.
func deliver(client network.Client, deps Deps, batch []domain.OutboxEntry) batchDone {
	var r batchDone
	for i, e := range batch {
		ctx, cancel := context.WithTimeout(context.Background(), deps.SendTimeout)
		rc, err := client.Send(ctx, e.Message)
		cancel()
		now := deps.Clock.Now().UTC()
		e.Attempts++
		if hold, until := heldBy(err, now, e.Attempts); hold {
			rest := append([]domain.OutboxEntry{e}, batch[i+1:]...)
			r.rest, r.pause = rest, until
			deps.Log.Warn("deliverer: outcome unknown or held; the message is sent again under its id",
				"session_id", e.SessionID, "message_id", e.ID, "attempts", e.Attempts, "err", err)
			return r
		}
		if err != nil {
			err = classify(err)
			e.Code, e.Error = domain.CodeOf(err), err.Error()
			e.SetStatus(domain.MsgFailed, now)
		} else {
			e.NetworkID, e.SentAt = rc.ID, domain.MillisOf(now)
			e.SetStatus(domain.MsgSent, now)
		}
		deps.Deliveries.Outcome(e, err)
		r.sent++
		r.last = now
	}
	return r
}

// heldBy tells whether a send error leaves the outcome unknown or asks the queue to wait, and
// until when (zero: the queue's own backoff). Such a message is never reported failed. What
// each network error means is network.go's list.
func heldBy(err error, now time.Time, attempts int) (bool, time.Time) {
	if err == nil {
		return false, time.Time{}
	}
	if until, ok := network.TimelockUntil(err); ok {
		// Never re-sent before the timelock ends; an hour when the network did not say.
		if until.After(now) {
			return true, until
		}
		return true, now.Add(time.Hour)
	}
	if after, ok := network.RetryAfter(err); ok {
		if errors.Is(err, network.ErrRefused) && attempts >= 2 {
			return false, time.Time{} // refused again after its backoff: a definite failure
		}
		return true, now.Add(after)
	}
	switch {
	case errors.Is(err, network.ErrNotConnected), errors.Is(err, network.ErrUnknownOutcome),
		errors.Is(err, network.ErrBanned), errors.Is(err, network.ErrOutdated),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return true, time.Time{}
	}
	return false, time.Time{}
}

// classify turns a network's definite failure into the gateway's error (the network's error
// stays in the chain, so errors.Is matches either).
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, network.ErrNotOnNetwork):
		return fmt.Errorf("%w: %w", domain.ErrRecipientNotOnNetwork, err)
	case errors.Is(err, network.ErrNotConnected):
		return fmt.Errorf("%w: %w", domain.ErrNotConnected, err)
	}
	return fmt.Errorf("%w: %w", domain.ErrNetwork, err)
}
