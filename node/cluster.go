package node

// A node of a cluster (serve --cluster, DESIGN.md section 13): the cluster's membership
// (cluster.Node: leases, heartbeats, balancing, forwarding) on one NATS connection with the
// records stream (persist/natskv), and one runtime per partition this node owns. A partition's
// runtime sits on the partition's view of the store, whose every commit carries the fence of
// the acquisition that started it (cluster.Acquisition: DESIGN.md section 19), and its network
// is guarded by the same acquisition: Acquire builds it from the partition's records
// (cluster.Node calls it only once the previous owner's lease lapsed or was handed back; when
// this node ran the partition before, only once that runtime has stopped), Release stops it the
// way a single node stops (finish in flight, flush counters), Fenced stops it without waiting
// (its writes are refused anyway, and a later acquisition's fence is not its).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gateway/gateway/cluster"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/httpapi"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/natskv"
)

// Interface guards.
var (
	_ cluster.Handler = (*clusterNode)(nil)
	_ httpapi.Cluster = (*clusterNode)(nil)
)

// clusterNode is this process's part of the cluster.
type clusterNode struct {
	sh    shared
	log   *slog.Logger
	nc    *nats.Conn
	store *natskv.Store
	net   network.Network
	http  *httpapi.Server // set before the node starts: forwarded requests run on it
	dir   *directory
	live  *liveEvents

	node    *cluster.Node
	started chan struct{} // closed once node is set (acquisitions wait for it)

	mu    sync.RWMutex
	parts map[int]*partition
	// stopping: the partitions whose runtime a Fenced is stopping (closed once stopped); a
	// later Acquire of the partition waits for it.
	stopping map[int]chan struct{}
	// retired holds the counters of the partitions that stopped here, so the node's counters
	// never go back when a partition moves away.
	retired      engine.Stats
	retiredStore engine.StoreStats
	leaveOnce    sync.Once
}

// partition is one partition running here.
type partition struct {
	id      int
	view    *natskv.View
	net     network.Network // the node's network, fenced by the partition's lease
	rt      *runtime
	backend *httpapi.Backend
	retire  func() // keeps its counters once stopped (nil: it never ran)
}

// adoptRoute is the forwarded request that has a partition's owner start a session moved into
// it (engine.Mover); it never comes from a client.
const adoptRoute = "internal: adopt session"

func newClusterNode(sh shared, log *slog.Logger, st storage, net network.Network) *clusterNode {
	n := &clusterNode{sh: sh, log: log, nc: st.nc, store: st.nats, net: net,
		started: make(chan struct{}), parts: map[int]*partition{}, stopping: map[int]chan struct{}{}}
	n.live = newLiveEvents(st.nc, sh.c.NATSPrefix, sh.c.NodeID, log)
	return n
}

// start joins the cluster (after http is set).
func (n *clusterNode) start(ctx context.Context) error {
	dir, err := openDirectory(ctx, n.store, n.log)
	if err != nil {
		return err
	}
	n.dir = dir
	if err := n.live.startWatch(persist.NewWebhooks(n.store.Global())); err != nil {
		return err
	}
	c := n.sh.c
	node, err := cluster.Start(ctx, cluster.Config{
		Conn: n.nc, Prefix: c.NATSPrefix, NodeID: c.NodeID, Partitions: c.Partitions, LeaseTTL: c.LeaseTTL,
		Replicas: n.store.Replicas(), Handler: n, Serve: n.serve, Sessions: n.sessions, Secret: []byte(c.SecretKey),
		Fences: n.store, Logger: n.log.With("component", "cluster"), Metrics: n.sh.reg,
	})
	if err != nil {
		return err
	}
	n.node = node
	close(n.started)
	return nil
}

// leave hands every partition this node owns over to the others (SIGTERM: their requests are
// held and replayed, never refused), then stops what is left. Safe to call twice.
func (n *clusterNode) leave(ctx context.Context) {
	n.leaveOnce.Do(func() {
		if n.node != nil {
			if err := n.node.Stop(ctx); err != nil {
				n.log.Warn("leaving the cluster", "err", err)
			}
		}
		n.stopAll(ctx)
		if n.dir != nil {
			n.dir.close()
		}
		n.live.close()
	})
}

