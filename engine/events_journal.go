package engine

// The event journal (DESIGN.md section 20): the events of a user who had a live stream open in
// the last 24 h are kept 24 h in the user's journal, numbered in commit order, so a stream that
// lost its connection resumes with Last-Event-ID: the events after that one come first, then
// the live ones. A user who never opens a stream costs nothing: an id a client sends back comes
// from a stream, and from the moment a stream opens (Watchers) until the journal's retention
// after it could have ended, every event of its user is kept.
//
// Numbering: a sequence number is the facet's epoch (counted durably at each Boot: a restart,
// or a cluster partition's new owner) in the high bits and a counter of this run in the low
// ones, so every event of a run sorts after every event of the runs before it, whatever the
// clocks do. An event id carries its number ("evt_" + 16 hex digits + 8 random characters):
// the Last-Event-ID a client sends back names its place without an index. The random part keeps
// ids unique across partitions (their numbers overlap) for webhook receivers and the broker's
// de-duplication.

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gateway/gateway/domain"
)

// EventJournal reads a user's recent events back (persist.Webhooks): up to limit with a
// sequence number at or above from, in order.
type EventJournal interface {
	JournalFrom(uid string, from uint64, limit int) ([]domain.EventRecord, error)
}

// epochShift: a run numbers up to 2^40 events (a century at 300 a second) after its epoch.
const epochShift = 40

// eventIDLen is the length of an event id: "evt_", 16 hex digits, 8 random characters.
const eventIDLen = 4 + 16 + 8

func newEventID(seq uint64) string {
	b := make([]byte, 0, eventIDLen)
	b = append(b, "evt_"...)
	b = fmt.Appendf(b, "%016x", seq)
	return string(append(b, randomID(5)...))
}

// eventSeq is the journal sequence number an event id carries (false: not one of the
// journal's ids).
func eventSeq(id string) (uint64, bool) {
	if len(id) != eventIDLen || id[:4] != "evt_" {
		return 0, false
	}
	seq, err := strconv.ParseUint(id[4:20], 16, 64)
	return seq, err == nil
}

// journal numbers the facet's events. Its epoch is counted while the rest of the runtime boots
// (Events.Boot starts the count, Events.Counted waits for it): a number is given out only once
// the count is durable, so no event of this run carries a number of an earlier run's epoch.
type journal struct {
	seq atomic.Uint64 // the last number given out
	// counting is the epoch's count while it runs or after it failed (nil: counted, or never
	// counted: a facet that was not booted numbers from 0).
	counting atomic.Pointer[epochCount]
}

// epochCount is one count of the journal's epoch (Events.Boot).
type epochCount struct {
	done chan struct{}
	err  error // set before done closes
}

// start numbers this run's events after epoch's.
func (j *journal) start(epoch uint64) { j.seq.Store(epoch << epochShift) }

// next gives out the next number, once the epoch is counted; an error when its count failed.
func (j *journal) next() (uint64, error) {
	if c := j.counting.Load(); c != nil {
		<-c.done
		if c.err != nil {
			return 0, c.err
		}
		j.counting.CompareAndSwap(c, nil)
	}
	return j.seq.Add(1), nil
}

// watchSpan is how long a stream's opening keeps its user's events journaled: the journal's
// retention after the longest a stream stays open. watchRefresh: a stream opened within it of
// the last mark does not write a new one.
const (
	watchSpan    = domain.EventJournalRetention + streamMaxOpen
	watchRefresh = streamMaxOpen
	// streamMaxOpen is the longest an event stream stays open (httpapi ends it then; the client
	// reconnects, which marks its user again).
	streamMaxOpen = 30 * time.Minute
)

// Watchers are the users who had a live stream open lately, whose events the journal keeps. A
// single node's events facet keeps its own; a cluster node shares one among its partitions and
// hears of the streams other nodes open (EventsConfig.Watchers).
type Watchers struct {
	mu    sync.RWMutex
	until map[string]time.Time
	marks int          // since the last sweep of lapsed marks
	n     atomic.Int64 // len(until), read without mu: no lock per event while nobody streams
}

// NewWatchers makes an empty set.
func NewWatchers() *Watchers { return &Watchers{until: map[string]time.Time{}} }

// Mark keeps uid's events journaled until until; it tells whether that extends the last mark by
// more than watchRefresh (the caller then writes the mark down).
func (w *Watchers) Mark(uid string, until time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	cur := w.until[uid]
	if !until.After(cur) {
		return false
	}
	w.until[uid] = until
	if w.marks++; w.marks >= watchSweep {
		w.marks = 0
		now := time.Now()
		for id, u := range w.until {
			if u.Before(now) {
				delete(w.until, id)
			}
		}
	}
	w.n.Store(int64(len(w.until)))
	return until.Sub(cur) > watchRefresh
}

// watchSweep: every this many marks, the lapsed ones are forgotten.
const watchSweep = 1024

// Watched tells whether uid's events are journaled now.
func (w *Watchers) Watched(uid string, now time.Time) bool {
	until, ok := w.markOf(uid)
	return ok && now.Before(until)
}

