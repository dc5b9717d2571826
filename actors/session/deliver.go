package session

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// Deliveries is what a session's deliverer reports to: the engine's message facet, which owns
// each message's reservation, its waiters and its durable outcome.
type Deliveries interface {
	// Outcome is told the network's final word on an entry: sent (err nil) or failed. It is
	// called from the deliverer's worker goroutine, in queue order, and must not block long.
	Outcome(e domain.OutboxEntry, err error)
	// Receipt is told the recipient's device reported on a sent message (delivered, read;
	// c.Category is the pricing category a network reports with it). It is called from the
	// network's event goroutine (not the actor's) and must not block long. done (nil when
	// the network does not wait) is called once, when the receipt is recorded (or needs no
	// record: a repeat, a message not the gateway's) or could not be.
	Receipt(id string, c domain.StatusChange, done network.Done)
	// Failed is told the network could not deliver a message it had taken (the Cloud API
	// reports most delivery errors after the send's answer); err carries the code. Called
	// like Receipt.
	Failed(id string, err error, at time.Time, done network.Done)
}

// Deliverer messages.
type (
	// Enqueue hands an accepted (durably queued) entry to the session's delivery queue; sent
	// as a pointer (the entry is large; the value is taken too).
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
)

// deliverBatch is how many entries one worker run takes when the session has no gap and no
// per-minute cap: in order, one after another, without a round trip through the actor.
const deliverBatch = 32

// Backoff of a queue whose message had an unknown outcome (the network did not say, the link
// dropped mid-send): sent again under the same id, 1 s, 2 s, ... at most a minute apart.
const (
	retryFirst = time.Second
	retryMax   = time.Minute
)

// item is a queued entry with its place in the queue (acceptance order): entries that come
// back from the worker are merged back in that order.
type item struct {
	seq uint64
	e   domain.OutboxEntry
}

// queue is a session's delivery queue and its pacing state, in its Queue (worker.go), guarded
// by the Queue's mutex. Order is kept per recipient: a message held for its recipient holds
// only the later messages to that recipient.
type queue struct {
	items []item // in acceptance order
	seq   uint64
	// spare: the last batch's array, back from the worker and cleared, for the next batch (a
	// batch is often one message: an 830-byte allocation per message otherwise).
	spare   []item
	busy    bool      // the worker is sending a batch
	timerAt time.Time // the worker is to be woken then (zero: no wake scheduled)
	pause   time.Time // the whole queue waits until then (429, the unknown-outcome backoff)
	retry   time.Duration
	holds   map[string]time.Time // recipient → its next message waits until then
	fails   []failure            // settled here as failed, reported by the next job
	base    domain.Pacing        // inherited: the network's and the owner's plan's
	pacing  domain.Pacing        // in force: base with the session's own override over it
	// lastSend and gap: the last answer from the network and the gap drawn after it.
	lastSend time.Time
	gap      time.Duration
	window   []time.Time // answers of the last minute, oldest first (PerMinute)
	// quiet: the last scan found nothing to send; a new entry to one of these recipients
	// cannot change that before until, so it costs no new scan.
	quiet        bool
	quietTo      map[string]struct{}
	quietUntil   time.Time
	quietCapFull bool // the day's new-contact cap was reached then
}

// stats describes the queue for views and metrics.
func (q *queue) stats() domain.QueueStats {
	if len(q.items) == 0 {
		return domain.QueueStats{}
	}
	return domain.QueueStats{Depth: len(q.items), OldestAt: q.items[0].e.CreatedAt}
}

// enqueue takes an accepted entry (Queue.Push, or an Enqueue message). By pointer, and copied
// once, into the queue: an entry is large. Called with the queue's lock held.
func (s *Session) enqueue(e *domain.OutboxEntry) {
	e.SessionID = s.st.ID
	if err := s.accountGone(e); err != nil {
		s.failEntry(e, err)
		s.wake()
		return
	}
	q := s.q
	q.seq++
	q.items = append(q.items, item{})
	last := &q.items[len(q.items)-1]
	last.seq, last.e = q.seq, *e
	s.publishQueue()
	if q.busy {
		return // the worker looks at the queue again when its batch is done
	}
	if q.quiet { // the clock is read only then: a read costs 0.1 µs on the AMD VM, at every accept
		if now := s.deps.Clock.Now(); now.Before(q.quietUntil) && s.stillQuiet(e.Message.To, now) {
			return
		}
	}
	s.stir()
	s.wake()
}

