package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	goruntime "runtime"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/httpapi"
	"github.com/gateway/gateway/identity"
	"github.com/gateway/gateway/natsevents"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/network/cloud"
	"github.com/gateway/gateway/network/whatsapp"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/web"
)

// Node is one running gateway process: a single node, or one node of a cluster.
type Node struct {
	c        Config
	log      *slog.Logger
	st       storage
	net      network.Network
	cloud    *cloud.Network // the Cloud API network (DESIGN.md section 17)
	verifier *identity.Verifier
	issuer   *identity.Issuer // dev auth only
	http     *httpapi.Server
	eventsTo *natsevents.Publisher // --events-nats (nil: off)
	single   *runtime              // a single node's core (nil on a cluster node)
	cluster  *clusterNode          // a cluster node's partitions (nil on a single node)
	lost     <-chan struct{}
	stopOnce sync.Once
}

// Open builds a node from c and starts it, in the start order the package doc gives; Serve
// then serves its HTTP API. On error, whatever was opened is closed again.
func Open(ctx context.Context, c Config, log *slog.Logger) (_ *Node, err error) {
	if err := testBuild(&c); err != nil {
		return nil, err
	}
	// Configuration errors first, before anything is opened.
	if err := c.Check(); err != nil {
		return nil, err
	}
	if c.DefaultPlan == "" {
		// The engine's own default, set here too: the cluster's key list resolves plans
		// without an engine (clusterRecords.Keys) and must fall back to the same plan.
		c.DefaultPlan = engine.BuiltinDefaultPlan
	}
	stores, err := storeConfig(c)
	if err != nil {
		return nil, err
	}
	n := &Node{c: c, log: log}
	defer func() {
		if err != nil {
			n.Shutdown(context.Background())
		}
	}()
	if err := os.MkdirAll(c.Data, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	plans := engine.DefaultPlans()
	if c.PlansFile != "" {
		if plans, err = engine.LoadPlans(c.PlansFile); err != nil {
			return nil, err
		}
	}
	// Storage before the identity provider: a data dir that cannot be opened fails the start at
	// once, before the provider is contacted (up to 2.5 s) or an outage of it is logged.
	if n.st, err = openStorage(ctx, c, log); err != nil {
		return nil, err
	}
	n.lost = n.st.lost
	if err := n.openIdentity(ctx, stores); err != nil {
		return nil, err
	}
	net, sim, err := openNetwork(c, log)
	if err != nil {
		return nil, err
	}
	n.net = net
	if n.eventsTo, err = openEvents(ctx, c, log); err != nil {
		return nil, err
	}
	reg := n.metrics()
	site, err := web.New()
	if err != nil {
		return nil, err
	}
	verifier, issuer := n.verifier, n.issuer
	dash := httpapi.DashboardConfig{Site: site, Auth: c.Auth, OIDCIssuer: c.OIDCIssuer, ClientID: c.DashboardClientID,
		FirebaseAPIKey: c.FirebaseAPIKey, FirebaseAuthURL: c.FirebaseAuthURL, Endpoints: verifier.Endpoints}
	if issuer != nil { // a nil *Issuer in the interface would not be a nil TokenMinter
		dash.DevIssuer = issuer
	}
	identityCheck := func() error {
		if st := verifier.Status(); !st.Ready || st.Err != nil {
			return errors.New("unavailable")
		}
		return nil
	}
	hc := httpapi.Config{
		Verifier: verifier, DevRoles: c.Auth == "dev", Logger: log.With("component", "http"),
		Registry: reg, InternalCIDRs: c.InternalCIDRs, BodyLimit: c.BodyLimit,
		CORSOrigins: c.CORSOrigins, Storage: n.st.kv.Health,
		ReadyChecks: []httpapi.ReadyCheck{
			{Name: "storage", Critical: true, Check: n.st.kv.Health},
			{Name: "identity", Check: identityCheck},
		},
		LogRequests: c.LogRequests, AccessLog: c.accessLog(log), Version: c.Version, SimURL: c.SimURL, BulkMaxRecipients: c.BulkMaxRecipients,
		Media:     httpapi.MediaOptions{MaxBytes: c.MediaMaxBytes, AllowPrivate: c.MediaAllowPrivate},
		Dashboard: dash, AudioCheck: c.audioCheck(),
	}
	if sim != nil { // nil unless the embedded sim (a nil *sim.Network in the interface is not)
		hc.Sim = sim
	}
	n.cloud = openCloud(c, log)
	sh := shared{c: c, plans: plans, stores: stores, reg: reg, cloud: n.cloud}
	if n.eventsTo != nil { // a nil *Publisher in the interface would not be a nil forwarder
		sh.forward = n.eventsTo
	}
	if c.Cluster {
		return n, n.joinCluster(ctx, sh, hc)
	}
	ro := runtimeOptions{kv: n.st.kv, log: log, net: n.net, cloud: n.cloud, adoptInbound: true}
	if n.st.nats != nil {
		ro.askTimeout = natsAskTimeout
	}
	if n.single, err = newRuntime(ctx, sh, ro); err != nil {
		return nil, err
	}
	hc.Engine, hc.Webhooks = n.single.engine, n.single.events
	if n.http, err = httpapi.New(hc); err != nil {
		return nil, err
	}
	return n, nil
}

// openIdentity opens the ID token verifier: OIDC, or the embedded dev issuer (a cluster's
// issuer key is the cluster's, in the store: every node verifies what any mints).
func (n *Node) openIdentity(ctx context.Context, stores engine.StoreConfig) error {
	c := n.c
	var err error
	switch {
	case c.Auth == "oidc":
		n.verifier, err = identity.NewOIDC(ctx, c.OIDCIssuer, c.OIDCAudience, identity.OIDCOptions{
			Logger: n.log.With("component", "identity"), AllowAnonymous: c.OIDCAllowAnonymous,
			RequireEmailVerified: c.OIDCRequireEmailVerified,
		})
	case c.Cluster:
		pem, kerr := devIssuerKey(ctx, n.st.nats, stores.Sealer)
		if kerr != nil {
			return fmt.Errorf("dev issuer: %w", kerr)
		}
		n.verifier, n.issuer, err = identity.NewDevFromPEM(pem)
	default:
		n.verifier, n.issuer, err = identity.NewDev(c.Data)
	}
	return err
}

// metrics is the registry /metrics serves, with the node's own gauges and counters in it.
func (n *Node) metrics() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(n.verifier.Collectors()...)
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "gateway_build_info", Help: "Always 1; the labels name the running build.",
		ConstLabels: prometheus.Labels{"version": n.c.Version, "goversion": goruntime.Version()},
	}, func() float64 { return 1 }))
	if s := n.st.nats; s != nil {
		stat := func(i int) func() float64 {
			return func() float64 { g, b := s.Stats(); r, n := s.WriteStats(); return float64([]uint64{g, b, r, n}[i]) }
		}
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_storage_commits_total", Help: "Commit groups sent to NATS JetStream (a message or an atomic batch each)."}, stat(0)),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_storage_batches_total", Help: "Of those, atomic batches of more than one message."}, stat(1)),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_storage_writes_total", Help: "Records written or deleted by the commits NATS JetStream applied (a message each)."}, stat(2)),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_storage_write_bytes_total", Help: "Subject and value bytes of those records."}, stat(3)))
	}
	if b, ok := n.st.kv.(*persist.Badger); ok {
		// What the records cost the store (bench/README.md reads them per message).
		stat := func(i int) func() float64 {
			return func() float64 { t, w, n := b.WriteStats(); return float64([]uint64{t, w, n}[i]) }
		}
		reg.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_storage_commits_total", Help: "Write transactions committed to Badger (group commits)."}, stat(0)),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_storage_writes_total", Help: "Records written or deleted in Badger's committed transactions."}, stat(1)),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_storage_write_bytes_total", Help: "Key and value bytes of those records."}, stat(2)),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_storage_slow_commits_total", Help: "Commits to Badger that waited over 100 ms (written and synced); each run of them is logged at warn with what it waited on."}, func() float64 { return float64(b.SlowCommits()) }))
	}
	if n.c.Network == "whatsapp" {
		// How old the WhatsApp library is: WhatsApp retires old client builds (README, "Bumping
		// whatsmeow"); alert well before 30 days.
		if v, _, ok := whatsapp.Library(); ok {
			reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "gateway_network_library_age_days", Help: "Days since the commit of the messaging network's library in this build (whatsmeow).",
				ConstLabels: prometheus.Labels{"library": "go.mau.fi/whatsmeow", "version": v},
			}, func() float64 { d, _ := whatsapp.LibraryAgeDays(time.Now()); return d }))
		}
	}
	return reg
}

