package persist

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

// readsTogetherKV is a KV whose checkpoint read and pending-marks scan wait for the accept
// log's scan to begin: they begin only if the three are made at once. One that gave up waiting
// is counted in late.
type readsTogetherKV struct {
	KV
	logScan chan struct{} // closed when the accept log's scan begins
	once    sync.Once
	late    atomic.Int32
}

// readsTogetherWait bounds the wait: made one after the other, a read waits this long.
const readsTogetherWait = 2 * time.Second

func (k *readsTogetherKV) waitLogScan() {
	select {
	case <-k.logScan:
	case <-time.After(readsTogetherWait):
		k.late.Add(1)
	}
}

func (k *readsTogetherKV) Get(key []byte) ([]byte, error) {
	if bytes.Equal(key, checkpointKey) {
		k.waitLogScan()
	}
	return k.KV.Get(key)
}

func (k *readsTogetherKV) Scan(prefix []byte, fn func(key, value []byte) error) error {
	switch {
	case bytes.HasPrefix(prefix, []byte(messageLogTable+"/")):
		k.once.Do(func() { close(k.logScan) })
	case bytes.HasPrefix(prefix, []byte(outboxPendingTable+"/")):
		k.waitLogScan()
	}
	return k.KV.Scan(prefix, fn)
}

// memOutbox is an outbox booted on a new memory KV, on a test clock at the present.
func memOutbox(t *testing.T) (*Memory, *testClock, *Outbox) {
	mem := NewMemory()
	t.Cleanup(func() { mem.Close() })
	clock := &testClock{}
	clock.set(time.Now().Truncate(time.Millisecond))
	o, _ := bootOutbox(t, mem, clock)
	return mem, clock, o
}

// A boot's pending read makes its three reads at once on a store that scans the whole accept
// log whatever the checkpoint (natskv, where each is a round trip or a few: one after the other
// they were a third of a loaded partition's read), and still finds what is pending: the marked
// messages and the accepts since the checkpoint, not those before it or settled.
func TestOutboxBootReadsTogether(t *testing.T) {
	mem, clock, o := memOutbox(t)
	t0 := clock.now()
	// Older ones, settled; then some pending long enough to be marked past the checkpoint.
	settleAll(o, acceptN(t, o, "u", "old", 5, t0))
	marked := acceptN(t, o, "u", "marked", 4, t0.Add(time.Millisecond))
	clock.add(markAfter + time.Minute)
	if err := o.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	// Then accepts since the checkpoint, some settled, and a crash.
	recent := acceptN(t, o, "u", "recent", 6, clock.now())
	settleAll(o, recent[:2])
	want := append(slices.Clone(marked), recent[2:]...)

	kv := &readsTogetherKV{KV: mem, logScan: make(chan struct{})}
	_, got := bootOutbox(t, kv, clock)
	if n := kv.late.Load(); n > 0 {
		t.Errorf("%d of the checkpoint's and the marks' reads waited for the accept log's scan: made one after the other", n)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("pending:\n%v\nwant\n%v", got, want)
	}
}

// getsKV is a KV that reads many keys together (Getter) and counts the accept records read one
// at a time and the batched reads.
type getsKV struct {
	KV
	single, many atomic.Int32
}

func (k *getsKV) Get(key []byte) ([]byte, error) {
	if bytes.HasPrefix(key, []byte(messageLogTable+"/")) {
		k.single.Add(1)
	}
	return k.KV.Get(key)
}

func (k *getsKV) GetMany(keys [][]byte) ([][]byte, error) {
	k.many.Add(1)
	out := make([][]byte, len(keys))
	for i, key := range keys {
		v, err := k.KV.Get(key)
		if err != nil && !errors.Is(err, domain.ErrRecordNotFound) {
			return nil, err
		}
		out[i] = v
	}
	return out, nil
}

// A boot reads the bodies of the messages marked pending (queued past markAfter, their accepts
// before the checkpoint) together, not one at a time, and drops a mark whose body expired.
func TestOutboxBootReadsMarkedBodiesTogether(t *testing.T) {
	mem, clock, o := memOutbox(t)
	t0 := clock.now()
	marked := acceptN(t, o, "u", "marked", 20, t0)
	clock.add(markAfter + time.Minute)
	if err := o.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	// One body gone (expired) under its mark.
	if err := mem.Commit(context.Background(), Op{Key: acceptKeyAt(posOf("u", int64(domain.MillisOf(t0))), marked[0]), Delete: true}); err != nil {
		t.Fatal(err)
	}
	kv := &getsKV{KV: mem}
	_, got := bootOutbox(t, kv, clock)
	if !slices.Equal(got, marked[1:]) {
		t.Fatalf("pending:\n%v\nwant\n%v", got, marked[1:])
	}
	if s, m := kv.single.Load(), kv.many.Load(); s != 0 || m != 1 {
		t.Errorf("%d marked bodies read one at a time, %d batched reads; want 0 and 1", s, m)
	}
	if _, err := mem.Get(pendingKey(marked[0])); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Errorf("the mark of the expired body: %v, want it removed", err)
	}
}
