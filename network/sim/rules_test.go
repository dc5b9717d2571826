package sim

import (
	"errors"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// Refusals per recipient: 463 (not reachable, or the timelock when one is in force), 479 and
// 429 as the port's errors, the next `times` messages or until cleared; a message id the
// network already has is never refused; others are not affected.
func TestRefusals(t *testing.T) {
	n := openSim(t, Options{})
	c, _ := paired(t, n, "s1", "447700900001")
	if err := n.Refuse("+1 555 000 0463", 463, 2); err != nil {
		t.Fatal(err)
	}
	for i, id := range []string{"a1", "a2"} {
		if _, err := c.Send(ctx, text(id, "15550000463", "x")); !errors.Is(err, network.ErrNotReachable) {
			t.Fatalf("try %d: %v, want not reachable", i, err)
		}
	}
	if _, err := c.Send(ctx, text("a3", "15550000463", "x")); err != nil {
		t.Fatalf("after two refusals: %v", err)
	}
	if _, err := c.Send(ctx, text("b1", "15550000001", "x")); err != nil {
		t.Fatalf("another recipient: %v", err)
	}

	if err := n.Refuse("15550000479", 479, 0); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		_, err := c.Send(ctx, text("c1", "15550000479", "x"))
		if after, ok := network.RetryAfter(err); !ok || after <= 0 || !errors.Is(err, network.ErrRefused) {
			t.Fatalf("479: %v", err)
		}
	}
	if err := n.Refuse("15550000479", 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, text("c1", "15550000479", "x")); err != nil {
		t.Fatalf("cleared: %v", err)
	}
	// Delivered already: a refusal set afterwards does not apply to a re-send of it.
	if err := n.Refuse("15550000479", 463, 0); err != nil {
		t.Fatal(err)
	}
	if r, err := c.Send(ctx, text("c1", "15550000479", "x")); err != nil || r.ID != "c1" {
		t.Fatalf("re-send of a delivered id: %v %v", r, err)
	}
	if got := len(n.Messages("15550000479")); got != 1 {
		t.Fatalf("delivered %d times", got)
	}

	if err := n.Refuse("15550000429", 429, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, text("d1", "15550000429", "x")); !errors.Is(err, network.ErrRateLimited) {
		t.Fatalf("429: %v", err)
	}
	if _, err := c.Send(ctx, text("d1", "15550000429", "x")); err != nil {
		t.Fatalf("after one 429: %v", err)
	}

	for _, bad := range []struct {
		to          string
		code, times int
	}{{"15550000001", 500, 0}, {"15550000001", 463, -1}, {"12", 463, 1}} {
		if err := n.Refuse(bad.to, bad.code, bad.times); err == nil {
			t.Fatalf("Refuse(%q, %d, %d) accepted", bad.to, bad.code, bad.times)
		}
	}
}

// An account-wide timelock refuses first messages to numbers that never wrote to the phone
// (463 with its end) and spares those who wrote; the session hears it start and end.
func TestTimelock(t *testing.T) {
	n := openSim(t, Options{})
	c, r := paired(t, n, "s1", "447700900001")
	if _, err := n.Inbound("s1", "15550000010", "hi"); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.next(t).(network.Incoming); !ok {
		t.Fatal("no incoming event")
	}
	end := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	if err := n.Timelock("s1", end); err != nil {
		t.Fatal(err)
	}
	r.expect(t, network.Timelock{Active: true, Until: end})
	_, err := c.Send(ctx, text("e1", "15550000020", "x"))
	if until, ok := network.TimelockUntil(err); !ok || !until.Equal(end) {
		t.Fatalf("first message during the timelock: %v", err)
	}
	if _, err := c.Send(ctx, text("e2", "15550000010", "x")); err != nil {
		t.Fatalf("reply during the timelock: %v", err)
	}
	// A 463 rule while the notice is in force is the timelock.
	if err := n.Refuse("15550000010", 463, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(ctx, text("e3", "15550000010", "x")); !errors.Is(err, network.ErrTimelock) {
		t.Fatalf("463 during the timelock: %v", err)
	}
	if err := n.Timelock("s1", time.Time{}); err != nil {
		t.Fatal(err)
	}
	for {
		ev := r.next(t)
		if _, receipt := ev.(network.MessageReceipt); receipt {
			continue
		}
		if ev != (network.Timelock{}) {
			t.Fatalf("event %#v, want the timelock's end", ev)
		}
		break
	}
	if _, err := c.Send(ctx, text("e1", "15550000020", "x")); err != nil {
		t.Fatalf("after the timelock: %v", err)
	}
	if err := n.Timelock("nope", end); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("unknown session: %v", err)
	}
}

// A ban drops the session with its end, sends find it not connected, a Connect does not lift
// it, and it reconnects by itself at the end.
func TestBan(t *testing.T) {
	n := openSim(t, Options{})
	c, r := paired(t, n, "s1", "447700900001")
	end := time.Now().Add(300 * time.Millisecond)
	if err := n.Ban("s1", end); err != nil {
		t.Fatal(err)
	}
	r.expect(t, network.Disconnected{Reason: "account temporarily banned", Reconnecting: true, StatusReason: network.ReasonBanned, Until: end})
	if _, err := c.Send(ctx, text("f1", "15550000001", "x")); !errors.Is(err, domain.ErrNotConnected) {
		t.Fatalf("send while banned: %v", err)
	}
	if err := c.Connect(ctx); err != nil {
		t.Fatal(err)
	}
	if ev, ok := r.next(t).(network.Disconnected); !ok || ev.StatusReason != network.ReasonBanned {
		t.Fatalf("connect while banned: %#v", ev)
	}
	r.expect(t, network.Connected{Phone: "447700900001"})
	if time.Now().Before(end) {
		t.Fatal("reconnected before the ban's end")
	}
	if _, err := c.Send(ctx, text("f1", "15550000001", "x")); err != nil {
		t.Fatalf("after the ban: %v", err)
	}
	if err := n.Ban("nope", end); !errors.Is(err, ErrUnknownSession) {
		t.Fatalf("unknown session: %v", err)
	}
}
