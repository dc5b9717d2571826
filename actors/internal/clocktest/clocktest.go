// Package clocktest is the actors' fake clock: time stands still until a test moves it, and
// timers fire when it passes their deadline, in deadline order, on the goroutine that moved it.
package clocktest

import (
	"slices"
	"sync"
	"time"
)

// Clock is a fake clock. Its zero value is not usable: use New.
type Clock struct {
	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers []*Timer
}

// New returns a clock standing at t.
func New(t time.Time) *Clock { return &Clock{now: t} }

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Timer is a timer of a Clock.
type Timer struct {
	c   *Clock
	at  time.Time
	seq uint64
	f   func()
}

// AfterFunc runs f once the clock has moved d past now (d <= 0: at the next move).
func (c *Clock) AfterFunc(d time.Duration, f func()) *Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t := &Timer{c: c, at: c.now.Add(d), seq: c.seq, f: f}
	c.timers = append(c.timers, t)
	return t
}

// Stop cancels the timer; it reports whether it was still pending.
func (t *Timer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.timers)
	c.timers = slices.DeleteFunc(c.timers, func(x *Timer) bool { return x == t })
	return len(c.timers) != n
}

// Advance moves the clock by d and fires every timer due by then.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
	c.fire()
}

// Set moves the clock to t (never backwards) and fires every timer due by then.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	if t.After(c.now) {
		c.now = t
	}
	c.mu.Unlock()
	c.fire()
}

// Pending is how many timers wait.
func (c *Clock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// fire runs due timers one at a time, without the lock (a timer may set another).
func (c *Clock) fire() {
	for {
		c.mu.Lock()
		i := -1
		for j, t := range c.timers {
			if !t.at.After(c.now) && (i < 0 || t.at.Before(c.timers[i].at) || (t.at.Equal(c.timers[i].at) && t.seq < c.timers[i].seq)) {
				i = j
			}
		}
		if i < 0 {
			c.mu.Unlock()
			return
		}
		t := c.timers[i]
		c.timers = slices.Delete(c.timers, i, i+1)
		c.mu.Unlock()
		t.f()
	}
}
