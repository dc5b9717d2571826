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

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/cluster"
	"github.com/gateway/gateway/httpapi"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/network/sim"
	"github.com/gateway/gateway/network/simhttp"
)

// Interface guards of the cluster's adapters.
var _ network.Network = (*simhttp.Network)(nil)

// clusterFlags are the cluster's `gateway serve` flags (DESIGN.md section 13). --cluster is
// parsed and refused until the engine runs on partitions (the JetStream store is its
// prerequisite); --sim-url works on its own. --node-id and --lease-ttl come with --store nats
// (persist/natskv's single-writer lease uses them too).
type clusterFlags struct {
	cluster    bool
	partitions int
	simURL     string
}

func addClusterFlags(fs *flag.FlagSet, c *clusterFlags) {
	fs.BoolVar(&c.cluster, "cluster", false, "run as one node of a cluster on NATS JetStream (needs --store nats)")
	fs.IntVar(&c.partitions, "partitions", cluster.DefaultPartitions, "partitions of the cluster, fixed when its buckets are first made")
	fs.StringVar(&c.simURL, "sim-url", "", "use the simulated network of a `gateway sim` process at this URL (http://host:port) instead of an embedded one")
}

// checkCluster checks the cluster's flags; set names the flags given (command line or
// environment).
func (c config) checkCluster(set map[string]bool) error {
	if c.cluster {
		return errors.New("--cluster needs phase B of the cluster work (the engine on partitions over the JetStream store); it is not wired in this build")
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
	if err := applySimEnv(fs); err != nil {
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

// applySimEnv is applyEnv for `gateway sim`.
func applySimEnv(fs *flag.FlagSet) error {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		env := simEnvName(f.Name)
		if v, ok := os.LookupEnv(env); ok && !given[f.Name] && err == nil {
			if e := fs.Set(f.Name, v); e != nil {
				err = fmt.Errorf("%s: %w", env, e)
			}
		}
	})
	return err
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

// setFlags names the flags given on the command line or by the environment.
func setFlags(fs *flag.FlagSet) map[string]bool {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	return set
}
