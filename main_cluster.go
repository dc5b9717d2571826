package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/cluster"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/httpapi"
	"github.com/gateway/gateway/identity"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/network/sim"
	"github.com/gateway/gateway/network/simhttp"
	"github.com/gateway/gateway/network/whatsapp"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/natskv"
)

// Interface guards of the cluster's adapters.
var _ network.Network = (*simhttp.Network)(nil)

// clusterFlags are the cluster's `gateway serve` flags (DESIGN.md section 13). --node-id and
// --lease-ttl come with --store nats (persist/natskv's single-writer lease of a lone node uses
// them too).
type clusterFlags struct {
	cluster    bool
	leaseGiven bool // --lease-ttl was given (else a node takes the cluster's)
	partitions int
	simURL     string
}

func addClusterFlags(fs *flag.FlagSet, c *clusterFlags) {
	fs.BoolVar(&c.cluster, "cluster", false, "run as one node of a cluster on NATS JetStream (needs --store nats and GATEWAY_SECRET_KEY; README: Cluster)")
	fs.IntVar(&c.partitions, "partitions", cluster.DefaultPartitions, "partitions of the cluster, fixed when its buckets are first made")
	fs.StringVar(&c.simURL, "sim-url", "", "use the simulated network of a `gateway sim` process at this URL (http://host:port) instead of an embedded one")
}

// checkCluster checks the cluster's flags (DESIGN.md section 13.1's start-up refusals that
// need no NATS); set names the flags given (command line or environment).
func (c *config) checkCluster(set map[string]bool) error {
	if c.cluster {
		switch {
		case c.store != "nats":
			return errors.New("--cluster needs --store nats (every node's records are in one JetStream stream)")
		case os.Getenv("GATEWAY_SECRET_KEY") == "":
			return errors.New("--cluster needs GATEWAY_SECRET_KEY, the same on every node (it seals store credentials, webhook secrets and the dev issuer's key; a key file in one node's data dir would not open the others' records)")
		case c.network == "whatsapp" && !whatsapp.IsPostgresURL(c.whatsappStore):
			return errors.New("--cluster --network whatsapp needs --whatsapp-store postgres://... (a session's device store must be reachable from whichever node runs it)")
		case c.network == "sim" && c.simURL == "":
			return errors.New("--cluster --network sim needs --sim-url (one `gateway sim` process every node shares: a session moves between nodes)")
		case c.partitions < 1 || c.partitions > 4096:
			return errors.New("--partitions must be 1 to 4096")
		case c.leaseTTL%time.Second != 0:
			return errors.New("--lease-ttl must be whole seconds with --cluster")
		}
		if c.nodeID == "" {
			c.nodeID = defaultNodeID(c.addr)
		}
		c.leaseGiven = set["lease-ttl"]
	}
	if c.simURL != "" {
		if c.network != "sim" {
			return errors.New("--sim-url needs --network sim")
		}
		for _, f := range []string{"sim-latency", "sim-autopair"} {
			if set[f] {
				return fmt.Errorf("--%s belongs to `gateway sim` when --sim-url is set (the sim process owns the network)", f)
			}
		}
		if !strings.HasPrefix(c.simURL, "http://") && !strings.HasPrefix(c.simURL, "https://") {
			return fmt.Errorf("--sim-url %q: want http://host:port", c.simURL)
		}
	}
	return nil
}

// joinCluster builds this node of the cluster and joins it (build's end with --cluster): the
// HTTP server over the partitions this node will own, then the membership, which starts
// taking partitions.
func (g *gateway) joinCluster(ctx context.Context, c config, hc httpapi.Config, plans engine.Plans, stores engine.StoreConfig, reg prometheus.Registerer) error {
	store := g.kv.(*natskv.Store)
	n := newClusterNode(c, g.log, g.nc, store, g.net, plans, stores, reg)
	g.cluster = n
	hc.Cluster, hc.Stats, hc.StoreStats = n, n.stats, n.storeStats
	hc.ReadyChecks = append(hc.ReadyChecks, httpapi.ReadyCheck{Name: "cluster", Critical: true, Check: n.health})
	var err error
	if g.http, err = httpapi.New(hc); err != nil {
		return err
	}
	n.http = g.http
	if err := n.start(ctx); err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	g.lost = n.node.Done()
	g.log.Info("joined the cluster", "node_id", c.nodeID, "partitions", c.partitions, "prefix", c.natsPrefix)
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
		n.live.hub.Close()
	})
}

