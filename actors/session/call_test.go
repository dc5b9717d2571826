package session

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// ask sends m (whose reply comes on reply) to the actor and waits for the reply.
func (r *rig) ask(m any, reply chan Reply) Reply {
	r.t.Helper()
	r.hw.Send(r.pid, m)
	select {
	case rep := <-reply:
		return rep
	case <-time.After(5 * time.Second):
		r.t.Fatalf("no answer to %T", m)
		return Reply{}
	}
}

// call asks the actor for a Call and returns its error.
func (r *rig) call(checks int, fn func(context.Context, network.Client) error) error {
	r.t.Helper()
	reply := make(chan Reply, 1)
	return r.ask(&Call{Checks: checks, Fn: fn, Reply: reply}, reply).Err
}

func (r *rig) cancel(id string) bool {
	r.t.Helper()
	reply := make(chan Reply, 1)
	return r.ask(&Cancel{ID: id, Reply: reply}, reply).Found
}

// A message still in the queue is taken out and reported cancelled (its allowance is the
// engine's to release); it is never sent. One that left the queue is not found.
func TestCancelTakesAQueuedMessageOut(t *testing.T) {
	r := newRig(t, "15550000001", domain.Pacing{MinGapMs: 10 * 60 * 1000}) // one send every 10 minutes
	first := r.send("15550000002")
	second := r.send("15550000003")
	r.waitOutcome(first)
	if !r.cancel(second) {
		t.Fatal("the queued message was not found")
	}
	o := r.waitOutcome(second)
	if o.e.Status != domain.MsgCancelled || !errors.Is(o.err, domain.ErrCancelled) || o.e.Code != "" {
		t.Fatalf("outcome %+v, %v; want cancelled", o.e, o.err)
	}
	if r.cancel(first) {
		t.Fatal("a sent message was found in the queue")
	}
	r.advance(11 * time.Minute)
	if got := r.sentTo("15550000003"); len(got) != 0 {
		t.Fatalf("the cancelled message was sent: %v", got)
	}
	if d := r.depth(); d != 0 {
		t.Fatalf("queue depth %d after the cancellation", d)
	}
}

// A lookup counts its numbers against the linked phone's day, durably: past 200 it is refused
// with ErrCheckLimit, after a restart too; the next UTC day starts again.
func TestCallCountsLookupsPerDay(t *testing.T) {
	r := newRig(t, "15550000001", domain.Pacing{})
	lookup := func(ctx context.Context, c network.Client) error {
		_, err := c.Lookup(ctx, []string{"15550000009"})
		return err
	}
	if err := r.call(150, lookup); err != nil {
		t.Fatal(err)
	}
	if err := r.call(60, lookup); !errors.Is(err, domain.ErrCheckLimit) {
		t.Fatalf("150 + 60 lookups: %v, want ErrCheckLimit", err)
	}
	r.stop()
	r.spawn()
	if err := r.call(51, lookup); !errors.Is(err, domain.ErrCheckLimit) {
		t.Fatalf("after a restart, 150 + 51: %v, want ErrCheckLimit", err)
	}
	if err := r.call(50, lookup); err != nil {
		t.Fatalf("after a restart, 150 + 50: %v", err)
	}
	r.clock.Advance(24 * time.Hour)
	if err := r.call(200, lookup); err != nil {
		t.Fatalf("the next day: %v", err)
	}
	// A call that counts nothing is never refused for the count.
	if err := r.call(0, func(ctx context.Context, c network.Client) error { _, err := c.Groups(ctx); return err }); err != nil {
		t.Fatal(err)
	}
}

// Calls need the link: an unlinked session answers ErrNotConnected without calling.
func TestCallNeedsTheLink(t *testing.T) {
	r := newRig(t, "", domain.Pacing{})
	called := false
	err := r.call(1, func(context.Context, network.Client) error { called = true; return nil })
	if !errors.Is(err, domain.ErrNotConnected) || called {
		t.Fatalf("call on an unlinked session: %v (called %v)", err, called)
	}
}

// The contact book keeps who the phone wrote to (with the LID the network addressed them by)
// and who wrote to it (with their LID and name), to the hour.
func TestContactBookKeepsLIDsAndTimes(t *testing.T) {
	r := newRig(t, "15550000001", domain.Pacing{})
	r.waitOutcome(r.send("15550000002"))
	r.client().emit(network.Incoming{Origin: network.Origin{From: "15550000003", FromLID: "777", PushName: "Ana", At: t0}})
	r.settle()
	r.eventually("both in the book", func() bool {
		book, err := r.records.Book("s1", "15550000001", "", 10)
		return err == nil && len(book) == 2
	})
	book, _ := r.records.Book("s1", "15550000001", "", 10)
	if b := book[0]; b.Number != "15550000002" || b.LID != "915550000002" || b.LastOut == 0 || b.LastIn != 0 {
		t.Fatalf("written to: %+v", b)
	}
	if b := book[1]; b.Number != "15550000003" || b.LID != "777" || b.Name != "Ana" || b.LastIn == 0 || !b.Known() {
		t.Fatalf("wrote: %+v", b)
	}
}
