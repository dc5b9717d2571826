package engine

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

// What one contact wrote is read in order, one message after the other; another contact's
// messages do not wait for it; after Stop nothing new starts.
func TestContactLanesKeepEachContactsOrder(t *testing.T) {
	e := &Engine{cfg: Config{AskTimeout: time.Second}}
	e.stopCtx, e.stopCancel = context.WithCancel(context.Background())
	var mu sync.Mutex
	var order []string
	note := func(s string) {
		mu.Lock()
		order = append(order, s)
		mu.Unlock()
	}
	release := make(chan struct{})
	otherRan := make(chan struct{})
	if !e.inContactLane("s1|alice", func(context.Context) { <-release; note("alice 1") }) {
		t.Fatal("the first message did not start")
	}
	for _, m := range []string{"alice 2", "alice 3"} {
		e.inContactLane("s1|alice", func(context.Context) { note(m) })
	}
	e.inContactLane("s1|bob", func(context.Context) { note("bob 1"); close(otherRan) })
	select {
	case <-otherRan: // bob's message did not wait for alice's first
	case <-time.After(10 * time.Second):
		t.Fatal("another contact's message waited behind alice's")
	}
	mu.Lock()
	if len(order) != 1 || order[0] != "bob 1" {
		t.Fatalf("alice's later messages ran before her first was read: %v", order)
	}
	mu.Unlock()
	close(release)
	e.bgMu.Lock()
	e.bgClosed = true
	e.bgMu.Unlock()
	e.bg.Wait()
	if want := []string{"bob 1", "alice 1", "alice 2", "alice 3"}; len(order) != len(want) || order[1] != want[1] || order[2] != want[2] || order[3] != want[3] {
		t.Fatalf("order %v, want %v", order, want)
	}
	if e.inContactLane("s1|alice", func(context.Context) { note("late") }) {
		t.Fatal("a message started after Stop")
	}
	if len(e.lanes.waiting) != 0 {
		t.Fatalf("lanes left open: %v", e.lanes.waiting)
	}
}

// An incoming change (reaction, edit, revoke, vote) is recorded in the engine's background,
// which Stop waits for: before Stop it runs and its Done gets the write's answer; after Stop it
// does not run and its Done is told unavailable (the network sends it again).
func TestNoteLaterRunsInTheBackgroundStopWaitsFor(t *testing.T) {
	e := &Engine{cfg: Config{AskTimeout: time.Second}, stopCtx: context.Background()}
	release, told := make(chan struct{}), make(chan error, 2)
	e.noteLater(noteLane("u1", "m1"), func(err error) { told <- err }, func() error { <-release; return nil })
	e.bgMu.Lock()
	e.bgClosed = true
	e.bgMu.Unlock()
	e.noteLater(noteLane("u1", "m2"), func(err error) { told <- err }, func() error { t.Error("a change ran after Stop"); return nil })
	if err := <-told; !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("after Stop: %v, want unavailable", err)
	}
	close(release)
	e.bg.Wait()
	if err := <-told; err != nil {
		t.Fatalf("before Stop: %v", err)
	}
}
