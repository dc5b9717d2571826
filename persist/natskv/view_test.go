package natskv_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/kvtest"
	"github.com/gateway/gateway/persist/natskv"
	"github.com/gateway/gateway/persist/natstest"
)

// owner plays a cluster node for one partition: it writes the partition's fence (as a node
// does at each acquisition: every lane, expecting what it read) and is the view's Fencer.
type owner struct {
	s      *natskv.Store
	p      int
	mu     sync.Mutex
	seqs   []uint64
	lost   atomic.Bool
	fenced atomic.Int64 // times the store said the fence moved
}

func newOwner(t testing.TB, s *natskv.Store, p int) *owner {
	t.Helper()
	o := &owner{s: s, p: p}
	o.acquire(t)
	return o
}

// acquire writes a new fence: from now on only commits carrying its sequences pass.
func (o *owner) acquire(t testing.TB) []uint64 {
	t.Helper()
	cur, err := o.s.ReadFence(context.Background(), o.p)
	if err != nil {
		t.Fatal(err)
	}
	seqs, err := o.s.WriteFence(context.Background(), o.p, cur, []byte("owner"))
	if err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	o.seqs = seqs
	o.mu.Unlock()
	return seqs
}

func (o *owner) Fence() ([]uint64, error) {
	if o.lost.Load() {
		return nil, fmt.Errorf("%w: lease lost", domain.ErrNodeUnavailable)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.seqs, nil
}

func (o *owner) Fenced() { o.fenced.Add(1) }

// A fenced partition view passes the whole KV contract, on one server and on a cluster (where
// the server refuses a second check of the fence while one is in flight).
func TestViewContract(t *testing.T) {
	srv := natstest.Start(t)
	var n atomic.Int64
	open := func(url string) func(t *testing.T) persist.KV {
		return func(t *testing.T) persist.KV {
			s, err := natskv.Open(context.Background(), natskv.Options{URL: url, Prefix: fmt.Sprintf("v%d", n.Add(1)), Timeout: 2 * time.Second, MaxBatches: 8})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			o := newOwner(t, s, 7)
			return s.Partition(7, o)
		}
	}
	t.Run("single", func(t *testing.T) {
		kvtest.Run(t, kvtest.Factory{Open: open(srv.URL), MaxKey: natskv.MaxEncodedKey - 3, MaxValue: natstest.MaxPayload - 4<<10})
	})
	if testing.Short() {
		return
	}
	t.Run("cluster", func(t *testing.T) {
		c := natstest.StartCluster(t, 3)
		kvtest.Run(t, kvtest.Factory{Open: open(c.URLs()), MaxKey: natskv.MaxEncodedKey - 3, MaxValue: natstest.MaxPayload - 4<<10})
	})
}

// Partitions are namespaces: one key in two partitions is two records; a scan of the store
// sees every partition; Locate finds a key's partition; Watch reports keys with partitions.
func TestPartitionsAreNamespaces(t *testing.T) {
	srv := natstest.Start(t)
	s, err := natskv.Open(context.Background(), natskv.Options{URL: srv.URL, Prefix: "ns"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a, b := s.Partition(1, nil), s.Partition(2, nil)
	var mu sync.Mutex
	seen := map[string]natskv.WatchEntry{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kvtest.MustCommit(t, a, kvtest.Put("session/x", "in a"))
	ready, err := s.Watch(ctx, []string{"session"}, func(e natskv.WatchEntry) {
		mu.Lock()
		seen[string(e.Key)] = e
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-ready:
	case <-time.After(5 * time.Second):
		t.Fatal("watch not ready")
	}
	mu.Lock()
	if e := seen["session/x"]; e.Partition != "1" || e.Deleted {
		t.Fatalf("watch's initial value: %+v", e)
	}
	mu.Unlock()
	kvtest.WantValue(t, a, "session/x", "in a")
	if _, err := b.Get([]byte("session/x")); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Fatalf("partition 2 sees partition 1's record: %v", err)
	}
	if p, ok, err := s.Locate([]byte("session/x")); err != nil || !ok || p != "1" {
		t.Fatalf("Locate: %q %v %v", p, ok, err)
	}
	// Move it: the delete first, then the put, so the newest record is the live one.
	kvtest.MustCommit(t, a, persist.Op{Key: []byte("session/x"), Delete: true})
	kvtest.MustCommit(t, b, kvtest.Put("session/x", "in b"))
	if p, ok, err := s.Locate([]byte("session/x")); err != nil || !ok || p != "2" {
		t.Fatalf("Locate after the move: %q %v %v", p, ok, err)
	}
	if keys := kvtest.ScanKeys(t, s, "session/"); len(keys) != 1 {
		t.Fatalf("a scan of every partition: %v", keys)
	}
	if keys := kvtest.ScanKeys(t, a, "session/"); len(keys) != 0 {
		t.Fatalf("partition 1 after the move: %v", keys)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		e := seen["session/x"]
		mu.Unlock()
		if e.Partition == "2" && !e.Deleted {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("watch did not report the move: %+v", e)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// And back the way node's mover moves a session: the put in its new partition first, then
	// the delete from its old one, newer than the live record in another partition.
	kvtest.MustCommit(t, a, kvtest.Put("session/x", "back in a"))
	kvtest.MustCommit(t, b, persist.Op{Key: []byte("session/x"), Delete: true})
	if p, ok, err := s.Locate([]byte("session/x")); err != nil || !ok || p != "1" {
		t.Fatalf("Locate after the move back: %q %v %v", p, ok, err)
	}
	var values []string
	if err := s.Scan([]byte("session/"), func(_, v []byte) error { values = append(values, string(v)); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(values) != 1 || values[0] != "back in a" {
		t.Fatalf("a scan of every partition after the move back: %q", values)
	}
	if _, ok, err := s.Locate([]byte("session/none")); ok || err != nil {
		t.Fatalf("Locate of a missing key: %v %v", ok, err)
	}
}

// A former owner cannot write once a new owner wrote its fence: its commits (single writes
// and batches) are refused with ErrNodeUnavailable, at once, not retried; a view whose
// Fencer fails sends nothing; the stale owner's Fencer is told.
func TestFencing(t *testing.T) {
	srv := natstest.Start(t)
	s, err := natskv.Open(context.Background(), natskv.Options{URL: srv.URL, Prefix: "fence"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	old := newOwner(t, s, 3)
	v := s.Partition(3, old)
	kvtest.MustCommit(t, v, kvtest.Put("k/1", "old"))
	// A new owner takes the partition (its own fence); the old one does not know yet.
	newer := &owner{s: s, p: 3}
	newer.acquire(t)
	nv := s.Partition(3, newer)
	for _, ops := range [][]persist.Op{
		{kvtest.Put("k/1", "stale")},
		{kvtest.Put("k/1", "stale"), kvtest.Put("k/2", "stale")},
		{persist.IfAbsentOp([]byte("k/3")), kvtest.Put("k/3", "stale")},
	} {
		began := time.Now()
		err := v.Commit(context.Background(), ops...)
		if !errors.Is(err, domain.ErrNodeUnavailable) {
			t.Fatalf("stale owner's commit of %d ops: %v, want ErrNodeUnavailable", len(ops), err)
		}
		if d := time.Since(began); d > time.Second {
			t.Fatalf("a fenced commit took %v (retried?)", d)
		}
	}
	if old.fenced.Load() == 0 {
		t.Fatal("the stale owner's Fencer was never told its fence moved")
	}
	kvtest.WantValue(t, nv, "k/1", "old")
	kvtest.MustCommit(t, nv, kvtest.Put("k/1", "new"), kvtest.Put("k/2", "new"))
	kvtest.WantValue(t, v, "k/2", "new")
	newer.lost.Store(true)
	if err := nv.Commit(context.Background(), kvtest.Put("k/1", "x")); !errors.Is(err, domain.ErrNodeUnavailable) {
		t.Fatalf("commit without a lease: %v", err)
	}
	// A partition's view closed (the partition left this node): its calls store nothing and
	// say so as the fence does (the request runs again on the next owner); still ErrClosed.
	if err := nv.Close(); err != nil {
		t.Fatal(err)
	}
	for what, err := range map[string]error{"commit": nv.Commit(context.Background(), kvtest.Put("k/1", "y")), "get": func() error { _, err := nv.Get([]byte("k/1")); return err }()} {
		if !errors.Is(err, domain.ErrNodeUnavailable) || !errors.Is(err, persist.ErrClosed) {
			t.Fatalf("%s on a closed partition view: %v, want ErrNodeUnavailable and ErrClosed", what, err)
		}
	}
}

// Concurrent commits of a few partitions on a three-node cluster: every one lands (the
// dispatcher never has two groups checking one fence in flight, which the server would refuse)
// and they share batches.
func TestFencedConcurrency(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-node cluster: not in -short")
	}
	c := natstest.StartCluster(t, 3)
	s, err := natskv.Open(context.Background(), natskv.Options{URL: c.URLs(), Prefix: "conc", Replicas: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var views []*natskv.View
	for p := range 4 {
		o := newOwner(t, s, p)
		views = append(views, s.Partition(p, o))
	}
	const workers, each = 32, 20
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			v := views[w%len(views)]
			for i := range each {
				k := fmt.Sprintf("c/%d/%d", w, i)
				if err := v.Commit(context.Background(), kvtest.Put(k, "v"), kvtest.Put(k+"/x", "v")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	groups, _ := s.Stats()
	t.Logf("%d commits in %d groups", workers*each, groups)
	if n := len(kvtest.ScanKeys(t, s, "c/")); n != 2*workers*each {
		t.Fatalf("scan found %d keys, want %d", n, 2*workers*each)
	}

	// Group commit per node, not per stream (on the same cluster): a store whose partitions
	// spread over three replicated streams keeps two batches in flight in all, and every one-
	// message commit joins a batch, so its commits go out in as few groups as one stream's.
	spread, err := natskv.Open(context.Background(), natskv.Options{URL: c.URLs(), Prefix: "conc3", Replicas: 3, Streams: 3, Partitions: 6})
	if err != nil {
		t.Fatal(err)
	}
	defer spread.Close()
	if spread.Streams() != 3 {
		t.Fatalf("%d streams, want 3", spread.Streams())
	}
	views = views[:0]
	for p := range 6 {
		views = append(views, spread.Partition(p, newOwner(t, spread, p)))
	}
	g0, _ := spread.Stats()
	for w := range workers {
		wg.Go(func() {
			v := views[w%len(views)]
			for i := range each {
				if err := v.Commit(context.Background(), kvtest.Put(fmt.Sprintf("s/%d/%d", w, i), "v")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	g1, _ := spread.Stats()
	t.Logf("3 streams: %d one-message commits in %d groups, at most %d batches at once", workers*each, g1-g0, spread.PeakBatches())
	if peak := spread.PeakBatches(); peak > 2 {
		t.Fatalf("%d batches in flight at once over 3 streams, want at most 2 (the node's budget)", peak)
	}
	if g1-g0 > workers*each/3 {
		t.Fatalf("%d one-message commits over 3 streams went out as %d groups: not merged", workers*each, g1-g0)
	}
	if n := len(kvtest.ScanKeys(t, spread, "s/")); n != workers*each {
		t.Fatalf("scan found %d keys, want %d", n, workers*each)
	}

	// One stream's trouble holds its own partitions' commits only: while stream 1's groups
	// hang (as while it elects a leader), holding the node's two batch slots, partition 0's
	// and 2's commits (streams 0 and 2) go on: a group in flight past stallAfter leaves the
	// node's budget.
	release, held := natskv.HoldGroups(1)
	stuck := make(chan error, 2)
	for i, p := range []int{1, 4} { // stream 1: two groups, each sent once the one before is held
		go func() {
			stuck <- views[p].Commit(context.Background(), kvtest.Put("held", "v"), kvtest.Put("held/x", "v"))
		}()
		deadline := time.Now().Add(5 * time.Second)
		for held() < i+1 {
			if time.Now().After(deadline) {
				release()
				t.Fatalf("%d of stream 1's groups held, want %d", held(), i+1)
			}
			time.Sleep(time.Millisecond)
		}
	}
	// The node's two batch slots are stream 1's now: the others' commits go once those groups
	// are in flight past stallAfter and leave the node's budget (within the 5 s below).
	others := make(chan error, 1)
	go func() {
		for _, p := range []int{0, 2, 3, 5} {
			if err := views[p].Commit(context.Background(), kvtest.Put("other", "v"), kvtest.Put("other/x", "v")); err != nil {
				others <- err
				return
			}
		}
		others <- nil
	}()
	select {
	case err := <-others:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		release()
		t.Fatal("the other streams' commits waited for stream 1's held groups")
	}
	if len(stuck) != 0 {
		t.Fatal("stream 1's commits went through while its groups were held")
	}
	release()
	for range 2 {
		if err := <-stuck; err != nil {
			t.Fatal(err)
		}
	}

	// Monotonic reads (on the same cluster): a record a fenced view has read raises its floor,
	// so its later reads never come from a replica that has not applied it (a commit whose
	// answer was lost raised nothing: an Idempotency-Key's record read from one replica, then
	// the campaign committed with it missed on another).
	v := s.Partition(5, newOwner(t, s, 5))
	if _, err := v.Get([]byte("m/absent")); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Fatal(err)
	}
	before := v.Floor()
	if err := s.Partition(5, nil).Commit(context.Background(), kvtest.Put("m/other", "v")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := v.Get([]byte("m/other"))
		if err == nil {
			break
		}
		if !errors.Is(err, domain.ErrRecordNotFound) || time.Now().After(deadline) {
			t.Fatalf("another writer's record: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if after := v.Floor(); after <= before {
		t.Fatalf("a record read left the view's floor at %d (it was %d before the write)", after, before)
	}
}

// Parts handed to the store together (a node's shared outcome writer) are each committed with
// their own partition's fence (one-message parts as pipelined publishes, the others as atomic
// batches): a partition taken over, one whose lease is lost and one whose
// view is closed have their parts refused, the others' parts land.
func TestCommitPartsKeepsEachFence(t *testing.T) {
	srv := natstest.Start(t)
	s, err := natskv.Open(context.Background(), natskv.Options{URL: srv.URL, Prefix: "parts"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	live, taken, lost, closed := newOwner(t, s, 1), newOwner(t, s, 2), newOwner(t, s, 3), newOwner(t, s, 4)
	vLive, vTaken, vLost, vClosed := s.Partition(1, live), s.Partition(2, taken), s.Partition(3, lost), s.Partition(4, closed)
	(&owner{s: s, p: 2}).acquire(t) // another node takes partition 2: its old fence is stale
	lost.lost.Store(true)
	if err := vClosed.Close(); err != nil {
		t.Fatal(err)
	}
	parts := []persist.Part{
		{KV: vLive, Ops: []persist.Op{kvtest.Put("k/1", "a")}},
		{KV: vTaken, Ops: []persist.Op{kvtest.Put("k/1", "stale"), kvtest.Put("k/2", "stale")}},
		{KV: vLost, Ops: []persist.Op{kvtest.Put("k/1", "stale")}},
		{KV: vClosed, Ops: []persist.Op{kvtest.Put("k/1", "stale")}},
		{KV: vLive, Ops: []persist.Op{kvtest.Put("k/2", "b"), kvtest.Put("k/3", "c")}},
		{KV: s, Ops: []persist.Op{kvtest.Put("k/9", "store")}},
		{KV: vTaken, Ops: []persist.Op{kvtest.Put("k/1", "stale")}}, // one message: pipelined
	}
	errs := make([]error, len(parts))
	s.CommitParts(context.Background(), parts, errs)
	for i, want := range []bool{true, false, false, false, true, true, false} {
		if ok := errs[i] == nil; ok != want {
			t.Fatalf("part %d: %v (want success %v)", i, errs[i], want)
		}
		if !want && !errors.Is(errs[i], domain.ErrNodeUnavailable) {
			t.Fatalf("part %d refused with %v, want ErrNodeUnavailable", i, errs[i])
		}
	}
	if taken.fenced.Load() == 0 {
		t.Fatal("the taken partition's Fencer was never told its fence moved")
	}
	kvtest.WantValue(t, vLive, "k/1", "a")
	kvtest.WantValue(t, vLive, "k/3", "c")
	kvtest.WantValue(t, s, "k/9", "store")
	for p := 2; p <= 4; p++ {
		kvtest.WantAbsent(t, s.Partition(p, nil), "k/1")
	}
}

// The outboxes of a store's partitions share the store's outcome writer; a partition taken
// over has its outcomes refused (each outcome carries its own partition's fence), the others'
// are written.
func TestSharedOutcomeWriterKeepsEachFence(t *testing.T) {
	srv := natstest.Start(t)
	s, err := natskv.Open(context.Background(), natskv.Options{URL: srv.URL, Prefix: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 8
	views := make([]*natskv.View, n)
	boxes := make([]*persist.Outbox, n)
	for p := range n {
		views[p] = s.Partition(p, newOwner(t, s, p))
		boxes[p] = persist.NewOutbox(views[p])
	}
	if views[0].OutcomeWriter() != views[1].OutcomeWriter() || views[0].OutcomeWriter() != s.OutcomeWriter() {
		t.Fatal("the partitions' views do not share the store's outcome writer")
	}
	(&owner{s: s, p: 5}).acquire(t) // another node takes partition 5
	now := time.Now()
	errs := make(chan error, 4*n)
	for round := range 4 {
		for p := range n {
			e := domain.OutboxEntry{ID: "m" + string(rune('a'+p)) + string(rune('0'+round)), UserID: "u", CreatedAt: domain.MillisOf(now), Status: domain.MsgSent, UpdatedAt: domain.MillisOf(now)}
			boxes[p].Settle(e, func(err error) { errs <- err })
		}
	}
	for _, b := range boxes {
		b.Flush()
	}
	close(errs)
	var ok, refused int
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, domain.ErrNodeUnavailable):
			refused++
		default:
			t.Fatalf("outcome: %v", err)
		}
	}
	if ok != 4*(n-1) || refused != 4 {
		t.Fatalf("%d outcomes written, %d refused; want %d and 4 (partition 5's)", ok, refused, 4*(n-1))
	}
	for p := range n {
		_, err := views[p].Get([]byte("outbox_status/m" + string(rune('a'+p)) + "0"))
		if p == 5 {
			if !errors.Is(err, domain.ErrRecordNotFound) {
				t.Fatalf("the taken partition's outcome: %v, want not found", err)
			}
		} else if err != nil {
			t.Fatalf("partition %d's outcome: %v", p, err)
		}
	}
}
