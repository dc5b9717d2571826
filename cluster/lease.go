package cluster

import (
	"context"
	"errors"
	"hash/fnv"
	"slices"
	"sync"
	"time"

	"github.com/goccy/go-json"
	"github.com/nats-io/nats.go/jetstream"
)

// ReleaseWait bounds how long a graceful hand-over waits for the partition's requests in
// flight before calling Handler.Release anyway.
const ReleaseWait = 30 * time.Second

func (n *Node) leaseValue(p *part, state string) []byte {
	b, _ := json.Marshal(leaseValue{V: wireVersion, Node: n.cfg.NodeID, Instance: n.instance, State: state, Since: p.since.UTC()})
	return b
}

func stateName(s pstate) string {
	switch s {
	case stStarting:
		return leaseStarting
	case stReleasing:
		return leaseReleasing
	}
	return leaseActive
}

// renewAll renews every lease held here, concurrently (one revision-checked write each).
func (n *Node) renewAll() {
	var wg sync.WaitGroup
	for _, p := range n.parts {
		p.mu.Lock()
		held := p.heldLocked()
		p.mu.Unlock()
		if held {
			wg.Add(1)
			go func() { defer wg.Done(); n.renew(p) }()
		}
	}
	wg.Wait()
}

// renew writes p's lease with the revision it has; the time the write was sent becomes the
// base of the fence deadline (the server stamps it later, so it expires it later).
func (n *Node) renew(p *part) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.mu.Lock()
	if !p.heldLocked() || !n.freshLocked(p) {
		// Past its fence deadline (a stall, renewals that failed for a TTL): not renewed, but
		// fenced (fenceLapsed). Another node may be taking it; and a renewal this late could
		// land beside the server's expiry, whose lapse marker (a rollup, no condition) would
		// purge it while this node went on as the holder.
		p.mu.Unlock()
		return
	}
	rev, val := p.rev, n.leaseValue(p, stateName(p.state))
	p.mu.Unlock()

	ctx, cancel := n.opCtx()
	defer cancel()
	sent := time.Now()
	newRev, err := n.leases.Update(ctx, leaseKey(p.id), val, rev)
	n.leaseWrite(err)
	if err == nil {
		p.mu.Lock()
		if p.rev == rev {
			// Also once lost meanwhile: the lost lease's delete (dropLease) expects this revision.
			p.rev = newRev
			if p.heldLocked() {
				p.renewed = sent
			}
		}
		p.mu.Unlock()
		return
	}
	if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		n.log.Debug("renew", "partition", p.id, "err", err)
		return // unreachable for now: the fence deadline decides
	}
	// A mismatch is a lost lease, unless the check only met a write in flight (clustered
	// streams refuse a check on a subject with a proposal pending) and the key is unchanged.
	e, gerr := n.leases.Get(ctx, leaseKey(p.id))
	if gerr == nil && e.Revision() == rev {
		return
	}
	var v leaseValue
	if gerr == nil && json.Unmarshal(e.Value(), &v) == nil && v.Instance == n.instance {
		// An earlier renewal that timed out here landed after all: the lease is still ours.
		// Its send time is not known, so the fence deadline stays where it was until the
		// next renewal moves it.
		p.mu.Lock()
		if p.heldLocked() && p.rev == rev {
			p.rev = e.Revision()
		}
		p.mu.Unlock()
		return
	}
	if gerr != nil && !errors.Is(gerr, jetstream.ErrKeyNotFound) && !errors.Is(gerr, jetstream.ErrKeyDeleted) {
		return
	}
	n.lose(p, "the lease was taken or lapsed")
}

// fenceLapsed fences every partition past its fence deadline.
func (n *Node) fenceLapsed() {
	for _, p := range n.parts {
		p.mu.Lock()
		lapsed := p.heldLocked() && !n.freshLocked(p)
		p.mu.Unlock()
		if lapsed {
			n.lose(p, "the lease was not renewed in time")
		}
	}
}