// stillQuiet tells whether a new entry to recipient to leaves the last scan's verdict (nothing
// may go) standing, so a queue held by a timelock or a full new-contact cap costs one contact
// read per new entry, not a scan of the queue.
func (s *Session) stillQuiet(to string, now time.Time) bool {
	q := s.q
	if s.marked(to, now) {
		return false // it fails at once
	}
	if _, ok := q.quietTo[to]; ok {
		return true
	}
	blocked := q.holds[to].After(now)
	if !blocked && (q.quietCapFull || s.timelockActive(now)) && !domain.IsGroup(to) {
		c, err := s.deps.Records.Contact(s.st.ID, s.prot.Phone, to)
		if err != nil {
			return false
		}
		blocked = (s.timelockActive(now) && c.Wrote == 0) || (q.quietCapFull && !c.Known())
	}
	if blocked {
		if q.quietTo == nil {
			q.quietTo = map[string]struct{}{}
		}
		q.quietTo[to] = struct{}{}
	}
	return blocked
}

// stir forgets the last scan's verdict: something changed that may let a message go.
func (s *Session) stir() { s.q.quiet = false }

// wake asks the worker to look at the queue (the state changed in a way that may let a
// message go). It sends no message and waits for nothing.
func (s *Session) wake() { s.sq.wake() }

// next is the worker's next job: the failures settled here, and the next messages pacing lets
// go (when connected); ok false when there is none, after scheduling a wake for when pacing
// will let one go. Called by the worker with the queue's lock held.
func (s *Session) next() (j job, ok bool) {
	q := s.q
	if q.busy || (len(q.items) == 0 && len(q.fails) == 0 && s.prot.TimelockUntil == 0) {
		// Nothing to pick, nothing to expire: the worker's look after each batch reads no clock.
		return job{}, false
	}
	now := s.deps.Clock.Now()
	s.expireTimelock(now)
	var batch []item
	var wake time.Time
	if len(q.items) > 0 && s.st.Status == domain.StatusConnected && s.client != nil {
		batch, wake = s.pick(now)
	}
	if len(batch) == 0 && len(q.fails) == 0 {
		if !wake.IsZero() {
			s.schedule(wake)
		}
		return job{}, false
	}
	j = job{client: s.client, fail: q.fails, send: batch}
	q.fails, q.busy = nil, true
	s.publishQueue()
	return j, true
}

// pick takes the next messages to send, in order, as pacing and the protections allow; when
// none may go, it says when to look again (zero: when something changes).
func (s *Session) pick(now time.Time) ([]item, time.Time) {
	q := s.q
	if s.st.Phone != "" && s.prot.Phone != s.st.Phone {
		if s.loadPhone(s.st.Phone, now); s.prot.Phone != s.st.Phone {
			return nil, now.Add(retryFirst)
		}
	}
	p := s.pacingAt(now)
	// The whole queue's gates: the network's pause, the gap, the per-minute and per-day caps.
	wait := time.Time{}
	later := func(t time.Time) {
		if t.After(now) && t.After(wait) {
			wait = t
		}
	}
	later(q.pause)
	if !q.lastSend.IsZero() {
		later(q.lastSend.Add(q.gap))
	}
	if p.PerMinute > 0 {
		cut := now.Add(-time.Minute)
		for len(q.window) > 0 && !q.window[0].After(cut) {
			q.window = q.window[1:]
		}
		if len(q.window) >= p.PerMinute {
			later(q.window[0].Add(time.Minute))
		}
	}
	today := domain.DayOf(now)
	s.prot.Roll(today)
	tomorrow := domain.DayStart(today + 1)
	if p.PerDay > 0 && s.prot.Sends >= p.PerDay {
		later(tomorrow)
	}
	if !wait.IsZero() {
		return nil, wait
	}

	n := 1
	if p.MinGapMs == 0 && p.JitterMs == 0 && p.PerMinute == 0 {
		n = deliverBatch
	}
	timelock := s.timelockActive(now)
	newCap := -1
	if p.NewContactsPerDay > 0 {
		newCap = p.NewContactCap(s.linkedDays(now))
	}
	sends := s.prot.Sends
	var (
		batch   []item
		firsts  []string
		blocked map[string]struct{}
		wake    time.Time
	)
	block := func(to string, until time.Time) {
		if blocked == nil {
			blocked = map[string]struct{}{}
		}
		blocked[to] = struct{}{}
		if !until.IsZero() && (wake.IsZero() || until.Before(wake)) {
			wake = until
		}
	}
	// The batch comes off the front of the queue; items held (their recipient blocked) stay in
	// order in kept. When none was held the rest is resliced, not copied: a deep queue (a burst
	// into one session) is not moved on every batch.
	kept := q.items[:0]
	if batch, q.spare = q.spare[:0], nil; cap(batch) < min(n, len(q.items)) {
		batch = make([]item, 0, min(n, len(q.items))) // one allocation, not one per doubling
	}
	i := 0
	for ; i < len(q.items); i++ {
		// Items by pointer: an entry is large, and a copy of one in this frame (each loop, each
		// call's arguments) made it 2.6 KB, which a burst's new goroutine grew its stack for.
		it := &q.items[i]
		if len(batch) == n || (p.PerDay > 0 && sends >= p.PerDay) {
			break
		}
		to := it.e.Message.To
		if _, ok := blocked[to]; ok {
			kept = appendItem(kept, it)
			continue
		}
		if err := s.mustFail(&it.e, now); err != nil {
			s.failEntry(&it.e, err)
			continue
		}
		if until, ok := q.holds[to]; ok {
			if until.After(now) {
				block(to, until)
				kept = appendItem(kept, it)
				continue
			}
			delete(q.holds, to)
		}
		if (timelock || newCap >= 0) && !domain.IsGroup(to) {
			until, first, ok := s.contactGate(to, now, timelock, newCap, firsts, tomorrow)
			if !ok {
				block(to, until)
				kept = appendItem(kept, it)
				continue
			}
			if first {
				firsts = append(firsts, to)
			}
		}
		batch = appendItem(batch, it)
		sends++
	}
	switch {
	case len(kept) == 0 && i == len(q.items):
		clear(q.items)
		q.items = q.items[:0] // drained: the next entries go into the same array again
		if cap(q.items) > keptQueueCap {
			q.items = nil // not a burst's array kept by an idle session
		}
	case len(kept) == 0:
		clear(q.items[:i])
		q.items = q.items[i:]
	default:
		kept = append(kept, q.items[i:]...)
		clear(q.items[len(kept):])
		q.items = kept
	}
	if len(batch) == 0 {
		q.spare = batch
		if p.PerDay > 0 && sends >= p.PerDay {
			wake = tomorrow
		}
		q.quiet, q.quietTo, q.quietUntil = true, blocked, wake
		q.quietCapFull = newCap >= 0 && s.prot.NewContacts+len(firsts) >= newCap
		if wake.IsZero() || wake.After(tomorrow) {
			q.quietUntil = tomorrow // a new day may change the verdict
		}
		return nil, wake
	}
	if (p.PerDay > 0 || newCap >= 0) && !s.countSends(batch, firsts) {
		q.items = mergeItems(batch, q.items)
		return nil, now.Add(retryFirst)
	}
	return batch, time.Time{}
}

