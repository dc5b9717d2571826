package session

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// workerIdle is how long a session's send worker waits for work before it exits: a paced
// session (a send every 8-15 s on WhatsApp, twice that at half rate) keeps its worker, and with
// it the worker's grown stack, while an idle one costs no goroutine.
const workerIdle = time.Minute

// Queue is a session's delivery queue, shared by three parties (issue 32): the engine pushes
// each accepted entry into it (Push: no actor message, no goroutine); the session's long-lived
// send worker picks the next messages pacing lets go, sends them and takes their results; the
// session's actor keeps the session's state and its changes (link, status, pacing, the
// protections), and wakes the worker when one may let a message go. One mutex guards the queue
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

	// The worker: running while its goroutine lives; kick wakes it (capacity 1); want says a
	// wake came that it has not acted on yet; sending while it holds a batch (inflight: a
	// graceful stop waits for it).
	running  atomic.Bool
	kick     chan struct{}
	want     atomic.Bool
	inflight sync.WaitGroup
	quitting atomic.Bool // stop: the worker exits at its next look (kick)
	quitOnce sync.Once
	sends    sendContext // the worker's sends' deadline (its goroutine's alone)
}

// NewQueue returns an empty session queue.
func NewQueue() *Queue {
	return &Queue{kick: make(chan struct{}, 1)}
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

// wake asks the worker to look at the queue, starting its goroutine when it is not running
// (after workerIdle without work). Safe with or without mu held.
func (x *Queue) wake() {
	x.want.Store(true)
	x.poke()
	if !x.running.Load() && x.running.CompareAndSwap(false, true) {
		go x.loop()
	}
}

// poke makes the worker look (its kick holds one token: pokes before it looks are one).
func (x *Queue) poke() {
	select {
	case x.kick <- struct{}{}:
	default:
	}
}

// idle tells whether the worker has nothing to do that it knows of (tests). Called with mu
// held.
func (x *Queue) idle() bool { return !x.q.busy && !x.want.Load() }

// stop ends the worker once the actor stopped for good (after its batch in flight: drain).
func (x *Queue) stop() {
	x.quitOnce.Do(func() {
		x.quitting.Store(true)
		x.poke()
	})
}

// loop is the worker goroutine: it runs steps while there is work, then waits for a wake, and
// exits after one to two workerIdle without one. The idle timer is not reset per wake (a wake
// is often one message, and a timer's reset takes the timer heap's lock): when it fires after
// a period with work, it is set again.
//
// It waits on its kick alone, a plain receive: a wake (want set first), the idle timer (rang)
// and stop (quitting) each set their flag and then poke, and the worker reads the flags. A
// select over the kick, the timer's channel and a quit channel cost a lock of each of the
// three and a sudog each per wait, and a wait is often one message (issue 32: runtime.selectgo
// under Queue.loop was 0.19 s of the gateway's 13.1 s profile, about 1.4 µs a message).
func (x *Queue) loop() {
	rang := new(atomic.Bool) // this loop's own: a timer of an earlier loop firing late sets not it
	idle := time.AfterFunc(workerIdle, func() {
		rang.Store(true)
		x.poke()
	})
	defer idle.Stop()
	worked := false // a wake came since the idle timer was set
	for {
		<-x.kick
		if x.quitting.Load() {
			x.sends.stop()
			x.running.Store(false)
			return
		}
		if x.want.Load() {
			// Let the goroutines that are ready run first (the accepts of a burst, which push
			// into this queue): the worker then takes them in one batch, not one wake each.
			// Measured in process (SendPath/interval/send, 20 sessions, 64 callers): 1.3 → 3.7
			// messages per batch, 0.79 → 0.36 wakes per message. Without other work ready it
			// returns at once.
			runtime.Gosched()
			for x.step() {
			}
			worked = true
		}
		if !rang.Swap(false) {
			continue
		}
		if worked {
			worked = false
			idle.Reset(workerIdle)
			continue
		}
		x.sends.stop() // before the flag: a new worker may start at once
		x.running.Store(false)
		// A wake between the poke and the flag found the worker running and started nothing
		// (its poke may be the one this look took): take it here unless another goroutine did.
		if !x.want.Load() || !x.running.CompareAndSwap(false, true) {
			return
		}
		idle.Reset(workerIdle)
		x.poke()
	}
}

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
	// The loop steps again at once: until that step takes the lock, the worker has work it
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