// lose fences p: it is no longer this node's, and the engine stops it without writing. A
// take or release under way settles with the engine itself (one call at a time per partition).
func (n *Node) lose(p *part, why string) {
	p.mu.Lock()
	if !p.heldLocked() {
		p.mu.Unlock()
		return
	}
	busy := p.busy
	p.state, p.previous = stFree, true
	if p.idle != nil {
		close(p.idle)
		p.idle = nil
	}
	p.mu.Unlock()
	n.metrics.handover("lost")
	n.log.Warn("partition fenced", "partition", p.id, "why", why)
	if !busy {
		n.cfg.Handler.Fenced(p.id)
	}
}

// share is node me's fair share of n partitions among the live nodes: n/len, and one more
// for the first n%len nodes in id order, so the shares add up to n and every node computes
// the same ones from the same view.
func share(me string, live []string, n int) int {
	i, found := slices.BinarySearch(live, me)
	if !found || len(live) == 0 {
		return 0
	}
	s := n / len(live)
	if i < n%len(live) {
		s++
	}
	return s
}

// balance takes free partitions up to this node's fair share and hands back those above it.
func (n *Node) balance() {
	if n.ctx.Err() != nil {
		return
	}
	n.fenceLapsed() // never hand over (or count) a partition that is no longer ours
	now := time.Now()
	live := n.view.liveNodes(now)
	if !n.leaving.Load() && !slices.Contains(live, n.cfg.NodeID) {
		live = append(live, n.cfg.NodeID) // our own heartbeat may not have come back yet
		slices.Sort(live)
	}
	want := 0
	if !n.leaving.Load() {
		want = share(n.cfg.NodeID, live, n.cfg.Partitions)
	}
	held, releasing := 0, 0
	var active []*part
	for _, p := range n.parts {
		p.mu.Lock()
		switch {
		case p.state == stStarting || (p.state == stFree && p.busy): // taking
			held++
		case p.state == stActive:
			held++
			if !p.busy {
				active = append(active, p)
			}
		case p.state == stReleasing:
			releasing++
		}
		p.mu.Unlock()
	}
	switch {
	case held < want:
		for _, p := range n.candidates(now, want-held) {
			n.goBackground(func() { n.take(p) })
		}
	case held > want && releasing == 0:
		// Hand back the partitions taken last, a few at a time: their requests are held
		// meanwhile, so handing back everything at once would hold them all.
		slices.SortFunc(active, func(a, b *part) int { return b.since.Compare(a.since) })
		k := min(held-want, len(active), n.cfg.Parallel)
		if n.leaving.Load() {
			k = len(active)
		}
		for _, p := range active[:k] {
			p.mu.Lock()
			p.busy = true
			p.mu.Unlock()
			n.goBackground(func() { n.release(p) })
		}
	}
}

