package outlog

import (
	"testing"
	"time"
)

// TestRoundCallbacksReused: a round's callback list is kept once the writer answered it,
// emptied, and the next round's callbacks go into it: each round grew a new one from nothing,
// by appends under the log's lock (an accept's under the outbox's lock too; issue 32). The
// kept list holds no callback of the round it answered.
func TestRoundCallbacksReused(t *testing.T) {
	l, _ := open(t, t.TempDir(), Options{Sync: SyncInterval})
	rec, done := record(0, 40), make(chan struct{}, 8)
	answer := func(Pos, error) { done <- struct{}{} }
	round := func(n int) {
		for range n {
			l.AppendAsync(rec, answer)
		}
		for range n {
			<-done
		}
		// The writer gives the list back after its answers: wait for it.
		deadline := time.Now().Add(10 * time.Second)
		for {
			l.mu.Lock()
			kept := len(l.freeCalls)
			l.mu.Unlock()
			if kept > 0 {
				return
			}
			if time.Now().After(deadline) {
				t.Fatal("no callback list given back after a round")
			}
			time.Sleep(time.Millisecond)
		}
	}
	round(8)
	l.mu.Lock()
	for _, calls := range l.freeCalls {
		for _, c := range calls[:cap(calls)] {
			if c.done != nil {
				l.mu.Unlock()
				t.Fatal("a kept callback list still holds a callback of the round it answered")
			}
		}
	}
	l.mu.Unlock()
	// A round of one record with a callback, once lists are kept: the group and its channel
	// are new (a caller's ticket may hold them), the list is not.
	if got := testing.AllocsPerRun(50, func() { round(1) }); got > 2 {
		t.Fatalf("%.1f allocations a round of one callback, want at most 2 (the group and its channel)", got)
	}
}
