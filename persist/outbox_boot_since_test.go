package persist

import (
	"bytes"
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// sinceKV is a memory KV that reads records by their write time as NATS does (ScanSince: the
// records last written at or after a time, by the store's clock, here the test's), and counts
// the accept records its scans hand out.
type sinceKV struct {
	*Memory
	clock   *testClock
	mu      sync.Mutex
	written map[string]time.Time
	read    atomic.Int32 // accept records (msg_log) handed to a scan
}

func newSinceKV(t *testing.T, clock *testClock) *sinceKV {
	k := &sinceKV{Memory: NewMemory(), clock: clock, written: map[string]time.Time{}}
	t.Cleanup(func() { k.Memory.Close() })
	return k
}

func (k *sinceKV) Commit(ctx context.Context, ops ...Op) error {
	if err := k.Memory.Commit(ctx, ops...); err != nil {
		return err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, op := range ops {
		k.written[string(op.Key)] = k.clock.now()
	}
	return nil
}

func (k *sinceKV) Scan(prefix []byte, fn func(key, value []byte) error) error {
	return k.ScanSince(prefix, time.Time{}, fn)
}

func (k *sinceKV) ScanSince(prefix []byte, since time.Time, fn func(key, value []byte) error) error {
	return k.Memory.Scan(prefix, func(key, value []byte) error {
		k.mu.Lock()
		at := k.written[string(key)]
		k.mu.Unlock()
		if at.Before(since) {
			return nil
		}
		if bytes.HasPrefix(key, []byte(messageLogTable+"/")) {
			k.read.Add(1)
		}
		return fn(key, value)
	})
}

// On a store that reads records by their write time (NATS), a boot reads the accepts written
// lately, not the user's whole history (1,000 settled messages were as much of a partition's
// boot as its 1,000 queued), and still finds every message pending: the marked ones and those
// since the checkpoint; with a checkpoint older than its first read (a partition nobody ran for
// a while), those since the checkpoint; with none, all.
func TestOutboxBootReadsTheAcceptsSinceTheCheckpoint(t *testing.T) {
	present := time.Now().Truncate(time.Millisecond)
	t.Run("recent checkpoint", func(t *testing.T) {
		clock := &testClock{}
		clock.set(present.Add(-time.Hour))
		kv := newSinceKV(t, clock)
		o, _ := bootOutbox(t, kv, clock)
		settleAll(o, acceptN(t, o, "u", "old", 20, clock.now()))
		long := acceptN(t, o, "u", "long", 3, clock.now()) // queued for long: marked
		clock.add(markAfter + time.Minute)
		if err := o.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		clock.set(present)
		recent := acceptN(t, o, "u", "recent", 5, clock.now())
		settleAll(o, recent[:2])
		if err := o.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		kv.read.Store(0)
		_, got := bootOutbox(t, kv, clock) // a kill -9, then the next boot
		sameIDs(t, got, append(long, recent[2:]...))
		if n := kv.read.Load(); n > int32(len(recent)) {
			t.Errorf("the boot read %d accept records, want at most the %d written since the checkpoint", n, len(recent))
		}
	})
	t.Run("old checkpoint", func(t *testing.T) {
		clock := &testClock{}
		clock.set(present.Add(-30 * time.Minute))
		kv := newSinceKV(t, clock)
		o, _ := bootOutbox(t, kv, clock)
		settleAll(o, acceptN(t, o, "u", "old", 4, clock.now().Add(-time.Minute)))
		waiting := acceptN(t, o, "u", "waiting", 4, clock.now())
		if err := o.Checkpoint(); err != nil {
			t.Fatal(err)
		}
		clock.set(present) // down for half an hour
		_, got := bootOutbox(t, kv, clock)
		sameIDs(t, got, waiting)
	})
	t.Run("no checkpoint", func(t *testing.T) {
		clock := &testClock{}
		clock.set(present.Add(-30 * time.Minute))
		kv := newSinceKV(t, clock)
		o := NewOutbox(kv) // never booted: no checkpoint written
		o.now = clock.now
		waiting := acceptN(t, o, "u", "waiting", 4, clock.now())
		clock.set(present)
		_, got := bootOutbox(t, kv, clock)
		sameIDs(t, got, waiting)
	})
}

func sameIDs(t *testing.T, got, want []string) {
	t.Helper()
	got, want = slices.Clone(got), slices.Clone(want)
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("pending %v, want %v", got, want)
	}
}