// candidates picks up to k partitions to take now and marks them busy: free here and free
// in the view (never held, released, or lapsed). A lapsed lease whose holder still
// heartbeats is left to it for one more renewal interval (or two after that holder came
// back), and a node whose own writes failed for a while takes only its own for two intervals, so
// after a NATS leader election (every renewal failed for a while) each node retakes its own
// partitions first. This node's former
// partitions come first, then the rest from an offset of its own, so nodes starting together
// do not all race for partition 0.
func (n *Node) candidates(now time.Time, k int) []*part {
	// Recovering: this node's own heartbeats and lease writes failed for a while (a NATS
	// leader election, most likely, which failed everyone's; not one write timing out on a
	// loaded machine): until two renewal intervals after they succeed again it takes back only
	// its own partitions, and so does every other node.
	recovering := n.health.recovering(now, n.outage(), 2*n.renewEvery)
	h := fnv.New32a()
	h.Write([]byte(n.cfg.NodeID))
	off := int(h.Sum32() % uint32(len(n.parts)))
	var first, rest []*part
	for i := range n.parts {
		p := n.parts[(off+i)%len(n.parts)]
		p.mu.Lock()
		ok := p.state == stFree && !p.busy && !now.Before(p.retryAt)
		prev := p.previous
		p.mu.Unlock()
		if !ok {
			continue
		}
		s := n.view.lease(p.id)
		switch {
		case s == nil || s.deleted:
		case n.view.alive(s, now):
			continue
		case s.value.Instance == n.instance:
		case recovering:
			continue
		default:
			// Lapsed, held by another node: taken at once when that node is gone too (a
			// killed node's heartbeat lapses with its leases); while it is alive, left to it
			// for a moment after the lapse, or after it came back (it retakes its own first:
			// NATS, not the node, failed).
			// Alive: its heartbeat seen within two renewal intervals (a killed node's last one
			// is older by then, whichever of its keys the server expired first).
			if up := n.view.nodeUpSince(s.value.Node, now); !up.IsZero() && n.view.nodeFresh(s.value.Node, now, 2*n.renewEvery) &&
				(now.Before(n.view.lapsedAt(s).Add(2*n.renewEvery)) || now.Sub(up) < 2*n.renewEvery) {
				continue
			}
		}
		if prev {
			first = append(first, p)
		} else {
			rest = append(rest, p)
		}
	}
	out := append(first, rest...)
	out = out[:min(k, len(out))]
	for _, p := range out {
		p.mu.Lock()
		p.busy = true
		p.mu.Unlock()
	}
	return out
}

// take creates p's lease (only possible once the previous one lapsed or was released: the
// server refuses the create while the key exists), writes the fence (expecting what it read
// when the lease was taken: a delayed fence write of an earlier acquisition then fails instead
// of locking this one out), and has the engine start the partition.
func (n *Node) take(p *part) {
	select {
	case n.sem <- struct{}{}:
	case <-n.ctx.Done():
		n.settle(p, n.renewEvery)
		return
	}
	defer func() { <-n.sem }()
	ctx, cancel := n.opCtx()
	p.mu.Lock()
	p.since = time.Now()
	val := n.leaseValue(p, leaseStarting)
	p.mu.Unlock()
	sent := time.Now()
	// How long the lease taken went unrenewed as this node saw it (0: free, released or
	// lapsed by the server's marker): the log's measure of how close to its TTL a take comes.
	var unseen time.Duration
	if s := n.view.lease(p.id); s != nil && !s.deleted && !s.lapsed {
		unseen = sent.Sub(s.seen)
	}
	rev, err := n.claimLease(ctx, p.id, val, sent)
	cancel()
	if !errors.Is(err, errLeaseAlive) { // no write was sent
		n.leaseWrite(err)
	}
	if err != nil {
		n.log.Debug("take", "partition", p.id, "err", err)
		retry := n.renewEvery
		if s := n.view.lease(p.id); errors.Is(err, jetstream.ErrKeyExists) && s != nil && !s.deleted && !s.lapsed && !n.view.alive(s, time.Now()) {
			// Past its TTL as seen here, not yet expired by the server: taken when its lapse
			// marker arrives (the view's change wakes balancing), not a renewal interval later.
			retry = 0
		}
		n.settle(p, retry)
		return
	}
	p.mu.Lock()
	p.state, p.rev, p.renewed, p.previous = stStarting, rev, sent, false
	// In the same step as the state: an acquisition of an earlier hold (lost, its engine still
	// stopping) never counts as valid again once the partition is held anew.
	p.epoch++
	p.fence, p.fenced = nil, n.cfg.Fences == nil
	p.mu.Unlock()
	for try := 1; ; try++ {
		a, err := n.acquisition(p, val)
		if err != nil {
			n.log.Warn("fence write failed; giving the partition up", "partition", p.id, "err", err)
			n.giveUp(p, n.renewEvery) // NATS trouble, most likely: soon again
			return
		}
		if a == nil { // fenced meanwhile (the fence write took past the deadline)
			n.giveUp(p, n.renewEvery)
			return
		}
		err = n.cfg.Handler.Acquire(n.ctx, a)
		if err == nil {
			break
		}
		// This acquisition is over: whatever its start left behind can no longer write (its
		// token is not the next one's, which replaces it in the fence) nor send.
		p.mu.Lock()
		p.epoch++
		p.fence, p.fenced = nil, n.cfg.Fences == nil
		starting := p.state == stStarting
		p.mu.Unlock()
		if try >= acquireTries || !starting || n.ctx.Err() != nil {
			n.log.Error("acquire failed; giving the partition up", "partition", p.id, "err", err)
			n.giveUp(p, n.cfg.LeaseTTL)
			return
		}
		// A records stream electing its leader fails a start for a moment: the lease stays
		// held, saying starting, so requests for the partition are held meanwhile (not answered
		// 503 after HoldMax, as they were once the lease was given up while this node's own
		// writes to the leases went through).
		n.log.Warn("acquire failed; trying again with a new fence", "partition", p.id, "try", try, "err", err)
		select {
		case <-n.ctx.Done():
		case <-time.After(n.renewEvery):
		}
	}
	p.mu.Lock()
	if p.state != stStarting { // fenced while starting: the engine stops what it started
		p.busy = false
		p.mu.Unlock()
		n.cfg.Handler.Fenced(p.id)
		return
	}
	p.state, p.busy = stActive, false
	p.mu.Unlock()
	n.renew(p) // the lease says active: requests held for it go ahead
	n.metrics.handover("acquired")
	n.log.Info("partition acquired", "partition", p.id, "took_ms", time.Since(sent).Milliseconds(), "unrenewed_ms", unseen.Milliseconds())
	n.wake()
}

