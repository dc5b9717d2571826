// Package mark is the durable-mark protocol the key and account actors share. An actor counts
// in memory (a key's calls today, an account's messages this month) and keeps a durable mark
// that the count may not pass: a crash then resumes from the mark, never below what was
// granted. The mark is raised a block ahead of the count so that requests seldom wait for it.
//
// The protocol, written once here:
//   - one write in flight at a time, on a worker goroutine: Receive never waits on the disk;
//     the outcome comes back to the actor as a Saved message;
//   - a write asked for while one is in flight follows it (Again);
//   - requests the mark does not cover yet are parked until the write lands;
//   - the final flush waits for the write in flight (Wait), so an older mark never lands after
//     the exact count;
//   - while writes fail (a full disk), the actor retries every RetryEvery by itself and logs
//     the change of state once each way, not once per request.
//
// What to write, and what a parked request does when a write fails, is the actor's.
package mark

import (
	"context"
	"log/slog"
	"time"

	"github.com/anthdm/hollywood/actor"
)

// RetryEvery is how often a failing mark is written again: storage that comes back is noticed
// within it.
const RetryEvery = time.Second

// Saved is what a write reports back to its actor: the snapshot written, and the error.
type Saved struct {
	Snapshot any
	Err      error
}

// Retry is the message that asks the actor to write again after a failure.
type Retry struct{}

// Block is how far ahead a mark is raised for a limit: limit/div (at least 1, at most most),
// or most without a limit. A kill -9 costs at most one block.
func Block(limit, div, most int64) int64 {
	if limit <= 0 {
		return most
	}
	return min(max(limit/div, 1), most)
}

// To returns a function that sends a message to c's actor from any goroutine: how a write,
// a retry's timer or a counter's caller reaches the actor.
func To(c *actor.Context) func(msg any) {
	hw, self := c.Engine(), c.PID()
	return func(msg any) { hw.Send(self, msg) }
}

// Mark is one actor's mark writer and its parked requests (of type R). Its fields are owned by
// the actor's goroutine; the zero value is ready.
type Mark[R any] struct {
	writing bool
	again   bool
	written chan struct{} // closed when the write in flight has returned
	parked  []R
	failing bool
	retry   bool // a Retry is scheduled
}

// Writing reports whether a write is in flight.
func (m *Mark[R]) Writing() bool { return m.writing }

// Failing reports whether the last write failed (and no write has landed since).
func (m *Mark[R]) Failing() bool { return m.failing }

// Park holds r until the write in flight lands.
func (m *Mark[R]) Park(r R) { m.parked = append(m.parked, r) }

// Take removes and returns the parked requests (the actor is going away).
func (m *Mark[R]) Take() []R {
	p := m.parked
	m.parked = nil
	return p
}

// Write runs put(snapshot) on a worker goroutine and reports back with Saved{snapshot, err}.
// With a write in flight, it only notes that another one is wanted (Landed says so): the actor
// then writes its newer snapshot.
func (m *Mark[R]) Write(c *actor.Context, snapshot any, put func(ctx context.Context) error) {
	if m.writing {
		m.again = true
		return
	}
	m.writing, m.again = true, false
	written := make(chan struct{})
	m.written = written
	send := To(c)
	runWrite(func() {
		err := put(context.Background())
		close(written)
		send(Saved{Snapshot: snapshot, Err: err})
	})
}

// writes hands a write to an idle writer (unbuffered: only one waiting for work takes it).
var writes = make(chan func())

// writerIdle is how long a writer waits for its next write before it ends.
const writerIdle = 5 * time.Second

// runWrite runs f on a writer: an idle one, else a new one, so a write never waits behind
// another (a store that stalls one stalls no other actor's). A write goes down to the store's
// commit, deep enough that a new goroutine's stack grew, and was copied, on each one
// (runtime.newstack under Mark.Write: 0.07 s of the gateway's 7.9 s profile in the send path,
// where each busy user's count is written every 20 ms); a writer that stays keeps its grown
// stack for the next write.
func runWrite(f func()) {
	select {
	case writes <- f:
	default:
		go writer(f)
	}
}

// writer runs f, then the writes it takes, until writerIdle passes without one.
func writer(f func()) {
	idle := time.NewTimer(writerIdle)
	defer idle.Stop()
	for {
		f()
		f = nil // what the write holds is not kept alive while the writer waits (review17 H5)
		idle.Reset(writerIdle)
		select {
		case f = <-writes:
		case <-idle.C:
			return
		}
	}
}

// Landed takes a write's outcome: the requests parked meanwhile (to run again, or to answer
// when it failed) and whether another write was asked for. A failed write schedules a Retry;
// the first failure and the first success after failures are logged (log, with args naming
// the actor), nothing in between.
func (m *Mark[R]) Landed(c *actor.Context, s Saved, log *slog.Logger, msg string, args ...any) (parked []R, again bool) {
	m.writing = false
	parked, m.parked = m.parked, nil
	again, m.again = m.again, false
	switch {
	case s.Err != nil && !m.failing:
		m.failing = true
		log.Warn(msg+": cannot be saved; retrying every second", append(args, "err", s.Err)...)
	case s.Err == nil && m.failing:
		m.failing = false
		log.Info(msg+": saved again", args...)
	}
	if s.Err != nil {
		m.scheduleRetry(c)
	}
	return parked, again
}

// Retried takes a Retry message: false when it is stale (a write landed since the failure).
func (m *Mark[R]) Retried() bool {
	m.retry = false
	return m.failing
}

func (m *Mark[R]) scheduleRetry(c *actor.Context) {
	if m.retry {
		return
	}
	m.retry = true
	send := To(c)
	time.AfterFunc(RetryEvery, func() { send(Retry{}) })
}

// Wait blocks until the write in flight, if any, has returned: call it before the final flush
// of the exact count.
func (m *Mark[R]) Wait() {
	if m.written != nil {
		<-m.written
	}
}
