// Package runq runs ready items on goroutines it keeps: an item made ready (Schedule) is run by
// a goroutine that waits, or by a new one when none waits, and a goroutine done with an item
// takes the next ready one without waiting. A wake-up hands a burst over, not an item: items
// made ready while a goroutine is on its way to them (signalled or started, not yet looking)
// wake none, it takes them with the rest.
//
// Its users (issue 32: a goroutine, or a wake-up, an item was a cost a message): the sim's
// event goroutines (a client with events waiting), the sessions' send goroutines (a session
// whose queue may let a message go). The caller sees to it that an item is ready at most once
// at a time (it is run by one goroutine at a time).
package runq

import (
	"runtime"
	"sync"
)

// Options configure New.
type Options struct {
	// Keep is the most goroutines kept waiting for work; more start when every kept one is
	// busy, and those exit once this many wait.
	Keep int
	// Spread: while items are ready, a goroutine is on its way to them, so none waits behind
	// a long run (a goroutine that takes an item and leaves others ready calls one more).
	// Without it, the items made ready while one is on its way wait for that one (runs that
	// never block).
	Spread bool
	// Yield: a goroutine woken from its wait yields once before it looks, so that the
	// goroutines already runnable (a burst's producers) make their items ready first: it then
	// takes them all. With nothing else to run the yield returns at once.
	Yield bool
}

// Q is a run queue of items of type T and the goroutines that run them.
type Q[T any] struct {
	run  func(T)
	o    Options
	mu   sync.Mutex
	cond sync.Cond
	// ready: the items to run, from head on (taken ones are zeroed).
	ready []T
	head  int
	idle  int // goroutines waiting on cond
	// coming: goroutines signalled or started that have not looked at ready yet; one will
	// take what is ready, so an item made ready meanwhile wakes none.
	coming int
	quit   bool // Stop: the waiting ones exit
	live   sync.WaitGroup
}

// New returns a run queue whose goroutines call run for each item made ready.
func New[T any](run func(T), o Options) *Q[T] {
	q := &Q[T]{run: run, o: o}
	q.cond.L = &q.mu
	return q
}

// Schedule makes x ready; a waiting goroutine or a new one runs it.
func (q *Q[T]) Schedule(x T) {
	q.mu.Lock()
	q.ready = append(q.ready, x)
	if q.coming == 0 {
		q.call()
	} // else one is on its way: it takes x with the rest
	q.mu.Unlock()
}

// call wakes a waiting goroutine, or starts one when none waits. Called with mu held.
func (q *Q[T]) call() {
	q.coming++
	if q.idle > 0 {
		q.cond.Signal()
		return
	}
	q.live.Add(1)
	go q.loop()
}

// loop is a goroutine of the queue: it runs the ready items, then waits for more while fewer
// than Keep wait, else exits.
func (q *Q[T]) loop() {
	defer q.live.Done()
	q.mu.Lock()
	q.coming--
	for {
		if x, ok := q.take(); ok {
			if q.o.Spread && q.head < len(q.ready) && q.coming == 0 {
				q.call() // the rest must not wait behind x; one done first takes them meanwhile
			}
			q.mu.Unlock()
			q.run(x)
			q.mu.Lock()
			continue
		}
		if q.quit || q.idle >= q.o.Keep {
			q.mu.Unlock()
			return
		}
		q.idle++
		q.cond.Wait()
		q.idle--
		if q.quit {
			continue // Broadcast is Stop's alone: no coming to count down
		}
		if q.o.Yield {
			// coming stays counted meanwhile, so the producers wake no other goroutine.
			q.mu.Unlock()
			runtime.Gosched()
			q.mu.Lock()
		}
		q.coming--
	}
}

// take returns the first ready item. Called with mu held.
func (q *Q[T]) take() (x T, ok bool) {
	if q.head == len(q.ready) {
		return x, false
	}
	x = q.ready[q.head]
	var zero T
	q.ready[q.head] = zero
	q.head++
	switch {
	case q.head == len(q.ready):
		q.ready, q.head = q.ready[:0], 0 // ran dry: the array is kept
	case q.head > len(q.ready)/2:
		n := copy(q.ready, q.ready[q.head:]) // never dry: keep it from growing
		clear(q.ready[n:])
		q.ready, q.head = q.ready[:n], 0
	}
	return x, true
}

// Stop ends the waiting goroutines and waits for every one to exit. Called once nothing more
// is made ready and nothing ready is left (the caller knows: its items are all run).
func (q *Q[T]) Stop() {
	q.mu.Lock()
	q.quit = true
	q.cond.Broadcast()
	q.mu.Unlock()
	q.live.Wait()
}