// errLeaseAlive: a take found the lease renewed (as this node's view has it) since it was
// chosen: its holder is alive.
var errLeaseAlive = errors.New("cluster: the lease is alive")

// claimLease takes partition p's lease for this node (now: when the write is sent).
//
// With takeOver (a leases bucket of this release), a lease that exists is taken by a write
// expecting the revision this node's view holds, once that revision was seen here at least a
// TTL ago (by now, on this node's monotonic clock): its holder stopped using the partition
// at its last renewal's send time + TTL − the fence margin on its own monotonic clock, and
// that send came before the write the view saw, so the take comes at least the margin after
// the holder stopped, whatever the clocks of the machines say (only their rates count). A
// renewal that landed meanwhile makes the write fail (the server checks the revision), as
// does another node's take; a revision the server removed (the bucket's MaxAge, leasesMaxAge
// TTLs) too, and the lease is then created. A lease this node comes to near that expiry
// (takeOverWithin) is created too, once the server's lapse marker is in. No clock of a NATS server is in this, and no
// server expiry: the take is as early as the holder's fence allows, not when the server's
// expiry (at least 250 ms apart, proposed through the stream's raft) comes round.
//
// Without takeOver (a bucket an earlier release made: MaxAge the TTL, lapse markers), the
// lease is created: the server refuses that while a lease exists (a lapsed one's key holds the
// server's lapse marker, which a create replaces). It does not write over a lease past its TTL
// there: the lapse marker is a rollup of the key, decided when the old revision expires and
// proposed without a condition, so a lease written between the decision and the marker would
// be purged under its new holder, and a second node would then create it too (seen in
// test-cluster: two nodes started one partition until the first commit of one was refused by
// the other's fence).
func (n *Node) claimLease(ctx context.Context, p int, val []byte, now time.Time) (uint64, error) {
	return n.claimOver(ctx, p, val, now, n.view.lease(p))
}

