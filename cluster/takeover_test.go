package cluster

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/goccy/go-json"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gateway/gateway/cluster/clustertest"
)

// leaseLog records every entry of a cluster's leases bucket, per partition, in order.
type leaseLog struct {
	mu      sync.Mutex
	entries map[int][]leaseEntry
}

type leaseEntry struct {
	op       jetstream.KeyValueOp
	instance string
	rev      uint64
}

func watchLeases(t *testing.T, c *clustertest.Cluster, tc *testCluster) *leaseLog {
	t.Helper()
	js, err := jetstream.New(conn(t, c))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	kv, err := js.KeyValue(ctx, tc.prefix+"_leases")
	if err != nil {
		t.Fatal(err)
	}
	w, err := kv.WatchAll(ctx)
	if err != nil {
		t.Fatal(err)
	}
	l := &leaseLog{entries: map[int][]leaseEntry{}}
	go func() {
		for e := range w.Updates() {
			if e == nil {
				continue
			}
			p, ok := partitionOfKey(e.Key())
			if !ok {
				continue
			}
			le := leaseEntry{op: e.Operation(), rev: e.Revision()}
			var v leaseValue
			if e.Operation() == jetstream.KeyValuePut && json.Unmarshal(e.Value(), &v) == nil {
				le.instance = v.Instance
			}
			l.mu.Lock()
			l.entries[p] = append(l.entries[p], le)
			l.mu.Unlock()
		}
	}()
	return l
}

// after returns partition p's entries from the last one written by instance on (nil if it
// wrote none).
func (l *leaseLog) after(p int, instance string) []leaseEntry {
	l.mu.Lock()
	defer l.mu.Unlock()
	es := l.entries[p]
	for i := len(es) - 1; i >= 0; i-- {
		if es[i].instance == instance {
			return append([]leaseEntry(nil), es[i:]...)
		}
	}
	return nil
}

// A killed node's leases are taken by the survivors at their TTL, by a write expecting the
// revision they saw last, not once the server has expired them: the survivors count takes by a
// write over a lease (tookOver), and in the leases bucket each orphan's next entry after the
// dead node's last renewal is its new holder's put (before, the server's expiry came first: a
// lapse marker, and only then the create). A partition the dead node let go before the kill
// (lost to its fence, handed back by balancing: a delete) is not an orphan.
func testKilledNodesLeasesTakenOver(t *testing.T, c *clustertest.Cluster) {
	tc := newTestCluster(t, c)
	a, b, d := tc.start("a:1"), tc.start("b:1"), tc.start("c:1")
	eventually(t, settleWithin, "fair shares", tc.settled(a, b, d))
	log := watchLeases(t, c, tc)
	running := tc.eng.runningOf(d.ID())
	eventually(t, 10*time.Second, "the watch has the dead node's leases", func() bool {
		for _, p := range running {
			if log.after(p, d.instance) == nil {
				return false
			}
		}
		return true
	})
	overBefore := a.tookOver.Load() + b.tookOver.Load()
	killed := time.Now()
	tc.kill(d)
	eventually(t, testLeaseTTL+10*time.Second, "the dead node's partitions on survivors", tc.settled(a, b))
	took := time.Since(killed)
	orphans := 0
	for _, p := range running {
		var es []leaseEntry
		eventually(t, 5*time.Second, "the entry after the dead node's last in the watch", func() bool {
			es = log.after(p, d.instance)
			return len(es) >= 2
		})
		if es[1].op == jetstream.KeyValueDelete {
			continue // let go by the dead node itself before the kill
		}
		orphans++
		if next := es[1]; next.op != jetstream.KeyValuePut || (next.instance != a.instance && next.instance != b.instance) {
			t.Errorf("partition %d: after the dead node's last renewal (revision %d) came %v by %q, want the new holder's put over it", p, es[0].rev, next.op, next.instance)
		}
	}
	if orphans == 0 {
		t.Fatal("the dead node held no partition at the kill")
	}
	if over := a.tookOver.Load() + b.tookOver.Load() - overBefore; over < int64(orphans) {
		t.Errorf("%d of the %d orphans taken by a write over the lease, want all", over, orphans)
	}
	t.Logf("failover of %d partitions: %v", orphans, took)
}

