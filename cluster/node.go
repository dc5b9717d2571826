package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goccy/go-json"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gateway/gateway/domain"
)

// Start-up refusals (node.Open returns them; the gateway prints them and exits 1).
var (
	// ErrDuplicateNode: a live node already runs under this node id.
	ErrDuplicateNode = errors.New("a live node already uses this node id (--node-id)")
	// ErrPartitionsDiffer: the cluster's buckets were made with another partition count.
	ErrPartitionsDiffer = errors.New("--partitions differs from the cluster's (fixed when its buckets were first made)")
	// ErrLeaseTTLDiffers: the cluster's buckets were made with another lease TTL.
	ErrLeaseTTLDiffers = errors.New("--lease-ttl differs from the cluster's (fixed when its buckets were first made)")
)

// pstate is where this node stands with one partition.
type pstate uint8

const (
	stFree      pstate = iota // not held here
	stStarting                // lease held, Handler.Acquire running
	stActive                  // held and serving
	stReleasing               // graceful hand-over: no new requests, Handler.Release running
)

// part is this node's side of one partition.
type part struct {
	id int

	mu       sync.Mutex
	state    pstate
	rev      uint64    // the lease key's revision (its stream sequence)
	renewed  time.Time // monotonic: when the last successful lease write was sent
	epoch    uint64    // counts this node's acquisitions of the partition (Acquisition binds one)
	fence    []uint64  // this acquisition's fence token (Config.Fences' sequences, one per lane)
	fenced   bool      // the fence of this acquisition is written (Lease reports it from then on)
	since    time.Time
	inflight int
	idle     chan struct{} // closed when inflight drops to 0 (set while releasing)
	busy     bool          // a take or release goroutine runs for it
	retryAt  time.Time     // after a failed take: not before
	previous bool          // this node held it last: it retakes it first

	wmu sync.Mutex // serialises writes of the lease key (renewal, release)
}

// heldLocked reports whether the lease is held here (mu held).
func (p *part) heldLocked() bool { return p.state != stFree }

// Node is one gateway node's membership in the cluster: its heartbeat, the leases of the
// partitions it owns, balancing, fencing and forwarding. Its methods are safe for concurrent use.
type Node struct {
	cfg        Config
	log        *slog.Logger
	js         jetstream.JetStream
	leases     jetstream.KeyValue
	nodes      jetstream.KeyValue
	instance   string
	renewEvery time.Duration
	margin     time.Duration // the fence margin: TTL/4, at most 1 s
	// takeOver: a lease past its TTL, as this node saw it, is taken by a write expecting the
	// revision seen (the leases bucket keeps it longer than the TTL: leasesMaxAge), not by a
	// create once the server expired it (a bucket of an earlier release).
	takeOver bool
	tookOver atomic.Int64 // leases taken by a write over them (claimOver's update)
	parts    []*part
	view     *view
	metrics  *metrics
	fwd      *forwarder
	started  time.Time

	ctx     context.Context
	cancel  context.CancelFunc
	wakeC   chan struct{}
	restart chan struct{} // restarts the watchers
	sem     chan struct{} // bounds concurrent takes and releases
	wg      sync.WaitGroup

	leaving atomic.Bool
	// hbMu serialises the heartbeat's writes (the renewals' and Stop's) with the last one,
	// Stop's delete; left is set then, and no heartbeat is written after it (one would
	// claim the id again, and a restart under it would wait for that key to lapse).
	hbMu    sync.Mutex
	left    bool
	frozen  atomic.Bool // tests: a paused process (no renewals, no fencing by the loop)
	nodeRev atomic.Uint64

	// renewals goroutine only
	watchersRestarted time.Time
	// health: whether this node's writes to the cluster's buckets reach NATS (an outage:
	// they failed for a while; after one the node retakes its own partitions first).
	health writeHealth
	// natsFailedAt: when a heartbeat or a lease write last failed for want of NATS (unix
	// nanoseconds; 0: never): held requests are held longer for a while after it.
	natsFailedAt atomic.Int64

	failOnce sync.Once
	failErr  error
	done     chan struct{} // closed when the node has stopped (Stop, or a fatal error)
}

