package httpapi

import (
	"testing"
	"time"
)

// A bucket that refilled is dropped, and with none held a call is allowed without the lock;
// the budget is the same as with the bucket kept.
func TestGuessLimitsDropRefilledBuckets(t *testing.T) {
	now := time.Date(2026, 11, 29, 6, 0, 0, 0, time.UTC)
	g := newGuessLimitsOf(3, 1)
	g.now = func() time.Time { return now }
	if !g.allow("a") || g.held.Load() != 0 {
		t.Fatalf("a fresh key: allowed %v, %d held", g.allow("a"), g.held.Load())
	}
	for range 3 {
		g.fail("a")
	}
	if g.allow("a") || !g.allow("b") || g.held.Load() != 1 {
		t.Fatalf("after 3 failures: a allowed %v, b allowed %v, %d held", g.allow("a"), g.allow("b"), g.held.Load())
	}
	now = now.Add(1500 * time.Millisecond) // 1.5 of 3 back
	if !g.allow("a") || g.held.Load() != 1 {
		t.Fatalf("half refilled: allowed %v, %d held", g.allow("a"), g.held.Load())
	}
	g.fail("a") // 0.5 left
	if g.allow("a") {
		t.Fatal("a failure spent what had refilled, yet allowed")
	}
	now = now.Add(3 * time.Second)
	if !g.allow("a") || g.held.Load() != 0 {
		t.Fatalf("refilled: allowed %v, %d held (want the bucket dropped)", g.allow("a"), g.held.Load())
	}
	for range 3 {
		g.fail("a") // a dropped bucket starts whole again, as it would have refilled
	}
	if g.allow("a") || g.held.Load() != 1 {
		t.Fatalf("3 new failures: allowed %v, %d held", g.allow("a"), g.held.Load())
	}
}