// claimOver is claimLease over s, the lease as this node's view has it.
func (n *Node) claimOver(ctx context.Context, p int, val []byte, now time.Time, s *leaseSeen) (uint64, error) {
	if !n.takeOver || s == nil || s.deleted || s.lapsed {
		return n.leases.Create(ctx, leaseKey(p), val)
	}
	if n.view.alive(s, now) {
		return 0, errLeaseAlive
	}
	if !n.takeOverWithin(s, now) {
		// Near the server's expiry: its lapse marker (a rollup, no condition) could purge a
		// take written now; the create takes the lease once the marker is in.
		return n.leases.Create(ctx, leaseKey(p), val)
	}
	rev, err := n.leases.Update(ctx, leaseKey(p), val, s.rev)
	if err == nil {
		n.tookOver.Add(1)
	}
	if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
		// Renewed or taken meanwhile (the view will show it), or removed by the server's
		// expiry (a cluster that stopped whole): then the create takes it.
		if _, gerr := n.leases.Get(ctx, leaseKey(p)); errors.Is(gerr, jetstream.ErrKeyNotFound) || errors.Is(gerr, jetstream.ErrKeyDeleted) {
			return n.leases.Create(ctx, leaseKey(p), val)
		}
	}
	return rev, err
}

// takeOverWithin says whether a lease past its TTL is still far enough from the server's
// expiry (leasesMaxAge TTLs after its last write, then a lapse marker) to be taken by a write
// over it: seen here less than 1.5 TTLs ago, and written (by the server's clock, against this
// machine's: a guard for a lease seen first long after its write, as when a cluster that
// stopped whole starts again) as long ago or less. Past it, the marker comes first and the
// lease is taken by a create. A take written by then lands within its write's timeout (opCtx:
// half the default TTL), so by 2 TTLs after the lease's write: a whole TTL before the expiry
// at leasesMaxAge (3) TTLs, the room for the watcher's lag and for this machine's clock
// behind the leases stream leader's (the written guard) or a leader whose clock is ahead.
func (n *Node) takeOverWithin(s *leaseSeen, now time.Time) bool {
	within := n.cfg.LeaseTTL + n.cfg.LeaseTTL/2
	if now.Sub(s.seen) >= within {
		return false
	}
	return s.written.IsZero() || now.Sub(s.written) < within
}

// nextLapse is when the first lease or heartbeat alive in the view now lapses as seen here
// (its last write seen + the TTL): balancing runs then, not at the next tick (a lease the
// server has expired by then is taken at once; else at its lapse marker).
func (n *Node) nextLapse(now time.Time) time.Time {
	v := n.view
	v.mu.Lock()
	defer v.mu.Unlock()
	var next time.Time
	at := func(t time.Time) {
		if t.After(now) && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	for _, s := range v.leases {
		if s != nil && !s.deleted && !s.lapsed {
			at(s.seen.Add(v.ttl))
		}
	}
	for _, s := range v.nodes {
		if !s.deleted {
			at(s.seen.Add(v.ttl))
		}
	}
	return next
}

// acquireTries bounds how often a node starts a partition under one lease before it gives the
// lease up (each try a new acquisition, with a new fence).
const acquireTries = 3

// acquisition begins a new acquisition of p (its lease held, starting, its epoch new: take
// bumps it when it takes the lease and again after a failed start) and, with Config.Fences,
// writes a fence expecting what was read, whose sequences are its token. Nil without error: p
// was fenced or lost meanwhile.
func (n *Node) acquisition(p *part, val []byte) (*Acquisition, error) {
	p.mu.Lock()
	lost := p.state != stStarting
	p.mu.Unlock()
	if lost {
		// Lost meanwhile (a retry waited while the lease lapsed): its fence, perhaps another
		// node's by now, is not written over.
		return nil, nil
	}
	if n.cfg.Fences != nil {
		// The fence's reads and write get a lease TTL (a stream that just elected its leader
		// answers slowly): the acquisition's deadline, not this, bounds its use.
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.LeaseTTL)
		seqs, err := n.cfg.Fences.ReadFence(ctx, p.id)
		if err == nil {
			var seqs2 []uint64
			if seqs2, err = n.cfg.Fences.WriteFence(ctx, p.id, seqs, val); err != nil && ctx.Err() == nil {
				// A replica behind answered the read, or an earlier write landed meanwhile:
				// once more, as the leader has it.
				if seqs, err = n.cfg.Fences.ReadFenceLeader(ctx, p.id); err == nil {
					seqs2, err = n.cfg.Fences.WriteFence(ctx, p.id, seqs, val)
				}
			}
			seqs = seqs2
		}
		cancel()
		if err != nil {
			return nil, err
		}
		p.mu.Lock()
		p.fence, p.fenced = seqs, true
		p.mu.Unlock()
	}
	a, ok := n.Acquisition(p.id)
	if !ok {
		return nil, nil
	}
	return a, nil
}