// Start joins the cluster: it makes the buckets if they are missing (refusing a partition
// count or lease TTL other than theirs), claims the node id (refusing one a live node holds),
// reads the buckets and starts heartbeats, renewals and balancing. The node then takes
// partitions up to its fair share, calling cfg.Handler.Acquire for each.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	js, err := jetstream.New(cfg.Conn)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if cfg.LeaseTTL == 0 {
		cfg.LeaseTTL = clusterTTL(ctx, js, cfg.Prefix)
	}
	n := &Node{
		cfg: cfg, log: cfg.Logger.With("node", cfg.NodeID), js: js, instance: randomID(),
		renewEvery: cfg.LeaseTTL / 4, margin: min(time.Second, cfg.LeaseTTL/4),
		wakeC: make(chan struct{}, 1), restart: make(chan struct{}),
		sem: make(chan struct{}, cfg.Parallel), done: make(chan struct{}), started: time.Now(),
	}
	for i := 0; i < cfg.Partitions; i++ {
		n.parts = append(n.parts, &part{id: i})
	}
	n.view = newView(cfg.Partitions, cfg.LeaseTTL, n.wake)
	if n.metrics, err = newMetrics(cfg.Metrics, n); err != nil {
		return nil, err
	}
	md := map[string]string{"gateway_partitions": strconv.Itoa(cfg.Partitions), "gateway_lease_ttl": cfg.LeaseTTL.String()}
	if n.leases, err = n.bucket(ctx, cfg.Prefix+"_leases", "partition leases of the gateway cluster", md, true); err != nil {
		return nil, err
	}
	if n.nodes, err = n.bucket(ctx, cfg.Prefix+"_nodes", "node heartbeats of the gateway cluster", md, false); err != nil {
		return nil, err
	}
	if err := n.claim(ctx); err != nil {
		return nil, err
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if n.fwd, err = newForwarder(n); err != nil {
		n.cancel()
		return nil, err
	}
	leasesReady, nodesReady := make(chan struct{}), make(chan struct{})
	onErr := func(err error) { n.log.Debug("watch", "err", err) }
	n.goBackground(func() { watch(n.ctx, n.leases, n.view.applyLease, leasesReady, n.restart, onErr) })
	n.goBackground(func() { watch(n.ctx, n.nodes, n.view.applyNode, nodesReady, n.restart, onErr) })
	for _, ready := range []chan struct{}{leasesReady, nodesReady} {
		select {
		case <-ready:
		case <-ctx.Done():
			n.abort()
			return nil, fmt.Errorf("cluster: reading the buckets: %w", ctx.Err())
		}
	}
	n.goBackground(n.renewals)
	n.goBackground(n.loop)
	n.log.Info("joined the cluster", "partitions", cfg.Partitions, "lease_ttl", cfg.LeaseTTL)
	return n, nil
}

// markerTTL is how long the server keeps the marker it writes when a key lapses (what the
// watchers see as the lapse; a create replaces it).
const markerTTL = 5 * time.Second

// leasesMaxAge is how long the server keeps a lease nobody renews in a leases bucket made
// by this release, in lease TTLs. The lease's TTL is the nodes' (the nodes bucket's MaxAge,
// and the buckets' metadata: bucketTTL). A lease past its TTL is taken by a write expecting
// its revision (takeOver), two TTLs before the server expires it; the server's expiry only
// clears the leases of a cluster that stopped whole.
//
// The bucket keeps lapse markers all the same (markerTTL). A marker is a rollup of the key,
// proposed without a condition, so it would purge a take landing beside the expiry; but the
// expiry comes leasesMaxAge TTLs after the key's last write, and a take is written at one TTL
// and at most 1.5 (past takeOverWithin, not written over the lease: the marker comes first,
// and the take is a create), landing by 2 TTLs: a TTL of room for clocks and lag. (At 2 TTLs,
// as first built, a take sent at 1.5 TTLs with its 1 s timeout could land at the expiry.) The markers are there for a node of the release before this one (lapse
// markers, MaxAge = its TTL): its start reads the leases bucket's MaxAge as the cluster's TTL
// and, on a bucket with no markers whose MaxAge is that TTL, rewrites the bucket (markers on,
// metadata's TTL = leasesMaxAge TTLs) before the nodes bucket makes it refuse; with the
// markers on it finds nothing to add, and refuses (the nodes bucket's MaxAge, or this
// bucket's, is not the TTL it took) having written nothing.
const leasesMaxAge = 3