// refuseBesideCluster refuses a lone --store nats gateway on a prefix where cluster nodes run
// (their records are partitioned; a lone gateway would write beside them unfenced).
func refuseBesideCluster(ctx context.Context, c config, o natskv.Options) error {
	if c.store != "nats" {
		return nil
	}
	nc, err := natskv.Connect(o)
	if err != nil {
		return fmt.Errorf("open storage: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	ids, err := cluster.Running(cctx, js, c.natsPrefix)
	if err != nil {
		return fmt.Errorf("open storage: %w", err)
	}
	if len(ids) > 0 {
		return fmt.Errorf("NATS prefix %q is a cluster's (nodes %s run there): start this gateway with --cluster, or give it another --nats-prefix", c.natsPrefix, strings.Join(ids, ", "))
	}
	return nil
}

// refuseBesideLone refuses a cluster node on a prefix a lone --store nats gateway holds.
func refuseBesideLone(ctx context.Context, c config, s *natskv.Store) error {
	node, live, err := s.LeaseHolder(ctx)
	if err != nil {
		return fmt.Errorf("open storage: %w", err)
	}
	if live {
		return fmt.Errorf("%w %q: gateway %q runs there without --cluster; stop it first, or give this cluster another --nats-prefix", natskv.ErrLeaseHeld, c.natsPrefix, node)
	}
	return nil
}

// devIssuerKey is the cluster's dev issuer key: made once by the first node (put-if-absent),
// sealed with GATEWAY_SECRET_KEY, in the records of no partition, so every node verifies the
// tokens any node (or `gateway token --store nats`) mints.
func devIssuerKey(ctx context.Context, s *natskv.Store, sealer engine.Sealer) ([]byte, error) {
	g := s.Global()
	key := []byte("dev_issuer/key")
	read := func() ([]byte, error) {
		sealed, err := g.Get(key)
		if err != nil {
			return nil, err
		}
		plain, err := sealer.Open(string(sealed))
		if err != nil {
			return nil, fmt.Errorf("the dev issuer key in the store does not open with this GATEWAY_SECRET_KEY: %w", err)
		}
		return []byte(plain), nil
	}
	pem, err := read()
	if !errors.Is(err, domain.ErrRecordNotFound) {
		return pem, err
	}
	if pem, err = identity.NewDevKeyPEM(); err != nil {
		return nil, err
	}
	sealed, err := sealer.Seal(string(pem))
	if err != nil {
		return nil, err
	}
	err = g.Commit(ctx, persist.IfAbsentOp(key), persist.Op{Key: key, Value: []byte(sealed)})
	if errors.Is(err, domain.ErrRecordExists) {
		return read() // another node made it first
	}
	return pem, err
}

// simCmd is `gateway sim`: the simulated network as its own process, shared by every node
// of a cluster (serve --network sim --sim-url http://ADDR). It serves the network port under
// /api/sim/v1/ and the dev routes (/api/dev/sim/*) that each node passes to it, and keeps
// its state (pairings, deliveries, numbers not on the network) in DATA/sim.
func simCmd(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("sim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", ":8090", "listen address")
	data := fs.String("data", "./sim-data", "data directory (the sim's journal at DATA/sim)")
	latency := fs.Duration("sim-latency", 0, "time each delivery takes")
	autopair := fs.Duration("sim-autopair", 0, "pair a session this long after its QR is shown (0 = never)")
	cidrs := fs.String("internal-cidrs", "127.0.0.0/8,::1/128", "addresses allowed to use the sim (the gateway nodes')")
	logLevel := fs.String("log-level", "info", "debug, info, warn or error")
	logFormat := fs.String("log-format", "json", "json or text")
	commandUsage(fs)
	if err := parseFlags(fs, args); err != nil {
		if errors.Is(err, errHelp) {
			return nil
		}
		return err
	}
	if err := applyEnvNamed(fs, simEnvName); err != nil {
		return err
	}
	allowed, err := parseCIDRs(*cidrs)
	if err != nil {
		return err
	}
	log, err := newLogger(config{logLevel: *logLevel, logFormat: *logFormat}, stderr)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	s, err := sim.Open(sim.Options{Dir: filepath.Join(*data, "sim"), AutoPair: *autopair, Latency: *latency, Logger: log.With("component", "sim")})
	if err != nil {
		return fmt.Errorf("open sim network: %w", err)
	}
	defer s.Close()
	port := simhttp.NewServer(s, log.With("component", "simhttp"))
	dev, err := httpapi.NewSim(httpapi.SimServerConfig{Sim: s, Logger: log.With("component", "http"), InternalCIDRs: allowed, Version: version})
	if err != nil {
		return err
	}
	devHandler := dev.Handler()
	srv := &fasthttp.Server{
		Name: "gateway-sim", NoDefaultServerHeader: true, ReadTimeout: time.Minute, IdleTimeout: 2 * time.Minute,
		MaxRequestBodySize: 64 << 20,
		Handler: func(rc *fasthttp.RequestCtx) {
			if strings.HasPrefix(string(rc.Path()), simhttp.PathPrefix) {
				if a, ok := netip.AddrFromSlice(rc.RemoteIP()); !ok || !inCIDRs(a.Unmap(), allowed) {
					rc.SetStatusCode(fasthttp.StatusForbidden)
					rc.SetContentType("application/json")
					rc.SetBodyString(`{"error":"this address is not in --internal-cidrs","code":"internal_only"}`)
					return
				}
				port.Handler(rc)
				return
			}
			devHandler(rc)
		},
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Info("sim network listening", "addr", ln.Addr().String(), "data", *data, "latency", *latency, "autopair", *autopair)
	select {
	case <-ctx.Done():
	case err := <-errc:
		return fmt.Errorf("sim: %w", err)
	}
	log.Info("sim network stopping")
	port.Close()
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = srv.ShutdownWithContext(sctx)
	return nil
}

func inCIDRs(a netip.Addr, cidrs []netip.Prefix) bool {
	for _, p := range cidrs {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// simEnvName is the environment variable of a `gateway sim` flag: GATEWAY_SIM_<NAME>, the
// flag's own sim- left out (--sim-latency: GATEWAY_SIM_LATENCY), so a gateway's variables
// (GATEWAY_ADDR) never set the sim's.
func simEnvName(flag string) string {
	return "GATEWAY_SIM_" + strings.ToUpper(strings.ReplaceAll(strings.TrimPrefix(flag, "sim-"), "-", "_"))
}

// openSimURL opens the network of a `gateway sim` process (--sim-url).
func (g *gateway) openSimURL(c config) error {
	n, err := simhttp.Dial(simhttp.Options{URL: c.simURL, Logger: g.log.With("component", "sim")})
	if err != nil {
		return err
	}
	g.net = n
	return nil
}

// clusterIssuer is the dev issuer of the cluster on o's prefix (`gateway token --store nats`):
// its key from the store, opened with GATEWAY_SECRET_KEY (made there if no node made it yet).
func clusterIssuer(o natskv.Options) (*identity.Issuer, error) {
	if o.URL == "" {
		return nil, errors.New("token: --store nats needs --nats (the NATS servers' URLs)")
	}
	v := os.Getenv("GATEWAY_SECRET_KEY")
	if v == "" {
		return nil, errors.New("token: --store nats needs GATEWAY_SECRET_KEY, the cluster's (it seals the dev issuer's key)")
	}
	key, err := persist.ParseSecretKey(v)
	if err != nil {
		return nil, fmt.Errorf("GATEWAY_SECRET_KEY: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := natskv.Open(ctx, o)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	pem, err := devIssuerKey(ctx, s, persist.NewSealer(key, ""))
	if err != nil {
		return nil, err
	}
	_, issuer, err := identity.NewDevFromPEM(pem)
	return issuer, err
}