// opCtx bounds one write to the cluster's buckets.
func (n *Node) opCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(n.ctx, max(n.renewEvery, time.Second))
}

// settle ends a take that did not get the lease; p is not tried again before retry.
func (n *Node) settle(p *part, retry time.Duration) {
	p.mu.Lock()
	p.busy = false
	p.retryAt = time.Now().Add(retry)
	p.mu.Unlock()
}

// giveUp deletes p's lease after a failed start so another node can try; it tries again
// itself after retry (first among its candidates).
func (n *Node) giveUp(p *part, retry time.Duration) {
	p.wmu.Lock()
	defer p.wmu.Unlock()
	p.mu.Lock()
	held, rev := p.heldLocked(), p.rev
	p.state = stFree
	p.busy = false
	p.previous = true
	p.retryAt = time.Now().Add(retry)
	p.mu.Unlock()
	if held {
		ctx, cancel := n.opCtx()
		_ = n.leases.Delete(ctx, leaseKey(p.id), jetstream.LastRevision(rev))
		cancel()
	}
}

// release hands p over gracefully: requests are no longer let in (forwarders hold theirs,
// seeing the lease say releasing), those in flight finish, the engine releases it, and the
// lease is deleted, which the other nodes see at once.
func (n *Node) release(p *part) {
	select {
	case n.sem <- struct{}{}:
	case <-n.ctx.Done():
		n.releaseDropped(p)
		return
	}
	defer func() { <-n.sem }()
	p.mu.Lock()
	if p.state != stActive {
		p.mu.Unlock()
		n.releaseDropped(p)
		return
	}
	p.state = stReleasing
	var idle chan struct{}
	if p.inflight > 0 {
		idle = make(chan struct{})
		p.idle = idle
	}
	p.mu.Unlock()
	// The lease says releasing: forwarders hold new requests, and this node answers those
	// that reach it "moved" (Enter refuses), so they are replayed to the new owner.
	n.renew(p)
	if idle != nil {
		select {
		case <-idle:
		case <-time.After(ReleaseWait):
			n.log.Warn("hand-over: requests still in flight; releasing anyway", "partition", p.id)
		case <-n.ctx.Done():
		}
	}
	if err := n.cfg.Handler.Release(n.ctx, p.id); err != nil {
		n.log.Error("release", "partition", p.id, "err", err)
	}
	p.wmu.Lock()
	p.mu.Lock()
	held, rev := p.state == stReleasing, p.rev
	p.state, p.busy, p.previous = stFree, false, false
	p.retryAt = time.Now().Add(n.cfg.LeaseTTL) // let the node that wants it take it
	p.mu.Unlock()
	if held {
		ctx, cancel := n.opCtx()
		err := n.leases.Delete(ctx, leaseKey(p.id), jetstream.LastRevision(rev))
		cancel()
		if err != nil {
			n.log.Warn("hand-over: delete lease (it lapses instead)", "partition", p.id, "err", err)
		}
	}
	p.wmu.Unlock()
	n.metrics.handover("released")
	n.log.Info("partition released", "partition", p.id)
	n.wake()
}

// releaseDropped ends a release that never began. A partition fenced while its release waited
// (lose skips Handler.Fenced while the partition is busy) is stopped here: the engine would
// otherwise keep running a partition this node no longer holds (and be told to Acquire it again
// when the node retakes it, with the first run still going).
func (n *Node) releaseDropped(p *part) {
	p.mu.Lock()
	lost := p.state == stFree
	p.busy = false
	p.mu.Unlock()
	if lost {
		n.cfg.Handler.Fenced(p.id)
	}
}
