package engine

import (
	"container/heap"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gateway/gateway/actors/session"
	"github.com/gateway/gateway/domain"
)

// Send later (DESIGN.md section 18). A message accepted with a sendAt ahead is written to the
// outbox as any other (one commit, its allowance reserved), with the time in its body: its
// status reads `scheduled`. It waits here, in this engine's schedule (a heap of ids by time on
// one timer of the engine's clock), not in its session's queue; at its time it is read again
// from the outbox and handed to the session's deliverer, queued from then on. Nothing is
// written at that hand-over: the outbox still says scheduled with a time passed, which reads
// as queued, and a restart (or the partition's next owner in a cluster) hands it over at boot
// as it recovers every pending entry. So the schedule is durable wherever the outbox is.
//
// Before its time it may be cancelled (DELETE /api/v1/messages/{id}, or the store loop: an
// order cancelled, an answer that makes a follow-up pointless, an opt-out): its outcome is
// then `cancelled` with the reason's code, and its allowance goes back.
//
// At the hand-over two things are checked again, because they may have changed since the
// accept: a recipient on the suppression list gets nothing (cancelled, opted_out) unless the
// message was sent as transactional, and a campaign's or a store's message that falls in the
// user's quiet hours waits in the schedule until they end (nothing written).

// laterItem is one scheduled message: its id and when it goes.
type laterItem struct {
	id  string
	uid string
	at  time.Time
	idx int
}

type laterHeap []*laterItem

func (h laterHeap) Len() int           { return len(h) }
func (h laterHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h laterHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i]; h[i].idx = i; h[j].idx = j }
func (h *laterHeap) Push(x any)        { it := x.(*laterItem); it.idx = len(*h); *h = append(*h, it) }
func (h *laterHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	it.idx = -1
	return it
}

// later is the engine's schedule of messages accepted for later.
type later struct {
	ms   *Messages
	mu   sync.Mutex
	heap laterHeap
	byID map[string]*laterItem
	// timer fires at due (zero: no timer); stopped: the engine stops, nothing more is handed on.
	timer   session.Timer
	due     time.Time
	stopped bool
}

func newLater(ms *Messages) *later { return &later{ms: ms, byID: map[string]*laterItem{}} }

// add schedules message id (of user uid) for at.
func (l *later) add(id, uid string, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return
	}
	if it := l.byID[id]; it != nil {
		it.at = at
		heap.Fix(&l.heap, it.idx)
	} else {
		it := &laterItem{id: id, uid: uid, at: at}
		heap.Push(&l.heap, it)
		l.byID[id] = it
	}
	l.arm()
}

// take removes id from the schedule; false when it is not in it (handed over already).
func (l *later) take(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	it := l.byID[id]
	if it == nil {
		return false
	}
	heap.Remove(&l.heap, it.idx)
	delete(l.byID, id)
	return true
}

// has tells whether id waits in the schedule.
func (l *later) has(id string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.byID[id] != nil
}

// len is how many messages wait.
func (l *later) len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.heap)
}

// arm sets the timer for the earliest message. Called with mu held.
func (l *later) arm() {
	if len(l.heap) == 0 {
		return
	}
	first := l.heap[0].at
	if l.timer != nil && !first.Before(l.due) {
		return
	}
	if l.timer != nil {
		l.timer.Stop()
	}
	l.due = first
	l.timer = l.ms.e.cfg.AfterFunc(max(first.Sub(l.ms.e.now()), 0), l.fire)
}

// fire hands over every message that is due.
func (l *later) fire() {
	now := l.ms.e.now()
	l.mu.Lock()
	l.timer, l.due = nil, time.Time{}
	var due []*laterItem
	for len(l.heap) > 0 && !l.heap[0].at.After(now) && !l.stopped {
		it := heap.Pop(&l.heap).(*laterItem)
		delete(l.byID, it.id)
		due = append(due, it)
	}
	if !l.stopped {
		l.arm()
	}
	l.mu.Unlock()
	for _, it := range due {
		l.ms.release(it.id, now)
	}
}

// stop ends the schedule: messages still waiting stay scheduled in the outbox (the next boot,
// or the partition's next owner, takes them up).
func (l *later) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.stopped = true
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
}

// Origins whose messages wait out the user's quiet hours (not API or dashboard sends, not
// replies).
func quietOrigin(origin string) bool {
	return strings.HasPrefix(origin, "campaign:") || strings.HasPrefix(origin, "store:")
}