// Acquire starts partition p of acquisition a from its records (cluster.Handler): its view of
// the store writes under a's fence token and its network sends while a is valid, never under a
// later acquisition of the same partition. A runtime of an earlier acquisition of p that a
// Fenced is still stopping is waited for first, so two runtimes never run one partition here.
func (n *clusterNode) Acquire(ctx context.Context, a *cluster.Acquisition) error {
	select {
	case <-n.started:
	case <-ctx.Done():
		return ctx.Err()
	}
	p := a.Partition()
	n.mu.Lock()
	prev := n.stopping[p]
	n.mu.Unlock()
	if prev != nil {
		select {
		case <-prev:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	began := time.Now()
	pt := &partition{id: p, view: n.store.Partition(p, a), net: fencedNetwork{n.net, a.Valid}}
	log := n.log.With("partition", p)
	cloudNet := fencedCloud{fencedNetwork{n.sh.cloud, a.Valid}, n.sh.cloud}
	rt, err := newRuntime(ctx, n.sh, runtimeOptions{
		kv: pt.view, log: log, live: n.live, watchers: n.live.watchers, net: pt.net, cloud: cloudNet, askTimeout: natsAskTimeout,
		mover: func(recs *persist.Records) engine.Mover { return &mover{n: n, p: p, from: recs} },
	})
	if err != nil {
		pt.view.Close()
		return err
	}
	pt.rt = rt
	pt.backend = &httpapi.Backend{Engine: rt.engine, Webhooks: rt.events, Partition: p}
	n.mu.Lock()
	n.parts[p] = pt
	n.mu.Unlock()
	log.Info("partition started", "took_ms", time.Since(began).Milliseconds())
	return nil
}

// Release stops partition p gracefully (cluster.Handler): its requests have finished.
func (n *clusterNode) Release(ctx context.Context, p int) error {
	if pt := n.take(p); pt != nil {
		sctx, cancel := context.WithTimeout(ctx, n.sh.c.ShutdownTimeout)
		defer cancel()
		pt.stop(sctx)
	}
	return nil
}

// Fenced stops partition p at once (cluster.Handler): another node may hold it already, so
// nothing of it may write (its view refuses) or send (its network refuses).
func (n *clusterNode) Fenced(p int) {
	if pt := n.take(p); pt != nil {
		done := make(chan struct{})
		n.mu.Lock()
		n.stopping[p] = done
		n.mu.Unlock()
		go func() {
			// A second at most: it can no longer write (its acquisition is over, its view
			// closes) nor send (its network refuses); what it still waits for (a send in
			// flight) would only delay the partition's next start here.
			ctx, cancel := context.WithTimeout(context.Background(), fencedStop)
			defer cancel()
			pt.stop(ctx)
			n.mu.Lock()
			if n.stopping[p] == done {
				delete(n.stopping, p)
			}
			n.mu.Unlock()
			close(done)
		}()
	}
}

// fencedStop bounds how long a fenced partition's runtime is waited for.
const fencedStop = time.Second

func (n *clusterNode) take(p int) *partition {
	n.mu.Lock()
	defer n.mu.Unlock()
	pt := n.parts[p]
	delete(n.parts, p)
	if pt != nil {
		pt.retire = func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			addCounters(&n.retired, pt.rt.engine.Stats())
			addStoreCounters(&n.retiredStore, pt.rt.engine.Stores.Stats())
		}
	}
	return pt
}

// stop stops a partition's runtime (its counters kept), then closes its view.
func (pt *partition) stop(ctx context.Context) {
	pt.rt.stop(ctx)
	if pt.retire != nil {
		pt.retire()
	}
	pt.view.Close()
}

// stopAll stops every partition still running (the node has left or died).
func (n *clusterNode) stopAll(ctx context.Context) {
	n.mu.Lock()
	parts := n.parts
	n.parts = map[int]*partition{}
	n.mu.Unlock()
	var wg sync.WaitGroup
	for _, pt := range parts {
		wg.Go(func() { pt.stop(ctx) })
	}
	wg.Wait()
}

func (n *clusterNode) part(p int) *partition {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.parts[p]
}

// serve answers a forwarded request (cluster.ServeFunc).
func (n *clusterNode) serve(ctx context.Context, p int, env *cluster.Envelope) *cluster.Response {
	pt := n.part(p)
	if pt == nil {
		return &cluster.Response{Status: 503, Header: []cluster.Header{{Name: "Retry-After", Value: "1"}},
			Body: []byte(`{"success":false,"error":"the partition is starting or stopping here; retry shortly","code":"node_unavailable"}`)}
	}
	if env.Route == adoptRoute {
		if err := n.syncView(ctx, p); err != nil {
			return &cluster.Response{Status: 503, Body: []byte(err.Error())}
		}
		if err := pt.rt.engine.Sessions.Adopt(ctx, string(env.Body)); err != nil {
			return &cluster.Response{Status: 503, Body: []byte(err.Error())}
		}
		return &cluster.Response{Status: 200}
	}
	return n.http.ServeForwarded(ctx, pt.backend, env)
}

// syncView has partition p's view read what another node (or this node's unfenced view: a
// session moved in) wrote into it: as the stream's leader has it now.
func (n *clusterNode) syncView(ctx context.Context, p int) error {
	if pt := n.part(p); pt != nil {
		return pt.view.Sync(ctx)
	}
	return nil
}

// sessions counts the sessions running here (the heartbeat's and the snapshot's).
func (n *clusterNode) sessions() int {
	total := 0
	n.mu.RLock()
	defer n.mu.RUnlock()
	for _, pt := range n.parts {
		total += pt.rt.engine.Stats().Sessions
	}
	return total
}

// --- httpapi.Cluster ---

func (n *clusterNode) PartitionOf(id string) int { return cluster.PartitionOf(id, n.sh.c.Partitions) }

func (n *clusterNode) Enter(p int) (*httpapi.Backend, func(), bool) {
	done, ok := n.node.Enter(p)
	if !ok {
		return nil, nil, false
	}
	pt := n.part(p)
	if pt == nil {
		done()
		return nil, nil, false
	}
	return pt.backend, done, true
}

func (n *clusterNode) Forward(ctx context.Context, p int, env *cluster.Envelope) (*cluster.Response, error) {
	return n.node.Forward(ctx, p, env)
}

func (n *clusterNode) Locate(table, id string) (int, bool, error) { return n.dir.locate(table, id) }

// User reads uid's profile from its partition's records, with its effective role.
func (n *clusterNode) User(uid string) (domain.User, bool, error) {
	u, err := persist.NewStore(n.store.Partition(n.PartitionOf(uid), nil)).GetUser(uid)
	if errors.Is(err, domain.ErrRecordNotFound) {
		return domain.User{ID: uid, Role: n.roleOf(uid, engine.RoleClient)}, false, nil
	}
	if err != nil {
		return u, false, fmt.Errorf("%w: read profile: %w", domain.ErrUnavailable, err)
	}
	u.Role = n.roleOf(uid, u.Role)
	return u, true, nil
}

func (n *clusterNode) roleOf(uid, stored string) string {
	if slices.Contains(n.sh.c.AdminUIDs, uid) {
		return engine.RoleAdmin
	}
	return stored
}

func (n *clusterNode) Records() httpapi.ClusterRecords { return clusterRecords{n} }

func (n *clusterNode) Snapshot() cluster.Snapshot { return n.node.Snapshot() }

func (n *clusterNode) NodeID() string { return n.node.ID() }

// Listen opens a stream of uid's events here; from now on (DESIGN.md section 20) the owner of
// uid's partition, whichever node, journals them, so the stream can resume.
func (n *clusterNode) Listen(uid string) *engine.Listener {
	n.live.watch(uid)
	return n.live.hub.Listen(uid)
}

// Replay reads uid's journal in the records of uid's partition, wherever it runs.
func (n *clusterNode) Replay(uid, lastID string, fn func(engine.LiveEvent) error) (bool, error) {
	j := persist.NewWebhooks(n.store.Partition(n.PartitionOf(uid), nil))
	return engine.ReplayJournal(j, uid, lastID, fn)
}

// stats sums the partitions' engine counters (/metrics), with those of the partitions that
// ran here before.
func (n *clusterNode) stats() engine.Stats {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := n.retired
	for _, pt := range n.parts {
		s := pt.rt.engine.Stats()
		addCounters(&out, s)
		out.OutboxDepth += s.OutboxDepth
		out.Sessions += s.Sessions
		out.Keys += s.Keys
		out.CampaignsRunning += s.CampaignsRunning
	}
	return out
}

// storeStats sums the partitions' store counters (/metrics), as stats does.
func (n *clusterNode) storeStats() engine.StoreStats {
	n.mu.RLock()
	defer n.mu.RUnlock()
	st := n.retiredStore
	for _, pt := range n.parts {
		s := pt.rt.engine.Stores.Stats()
		addStoreCounters(&st, s)
		st.Stores += s.Stores
		st.EventsPending += s.EventsPending
	}
	return st
}

// addCounters adds the counters (never the gauges) of s to out.
func addCounters(out *engine.Stats, s engine.Stats) {
	out.MessagesSent += s.MessagesSent
	out.MessagesFailed += s.MessagesFailed
	out.CampaignsCompleted += s.CampaignsCompleted
	out.CampaignsCancelled += s.CampaignsCancelled
	out.CampaignsFailed += s.CampaignsFailed
}

// addStoreCounters is addCounters for the store counters.
func addStoreCounters(outs *engine.StoreStats, ss engine.StoreStats) {
	outs.WebhooksAccepted += ss.WebhooksAccepted
	outs.WebhooksDuplicate += ss.WebhooksDuplicate
	outs.WebhooksIgnored += ss.WebhooksIgnored
	outs.SignatureFailures += ss.SignatureFailures
	outs.EventsSent += ss.EventsSent
	outs.EventsSkipped += ss.EventsSkipped
	outs.EventsFailed += ss.EventsFailed
}

// health is /readyz's "cluster" check: the node is a member (not failed, not leaving).
func (n *clusterNode) health() error {
	select {
	case <-n.node.Done():
		if err := n.node.Err(); err != nil {
			return err
		}
		return errors.New("left the cluster")
	default:
		return nil
	}
}
