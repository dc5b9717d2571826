package cluster

import (
	"context"
	"log/slog"
	"testing"
	"time"
)

// A leaving node waits for the partitions it handed over to be served elsewhere, and for those
// only: a partition of another node that is still starting (slow to boot after a NATS server's
// loss) does not hold its exit up to HoldMax (a SIGTERM then took 11 s in make test-cluster).
func TestWaitHandedOverWaitsForItsOwnOnly(t *testing.T) {
	ttl := 10 * time.Second
	n := &Node{cfg: Config{NodeID: "me"}, instance: "me-1", log: slog.New(slog.DiscardHandler), view: newView(3, ttl, nil)}
	now := time.Now()
	n.view.nodes["me"] = &nodeSeen{value: nodeValue{ID: "me", Instance: "me-1", State: nodeLeaving}, seen: now}
	n.view.nodes["other"] = &nodeSeen{value: nodeValue{ID: "other", Instance: "other-1", State: nodeUp}, seen: now}
	n.view.leases[0] = &leaseSeen{value: leaseValue{Node: "other", Instance: "other-1", State: leaseActive}, seen: now}
	n.view.leases[1] = &leaseSeen{value: leaseValue{Node: "other", Instance: "other-1", State: leaseStarting}, seen: now}
	n.view.leases[2] = &leaseSeen{value: leaseValue{Node: "me", Instance: "me-1", State: leaseReleasing}, seen: now}

	began := time.Now()
	n.waitHandedOver(context.Background(), []int{0})
	if took := time.Since(began); took < handedOverFor || took > handedOverFor+time.Second {
		t.Fatalf("handed over partition 0 (served elsewhere) while partition 1 of another node starts: waited %v, want about %v", took, handedOverFor)
	}
	// Its own partitions not yet served elsewhere are waited for (here until ctx ends).
	for _, p := range []int{1, 2} {
		began = time.Now() // before the context: its deadline counts from its creation
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		n.waitHandedOver(ctx, []int{0, p})
		cancel()
		if took := time.Since(began); took < 300*time.Millisecond {
			t.Fatalf("partition %d not served elsewhere yet: waitHandedOver returned after %v", p, took)
		}
	}
}

// countingHandler counts the engine calls a node makes.
type countingHandler struct{ acquired, released, fenced int }

func (h *countingHandler) Acquire(context.Context, *Acquisition) error { h.acquired++; return nil }
func (h *countingHandler) Release(context.Context, int) error          { h.released++; return nil }
func (h *countingHandler) Fenced(int)                                  { h.fenced++ }

// A partition fenced while its release waited to begin (balancing marked it busy, so lose left
// telling the engine to the release) is stopped by that release: the engine was told neither
// Release nor Fenced, kept running a partition the node no longer held, and was told to Acquire
// it again when the node took it back (seen under load in TestCluster: "partition 39 acquired by
// a:1 while a:1 runs it").
func TestReleaseOfALostPartitionFencesIt(t *testing.T) {
	for _, stopped := range []bool{false, true} {
		h := &countingHandler{}
		ctx, cancel := context.WithCancel(context.Background())
		n := bareNode(ctx, h, 1)
		p := &part{id: 7, state: stActive, busy: true} // as balance leaves it for its release
		n.lose(p, "the lease was not renewed in time")
		if h.fenced != 0 {
			t.Fatalf("lose told the engine while a release was under way: %+v", h)
		}
		if stopped {
			n.sem <- struct{}{} // the release waits for its turn while the node stops
			cancel()
		}
		n.release(p)
		cancel()
		if h.fenced != 1 || h.released != 0 || p.busy {
			t.Fatalf("node stopping %v: the release of a lost partition told the engine %+v (busy %v), want it fenced once", stopped, *h, p.busy)
		}
	}
	// Not lost: a node aborted (kill -9) while the release waited tells the engine nothing.
	h := &countingHandler{}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	n := bareNode(ctx, h, 0)
	p := &part{id: 7, state: stActive, busy: true}
	n.release(p)
	if *h != (countingHandler{}) || p.busy {
		t.Fatalf("an aborted node's release told the engine %+v (busy %v)", *h, p.busy)
	}
}

// bareNode is a node without NATS, enough to take its partitions' state through lose and release.
func bareNode(ctx context.Context, h Handler, parallel int) *Node {
	n := &Node{cfg: Config{NodeID: "me", Handler: h}, log: slog.New(slog.DiscardHandler), ctx: ctx, sem: make(chan struct{}, parallel)}
	n.metrics, _ = newMetrics(nil, n)
	return n
}
