package main

// A node of a cluster (serve --cluster, DESIGN.md section 13): the cluster's membership
// (cluster.Node: leases, heartbeats, balancing, forwarding) on one NATS connection with the
// records stream (persist/natskv), and one engine per partition this node owns. A partition's
// engine, with its events facet and typed stores, sits on the partition's view of the store,
// whose every commit carries the partition's fence: Acquire builds them from the partition's
// records (cluster.Node calls it only once the previous owner's lease lapsed or was handed
// back), Release stops them the way a single node stops (finish in flight, flush counters),
// Fenced stops them without waiting (their writes are refused anyway).

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gateway/gateway/actors/webhook"
	"github.com/gateway/gateway/cluster"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/httpapi"
	"github.com/gateway/gateway/media"
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
	c      config
	log    *slog.Logger
	nc     *nats.Conn
	store  *natskv.Store
	net    network.Network
	plans  engine.Plans
	stores engine.StoreConfig
	reg    prometheus.Registerer
	http   *httpapi.Server // set before the node starts: forwarded requests run on it
	dir    *directory
	live   *liveEvents

	node    *cluster.Node
	started chan struct{} // closed once node is set (acquisitions wait for it)

	mu    sync.RWMutex
	parts map[int]*partition
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
	events  *engine.Events
	engine  *engine.Engine
	backend *httpapi.Backend
	retire  func() // keeps its counters once stopped (nil: it never ran)
}

// adoptRoute is the forwarded request that has a partition's owner start a session moved into
// it (engine.Mover); it never comes from a client.
const adoptRoute = "internal: adopt session"

func newClusterNode(c config, log *slog.Logger, nc *nats.Conn, store *natskv.Store, net network.Network,
	plans engine.Plans, stores engine.StoreConfig, reg prometheus.Registerer) *clusterNode {
	n := &clusterNode{c: c, log: log, nc: nc, store: store, net: net, plans: plans, stores: stores, reg: reg,
		started: make(chan struct{}), parts: map[int]*partition{}}
	n.live = newLiveEvents(nc, c.natsPrefix, log)
	return n
}

// start joins the cluster (after http is set).
func (n *clusterNode) start(ctx context.Context) error {
	dir, err := openDirectory(ctx, n.store, n.log)
	if err != nil {
		return err
	}
	n.dir = dir
	node, err := cluster.Start(ctx, cluster.Config{
		Conn: n.nc, Prefix: n.c.natsPrefix, NodeID: n.c.nodeID, Partitions: n.c.partitions, LeaseTTL: n.leaseTTL(),
		Replicas: n.store.Replicas(), Handler: n, Serve: n.serve, Sessions: n.sessions, Secret: []byte(os.Getenv("GATEWAY_SECRET_KEY")),
		Fences: n.store, Logger: n.log.With("component", "cluster"), Metrics: n.reg,
	})
	if err != nil {
		dir.close()
		return err
	}
	n.node = node
	close(n.started)
	return nil
}

// leaseTTL is the cluster's lease TTL as given (0: the cluster's, or the default for a new one).
func (n *clusterNode) leaseTTL() time.Duration {
	if n.c.leaseGiven {
		return n.c.leaseTTL
	}
	return 0
}

// Acquire starts partition p from its records (cluster.Handler).
func (n *clusterNode) Acquire(ctx context.Context, a *cluster.Acquisition) (err error) {
	select {
	case <-n.started:
	case <-ctx.Done():
		return ctx.Err()
	}
	p := a.Partition()
	began := time.Now()
	pt := &partition{id: p, view: n.store.Partition(p, a)}
	defer func() {
		if err != nil {
			pt.stop(context.Background())
		}
	}()
	recs := persist.NewRecords(pt.view)
	log := n.log.With("partition", p)
	recs.Outbox.SetLogger(log.With("component", "outbox"))
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		return fmt.Errorf("events: %w", err)
	}
	guard := media.Guard{AllowPrivate: n.c.webhookAllowPrivate}
	pt.events, err = engine.NewEvents(engine.EventsConfig{
		Store: recs.Webhooks, Actors: hw, Log: log.With("component", "events"), Metrics: n.reg,
		Poster: webhook.NewHTTPPoster(guard.Dialer(5*time.Second), webhook.Timeout, 0), Guard: guard,
		Secrets: engine.NewSecretBox(n.stores.Sealer), Live: n.live,
	})
	if err != nil {
		return err
	}
	if err := pt.events.Boot(ctx); err != nil {
		return err
	}
	pt.engine, err = engine.New(engine.Config{
		Store: recs.Store, Records: engineRecords(recs), Logger: log.With("component", "engine"), Plans: n.plans,
		DefaultPlan: n.c.defaultPlan, AdminUIDs: strings.Split(n.c.adminUIDs, ","), DevRoles: n.c.auth == "dev",
		Network: fencedNetwork{n.net, a.Valid},
		Stores:  n.stores, Now: n.c.now, AfterFunc: n.c.afterFunc, Pacing: n.c.pacing(), BootWindow: n.c.bootWindowOrDefault(),
		Events: pt.events, Mover: &mover{n: n, p: p, from: recs},
	})
	if err != nil {
		return err
	}
	pt.backend = &httpapi.Backend{Engine: pt.engine, Webhooks: pt.events, Partition: p}
	n.mu.Lock()
	n.parts[p] = pt
	n.mu.Unlock()
	log.Info("partition started", "took_ms", time.Since(began).Milliseconds())
	return nil
}