// joinCluster builds this node of the cluster and joins it (Open's end with --cluster): the
// HTTP server over the partitions this node will own, then the membership, which starts
// taking partitions.
func (n *Node) joinCluster(ctx context.Context, sh shared, hc httpapi.Config) error {
	cn := newClusterNode(sh, n.log, n.st, n.net)
	n.cluster = cn
	hc.Cluster, hc.Stats, hc.StoreStats = cn, cn.stats, cn.storeStats
	hc.ReadyChecks = append(hc.ReadyChecks, httpapi.ReadyCheck{Name: "cluster", Critical: true, Check: cn.health})
	var err error
	if n.http, err = httpapi.New(hc); err != nil {
		return err
	}
	cn.http = n.http
	if err := cn.start(ctx); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	n.lost = cn.node.Done()
	n.log.Info("joined the cluster", "node_id", n.c.NodeID, "partitions", n.c.Partitions, "prefix", n.c.NATSPrefix)
	return nil
}

// Serve serves the HTTP API on ln until Shutdown.
func (n *Node) Serve(ln net.Listener) error { return n.http.Serve(ln) }

// Lost is closed when the node must stop (nil: never): a cluster node left the cluster for
// good (another process took its node id), or a lone --store nats node lost its single-writer
// lease to another gateway (its state is stale: it must not write). Err says which.
func (n *Node) Lost() <-chan struct{} { return n.lost }