// bucketTTL is the lease TTL a cluster bucket was made with: its metadata's (the leases bucket
// of this release keeps its leases longer, leasesMaxAge), else its MaxAge (an earlier release's).
func bucketTTL(st jetstream.KeyValueStatus) time.Duration {
	if d, err := time.ParseDuration(st.Metadata()["gateway_lease_ttl"]); err == nil && d > 0 {
		return d
	}
	return st.TTL()
}

// clusterTTL is the lease TTL of the cluster under prefix, for a node given none: the nodes
// bucket's MaxAge (every release makes it the TTL, and no release rewrites it to another),
// else the leases bucket's (bucketTTL), else DefaultLeaseTTL (a new cluster).
func clusterTTL(ctx context.Context, js jetstream.JetStream, prefix string) time.Duration {
	if kv, err := js.KeyValue(ctx, prefix+"_nodes"); err == nil {
		if st, err := kv.Status(ctx); err == nil && st.TTL() > 0 {
			return st.TTL()
		}
	}
	if kv, err := js.KeyValue(ctx, prefix+"_leases"); err == nil {
		if st, err := kv.Status(ctx); err == nil && bucketTTL(st) > 0 {
			return bucketTTL(st)
		}
	}
	return DefaultLeaseTTL
}

// bucket opens a cluster bucket, making it if missing, and checks it was made with this
// node's partition count and lease TTL. Both buckets have lapse markers (LimitMarkerTTL): the
// server writes one when a key lapses, which the watchers see at once. leases: the leases
// bucket, which this release makes with a MaxAge of leasesMaxAge TTLs (takeOver: its leases
// are taken at their TTL by a revision-checked write); one an earlier release made (MaxAge
// the TTL) is kept as it is, and its leases are taken at the server's expiry.
func (n *Node) bucket(ctx context.Context, name, desc string, md map[string]string, leases bool) (jetstream.KeyValue, error) {
	kv, err := n.js.KeyValue(ctx, name)
	cfg := jetstream.KeyValueConfig{
		Bucket: name, Description: desc, History: 1, TTL: n.cfg.LeaseTTL,
		Storage: jetstream.FileStorage, Replicas: n.cfg.Replicas, Metadata: md, LimitMarkerTTL: markerTTL,
	}
	if leases {
		cfg.TTL = leasesMaxAge * n.cfg.LeaseTTL
	}
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = n.js.CreateKeyValue(ctx, cfg)
		if err != nil { // made by another node at the same moment?
			var err2 error
			if kv, err2 = n.js.KeyValue(ctx, name); err2 != nil {
				return nil, fmt.Errorf("cluster: make bucket %s: %w", name, err)
			}
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: open bucket %s: %w", name, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster: bucket %s: %w", name, err)
	}
	if st.LimitMarkerTTL() == 0 && (st.TTL() == n.cfg.LeaseTTL || st.TTL() == cfg.TTL) && bucketTTL(st) == n.cfg.LeaseTTL {
		// Made by a release before the lapse markers (MaxAge the TTL): made this release's
		// (the leases bucket: MaxAge leasesMaxAge TTLs, markers). Read again below: the take
		// path is the one the bucket has now.
		cfg.Replicas = st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Replicas
		if _, err := n.js.UpdateKeyValue(ctx, cfg); err != nil {
			n.log.Warn("could not update a cluster bucket to this release's; a lapsed lease is seen at the next renewal instead", "bucket", name, "err", err)
		} else if st2, err := kv.Status(ctx); err == nil {
			st = st2
		}
	}
	if got := st.Metadata()["gateway_partitions"]; got != md["gateway_partitions"] {
		return nil, fmt.Errorf("cluster: %w: the cluster has %s, this node was given %d", ErrPartitionsDiffer, got, n.cfg.Partitions)
	}
	if bucketTTL(st) != n.cfg.LeaseTTL {
		return nil, fmt.Errorf("cluster: %w: the cluster's is %v, this node was given %v", ErrLeaseTTLDiffers, bucketTTL(st), n.cfg.LeaseTTL)
	}
	if leases {
		n.takeOver = st.TTL() >= leasesMaxAge*bucketTTL(st)
	}
	return kv, nil
}

