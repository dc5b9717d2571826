package cluster

import (
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gateway/gateway/domain"
)

// Acquisition is one taking of a partition by this node (DESIGN.md section 19): the fence token
// captured when the node took it is the only one the partition's engine may write and send
// under. A later acquisition of the same partition by the same node (it lost the partition and
// took it back) is another Acquisition, so an engine of the earlier one that is still stopping
// cannot pass the new fence: its writes fail (Fence) and its network refuses (Valid).
//
// It is what persist/natskv's partition view takes as its Fencer, and what the engine's network
// guard asks. Safe for concurrent use.
type Acquisition struct {
	n     *Node
	p     *part
	epoch uint64
	fence []uint64
}

// Acquisition returns the acquisition of partition p this node holds now (starting, active or
// releasing, within its fence deadline). Handler.Acquire gets it for the partition it starts.
func (n *Node) Acquisition(p int) (*Acquisition, bool) {
	if p < 0 || p >= len(n.parts) {
		return nil, false
	}
	pt := n.parts[p]
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.state == stFree || !pt.fenced {
		return nil, false
	}
	return &Acquisition{n: n, p: pt, epoch: pt.epoch, fence: pt.fence}, true
}

// Partition is the acquired partition.
func (a *Acquisition) Partition() int { return a.p.id }

// Valid tells whether the partition is still this acquisition's: not lost, not taken again
// since, and within the lease's fence deadline.
func (a *Acquisition) Valid() bool {
	a.p.mu.Lock()
	defer a.p.mu.Unlock()
	return a.validLocked()
}

func (a *Acquisition) validLocked() bool {
	return a.p.epoch == a.epoch && a.p.state != stFree && a.p.fenced && a.n.freshLocked(a.p)
}

// Fence returns the acquisition's fence token (persist/natskv.Fencer), or
// domain.ErrNodeUnavailable once the partition is no longer this acquisition's to write.
func (a *Acquisition) Fence() ([]uint64, error) {
	if !a.Valid() {
		return nil, fmt.Errorf("%w: partition %d is not this node's to write (lost or taken again)", domain.ErrNodeUnavailable, a.p.id)
	}
	return a.fence, nil
}

// Fenced is told by the store when the server refused a commit because the partition's fence
// moved: another node wrote it, so this acquisition is over. The node gives the lease up at
// once (the engine is stopped, the lease deleted if it is still this node's), so balancing
// takes the partition again with a new fence instead of answering 503 until a restart.
func (a *Acquisition) Fenced() {
	n, p := a.n, a.p
	p.mu.Lock()
	mine := a.validLocked() || (p.epoch == a.epoch && p.state != stFree)
	p.mu.Unlock()
	if !mine {
		return
	}
	n.log.Warn("a commit was refused: the partition's fence moved; giving the lease up", "partition", p.id)
	n.lose(p, "a commit was refused by the partition's fence")
	go n.dropLease(p)
}

// dropLease deletes p's lost lease, unless this node holds p anew by then (a revision-checked
// delete of the lost hold's last revision: a lease written since, by another node or by this
// one's next take, stays). The acquisition's epoch is not what it checks: a start that failed
// because its commit was refused bumps the epoch when it ends, and the lease then lapsed
// (its TTL and the server's expiry: 2-2.5 s without an owner) instead of being deleted.
func (n *Node) dropLease(p *part) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.mu.Lock()
	rev, same := p.rev, p.state == stFree
	p.mu.Unlock()
	if !same || n.ctx.Err() != nil {
		return
	}
	ctx, cancel := n.opCtx()
	defer cancel()
	_ = n.leases.Delete(ctx, leaseKey(p.id), jetstream.LastRevision(rev))
	n.wake()
}
