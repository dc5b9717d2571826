package outlog

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"
)

// Under SyncInterval and a steady load (the writer never finds its queue empty after a round:
// each append's answer queues the next, as callers answering one another do), every tick of
// the interval still syncs, at the end of the round in flight: Durable reaches what was written
// before the tick within one round or two, not at the next pause of the load or Sync (review17
// L3: the tick was read only between bursts). The tick is the test's, so the machine's speed
// does not matter.
func TestIntervalSyncUnderSteadyLoad(t *testing.T) {
	ticks := make(chan time.Time, 1)
	orig := newTicker
	newTicker = func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }
	t.Cleanup(func() { newTicker = orig })
	l, _ := open(t, t.TempDir(), Options{Sync: SyncInterval})
	const size = 200
	frame := Pos(frameSize(size, 0))
	var stop atomic.Bool
	var rounds atomic.Int64
	failed := make(chan error, 1)
	var next func(Pos, error)
	next = func(_ Pos, err error) {
		if err != nil {
			select {
			case failed <- err:
			default:
			}
			return
		}
		if n := rounds.Add(1); !stop.Load() {
			l.AppendAsync(record(int(n), size), next)
		}
	}
	l.AppendAsync(record(0, size), next)
	t.Cleanup(func() { stop.Store(true) }) // before the log's Close (cleanups run last first)
	wait := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			select {
			case err := <-failed:
				t.Fatalf("an append failed: %v", err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not in 10 s (durable %v, written %v, %d rounds)", what, l.Durable(), l.Written(), rounds.Load())
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	for k := range 5 {
		r := rounds.Load()
		wait("the load going on", func() bool { return rounds.Load() > r+2 })
		w := l.Written()
		ticks <- time.Time{}
		wait(fmt.Sprintf("tick %d's sync", k+1), func() bool { return l.Durable() >= w })
		if d := l.Durable(); d > w+2*frame {
			t.Fatalf("tick %d synced at %v, more than two rounds after %v", k+1, d, w)
		}
	}
	if r := rounds.Load(); r < 15 {
		t.Fatalf("%d rounds: the load was not steady", r)
	}
}
