package session

import (
	"runtime"
	"sync"
)

// keptWorkers is the most send goroutines the process keeps waiting for work; more start when
// every kept one is busy (a send on a slow network holds its goroutine), and those exit once
// this many wait.
const keptWorkers = 8

// runq is the sessions' send goroutines, shared by every session of the process (issue 32):
// a session whose queue may let a message go is made ready (Queue.wake: at most once, while it
// is neither ready nor being run), and a goroutine takes it, runs its steps until it has none,
// and takes the next ready session without waiting when there is one.
//
// A long-lived goroutine a session was woken about once a message: with 100 sessions a burst
// of accepts is a message or two a session, and each session's worker had to be woken for its
// own. Here the sessions made ready while a goroutine is on its way (coming) wake none, and a
// goroutine done with its session takes the next ready one without waiting: one wake-up
// carries a burst across sessions. While any session is ready, one goroutine is on its way
// (coming > 0), so no ready session waits behind another's send. A session is run by one
// goroutine at a time (Queue.sched), so its sends go out in order, one batch at a time.
// Nothing waits on a timer: an idle session costs no goroutine and no wake-up.
type runq struct {
	mu    sync.Mutex
	cond  sync.Cond
	ready []*Queue // from head on: taken ones are nil
	head  int
	idle  int // goroutines waiting on cond
	// coming: goroutines signalled or started that have not looked at ready yet; one will take
	// what is ready, so a session made ready meanwhile wakes none.
	coming int
}

// workers is the process's send goroutines.
var workers = newRunq()

func newRunq() *runq {
	r := &runq{}
	r.cond.L = &r.mu
	return r
}

// schedule makes x ready; a waiting goroutine or a new one runs it. The caller moved x.sched
// from parked to scheduled (so x is in ready at most once).
func (r *runq) schedule(x *Queue) {
	r.mu.Lock()
	r.ready = append(r.ready, x)
	if r.coming == 0 {
		r.call()
	} // else one is on its way: it takes x with the rest
	r.mu.Unlock()
}

// call wakes a waiting goroutine, or starts one when none waits. Called with mu held.
func (r *runq) call() {
	r.coming++
	if r.idle > 0 {
		r.cond.Signal()
		return
	}
	go r.run()
}

// run is a send goroutine: it runs the ready sessions, then waits for more while fewer than
// keptWorkers wait, else exits.
func (r *runq) run() {
	r.mu.Lock()
	r.coming--
	for {
		if x := r.take(); x != nil {
			if r.head < len(r.ready) && r.coming == 0 {
				// The rest must not wait behind x (a send on a slow network holds this
				// goroutine): one more comes for them. One that finishes its session first
				// takes them meanwhile, without a wake.
				r.call()
			}
			r.mu.Unlock()
			x.run()
			r.mu.Lock()
			continue
		}
		if r.idle >= keptWorkers {
			r.mu.Unlock()
			return
		}
		r.idle++
		r.cond.Wait()
		r.idle--
		// Let the goroutines that are ready run first (the accepts of a burst, which make
		// their sessions ready while this one is coming: no wake of their own): it then takes
		// them all. Without other work ready it returns at once. coming stays counted
		// meanwhile, so those accepts wake no other goroutine.
		r.mu.Unlock()
		runtime.Gosched()
		r.mu.Lock()
		r.coming--
	}
}

// take returns the first ready session, or nil. Called with mu held.
func (r *runq) take() *Queue {
	if r.head == len(r.ready) {
		return nil
	}
	x := r.ready[r.head]
	r.ready[r.head] = nil
	r.head++
	switch {
	case r.head == len(r.ready):
		r.ready, r.head = r.ready[:0], 0 // ran dry: the array is kept
	case r.head > len(r.ready)/2:
		n := copy(r.ready, r.ready[r.head:]) // never dry: keep it from growing
		clear(r.ready[n:])
		r.ready, r.head = r.ready[:n], 0
	}
	return x
}
