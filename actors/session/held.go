package session

// Held Dones: an event the network waits for (network.Done: WhatsApp acks it, the Cloud API
// answers Meta, only once it is kept) is told exactly once, also when the actor never takes it
// (it stopped for good) or panics on it (hollywood restarts the actor and drops the message it
// was handling). Told with an error, the network delivers it again.

import (
	"fmt"
	"sync/atomic"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// errStopped is the Done of an event the session's actor stopped before taking.
var errStopped = fmt.Errorf("%w: the session stopped before taking the event", domain.ErrUnavailable)

// hold registers the Done of an event on its way to the actor: its token, or false when the
// actor stopped for good (the caller tells the Done).
func (x *Queue) hold(d network.Done) (uint64, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.stopped {
		return 0, false
	}
	if x.held == nil {
		x.held = map[uint64]network.Done{}
	}
	x.heldSeq++
	x.held[x.heldSeq] = d
	return x.heldSeq, true
}

// take removes held Done n: false when it was told already (the actor stopped). Called with mu
// held.
func (x *Queue) take(n uint64) bool {
	if _, ok := x.held[n]; !ok {
		return false
	}
	delete(x.held, n)
	return true
}

// dropHeld takes every held Done (the actor stopped for good: none will be taken). Called with
// mu held; the caller tells them once it is released.
func (x *Queue) dropHeld() []network.Done {
	ds := make([]network.Done, 0, len(x.held))
	for _, d := range x.held {
		ds = append(ds, d)
	}
	x.held = nil
	return ds
}

// sendNet hands a network event to the actor; one that carries a Done is held until the actor
// takes it.
func (x *Queue) sendNet(hw *actor.Engine, self *actor.PID, ev network.Event) {
	d := network.DoneOf(ev)
	if d == nil {
		hw.Send(self, netEvent{ev: ev})
		return
	}
	n, ok := x.hold(d)
	if !ok {
		d.Call(errStopped)
		return
	}
	hw.Send(self, netEvent{ev: ev, held: n})
}

// takeNet is the actor taking netEvent m: the event to handle, whose Done (told once only:
// a panic may fail it while a callee that took it still works on it) is the one in hand until
// handed on (handOn), or false when that Done was told already (the actor stopped; the
// network delivers it again). Called with the queue's lock held.
func (s *Session) takeNet(m netEvent) (network.Event, bool) {
	if m.held != 0 && !s.sq.take(m.held) {
		return nil, false
	}
	d := network.DoneOf(m.ev)
	if d == nil {
		return m.ev, true
	}
	var told atomic.Bool
	once := network.Done(func(err error) {
		if told.CompareAndSwap(false, true) {
			d(err)
		}
	})
	ev, _ := network.WithDone(m.ev, once)
	s.inHand = once
	return ev, true
}

// handOn says the event's Done in hand is now another's to tell (the inbound took it and
// returned).
func (s *Session) handOn() { s.inHand = nil }

// failOnPanic, deferred by Receive, tells the Done in hand of an event the actor panicked on
// (hollywood drops that message), and marks the actor as panicked: the Stopped that hollywood
// delivers before restarting it is then not the session's end. It panics again.
func (s *Session) failOnPanic() {
	v := recover()
	if v == nil {
		return
	}
	s.panicked = true
	if d := s.inHand; d != nil {
		s.inHand = nil
		d.Call(fmt.Errorf("%w: the session failed on the event: %v", domain.ErrUnavailable, v))
	}
	panic(v)
}