// claim writes this node's heartbeat key, which must not exist. A key left by a node that
// died lapses within the TTL, so claim waits that long; a key whose revision moves meanwhile
// belongs to a live node, and the start is refused.
func (n *Node) claim(ctx context.Context) error {
	key, val := nodeKey(n.cfg.NodeID), n.heartbeatValue()
	deadline := time.Now().Add(n.cfg.LeaseTTL + n.renewEvery)
	var firstRev uint64
	for {
		rev, err := n.nodes.Create(ctx, key, val)
		if err == nil {
			n.nodeRev.Store(rev)
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return fmt.Errorf("cluster: claim node id: %w", err)
		}
		if e, err := n.nodes.Get(ctx, key); err == nil {
			if firstRev == 0 {
				firstRev = e.Revision()
			} else if e.Revision() != firstRev {
				return fmt.Errorf("cluster: %w: %q heartbeats", ErrDuplicateNode, n.cfg.NodeID)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cluster: %w: %q", ErrDuplicateNode, n.cfg.NodeID)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (n *Node) heartbeatValue() []byte {
	state := nodeUp
	if n.leaving.Load() {
		state = nodeLeaving
	}
	sessions := 0
	if n.cfg.Sessions != nil {
		sessions = n.cfg.Sessions()
	}
	b, _ := json.Marshal(nodeValue{V: wireVersion, ID: n.cfg.NodeID, Instance: n.instance, State: state,
		Partitions: n.ownedCount(), Sessions: sessions, Started: n.started.UTC()})
	return b
}

// leaseWrite records whether a write to the cluster's buckets reached NATS (a revision
// mismatch did: it is an answer).
func (n *Node) leaseWrite(err error) {
	now := time.Now()
	if err != nil && !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) {
		n.health.failed(now)
		n.natsFailedAt.Store(now.UnixNano())
		return
	}
	n.health.ok(now, n.outage())
}

// outage is how long this node's writes must fail in a row to count as NATS lost (a leader
// election fails them for 4-9 s), not a write that timed out on a loaded machine.
func (n *Node) outage() time.Duration { return 2 * n.renewEvery }

// writeHealth follows whether a node's writes to the cluster's buckets reach NATS. Safe for
// concurrent use.
type writeHealth struct {
	mu           sync.Mutex
	failingSince time.Time // the first failure of the current run of them (zero: the last write succeeded)
	recoveredAt  time.Time // when the last outage (failures for at least the outage length) ended
}

func (h *writeHealth) failed(now time.Time) {
	h.mu.Lock()
	if h.failingSince.IsZero() {
		h.failingSince = now
	}
	h.mu.Unlock()
}

func (h *writeHealth) ok(now time.Time, outage time.Duration) {
	h.mu.Lock()
	if !h.failingSince.IsZero() {
		if now.Sub(h.failingSince) >= outage {
			h.recoveredAt = now
		}
		h.failingSince = time.Time{}
	}
	h.mu.Unlock()
}

// recovering: the writes fail for at least outage now, or did until less than after ago.
func (h *writeHealth) recovering(now time.Time, outage, after time.Duration) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.failingSince.IsZero() && now.Sub(h.failingSince) >= outage {
		return true
	}
	return !h.recoveredAt.IsZero() && now.Sub(h.recoveredAt) < after
}

func (n *Node) goBackground(f func()) {
	n.wg.Add(1)
	go func() { defer n.wg.Done(); f() }()
}

func (n *Node) wake() {
	select {
	case n.wakeC <- struct{}{}:
	default:
	}
}

// loop balances: whenever the view changes (a lease released or lapsed, a node gone or
// come) and every renewal interval. It never waits for a write to NATS (renewals run on their
// own goroutine, takes and releases on theirs), so a dead node's partitions are taken the
// moment their leases' lapse markers arrive, not after this node's own renewals have returned.
// A lease that is not renewed lapses at its last write seen here + the TTL: a timer runs
// balancing at that moment.
func (n *Node) loop() {
	t := time.NewTicker(n.renewEvery)
	defer t.Stop()
	lapse := time.NewTimer(n.renewEvery)
	defer lapse.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		case <-n.wakeC:
		case <-lapse.C:
		}
		if !n.frozen.Load() {
			n.balance()
		}
		now := time.Now()
		next := n.renewEvery
		if at := n.nextLapse(now); !at.IsZero() && at.Sub(now) < next {
			next = at.Sub(now) + time.Millisecond
		}
		lapse.Reset(next)
	}
}

