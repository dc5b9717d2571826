package runq

import (
	"bytes"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// Items made ready from many goroutines are each run once, and Stop leaves no goroutine of
// the queue behind.
func TestEveryItemRunOnce(t *testing.T) {
	const producers, each = 8, 2000
	runs := make([]atomic.Int32, producers*each)
	var done atomic.Int64
	q := New(func(i int) {
		runs[i].Add(1)
		done.Add(1)
	}, Options{Keep: 2, Spread: true, Yield: true})
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range each {
				q.Schedule(p*each + i)
				if i%64 == 0 {
					time.Sleep(10 * time.Microsecond) // the goroutines wait between bursts
				}
			}
		})
	}
	wg.Wait()
	waitFor(t, "every item run", func() bool { return done.Load() == producers*each })
	q.Stop()
	for i := range runs {
		if n := runs[i].Load(); n != 1 {
			t.Fatalf("item %d run %d times", i, n)
		}
	}
	buf := make([]byte, 1<<20)
	if st := buf[:runtime.Stack(buf, true)]; bytes.Contains(st, []byte("runq.(*Q[...]).loop")) {
		t.Fatalf("a goroutine outlived Stop:\n%s", st)
	}
}

// Spread: an item made ready does not wait behind another's run that blocks, even when both
// were ready before a goroutine looked.
func TestSpreadRunsBesideABlockedOne(t *testing.T) {
	release := make(chan struct{})
	ran := make(chan string, 2)
	q := New(func(s string) {
		if s == "slow" {
			<-release
		}
		ran <- s
	}, Options{Keep: 4, Spread: true, Yield: true})
	defer q.Stop()
	defer close(release)
	q.mu.Lock() // both ready before any goroutine looks
	q.ready = append(q.ready, "slow")
	q.call()
	q.mu.Unlock()
	q.Schedule("fast")
	select {
	case s := <-ran:
		if s != "fast" {
			t.Fatalf("%s ran first", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the second item waited behind the blocked one")
	}
}
