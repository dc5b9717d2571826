package sim

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// A delivered message is followed by a delivered receipt; the dev control Read adds a read one.
func TestReceiptsDeliveredThenRead(t *testing.T) {
	n := openSim(t, Options{})
	c, r := paired(t, n, "s1", "15550000001")
	if _, err := c.Send(ctx, text("m1", "15550000002", "hi")); err != nil {
		t.Fatal(err)
	}
	ev, ok := r.next(t).(network.MessageReceipt)
	if !ok || ev.Status != network.StatusDelivered || len(ev.IDs) != 1 || ev.IDs[0] != "m1" || ev.From != "15550000002" || ev.At.IsZero() {
		t.Fatalf("event = %#v, want a delivered receipt for m1", ev)
	}
	if err := n.Read("m1"); err != nil {
		t.Fatal(err)
	}
	ev, ok = r.next(t).(network.MessageReceipt)
	if !ok || ev.Status != network.StatusRead || ev.IDs[0] != "m1" {
		t.Fatalf("event = %#v, want a read receipt for m1", ev)
	}
	if err := n.Read("nope"); !errors.Is(err, ErrUnknownMessage) {
		t.Fatalf("Read(unknown) = %v, want ErrUnknownMessage", err)
	}
}

// The delivered receipt comes after the latency (Send waits it out first).
func TestDeliveredAfterLatency(t *testing.T) {
	n := openSim(t, Options{Latency: 50 * time.Millisecond})
	c, r := paired(t, n, "s1", "15550000001")
	start := time.Now()
	if _, err := c.Send(ctx, text("m1", "15550000002", "hi")); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.next(t).(network.MessageReceipt); !ok {
		t.Fatal("no receipt")
	}
	if d := time.Since(start); d < 50*time.Millisecond {
		t.Fatalf("receipt after %v, before the latency", d)
	}
}

func TestInbound(t *testing.T) {
	n := openSim(t, Options{})
	_, r := paired(t, n, "s1", "15550000001")
	id, err := n.Inbound("s1", "+1 555 000 0009", "hello shop")
	if err != nil {
		t.Fatal(err)
	}
	ev, ok := r.next(t).(network.Incoming)
	if !ok || ev.ID != id || ev.From != "15550000009" || ev.Message.Kind != domain.KindText || ev.Message.Text != "hello shop" || ev.At.IsZero() {
		t.Fatalf("event = %#v, want the incoming text", ev)
	}
	if _, err := n.Inbound("s1", "12", "x"); !errors.Is(err, ErrBadPhone) {
		t.Fatalf("bad phone: %v", err)
	}
	if _, err := n.Inbound("s1", "15550000009", " "); !errors.Is(err, ErrEmptyText) {
		t.Fatalf("empty text: %v", err)
	}
	if _, err := n.Inbound("nope", "15550000009", "x"); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("unknown session: %v", err)
	}
	c2, _ := n.Open("s2", func(network.Event) {})
	_ = c2
	if _, err := n.Inbound("s2", "15550000009", "x"); !errors.Is(err, domain.ErrNotConnected) {
		t.Fatalf("unlinked session: %v", err)
	}
}

// 1,000 linked sessions reconnecting at boot through network.ConnectStaggered are spread over
// the window: Connected events fill it evenly instead of arriving at once.
func TestBootReconnectsStaggered(t *testing.T) {
	const sessions = 1000
	const window = 2 * time.Second
	dir := t.TempDir()
	n := openSim(t, Options{Dir: dir})
	for i := range sessions {
		if err := n.setPairing(sessionName(i), phoneOf(i)); err != nil {
			t.Fatal(err)
		}
	}
	n.Close()

	n = openSim(t, Options{Dir: dir}) // the restart
	var (
		clients = make([]network.Client, sessions)
		times   = make(chan time.Time, sessions)
	)
	for i := range sessions {
		c, err := n.Open(sessionName(i), func(ev network.Event) {
			if _, ok := ev.(network.Connected); ok {
				times <- time.Now()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := c.Paired(); !ok {
			t.Fatalf("session %d not linked after restart", i)
		}
		clients[i] = c
	}
	start := time.Now()
	network.ConnectStaggered(context.Background(), clients, window, func(i int, err error) { t.Errorf("connect %d: %v", i, err) })
	// 10 buckets of 200 ms: by the end of each, at most its share of the window (plus two
	// tenths of slack) may have connected. A loaded machine only delays callbacks into later
	// buckets, never earlier, so only this bound holds there; connecting all at once still
	// fails it by far (a lower bound per bucket failed under -race at load 13).
	var buckets [10]int
	for range sessions {
		at := <-times
		b := int(at.Sub(start) * 10 / window)
		if b > 9 {
			b = 9
		}
		buckets[b]++
	}
	done := 0
	for i, got := range buckets {
		done += got
		if limit := sessions*(i+1)/10 + sessions/10*2; done > limit {
			t.Fatalf("%d connects by the end of bucket %d of the window (all: %v); want at most %d", done, i, buckets, limit)
		}
	}
	if d := time.Since(start); d < window*9/10 {
		t.Fatalf("all connected after %v, want spread over %v", d, window)
	}
}

func sessionName(i int) string { return fmt.Sprintf("boot-%d", i) }
func phoneOf(i int) string     { return fmt.Sprintf("1555%07d", i) }