// markOf is uid's mark (ok false: none), without a lock while no user has one.
func (w *Watchers) markOf(uid string) (until time.Time, ok bool) {
	if w.n.Load() == 0 {
		return time.Time{}, false
	}
	w.mu.RLock()
	until, ok = w.until[uid]
	w.mu.RUnlock()
	return until, ok
}

// WatchUntil is how long a stream opening at now keeps its user's events journaled.
func WatchUntil(now time.Time) time.Time { return now.Add(watchSpan) }

// replayPage is how many journal entries one read of a replay takes.
const replayPage = 2000

// Replay calls fn with each of uid's events committed after the event lastID, in order (the
// journal keeps 24 h). found is false, and fn is not called, when the journal does not hold
// lastID: older than 24 h, unknown, or not an id the journal gave out; the caller then cannot
// know what was missed.
func (e *Events) Replay(uid, lastID string, fn func(LiveEvent) error) (found bool, err error) {
	return ReplayJournal(e.cfg.Store, uid, lastID, fn)
}

// ReplayJournal is Replay on journal j (a cluster node reads the journal of the user's
// partition, wherever it runs).
func ReplayJournal(j EventJournal, uid, lastID string, fn func(LiveEvent) error) (found bool, err error) {
	seq, ok := eventSeq(lastID)
	if !ok {
		return false, nil
	}
	from := seq
	for {
		page, err := j.JournalFrom(uid, from, replayPage)
		if err != nil {
			return found, fmt.Errorf("%w: read the event journal: %w", domain.ErrUnavailable, err)
		}
		for _, r := range page {
			if !found {
				if r.Seq != seq || r.ID != lastID {
					return false, nil
				}
				found = true
				continue
			}
			if err := fn(LiveEvent{ID: r.ID, Type: r.Type, Body: r.Body}); err != nil {
				return true, err
			}
		}
		if len(page) < replayPage {
			return found, nil
		}
		from = page[len(page)-1].Seq + 1
	}
}

// watch marks uid as watched from now (Listen), and writes the mark down when it is new.
func (e *Events) watch(uid string) {
	until := WatchUntil(e.cfg.Clock.Now())
	if e.cfg.Watchers != nil || !e.watchers.Mark(uid, until) {
		return // a cluster node marks the users it streams to itself
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.cfg.Store.MarkWatched(ctx, uid, until); err != nil {
		e.log.Warn("events: the mark that keeps a streaming user's events is not written (kept in memory)", "user_id", uid, "err", err)
	}
}

// watched tells whether uid's events go into the journal.
func (e *Events) watched(uid string) bool {
	until, ok := e.watchers.markOf(uid)
	return ok && e.cfg.Clock.Now().Before(until) // the clock read only for a user with a mark
}

// bootJournal starts counting this run's epoch (Counted waits for it), loads the marks of the
// users who streamed lately and, with a broker, counts the events waiting for it.
//
// The count is one commit (100-250 ms under load, once 1.25 s, on a cluster node's partition):
// it runs beside the rest of the boot instead of before it. The journal's order holds: the
// count reads the epoch after every earlier run's last write to the store (a restart; or, on a
// cluster node, the acquisition's fence was written before this start, so the previous owner's
// commits are refused from then on and every event it journaled was committed before), and this
// run numbers no event before its epoch is durable (journal.next waits for the count).
func (e *Events) bootJournal(ctx context.Context) error {
	c := &epochCount{done: make(chan struct{})}
	e.journal.counting.Store(c)
	e.epochs.Go(func() {
		defer close(c.done)
		epoch, err := e.cfg.Store.NextEventEpoch(ctx)
		if err != nil {
			c.err = fmt.Errorf("%w: count the event journal's epoch: %w", domain.ErrUnavailable, err)
			return
		}
		e.journal.start(epoch)
	})
	var marks map[string]time.Time
	var marksErr error
	var reads sync.WaitGroup
	if e.cfg.Watchers == nil {
		reads.Go(func() { marks, marksErr = e.cfg.Store.WatchMarks() })
	}
	n, err := 0, error(nil)
	if e.fwd != nil {
		n, err = e.cfg.Store.OutboxLen()
	}
	reads.Wait()
	if marksErr != nil {
		return fmt.Errorf("engine: load the marks of streaming users: %w", marksErr)
	}
	for uid, until := range marks {
		e.watchers.Mark(uid, until)
	}
	if err != nil {
		return fmt.Errorf("engine: count the events waiting for the broker: %w", err)
	}
	if e.fwd != nil {
		e.fwd.addPending(n)
	}
	return nil
}

// Counted waits for the journal's epoch, counted from Boot on: a runtime is started (serves
// requests) only once it returns nil. An error: the count failed, and the facet numbers no
// event (Prepare fails); the runtime does not start.
func (e *Events) Counted(ctx context.Context) error {
	c := e.journal.counting.Load()
	if c == nil {
		return nil
	}
	select {
	case <-c.done:
		return c.err
	case <-ctx.Done():
		return fmt.Errorf("%w: count the event journal's epoch: %w", domain.ErrUnavailable, ctx.Err())
	}
}