// Release stops partition p gracefully (cluster.Handler): its requests have finished.
func (n *clusterNode) Release(ctx context.Context, p int) error {
	if pt := n.take(p); pt != nil {
		sctx, cancel := context.WithTimeout(ctx, n.c.shutdownTimeout)
		defer cancel()
		pt.stop(sctx)
	}
	return nil
}

// Fenced stops partition p at once (cluster.Handler): another node may hold it already, so
// nothing of it may write (its view refuses) or send (its network refuses).
func (n *clusterNode) Fenced(p int) {
	if pt := n.take(p); pt != nil {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			pt.stop(ctx)
		}()
	}
}

func (n *clusterNode) take(p int) *partition {
	n.mu.Lock()
	defer n.mu.Unlock()
	pt := n.parts[p]
	delete(n.parts, p)
	if pt != nil {
		pt.retire = func() {
			n.mu.Lock()
			defer n.mu.Unlock()
			addCounters(&n.retired, pt.engine.Stats())
			addStoreCounters(&n.retiredStore, pt.engine.Stores.Stats())
		}
	}
	return pt
}

// stop stops a partition's engine, then its events (which publish the engine's last changes),
// then closes its view.
func (pt *partition) stop(ctx context.Context) {
	if pt.engine != nil {
		pt.engine.Stop(ctx)
		if pt.retire != nil {
			pt.retire()
		}
	}
	if pt.events != nil {
		pt.events.Stop(ctx)
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
		if err := pt.engine.Sessions.Adopt(ctx, string(env.Body)); err != nil {
			return &cluster.Response{Status: 503, Body: []byte(err.Error())}
		}
		return &cluster.Response{Status: 200}
	}
	return n.http.ServeForwarded(ctx, pt.backend, env)
}

// sessions counts the sessions running here (the heartbeat's and the snapshot's).
func (n *clusterNode) sessions() int {
	total := 0
	n.mu.RLock()
	defer n.mu.RUnlock()
	for _, pt := range n.parts {
		total += pt.engine.Stats().Sessions
	}
	return total
}

// --- httpapi.Cluster ---

func (n *clusterNode) PartitionOf(id string) int { return cluster.PartitionOf(id, n.c.partitions) }

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
	if slices.Contains(splitList(n.c.adminUIDs), uid) {
		return engine.RoleAdmin
	}
	return stored
}

func (n *clusterNode) Records() httpapi.ClusterRecords { return clusterRecords{n} }

func (n *clusterNode) Snapshot() cluster.Snapshot { return n.node.Snapshot() }

func (n *clusterNode) NodeID() string { return n.node.ID() }

func (n *clusterNode) Listen(uid string) *engine.Listener { return n.live.hub.Listen(uid) }

