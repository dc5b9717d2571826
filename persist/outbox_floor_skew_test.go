package persist

import (
	"testing"
	"time"
)

// The accepts' floor with the stream's leadership moved to a server whose clock is ahead of
// the one that stored a pending message's accept, within RecountSkew: the next owner's boot
// finds the message. W is stamped by the new leader, ahead of the accept's own stamp by the
// clocks' gap; past RecountSkew (20 s: review rev28) the floor passes the accept and the
// message is missed, which the README's "Clocks" states as an assumption. The process's own
// clock (paced) runs on as the real time does; only the stamping server changes.
func TestOutboxFloorWithALeaderAheadWithinTheSkew(t *testing.T) {
	for _, ahead := range []time.Duration{5 * time.Second} {
		t.Run("ahead "+ahead.String(), func(t *testing.T) {
			server := &testClock{}
			server.set(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
			kv := newStampedKV(t, server)
			a := bootNode(t, kv, 0)
			// The process's paced clock: time.Now's monotonic reading, apart from the server's.
			proc := &testClock{}
			proc.set(server.now())
			a.o.paced, a.o.base = proc.now, proc.now()
			step := func(d time.Duration) {
				pass(kv, d, a)
				proc.add(d)
			}
			step(5 * time.Second)
			if err := a.o.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			m := acceptN(t, a.o, "u", "m", 1, a.clock.now()) // stored by the first leader
			step(time.Second)
			// The stream's leader changes to a server whose clock is ahead: its stamps jump,
			// no real time passes.
			server.add(ahead)
			for range 2 { // the engine's rhythm: the first stamps W by the new leader
				if err := a.o.Checkpoint(); err != nil {
					t.Fatal(err)
				}
				step(5 * time.Second)
			}
			// m is still unmarked (11 s < markAfter); the owner dies, the next boots.
			takeOver(t, kv, time.Minute, 0, m)
		})
	}
}
