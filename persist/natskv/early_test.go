package natskv

import (
	"context"
	"testing"
	"time"

	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/natstest"
)

// A piped group's commit whose ack is a success is answered to its caller from the ack's
// callback, before the group's slowest ack has come (here held back in the callback), once,
// its record counted; the commit whose ack is held is answered when its ack comes, and the
// group (its goroutine, so its keys in the dispatcher) ends only after that.
func TestPipedCommitAnsweredAtItsOwnAck(t *testing.T) {
	srv := natstest.Start(t)
	ctx := context.Background()
	s, err := Open(ctx, Options{URL: srv.URL, Prefix: "early", Timeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var group []*commitReq
	for _, k := range []string{"t/a", "t/b"} {
		r, rs, err := s.prepare("", []persist.Op{{Key: []byte(k), Value: []byte("v")}})
		if err != nil {
			t.Fatal(err)
		}
		r.ctx, r.rs = ctx, rs
		group = append(group, r)
	}
	a, b, rs := group[0], group[1], group[0].rs
	if b.rs != rs {
		t.Fatal("the two commits are in two streams")
	}
	held, release := make(chan struct{}), make(chan struct{})
	hook := func(i int) {
		if i == 1 { // b's ack: held until the test has looked
			close(held)
			<-release
		}
	}
	ackHook.Store(&hook)
	defer ackHook.Store(nil)
	ran := make(chan struct{})
	go func() {
		rs.runGroup(group, true)
		close(ran)
	}()
	bound := time.NewTimer(10 * time.Second) // a bound on a failure, not a wait for success
	defer bound.Stop()
	select {
	case <-held:
	case <-bound.C:
		t.Fatal("b's ack never came")
	}
	select {
	case err := <-a.done:
		if err != nil {
			t.Fatalf("a: %v", err)
		}
	case <-bound.C:
		close(release)
		t.Fatal("a, acked, was not answered while its group's other ack was held back")
	}
	select {
	case err := <-b.done:
		t.Fatalf("b answered (%v) before its ack came", err)
	case <-ran:
		t.Fatal("the group ended before its last ack came")
	default:
	}
	if n, _ := s.WriteStats(); n != 1 {
		t.Fatalf("%d records counted once a's commit was answered, want 1", n)
	}
	close(release)
	select {
	case <-ran:
	case <-bound.C:
		t.Fatal("the group did not end after its last ack")
	}
	if err := <-b.done; err != nil {
		t.Fatalf("b: %v", err)
	}
	if len(a.done) != 0 {
		t.Fatalf("a answered twice: again %v", <-a.done)
	}
	if n, _ := s.WriteStats(); n != 2 {
		t.Fatalf("%d records counted, want 2 (each commit once)", n)
	}
	for _, k := range []string{"t/a", "t/b"} {
		if v, err := s.Get([]byte(k)); err != nil || string(v) != "v" {
			t.Fatalf("%s: %q, %v", k, v, err)
		}
	}
}
