package session

import "github.com/gateway/gateway/internal/runq"

// keptWorkers is the most send goroutines the process keeps waiting for work; more start when
// every kept one is busy (a send on a slow network holds its goroutine), and those exit once
// this many wait.
const keptWorkers = 8

// workers are the sessions' send goroutines, shared by every session of the process (issue
// 32): a session whose queue may let a message go is made ready (Queue.wake: at most once,
// while it is neither ready nor being run), and a goroutine runs its worker's steps until it
// has none (Queue.run), then takes the next ready session without waiting when there is one.
//
// A long-lived goroutine a session was woken about once a message: with 100 sessions a burst
// of accepts is a message or two a session, and each session's worker had to be woken for its
// own. Here the sessions made ready while a goroutine is on its way wake none, and one done
// with its session takes the next: one wake-up carries a burst across sessions. Spread: while
// any session is ready, a goroutine is on its way, so no ready session waits behind another's
// send (a slow network's). Yield: a woken goroutine lets the accepts already runnable make
// their sessions ready first. A session is run by one goroutine at a time (Queue.sched), so
// its sends go out in order, one batch at a time. Nothing waits on a timer: an idle session
// costs no goroutine and no wake-up.
var workers *runq.Q[*Queue]

func init() { // not in workers' declaration: Queue.run wakes through workers
	workers = runq.New((*Queue).run, runq.Options{Keep: keptWorkers, Spread: true, Yield: true})
}