// contactGate tells whether a message to to may go under the timelock and the new-contact
// cap (first: it is a new contact, counted against the cap), else until when it is held.
// Apart from pick so that pick's frame stays small.
//
//go:noinline
func (s *Session) contactGate(to string, now time.Time, timelock bool, newCap int, firsts []string, tomorrow time.Time) (until time.Time, first, ok bool) {
	c, err := s.deps.Records.Contact(s.st.ID, s.prot.Phone, to)
	if err != nil {
		s.deps.Log.Warn("deliverer: contact book", "session_id", s.st.ID, "err", err)
		return now.Add(retryFirst), false, false
	}
	if timelock && c.Wrote == 0 {
		// Only contacts who wrote to the phone may be written to during a timelock.
		return s.prot.TimelockUntil.Time(), false, false
	}
	if newCap >= 0 && !c.Known() && !slices.Contains(firsts, to) {
		if s.prot.NewContacts+len(firsts) >= newCap {
			return tomorrow, false, false
		}
		return time.Time{}, true, true
	}
	return time.Time{}, false, true
}

// countSends counts a batch against the day's caps before it goes (a crash after the send
// never undercounts the day); false when that could not be written (the batch is held).
//
//go:noinline
func (s *Session) countSends(batch []item, firsts []string) bool {
	next := s.prot
	next.Sends += len(batch)
	next.NewContacts += len(firsts)
	if err := s.deps.Records.CountSends(context.Background(), next, firsts); err != nil {
		s.deps.Log.Warn("deliverer: count sends; held", "session_id", s.st.ID, "err", err)
		return false
	}
	s.prot = next
	return true
}

// keptQueueCap is the largest array a drained queue keeps for its next entries.
const keptQueueCap = 256

// appendItem appends *it to items. Apart from pick (and its copies of the item) so that pick's
// frame stays small.
//
//go:noinline
func appendItem(items []item, it *item) []item { return append(items, *it) }

