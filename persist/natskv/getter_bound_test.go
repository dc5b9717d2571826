package natskv_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/kvtest"
	"github.com/gateway/gateway/persist/natskv"
)

// A getter's batch stays within what one multi_last answers, its reads' anchors counted
// (nats-server v2.15.2 stream.go getDirectMulti, maxAllowedResponses: a request matching more
// than 1,024 existing subjects is answered 413 Too Many Results). 2,200 reads of distinct
// existing keys, each with one of two anchors beside it (as fenced views of two partitions of
// one stream ask their fences), queued behind two held round trips and a third batch, all read
// their values: before, the getter took 1,024 of them into one request, 1,026 subjects with the
// anchors, and every read of it failed.
func TestGetterBatchCountsAnchors(t *testing.T) {
	s := openPaged(t, "anchors")
	const n = 2200
	var ops []persist.Op
	commit := func() {
		kvtest.MustCommit(t, s, ops...)
		ops = ops[:0]
	}
	for i := range n {
		ops = append(ops, kvtest.Put(fmt.Sprintf("k/%04d", i), fmt.Sprint(i)))
		if len(ops) == 500 {
			commit()
		}
	}
	ops = append(ops, kvtest.Put("anchor/0", "a"), kvtest.Put("anchor/1", "a"))
	commit()

	release, held := natskv.HoldReads()
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	read := func(i int) {
		key := fmt.Sprintf("k/%04d", i)
		wait := s.ReadBeside(key, fmt.Sprintf("anchor/%d", i%2))
		wg.Go(func() {
			v, err := wait()
			switch {
			case err != nil:
				errs <- fmt.Errorf("%s: %w", key, err)
			case string(v) != fmt.Sprint(i):
				errs <- fmt.Errorf("%s: read %q", key, v)
			}
		})
	}
	// Two round trips in flight, held; a third read taken by the getter, waiting for a slot.
	read(0)
	waitFor(t, "a read held", func() bool { return held() == 1 })
	read(1)
	waitFor(t, "two reads held", func() bool { return held() == 2 })
	read(2)
	waitFor(t, "the third read taken by the getter", func() bool { return s.QueuedReads() == 0 })
	for i := 3; i < n; i++ {
		read(i)
	}
	// The third batch may have gathered some of them (at most 1,024 reads) before its wait.
	if q := s.QueuedReads(); q < natskv.MultiGetMax {
		t.Fatalf("%d reads queued, want %d or more", q, natskv.MultiGetMax)
	}
	release()
	released = true
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if failed < 3 {
			t.Error(err)
		}
		failed++
	}
	if failed > 0 {
		t.Fatalf("%d of %d reads failed", failed, n)
	}
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting: %s", what)
		}
	}
}
