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
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		began = time.Now()
		n.waitHandedOver(ctx, []int{0, p})
		cancel()
		if took := time.Since(began); took < 300*time.Millisecond {
			t.Fatalf("partition %d not served elsewhere yet: waitHandedOver returned after %v", p, took)
		}
	}
}