// stats sums the partitions' engine counters (/metrics), with those of the partitions that
// ran here before.
func (n *clusterNode) stats() engine.Stats {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := n.retired
	for _, pt := range n.parts {
		s := pt.engine.Stats()
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
		s := pt.engine.Stores.Stats()
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

// --- admin lists, from every partition's records ---

type clusterRecords struct{ n *clusterNode }

func (r clusterRecords) all() *persist.Records { return persist.NewRecords(r.n.store) }

func (r clusterRecords) Users() ([]domain.User, error) {
	us, err := r.all().Store.ListUsers()
	if err != nil {
		return nil, fmt.Errorf("%w: list users: %w", domain.ErrUnavailable, err)
	}
	return us, nil
}

func (r clusterRecords) names() (map[string]domain.User, error) {
	us, err := r.Users()
	if err != nil {
		return nil, err
	}
	out := make(map[string]domain.User, len(us))
	for _, u := range us {
		out[u.ID] = u
	}
	return out, nil
}

func clientName(u domain.User) string {
	switch {
	case u.Name != "":
		return u.Name
	case u.Email != "":
		return u.Email
	}
	return u.ID
}

func (r clusterRecords) Keys() ([]engine.KeyView, error) {
	keys, err := r.all().Store.ListKeys()
	if err != nil {
		return nil, fmt.Errorf("%w: list keys: %w", domain.ErrUnavailable, err)
	}
	users, err := r.names()
	if err != nil {
		return nil, err
	}
	out := make([]engine.KeyView, 0, len(keys))
	for _, k := range keys {
		u, known := users[k.UserID]
		plan := u.Plan
		if plan == "" {
			plan = r.n.c.defaultPlan
		}
		v := engine.KeyView{Grant: domain.Grant{Key: k, Plan: plan, Limit: r.n.plans[plan].RateLimit}}
		if known {
			v.ClientName = clientName(u)
		}
		if usage, err := persist.NewStore(r.n.store.Partition(r.n.PartitionOf(k.UserID), nil)).GetKeyUsage(k.ID); err == nil {
			v.APICalls = usage.CallsMark
		}
		out = append(out, v)
	}
	return out, nil
}

func (r clusterRecords) Sessions() ([]engine.SessionView, error) {
	sts, err := r.all().Sessions.ListSessions()
	if err != nil {
		return nil, fmt.Errorf("%w: list sessions: %w", domain.ErrUnavailable, err)
	}
	users, err := r.names()
	if err != nil {
		return nil, err
	}
	out := make([]engine.SessionView, 0, len(sts))
	for _, st := range sts {
		v := engine.SessionView{Session: st}
		if u, ok := users[st.AssignedTo]; ok {
			v.ClientName = clientName(u)
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b engine.SessionView) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// --- moving sessions between partitions (engine.Mover) ---

type mover struct {
	n    *clusterNode
	p    int
	from *persist.Records
}

func (m *mover) Local(uid string) bool { return m.n.PartitionOf(uid) == m.p }

func (m *mover) User(_ context.Context, uid string) (domain.User, error) {
	u, found, err := m.n.User(uid)
	if err == nil && !found {
		err = fmt.Errorf("%w: %s", domain.ErrUserNotFound, uid)
	}
	return u, err
}

// Move copies the session's protection records and then the session itself into the new
// user's partition (each only where absent: a resumed move never overwrites), then has that
// partition's owner start it.
func (m *mover) Move(ctx context.Context, st domain.Session) error {
	q := m.n.PartitionOf(st.AssignedTo)
	to := persist.NewRecords(m.n.store.Partition(q, nil))
	if err := m.from.Protections.CopySession(ctx, to.Protections, st.ID, time.Now()); err != nil {
		return err
	}
	if err := to.Sessions.AdoptSession(ctx, st); err != nil {
		return err
	}
	for {
		if b, done, ok := m.n.Enter(q); ok {
			err := b.Engine.Sessions.Adopt(ctx, st.ID)
			done()
			return err
		}
		resp, err := m.n.node.Forward(ctx, q, &cluster.Envelope{Route: adoptRoute, Method: "POST", Body: []byte(st.ID), Wait: 20 * time.Second})
		switch {
		case errors.Is(err, cluster.ErrLocal):
			continue
		case err != nil:
			return err
		case resp.Status != 200:
			return fmt.Errorf("%w: the new owner could not start the session: %s", domain.ErrNodeUnavailable, resp.Body)
		}
		return nil
	}
}

// --- the network, fenced ---

// fencedNetwork refuses a partition's network calls once this node may no longer run it (a
// process paused past its lease must not connect or send for a session another node runs
// now); the refusal is ErrNotConnected, which keeps messages queued.
type fencedNetwork struct {
	network.Network
	ok func() bool
}

func (f fencedNetwork) Open(sessionID string, sink func(network.Event), opts ...network.Option) (network.Client, error) {
	c, err := f.Network.Open(sessionID, sink, opts...)
	if err != nil {
		return nil, err
	}
	return fencedClient{c, f.ok}, nil
}

// Close is the node's to make, not a partition's.
func (f fencedNetwork) Close() error { return nil }

type fencedClient struct {
	network.Client
	ok func() bool
}

var errFencedNetwork = fmt.Errorf("%w: this node no longer runs the session's partition", domain.ErrNotConnected)

func (c fencedClient) Connect(ctx context.Context) error {
	if !c.ok() {
		return errFencedNetwork
	}
	return c.Client.Connect(ctx)
}

func (c fencedClient) PairPhone(ctx context.Context, phone string) (string, error) {
	if !c.ok() {
		return "", errFencedNetwork
	}
	return c.Client.PairPhone(ctx, phone)
}

func (c fencedClient) Send(ctx context.Context, m domain.Message) (network.Receipt, error) {
	if !c.ok() {
		return network.Receipt{}, errFencedNetwork
	}
	return c.Client.Send(ctx, m)
}

func (c fencedClient) Logout(ctx context.Context) error {
	if !c.ok() {
		return errFencedNetwork
	}
	return c.Client.Logout(ctx)
}

// defaultNodeID is <host name>:<port of --addr> (DESIGN.md section 13.1).
func defaultNodeID(addr string) string {
	host, _ := os.Hostname()
	port := addr
	if i := strings.LastIndexByte(addr, ':'); i >= 0 {
		port = addr[i+1:]
	}
	if _, err := strconv.Atoi(port); err != nil || host == "" {
		return host + port
	}
	return host + ":" + port
}