// release hands a scheduled message over to its session's deliverer at now, unless it must
// wait (quiet hours) or not go at all (opted out, cancelled meanwhile).
func (ms *Messages) release(id string, now time.Time) {
	e := ms.e
	entry, err := ms.msgs.outbox.Get(id)
	switch {
	case errors.Is(err, domain.ErrRecordNotFound):
		return
	case err != nil:
		// Storage refuses reads for now: try again shortly (it stays scheduled on disk).
		e.log.Warn("scheduled message: read it again shortly", "message_id", id, "err", err)
		ms.later.add(id, "", now.Add(time.Second))
		return
	case entry.Status != domain.MsgScheduled:
		return // settled meanwhile (cancelled)
	}
	if !entry.Transactional && e.OptOuts.Has(entry.UserID, entry.Message.To) {
		ms.settleCancelled(entry, domain.SkipOptedOut, "the recipient opted out before the message was due", now)
		return
	}
	if quietOrigin(entry.Origin) {
		if until, quiet := e.Users.QuietUntil(entry.UserID, now); quiet {
			ms.later.add(id, entry.UserID, until)
			return
		}
	}
	ent := e.Sessions.idx.get(entry.SessionID)
	if ent == nil {
		entry.SetStatus(domain.MsgFailed, now)
		entry.Code, entry.Error = domain.ErrSessionDeleted.Code, domain.ErrSessionDeleted.Msg
		ms.msgs.Outcome(entry, domain.ErrSessionDeleted)
		return
	}
	entry.SetStatus(domain.MsgQueued, now)
	e.pub.message(&entry, domain.MsgQueued, now)
	ms.push(ent, entry)
}

// errCancelled is a cancelled message's outcome error: its allowance goes back.
var errCancelled = errors.New("cancelled before it was sent")

// settleCancelled records a scheduled message as cancelled with code and why, and gives its
// allowance back.
func (ms *Messages) settleCancelled(entry domain.OutboxEntry, code, why string, now time.Time) {
	entry.SetStatus(domain.MsgCancelled, now)
	entry.Code, entry.Error = code, why
	ms.msgs.Outcome(entry, errCancelled)
}

// CancelScheduled cancels one of the user's messages that is still scheduled (its sendAt not
// come) or, its time come, still waits for its contact to write: its outcome cancelled with code and why, its allowance released. It returns the
// message as it stands and whether this call cancelled it (false: not scheduled, or handed to
// its session meanwhile; true too when another call's cancellation of it is being recorded),
// once the cancellation is recorded (outcomeRecorded: an error domain.ErrUnavailable when it
// was not).
func (ms *Messages) CancelScheduled(uid, id, code, why string) (domain.OutboxEntry, bool, error) {
	entry, err := ms.msgs.outbox.Get(id)
	if errors.Is(err, domain.ErrRecordNotFound) || (err == nil && entry.UserID != uid) {
		return domain.OutboxEntry{}, false, fmt.Errorf("%w: %s", domain.ErrMessageNotFound, id)
	}
	if err != nil {
		return entry, false, fmt.Errorf("%w: outbox: %w", domain.ErrUnavailable, err)
	}
	if entry.Status != domain.MsgScheduled || !ms.later.take(id) {
		if entry.Waiting {
			// Its time came and it waits for its contact to write (routing): taken back the same.
			if e, ok, err := ms.e.Routing.cancel(uid, id, code, why); ok {
				return e, true, err
			}
		}
		if cur, ok, err := ms.msgs.cancelling(id); ok {
			return cur, true, err // cancelled by another call, answered as it is (its record)
		}
		if cur, ok := ms.msgs.settling(id); ok {
			entry = cur
		}
		return entry, false, nil
	}
	entry.SetStatus(domain.MsgCancelled, ms.e.now())
	entry.Code, entry.Error = code, why
	return entry, true, ms.msgs.outcomeRecorded(entry, errCancelled)
}

// scheduled registers an accepted (committed) scheduled entry: its reservation, its status
// published, its time on the schedule.
func (ms *Messages) scheduled(entry domain.OutboxEntry, res *Reservation) {
	ms.msgs.track(entry.ID, res, nil)
	ms.e.pub.message(&entry, domain.MsgScheduled, entry.CreatedAt.Time())
	ms.later.add(entry.ID, entry.UserID, entry.SendAt.Time())
}

// Later is how many messages wait for their time here (metrics).
func (ms *Messages) Later() int { return ms.later.len() }

// SendAtLimits checks a sendAt against now: up to domain.MaxSendAhead ahead; a time in the past
// up to an hour is taken as now (clocks differ), older is refused. It returns the zero time for
// "now".
func SendAtLimits(sendAt, now time.Time) (time.Time, error) {
	switch {
	case sendAt.IsZero():
		return time.Time{}, nil
	case sendAt.Before(now.Add(-time.Hour)):
		return time.Time{}, fmt.Errorf("%w: sendAt is in the past", domain.ErrValidation)
	case sendAt.After(now.Add(domain.MaxSendAhead)):
		return time.Time{}, fmt.Errorf("%w: sendAt must be at most 90 days ahead", domain.ErrValidation)
	case !sendAt.After(now):
		return time.Time{}, nil
	}
	return sendAt, nil
}
