package session

import (
	"sync"
	"sync/atomic"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// Queue is a session's delivery queue, shared by three parties (issue 32): the engine pushes
// each accepted entry into it (Push: no actor message, no goroutine); the session's send
// worker (its turn on one of the process's send goroutines, runq.go) picks the next messages
// pacing lets go, sends them and takes their results; the session's actor keeps the session's
// state and its changes (link, status, pacing, the protections), and wakes the worker when
// one may let a message go. One mutex guards the queue
// and every field of the actor's Session, so the worker reads the state it picks by as the
// actor left it. The queue's depth and oldest entry are published as counters (Stats), not as a
// copy of the session's view per entry.
//
// The engine makes a session's Queue (NewQueue) and hands it to the actor (Deps.Queue); it
// outlives an actor restarted after a panic: the new actor takes over the queue and its worker.
type Queue struct {
	mu sync.Mutex
	q  queue    // the entries and the pacing state (mu)
	s  *Session // the actor's state; nil until the actor started (mu)
	// early: entries pushed before the actor started, enqueued by it when it does (mu).
	early []domain.OutboxEntry
	// stopped: the actor stopped for good; the worker picks nothing more (mu).
	stopped bool
	// held: the Dones of the network's events on their way to the actor, by token (mu;
	// held.go).
	held    map[uint64]network.Done
	heldSeq uint64

	// Published for readers that take no lock (status reads, metrics).
	depth  atomic.Int64
	oldest atomic.Int64 // ms

	// The worker: sched is set while the queue is ready or run by a send goroutine (runq), so
	// one runs it at a time and a wake meanwhile schedules nothing; want says a wake came that
	// it has not acted on yet; inflight counts the batch it sends (a graceful stop waits for
	// it); quitting: the actor stopped for good (the worker's sends' context is released).
	sched    atomic.Bool
	want     atomic.Bool
	inflight sync.WaitGroup
	quitting atomic.Bool
	sends    sendContext // the worker's sends' deadline (the goroutine running the queue's alone)
}

// NewQueue returns an empty session queue.
func NewQueue() *Queue {
	return &Queue{}
}

// Push hands an accepted (durably queued) entry to the session's queue and wakes its worker
// when the entry may change what goes next. It takes the queue's lock, never the actor's
// mailbox; it is safe from any goroutine.
func (x *Queue) Push(e domain.OutboxEntry) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.s == nil {
		x.early = append(x.early, e)
		x.count()
		return
	}
	x.s.enqueue(&e)
}

// Stats is the queue's depth and oldest entry, without the lock.
func (x *Queue) Stats() domain.QueueStats {
	d := x.depth.Load()
	if d <= 0 {
		return domain.QueueStats{}
	}
	return domain.QueueStats{Depth: int(d), OldestAt: domain.Millis(x.oldest.Load())}
}

// count publishes the depth and the oldest entry. Called with mu held whenever the entries
// change.
func (x *Queue) count() {
	n := len(x.q.items) + len(x.early)
	var oldest domain.Millis
	switch {
	case len(x.q.items) > 0:
		oldest = x.q.items[0].e.CreatedAt
	case len(x.early) > 0:
		oldest = x.early[0].CreatedAt
	}
	x.oldest.Store(int64(oldest))
	x.depth.Store(int64(n))
}

// wake asks the worker to look at the queue: the queue is made ready for a send goroutine
// unless it is ready or being run already (then the goroutine that runs it sees want and
// steps again). Safe with or without mu held. A wake while the worker runs costs two atomic
// operations: a burst of accepts into a busy or ready queue wakes no goroutine.
func (x *Queue) wake() {
	x.want.Store(true)
	if !x.sched.Load() && x.sched.CompareAndSwap(false, true) {
		workers.Schedule(x)
	}
}

// idle tells whether the worker has nothing to do that it knows of (tests). Called with mu
// held.
func (x *Queue) idle() bool { return !x.q.busy && !x.want.Load() }

// stop releases the worker once the actor stopped for good (after its batch in flight: drain):
// it picks nothing more (stopped), and its next run releases its sends' context.
func (x *Queue) stop() {
	x.quitting.Store(true)
	x.wake()
}

// run is the worker's turn on a send goroutine (workers): it steps while there is work, then
// leaves the queue parked. A wake is never lost: wake sets want and then reads sched, run
// clears sched and then reads want (both sequentially consistent), so at least one of them
// sees the other's write and the queue is run again (here, or scheduled by the wake).
func (x *Queue) run() {
	for {
		for x.step() {
		}
		if x.quitting.Load() {
			x.sends.stop()
		}
		if f := beforePark.Load(); f != nil {
			(*f)(x)
		}
		x.sched.Store(false)
		if !x.want.Load() || !x.sched.CompareAndSwap(false, true) {
			return
		}
	}
}

// beforePark, when set (tests), runs in run's window between its last step and the queue's
// parking: a wake there must not be lost.
var beforePark atomic.Pointer[func(*Queue)]

// step picks the next job (the failures settled in the queue, the next messages pacing lets go)
// and runs it; false when there was none.
func (x *Queue) step() bool {
	x.mu.Lock()
	x.want.Store(false)
	s := x.s
	if s == nil || x.stopped {
		x.mu.Unlock()
		return false
	}
	j, ok := s.next()
	if ok {
		x.inflight.Add(1)
	}
	x.mu.Unlock()
	if !ok {
		return false
	}
	defer x.inflight.Done()
	for _, f := range j.fail {
		s.deps.Deliveries.Outcome(f.e, f.err)
	}
	r := deliver(j.client, s.deps, j.send, &x.sends)
	x.mu.Lock()
	// The actor may have been restarted meanwhile (a panic): its successor takes the result.
	if x.s != nil {
		x.s.batchDone(r)
	} else {
		x.q.busy = false
	}
	x.q.keepSpare(j.send)
	x.sends.sent = r.sent[:0] // batchDone read it (bookSent keeps none of it)
	// run steps again at once: until that step takes the lock, the worker has work it
	// knows of (idle must not report a gap between a batch's result and the next look, in
	// which a pacing timer is not set yet).
	x.want.Store(true)
	x.mu.Unlock()
	return true
}

// keepSpare keeps a sent batch's array for the next batch (pick): cleared, so that it holds
// no entry (their bodies) alive, and not a burst's large array. Called with mu held, once the
// worker is done with the batch (nothing else refers to it: what came back was copied).
func (q *queue) keepSpare(batch []item) {
	if cap(batch) == 0 || cap(batch) > keptQueueCap {
		return
	}
	clear(batch)
	q.spare = batch[:0]
}

// job is one batch for the worker: entries settled as failed in the queue (reported first),
// then a batch to send in order.
type job struct {
	client network.Client
	fail   []failure
	send   []item
}

// failure is an entry settled as failed without being sent (its account moved, its recipient
// is marked, it was cancelled).
type failure struct {
	e   domain.OutboxEntry
	err error
}
