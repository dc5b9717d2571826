package session

import (
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// panicky is an Inbound that panics on a message reading "boom" and keeps every other event
// at once.
type panicky struct{}

func (panicky) Inbound(_ domain.Session, ev network.Event) {
	if in, ok := ev.(network.Incoming); ok && in.Message.Text == "boom" {
		panic("boom")
	}
	network.DoneOf(ev).Call(nil)
}

// told is a Done that reports its calls on a channel.
func told() (network.Done, chan error) {
	ch := make(chan error, 2)
	return func(err error) { ch <- err }, ch
}

// once waits for a Done's call and fails t unless it came with an error (failed true) or
// without; a second call fails t too.
func once(t *testing.T, what string, ch chan error, failed bool) {
	t.Helper()
	select {
	case err := <-ch:
		if (err != nil) != failed {
			t.Fatalf("%s: Done told %v", what, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: Done never told (the network waits 10 s, then delivers it again)", what)
	}
	select {
	case err := <-ch:
		t.Fatalf("%s: Done told twice (then %v)", what, err)
	case <-time.After(20 * time.Millisecond):
	}
}

// Every event the network waits for is told exactly once: the one the actor panicked on (with
// an error: hollywood drops it), and one sent after the actor stopped for good. After the panic
// the restarted actor takes events and sends the queue as before.
func TestNetworkDonesToldOnce(t *testing.T) {
	r := newRig(t, "15550001000", domain.Pacing{})
	r.stop()
	r.inbound = panicky{}
	r.spawn()
	in := func(text string, d network.Done) network.Incoming {
		return network.Incoming{Origin: network.Origin{ID: text, From: "15550000077", At: t0},
			Message: domain.Message{Kind: domain.KindText, Text: text}, Done: d}
	}
	d, ch := told()
	r.client().emit(in("hello", d))
	once(t, "a message kept", ch, false)

	d, ch = told()
	r.client().emit(in("boom", d))
	once(t, "the message the actor panicked on", ch, true)

	d, ch = told()
	r.client().emit(in("again", d))
	once(t, "a message after the restart", ch, false)
	id := r.send("15550000078")
	if o := r.waitOutcome(id); o.err != nil {
		t.Fatalf("sent after the restart: %v", o.err)
	}

	r.stop()
	d, ch = told()
	r.client().emit(in("late", d))
	once(t, "a message after the stop", ch, true)
}

// A receipt that reaches the actor as a netEvent (the sink hands receipts to Deliveries
// directly, but nothing stops one from coming this way) is told by Deliveries once recorded,
// not by the actor as an event it keeps nothing of.
func TestReceiptThroughTheActorToldByDeliveries(t *testing.T) {
	r := newRig(t, "15550001001", domain.Pacing{})
	held := make(chan network.Done, 1)
	r.out.mu.Lock()
	r.out.held = held
	r.out.mu.Unlock()
	d, ch := told()
	r.hw.Send(r.pid, netEvent{ev: network.MessageReceipt{IDs: []string{"M1"}, Status: network.StatusDelivered, At: t0, Done: d}})
	var record network.Done
	select {
	case record = <-held:
	case <-time.After(5 * time.Second):
		t.Fatal("the receipt never reached Deliveries")
	}
	select {
	case err := <-ch:
		t.Fatalf("the receipt's Done told (%v) before Deliveries recorded it", err)
	case <-time.After(50 * time.Millisecond):
	}
	record(nil)
	once(t, "the receipt", ch, false)
}
