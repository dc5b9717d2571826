package persist

import (
	"testing"
	"time"
)

// The accepts' floor with the stream's leadership moved to a server whose clock is ahead of
// the one that stored a pending message's accept: the next owner's boot finds the message.
// The checkpoint's store time read after the move (W) is stamped by the new leader, ahead of
// the accept's own stamp by the clocks' gap; a floor taken as W less how long ago the message
// was indexed passed the accept once the gap passed RecountSkew (20 s, 60 s: review rev28, the
// message never delivered). The floor is now the store time the outbox had read before the
// message was indexed, less RecountSkew, whichever server stamps later records.
func TestOutboxFloorWithALeaderAhead(t *testing.T) {
	for _, ahead := range []time.Duration{5 * time.Second, 20 * time.Second, time.Minute} {
		t.Run("ahead "+ahead.String(), func(t *testing.T) {
			server := &testClock{}
			server.set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			kv := newStampedKV(t, server)
			a := bootNode(t, kv, 0)
			pass(kv, 5*time.Second, a)
			if err := a.o.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			m := acceptN(t, a.o, "u", "m", 1, a.clock.now()) // stored by the first leader
			pass(kv, time.Second, a)
			// The stream's leader changes to a server whose clock is ahead: its stamps jump,
			// no real time passes.
			server.add(ahead)
			rhythm(t, kv, a, 2) // the engine's rhythm: the first reads W stamped by the new leader
			// m is still unmarked (11 s < markAfter); the owner dies, the next boots.
			takeOver(t, kv, time.Minute, 0, m)
		})
	}
}

// The other way: the leadership moves, after the outbox read a store time, to a server whose
// clock is behind by less than RecountSkew, which stores the next message's accept: the
// accept's stamp is earlier than the time read before the message was indexed, by less than
// RecountSkew, and the next boot finds it (what RecountSkew is for; a leader behind by more
// than RecountSkew is still assumed away: the README's "Clocks").
func TestOutboxFloorWithALeaderBehindWithinTheSkew(t *testing.T) {
	for _, behind := range []time.Duration{5 * time.Second, 9 * time.Second} {
		t.Run("behind "+behind.String(), func(t *testing.T) {
			server := &testClock{}
			server.set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			kv := newStampedKV(t, server)
			a := bootNode(t, kv, 0)
			rhythm(t, kv, a, 2) // the outbox has read a store time (the first checkpoint's)
			// Read again right after it is stored: the time read is the newest it can be.
			if err := a.o.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			if err := a.o.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			server.add(-behind) // the new leader's clock is behind
			m := acceptN(t, a.o, "u", "m", 1, a.clock.now())
			rhythm(t, kv, a, 2)
			takeOver(t, kv, time.Minute, 0, m)
		})
	}
}
