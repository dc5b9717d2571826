package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/httpapi"
	"github.com/gateway/gateway/network/sim"
	"github.com/gateway/gateway/network/simhttp"
)

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
	log, err := newLogger(*logLevel, *logFormat, stderr)
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
				if a, ok := netip.AddrFromSlice(rc.RemoteIP()); !ok || !slices.ContainsFunc(allowed, func(p netip.Prefix) bool { return p.Contains(a.Unmap()) }) {
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

// simEnvName is the environment variable of a `gateway sim` flag: GATEWAY_SIM_<NAME>, the
// flag's own sim- left out (--sim-latency: GATEWAY_SIM_LATENCY), so a gateway's variables
// (GATEWAY_ADDR) never set the sim's.
func simEnvName(flag string) string {
	return "GATEWAY_SIM_" + strings.ToUpper(strings.ReplaceAll(strings.TrimPrefix(flag, "sim-"), "-", "_"))
}