// mergeItems merges two runs of items, each in queue order, into one.
//
//go:noinline
func mergeItems(a, b []item) []item {
	out := make([]item, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		if a[0].seq < b[0].seq {
			out, a = append(out, a[0]), a[1:]
		} else {
			out, b = append(out, b[0]), b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// schedule wakes the worker at at (pacing's next slot, a hold's end), unless an earlier wake
// is coming.
func (s *Session) schedule(at time.Time) {
	q := s.q
	now := s.deps.Clock.Now()
	if !q.timerAt.IsZero() && !q.timerAt.After(at) && q.timerAt.After(now) {
		return // an earlier wake is coming
	}
	q.timerAt = at
	sq := s.sq
	d := at.Sub(now)
	if d <= 0 {
		sq.wake()
		return
	}
	s.deps.Clock.AfterFunc(d, func() {
		sq.mu.Lock()
		if sq.q.timerAt.Equal(at) {
			sq.q.timerAt = time.Time{}
		}
		sq.q.quiet = false
		sq.mu.Unlock()
		sq.wake()
	})
}

// batchDone takes a job's result: what pacing records, the holds the network asked for, the
// entries without an outcome back in their places. Called by the worker with the queue's lock
// held; the worker then looks at the queue again.
func (s *Session) batchDone(m batchDone) {
	q := s.q
	q.busy = false
	// The batch's last answer is now, to within the outcomes' reports after it: the clock is
	// read again only when no send was answered or the batch ended in the queue's backoff
	// (whose pause starts now). Two reads a batch fewer (this and touch's), and a batch is
	// often one message.
	now := m.last
	if now.IsZero() || m.backoff {
		now = s.deps.Clock.Now()
	}
	s.stir()
	if m.attempts > 0 {
		q.lastSend = m.last
		q.gap = s.pacingAt(now).Gap()
		if s.q.pacing.PerMinute > 0 {
			for range m.attempts {
				q.window = append(q.window, m.last)
			}
		}
		s.countAnswers(now, m.attempts, m.refused)
		s.touch(now)
	}
	s.bookSent(now, m.sent)
	if m.settled > 0 {
		q.retry = 0
	}
	for to, until := range m.holds {
		if q.holds == nil {
			q.holds = map[string]time.Time{}
		}
		q.holds[to] = until
	}
	if !m.timelock.IsZero() {
		s.setTimelock(m.timelock)
	}
	if len(m.back) > 0 {
		q.items = mergeItems(m.back, q.items)
	}
	if m.pause.After(q.pause) {
		q.pause = m.pause
	}
	if m.backoff {
		q.retry = min(max(2*q.retry, retryFirst), retryMax)
		q.pause = now.Add(q.retry)
		s.deps.Log.Info("deliverer: queue held", "session_id", s.st.ID, "until", q.pause, "depth", len(q.items))
	}
	for _, to := range m.marks {
		s.mark(to, now)
	}
	if len(m.back) > 0 {
		s.sweep() // what came back may belong to an account that moved meanwhile
	}
	s.publishQueue()
	s.answerClosers()
}

// accountGone tells why an entry may no longer be sent from this session (nil: it may): the
// session was assigned to someone else, or the phone it was accepted for is not linked.
func (s *Session) accountGone(e *domain.OutboxEntry) error {
	switch {
	case s.closing != nil:
		return s.closing
	case e.UserID != s.st.AssignedTo:
		return fmt.Errorf("%w (to %s)", domain.ErrSessionReassigned, s.st.ID)
	case !s.st.Linked:
		return s.unlinkCause()
	case e.From != "" && s.st.Phone != "" && e.From != s.st.Phone:
		return fmt.Errorf("%w: accepted for %s, now linked to another phone", domain.ErrSessionLoggedOut, e.From)
	}
	return nil
}

// mustFail tells why an entry fails without being sent (nil: it may go).
func (s *Session) mustFail(e *domain.OutboxEntry, now time.Time) error {
	if err := s.accountGone(e); err != nil {
		return err
	}
	if s.marked(e.Message.To, now) {
		return fmt.Errorf("%w: refused earlier; it must write to the session first", domain.ErrRecipientNotReachable)
	}
	return nil
}

// failEntry settles an entry as failed; the next job reports it.
func (s *Session) failEntry(entry *domain.OutboxEntry, err error) {
	now := s.deps.Clock.Now()
	e := *entry
	e.Code, e.Error = domain.CodeOf(err), err.Error()
	e.SetStatus(domain.MsgFailed, now)
	s.q.fails = append(s.q.fails, failure{e: e, err: err})
}

// failWhere fails every queued entry for which why says so.
func (s *Session) failWhere(why func(*domain.OutboxEntry) error) {
	q := s.q
	kept := q.items[:0]
	for i := range q.items {
		it := &q.items[i]
		if err := why(&it.e); err != nil {
			s.failEntry(&it.e, err)
			continue
		}
		kept = append(kept, *it)
	}
	clear(q.items[len(kept):])
	q.items = kept
	s.publishQueue()
}

// sweep fails the queued entries whose account moved (reassigned, logged out, deleted): they
// are never sent from another phone.
func (s *Session) sweep() { s.failWhere(s.accountGone) }