// renewals writes the heartbeat, renews every lease held here and fences the lapsed ones,
// every renewal interval (TTL/4).
func (n *Node) renewals() {
	t := time.NewTicker(n.renewEvery)
	defer t.Stop()
	for {
		if !n.frozen.Load() {
			n.tick()
		}
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (n *Node) tick() {
	// The heartbeat and the renewals are written together: a renewal sent only once a slow
	// heartbeat write returned (up to its 1 s timeout on a loaded machine) brought the fence
	// deadline that much closer, and two such rounds fenced partitions of a live node.
	hb := make(chan bool, 1)
	go func() { hb <- n.heartbeat() }()
	n.renewAll()
	hbOK := <-hb
	n.fenceLapsed()
	if hbOK {
		// Heartbeats and renewals are written every renewal interval: a watcher that delivered
		// none for a lease TTL lost its server (nats.go's ordered consumer notices by itself
		// only after two missed idle heartbeats, 10 s), and a stale view would take live
		// owners for dead.
		// (Not in the node's first TTL: the watchers have not seen the leases it takes yet.)
		owns := n.ownedCount() > 0
		n.view.mu.Lock()
		stale := time.Since(n.view.lastAny) > n.cfg.LeaseTTL || (owns && time.Since(n.view.lastLease) > n.cfg.LeaseTTL)
		n.view.mu.Unlock()
		if stale && time.Since(n.started) > n.cfg.LeaseTTL && time.Since(n.watchersRestarted) > n.cfg.LeaseTTL {
			n.watchersRestarted = time.Now()
			n.log.Warn("no heartbeat seen for a while; restarting the watchers")
			select {
			case n.restart <- struct{}{}:
			default:
			}
			select {
			case n.restart <- struct{}{}:
			default:
			}
		}
	}
	n.wake() // balance with what the renewals found
}

// heartbeat writes this node's key (revision-checked: a second process under this id is
// found out here). It reports whether the write succeeded.
func (n *Node) heartbeat() bool {
	n.hbMu.Lock()
	defer n.hbMu.Unlock()
	if n.left {
		return false
	}
	ctx, cancel := n.opCtx()
	defer cancel()
	key, val := nodeKey(n.cfg.NodeID), n.heartbeatValue()
	rev, err := n.nodes.Update(ctx, key, val, n.nodeRev.Load())
	n.leaseWrite(err)
	if err == nil {
		n.nodeRev.Store(rev)
		return true
	}
	if !errors.Is(err, jetstream.ErrKeyRevisionMismatch) && !errors.Is(err, jetstream.ErrKeyExists) {
		n.log.Debug("heartbeat", "err", err)
		return false
	}
	e, gerr := n.nodes.Get(ctx, key)
	switch {
	case errors.Is(gerr, jetstream.ErrKeyNotFound) || errors.Is(gerr, jetstream.ErrKeyDeleted):
		// Lapsed (NATS was unreachable longer than the TTL): claim it again.
		rev, err = n.nodes.Create(ctx, key, val)
		if err == nil {
			n.nodeRev.Store(rev)
			return true
		}
	case gerr != nil:
	default:
		var v nodeValue
		if json.Unmarshal(e.Value(), &v) == nil && v.Instance != n.instance {
			n.fail(fmt.Errorf("cluster: %w: another process took %q", ErrDuplicateNode, n.cfg.NodeID))
			return false
		}
		n.nodeRev.Store(e.Revision()) // our own write, seen late
	}
	return false
}

// fail stops the node for good: every partition is fenced at once.
func (n *Node) fail(err error) {
	n.failOnce.Do(func() {
		n.failErr = err
		n.log.Error("node stopped", "err", err)
		for _, p := range n.parts {
			n.lose(p, "the node stopped")
		}
		n.cancel()
		go func() { n.wg.Wait(); close(n.done) }()
	})
}

// Done is closed when the node has stopped; Err says why (nil after Stop).
func (n *Node) Done() <-chan struct{} { return n.done }

// Err is the fatal error that stopped the node, if any.
func (n *Node) Err() error {
	select {
	case <-n.done:
		return n.failErr
	default:
		return nil
	}
}

// Stop hands every partition over gracefully (each is released, so its requests are held
// and replayed to its new owner) and leaves the cluster. Partitions still held when ctx ends
// are fenced. Call it on SIGTERM, before stopping the engine.
func (n *Node) Stop(ctx context.Context) error {
	select {
	case <-n.done:
		return n.failErr
	default:
	}
	// The partitions this node hands over (held, or being taken: a take under way ends in a
	// release too): the exit waits for their new owners, not for the rest of the cluster.
	var mine []int
	for _, p := range n.parts {
		p.mu.Lock()
		if p.heldLocked() || p.busy {
			mine = append(mine, p.id)
		}
		p.mu.Unlock()
	}
	n.leaving.Store(true)
	n.heartbeat() // leaving: the others count without this node from now on
	n.wake()
wait:
	for n.heldOrBusy() > 0 {
		select {
		case <-ctx.Done():
			for _, p := range n.parts {
				n.lose(p, "stop timed out")
			}
			break wait
		case <-time.After(20 * time.Millisecond):
		}
	}
	n.waitHandedOver(ctx, mine)
	n.hbMu.Lock()
	n.left = true
	dctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	if err := n.nodes.Delete(dctx, nodeKey(n.cfg.NodeID), jetstream.LastRevision(n.nodeRev.Load())); err != nil {
		n.log.Warn("leaving: delete the heartbeat (it lapses instead)", "err", err)
	}
	cancel()
	n.hbMu.Unlock()
	n.abort()
	return nil
}

// handedOverFor is how long the partitions handed over must be seen served by their new
// owners before the node exits: the other nodes' views catch up meanwhile (a request one of
// them still sends here is answered "moved" and sent again, not lost in "no responders").
const handedOverFor = 500 * time.Millisecond

// waitHandedOver waits, at most HoldMax + 1 s, until each partition of parts (those this node
// handed over) is active on another node and seen so here for handedOverFor: until then
// requests that reach this node are answered "moved" and replayed, while once it exits they
// would find nobody. Partitions this node never held are not its to wait for (another node
// still booting one after a NATS server's loss does not hold this exit up).
func (n *Node) waitHandedOver(ctx context.Context, parts []int) {
	if others := slices.DeleteFunc(n.view.liveNodes(time.Now()), func(id string) bool { return id == n.cfg.NodeID }); len(others) == 0 || len(parts) == 0 {
		return // the last node: nobody takes its partitions
	}
	deadline := time.Now().Add(HoldMax + time.Second)
	var since time.Time
	for time.Now().Before(deadline) && ctx.Err() == nil {
		now := time.Now()
		served := true
		for _, p := range parts {
			s := n.view.lease(p)
			if !n.view.alive(s, now) || s.value.State != leaseActive || s.value.Instance == n.instance {
				served = false
				break
			}
		}
		switch {
		case !served:
			since = time.Time{}
		case since.IsZero():
			since = now
		case now.Sub(since) >= handedOverFor:
			return
		}
		select {
		case <-ctx.Done():
		case <-time.After(25 * time.Millisecond):
		}
	}
	if ctx.Err() == nil {
		n.log.Warn("leaving before every partition handed over is served elsewhere", "waited", HoldMax+time.Second)
	}
}

// abort stops every goroutine without writing anything (tests use it as a kill -9).
func (n *Node) abort() {
	n.failOnce.Do(func() {
		if n.cancel != nil {
			n.cancel()
		}
		if n.fwd != nil {
			n.fwd.close()
		}
		n.wg.Wait()
		close(n.done)
	})
}

func (n *Node) heldOrBusy() int {
	c := 0
	for _, p := range n.parts {
		p.mu.Lock()
		if p.heldLocked() || p.busy {
			c++
		}
		p.mu.Unlock()
	}
	return c
}

func (n *Node) ownedCount() int {
	c := 0
	for _, p := range n.parts {
		p.mu.Lock()
		if p.state == stActive || p.state == stStarting {
			c++
		}
		p.mu.Unlock()
	}
	return c
}

// ID is this node's id.
func (n *Node) ID() string { return n.cfg.NodeID }

// Owner is the node that owns partition p now, as far as this node knows (ok false while
// nobody does: lapsed, released and not yet taken).
func (n *Node) Owner(p int) (node string, ok bool) {
	if p < 0 || p >= len(n.parts) {
		return "", false
	}
	pt := n.parts[p]
	pt.mu.Lock()
	mine := pt.state != stFree && n.freshLocked(pt)
	pt.mu.Unlock()
	if mine {
		return n.cfg.NodeID, true
	}
	s := n.view.lease(p)
	if !n.view.alive(s, time.Now()) || s.value.Instance == n.instance {
		return "", false
	}
	return s.value.Node, true
}

// freshLocked: the lease is within its fence deadline (last renewal sent + TTL − the fence
// margin).
func (n *Node) freshLocked(p *part) bool {
	return time.Now().Before(p.renewed.Add(n.cfg.LeaseTTL - n.margin))
}

// Enter lets a request of partition p run on this node: ok when p is owned here, active and
// within its fence deadline. done must be called when the request has finished (a graceful
// hand-over waits for it). Not ok: forward the request (Forward).
func (n *Node) Enter(p int) (done func(), ok bool) {
	if p < 0 || p >= len(n.parts) {
		return nil, false
	}
	pt := n.parts[p]
	pt.mu.Lock()
	if pt.state != stActive || !n.freshLocked(pt) {
		pt.mu.Unlock()
		return nil, false
	}
	pt.inflight++
	pt.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			pt.mu.Lock()
			pt.inflight--
			if pt.inflight == 0 && pt.idle != nil {
				close(pt.idle)
				pt.idle = nil
			}
			pt.mu.Unlock()
		})
	}, true
}