// Err is why Lost was closed (nil while it is not).
func (n *Node) Err() error {
	select {
	case <-n.lost:
	default:
		return nil
	}
	if n.cluster != nil {
		return fmt.Errorf("left the cluster: %w", n.cluster.node.Err())
	}
	return fmt.Errorf("lost the single-writer lease on NATS prefix %q to another gateway", n.c.NATSPrefix)
}

// DevIssuer is the embedded dev issuer (dev auth; nil with OIDC).
func (n *Node) DevIssuer() *identity.Issuer { return n.issuer }

// Events is a single node's events facet (nil on a cluster node): tests publish through it.
func (n *Node) Events() *engine.Events {
	if n.single == nil {
		return nil
	}
	return n.single.events
}

// Shutdown stops the node, in the one stop order: stop accepting and drain requests (within
// ctx), hand a cluster node's partitions over, stop the core (the engine, then events out,
// which publishes its last changes), then close the network, the identity provider and
// storage. Safe to call more than once, and on a node Open is still building.
func (n *Node) Shutdown(ctx context.Context) {
	n.stopOnce.Do(func() {
		if n.http != nil {
			if err := n.http.Shutdown(ctx); err != nil {
				n.log.Warn("http shutdown", "err", err)
			}
		}
		if n.cluster != nil {
			n.cluster.leave(ctx) // every partition handed over to the other nodes
		}
		if n.single != nil {
			n.single.stop(ctx)
		}
		n.eventsTo.Close() // after the runtimes: they published their last events through it
		if n.net != nil {
			if err := n.net.Close(); err != nil {
				n.log.Warn("close network", "err", err)
			}
		}
		if n.cloud != nil {
			_ = n.cloud.Close()
		}
		if n.verifier != nil {
			n.verifier.Close()
		}
		n.st.close(n.log)
	})
}

// ServePprof serves the runtime profiles (CPU, heap, allocations, goroutines) on their own
// listener, so they are never reachable through the API's address.
func ServePprof(addr string, log *slog.Logger) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	log.Info("pprof listening", "addr", addr)
	if err := http.ListenAndServe(addr, mux); err != nil {
		log.Error("pprof", "err", err)
	}
}