// A take over a lease past its TTL expects the revision this node's view has: a lease
// renewed since (a view behind: its watcher lost its server, or was slow) is not taken, and its
// holder keeps it. (The node that tries is the holder itself here: another node would be
// handed partitions by balancing meanwhile; the write is refused all the same.)
func testTakeOverExpectsTheRevisionSeen(t *testing.T, c *clustertest.Cluster) {
	tc := newTestCluster(t, c)
	a := tc.start("a:1")
	eventually(t, settleWithin, "a owns all", tc.settled(a))
	if !a.takeOver {
		t.Fatal("a leases bucket made by this release is not taken over by revision")
	}
	// A take written at the latest (takeOverWithin), with its write's timeout, lands at least
	// a TTL before the server's expiry (the bucket's MaxAge): the room for clocks and lag.
	st, err := a.leases.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if room := st.TTL() - (testLeaseTTL + testLeaseTTL/2) - max(a.renewEvery, time.Second); room < testLeaseTTL {
		t.Fatalf("a take lands %v before the server's expiry (MaxAge %v), want at least a TTL (%v)", room, st.TTL(), testLeaseTTL)
	}
	la, ok := a.Lease(0)
	if !ok {
		t.Fatal("a does not hold partition 0")
	}
	// What a view behind has: the lease at a revision before its last renewal, seen two TTLs ago.
	eventually(t, 10*time.Second, "partition 0 renewed", func() bool { l, ok := a.Lease(0); return ok && l.Revision > la.Revision })
	now := time.Now()
	stale := &leaseSeen{value: leaseValue{V: wireVersion, Node: "b:1", Instance: "gone", State: leaseActive}, rev: la.Revision, seen: now.Add(-testLeaseTTL - testLeaseTTL/4)}
	val := []byte(`{"v":1,"node":"b:1","instance":"other","state":"starting"}`)
	if _, err := a.claimOver(context.Background(), 0, val, now, stale); !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		t.Fatalf("take over a lease renewed since: %v, want a revision mismatch", err)
	}
	l, ok := a.Lease(0)
	if !ok {
		t.Fatal("the holder lost partition 0 to a take expecting an old revision")
	}
	// A direct get may be answered by a replica a renewal behind: asked again for a while (a
	// take that went through would stay the taker's far longer: its holder's renewals fail).
	eventually(t, testLeaseTTL/2, "partition 0's lease the holder's after the refused take", func() bool {
		e, err := a.leases.Get(context.Background(), leaseKey(0))
		if err != nil {
			return false
		}
		var v leaseValue
		return json.Unmarshal(e.Value(), &v) == nil && v.Instance == a.instance && e.Revision() >= l.Revision
	})
	// Near the server's expiry (seen here, or written by the server's clock, more than 1.5
	// TTLs ago: the take's write, with its timeout, could land by the expiry's lapse marker
	// less than a TTL of clock skew and lag): not written over, whatever the revision (the
	// marker could purge the take), but created, which the server refuses while the lease is in.
	cur, ok := a.Lease(0)
	if !ok {
		t.Fatal("a does not hold partition 0")
	}
	late := *stale
	lateBy := testLeaseTTL + testLeaseTTL/2 + testLeaseTTL/8
	late.rev, late.seen = cur.Revision, now.Add(-lateBy)
	old := *stale
	old.rev, old.written = cur.Revision, now.Add(-lateBy)
	for what, s := range map[string]*leaseSeen{"seen": &late, "written": &old} {
		if _, err := a.claimOver(context.Background(), 0, val, now, s); !errors.Is(err, jetstream.ErrKeyExists) {
			t.Fatalf("take over a lease %s %v ago: %v, want a create refused", what, lateBy, err)
		}
	}
	if _, ok := a.Lease(0); !ok {
		t.Fatal("the holder lost partition 0 to a take near the server's expiry")
	}
	// Seen less than a TTL ago: not even tried.
	fresh := *stale
	fresh.seen = now.Add(-testLeaseTTL / 2)
	if _, err := a.claimOver(context.Background(), 0, val, now, &fresh); !errors.Is(err, errLeaseAlive) {
		t.Fatalf("take over a lease seen %v ago: %v, want errLeaseAlive", testLeaseTTL/2, err)
	}
}

// A holder past its fence deadline (a stall, renewals that failed for a TTL) does not renew:
// it is fenced. A renewal that late could land beside the server's expiry, and the expiry's
// lapse marker (a rollup of the key, no condition) purge it while the holder went on.
func testLateRenewalNotWritten(t *testing.T, c *clustertest.Cluster) {
	tc := newTestCluster(t, c)
	a := tc.start("a:1")
	eventually(t, settleWithin, "a owns all", tc.settled(a))
	a.frozen.Store(true) // the loop stands still: this test renews and fences by hand
	p := a.parts[0]
	// A renewal the loop sent before it stood still holds p.wmu until its answer sets p.rev and
	// p.renewed: waited for here, so the revision read is the last one and the deadline set
	// back is not written over (a renewal after this finds it past and writes nothing).
	p.wmu.Lock()
	p.mu.Lock()
	rev := p.rev
	p.renewed = time.Now().Add(-testLeaseTTL) // past the fence deadline
	p.mu.Unlock()
	p.wmu.Unlock()
	a.renew(p)
	e, err := a.leases.Get(context.Background(), leaseKey(0))
	if err != nil {
		t.Fatal(err)
	}
	if e.Revision() != rev {
		t.Fatalf("a lease past its fence deadline renewed: revision %d → %d, want no write", rev, e.Revision())
	}
	a.fenceLapsed()
	if _, ok := a.Lease(0); ok {
		t.Fatal("a still holds partition 0 past its fence deadline")
	}
	// Its loop going again, the partition comes back (the lease is a's, taken anew).
	a.frozen.Store(false)
	eventually(t, 3*testLeaseTTL+5*time.Second, "a holds partition 0 again", func() bool { _, ok := a.Lease(0); return ok })
}
