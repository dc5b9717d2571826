// Command bench is the gateway's load-test harness (`make bench`, `make bench-quick`).
//
// It owns bench/ and imports only the identity package's dev issuer (to mint client ID tokens
// with the key file the gateway uses, as `gateway token` does, without a process per user) and
// persist's Badger (the bare server's durable floor): everything else goes through the gateway
// binary, run as a separate process, its public HTTP API and its CLI, as an operator would. It
// starts the gateway on loopback with the sim network, dev auth and a fresh data
// dir, provisions users, linked sessions and API keys through the API, then measures each
// case with a fasthttp-client load generator (HdrHistogram latencies) against the gateway and
// against a bare fasthttp server (this binary's `bare` mode, its own process) that answers the
// same bytes, so every figure is a ratio taken side by side in one run (DESIGN.md section 8).
// The cases that write durably are measured a third time against the floor: the bare server
// making one Badger commit per request before its answer.
//
//	bench run   [flags]  the cases, the connection sweep and the fixed-rate run (default)
//	bench scale [flags]  memory and goroutines per linked session (and per campaign), boot time
//	bench cluster [flags] 3 nodes beside 1 node, the forwarding overhead, hand-over times
//	bench bare  [flags]  the bare server (started by run; prints its address on stdout)
//	bench profile CPU.prof [messages]  a gateway CPU profile split by component
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// roleEnv makes a re-executed copy of this binary (or of its test binary) act as the bare
// server whatever its arguments: see startBare.
const roleEnv = "GATEWAY_BENCH_ROLE"

func main() {
	if os.Getenv(roleEnv) == "bare" {
		os.Exit(exitCode(bareMain(os.Args[1:], os.Stdout, os.Stderr)))
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err))
}

func exitCode(err error) int {
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errFailed):
		return 1 // the report already says why
	}
	fmt.Fprintln(os.Stderr, "bench:", err)
	return 2
}

// errFailed: the run finished but a case had errors or lost messages.
var errFailed = errors.New("benchmark failed")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := "run"
	if len(args) > 0 && len(args[0]) > 0 && args[0][0] != '-' {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "run":
		o, err := parseRun(args, stderr)
		if err != nil {
			return err
		}
		return runBench(ctx, o, stdout)
	case "scale":
		o, err := parseScale(args, stderr)
		if err != nil {
			return err
		}
		return runScale(ctx, o, stdout)
	case "cluster":
		o, err := parseCluster(args, stderr)
		if err != nil {
			return err
		}
		return runCluster(ctx, o, stdout)
	case "bare":
		return bareMain(args, stdout, stderr)
	case "profile":
		return profileMain(args, stdout)
	}
	return fmt.Errorf("unknown command %q (run, scale, cluster, bare, profile)", cmd)
}
