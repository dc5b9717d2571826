package persist

import (
	"bytes"
	"context"
	"fmt"
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
