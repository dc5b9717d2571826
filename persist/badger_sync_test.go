package persist

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// With FsyncBatch a commit is answered once a sync that began after its group was written is
// done; while one sync is slow, the next group is written (and readable) and waits for the
// next sync, not for the slow one to be repeated.
func TestBadgerSyncsArePipelined(t *testing.T) {
	b := openTestBadger(t, t.TempDir(), FsyncBatch)
	release := make(chan struct{})
	entered := make(chan struct{}, 8)
	first := true
	b.sync.beforeBarrier = func() {
		entered <- struct{}{}
		if first {
			first = false
			<-release // the first sync is slow
		}
	}
	ctx := context.Background()
	errA := make(chan error, 1)
	go func() { errA <- b.Commit(ctx, put("a", "1")) }()
	<-entered // a's group is written and its sync has begun
	errB := make(chan error, 1)
	go func() { errB <- b.Commit(ctx, put("b", "2")) }()
	waitFor(t, 5*time.Second, "b written during a's sync", func() bool {
		v, err := b.Get([]byte("b"))
		return err == nil && string(v) == "2"
	})
	select {
	case err := <-errA:
		t.Fatalf("a answered before its sync ended: %v", err)
	case err := <-errB:
		t.Fatalf("b answered before any sync after its write: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-errA; err != nil {
		t.Fatal(err)
	}
	if err := <-errB; err != nil {
		t.Fatal(err)
	}
	if n := b.sync.syncs.Load(); n != 2 {
		t.Fatalf("%d syncs, want 2 (a's, then b's)", n)
	}
}

// A memtable that fills after a group was written becomes immutable with its write-ahead log
// unsynced, which DB.Sync does not cover: the barrier sees the new log file and syncs the older
// ones.
func TestBadgerBarrierSyncsRotatedLogs(t *testing.T) {
	b, err := OpenBadger(t.TempDir(), BadgerOptions{Fsync: FsyncInterval, MemTableSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	value := bytes.Repeat([]byte("v"), 100) // stays in the tree
	before := b.sync.rotations.Load()
	for i := 0; i < 300; i++ {
		ops := make([]Op, 200)
		for j := range ops {
			ops[j] = Op{Key: fmt.Appendf(nil, "k/%05d/%03d", i, j), Value: value}
		}
		mustCommit(t, b, ops...)
	}
	if err := b.sync.barrier(); err != nil {
		t.Fatal(err)
	}
	if b.sync.rotations.Load() == before {
		t.Fatal("6 MiB written to 8 MiB memtables (and their skiplists' overhead) and no new log file seen")
	}
	mem, _ := b.sync.newest()
	if b.sync.mem != mem {
		t.Fatalf("the barrier knows memtable %d, the newest is %d", b.sync.mem, mem)
	}
}

// A barrier that answered several callers waits for them to commit again (up to a bound), so
// one sync covers them all; a background commit it answered is not waited for; a caller alone
// is never held; Close ends a wait at once.
func TestBadgerSyncGathersTheCallersItAnswered(t *testing.T) {
	fraction, most := gatherFraction, gatherMax
	gatherFraction, gatherMax = 1e6, 10*time.Second // only the callers can end a wait
	t.Cleanup(func() { gatherFraction, gatherMax = fraction, most })
	b := openTestBadger(t, t.TempDir(), FsyncBatch)
	ctx := context.Background()

	for i := range 5 { // one caller: each barrier answers one, and the next commit is not held
		mustCommit(t, b, put(fmt.Sprint("alone", i), "v"))
	}
	if n := b.sync.syncs.Load(); n != 5 {
		t.Fatalf("%d syncs for 5 commits one after another, want 5", n)
	}

	// Two callers answered by one barrier: their next commits share the next one.
	release, entered := make(chan struct{}), make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // a failure still lets Close finish
	held := false
	b.sync.beforeBarrier = func() {
		if !held {
			held = true
			close(entered)
			<-release
		}
	}
	errC := make(chan error, 1)
	go func() { errC <- b.Commit(ctx, put("c", "held")) }() // its barrier is held
	<-entered
	errs := make(chan error, 2)
	for _, k := range []string{"a", "b"} {
		go func() {
			if err := b.Commit(ctx, put(k, "1")); err != nil { // written during the held barrier
				errs <- err
				return
			}
			for deadline := time.Now().Add(5 * time.Second); k == "a" && time.Now().Before(deadline); {
				// a commits again once b's next commit is written
				if v, err := b.Get([]byte("b")); err == nil && string(v) == "2" {
					break
				}
				time.Sleep(time.Millisecond)
			}
			errs <- b.Commit(ctx, put(k, "2"))
		}()
	}
	bg := make(chan error, 1)
	go func() { bg <- b.Commit(background(ctx), put("bg", "1")) }() // an outcome writer's
	waitFor(t, 5*time.Second, "a, b and bg written during the held barrier", func() bool {
		b.sync.mu.Lock()
		defer b.sync.mu.Unlock()
		return len(b.sync.pending) == 3 && b.sync.callers == 2
	})
	// The barrier that answers a1 and b1 lets b commit again before gather counts what is
	// pending: the answered callers' new commits must not be counted twice (the wait would
	// then want a third commit and run out its bound).
	waited := false // the syncer's goroutine's own
	b.sync.afterAnswers = func(answered int) {
		if answered != 2 || waited { // a2 and b2's barrier comes later: no one commits after it
			return
		}
		waited = true
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
			b.sync.mu.Lock()
			back := b.sync.callers
			b.sync.mu.Unlock()
			if back >= 1 { // the syncer's goroutine: no t.Fatal here; a missed b2 fails below
				break
			}
		}
	}
	released := time.Now()
	releaseOnce.Do(func() { close(release) })
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if took := time.Since(released); took > 5*time.Second {
		t.Fatalf("a2 and b2 answered %v after the release: the wait counted the background commit, or an answered caller's new commit twice", took)
	}
	if err := <-errC; err != nil {
		t.Fatal(err)
	}
	if err := <-bg; err != nil {
		t.Fatal(err)
	}
	// Had bg counted, the wait after a1, b1 and bg's barrier would have wanted a third commit,
	// which never comes (the bound is 10 s here): a2 and b2 would wait it out.
	if n := b.sync.syncs.Load(); n != 8 {
		t.Fatalf("%d syncs, want 8: the held one, a1, b1 and bg's, then a2 and b2's together", n)
	}

	// The last barrier answered two and waits for two more commits, which never come: Close
	// does not wait out the bound.
	start := time.Now()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Close took %v: it waited for gather's bound", took)
	}
}