// Lease is this node's hold on a partition, as tests and the cluster's screen see it.
type Lease struct {
	Partition int
	// Revision is the lease key's revision in the leases bucket (changes at every renewal).
	Revision uint64
	// Fence is the acquisition's fence token: Config.Fences' sequences, one per lane (nil
	// without Config.Fences).
	Fence []uint64
	// Deadline is when this node stops using the partition unless the lease is renewed
	// (monotonic clock).
	Deadline time.Time
}

// Lease returns partition p's lease while this node holds it within its fence deadline
// (starting, active or releasing: the engine writes while it starts and while it flushes).
// Not ok: the partition is not this node's to write.
func (n *Node) Lease(p int) (Lease, bool) {
	if p < 0 || p >= len(n.parts) {
		return Lease{}, false
	}
	pt := n.parts[p]
	pt.mu.Lock()
	defer pt.mu.Unlock()
	if pt.state == stFree || !pt.fenced || !n.freshLocked(pt) {
		return Lease{}, false
	}
	return Lease{Partition: p, Revision: pt.rev, Fence: pt.fence, Deadline: pt.renewed.Add(n.cfg.LeaseTTL - n.margin)}, true
}

// UnavailableError is domain.ErrNodeUnavailable with its cause and when to retry: httpapi
// answers it 503 node_unavailable with Retry-After.
type UnavailableError struct {
	Partition  int
	Reason     string
	RetryAfter time.Duration
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("%s (partition %d: %s)", domain.ErrNodeUnavailable.Msg, e.Partition, e.Reason)
}

// Unwrap makes errors.Is(err, domain.ErrNodeUnavailable) true.
func (e *UnavailableError) Unwrap() error { return domain.ErrNodeUnavailable }

func randomID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// Running lists the nodes of the cluster on prefix that heartbeat now (a gateway started
// without --cluster on that prefix refuses to start beside them). No cluster: none.
func Running(ctx context.Context, js jetstream.JetStream, prefix string) ([]string, error) {
	kv, err := js.KeyValue(ctx, prefix+"_nodes")
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	keys, err := kv.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	var ids []string
	for _, k := range keys {
		if id, ok := nodeIDOfKey(k); ok {
			ids = append(ids, id)
		}
	}
	return ids, nil
}
