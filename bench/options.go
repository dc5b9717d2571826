package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// runOptions are the flags of `bench run`.
type runOptions struct {
	gateway      string
	duration     time.Duration
	warmup       time.Duration
	conns        int
	sweep        []int
	rateFraction float64
	rateDuration time.Duration
	ratePerConn  bool // the fixed-rate schedule split between the connections (load.perConn)
	quick        bool
	wrk          string // wrk binary: "auto" (PATH), a path, or "off"
	profile      bool   // CPU per message by component, from gateway profiles
	rounds       int    // rounds of alternated windows per closed-loop case of roundsCases (rounds.go)
	roundsCases  []string
	users        int
	cases        []string
	fsync        []string
	stores       []string
	timeout      time.Duration
	settle       time.Duration
	results      string
	readme       string
	keep         bool
	cpuProfile   string
	command      string // how this run was invoked, for the report
}

func parseRun(args []string, stderr io.Writer) (runOptions, error) {
	var o runOptions
	var sweep, cases, fsync, stores, roundsCases string
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.gateway, "gateway", "bin/gateway", "gateway binary to start")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per case and server (quick: 2s)")
	fs.DurationVar(&o.warmup, "warmup", 3*time.Second, "warm-up before each measurement, not recorded (quick: 500ms)")
	fs.IntVar(&o.conns, "conns", 64, "connections for the cases and the fixed-rate run")
	fs.StringVar(&sweep, "sweep", "1,16,64,256", "connection counts of the sweep (run on v1 send; empty = no sweep)")
	fs.Float64Var(&o.rateFraction, "rate-fraction", 0.5, "fixed-rate (open-loop) run of v1 send at this fraction of the closed-loop peak (0 = none)")
	fs.DurationVar(&o.rateDuration, "rate-duration", 60*time.Second, "measured time of the fixed-rate run (quick: --duration)")
	fs.BoolVar(&o.ratePerConn, "rate-per-conn", false, "fixed-rate run: each connection sends its own share of the schedule in turn, behind its own answers, as wrk2 does (default: the next request due goes out on the first connection free)")
	fs.StringVar(&o.wrk, "wrk", "auto", "wrk binary measuring every closed-loop case beside the bench's generator (auto: from PATH; off: none)")
	fs.BoolVar(&o.profile, "profile", true, "profile the gateway during v1 send and webhook (CPU per message by component; the gateway gets a loopback --pprof)")
	fs.IntVar(&o.rounds, "rounds", 3, "rounds per generator of the closed-loop cases of --rounds-cases at --conns: each round one window per server (gateway, bare, floor), the order rotated each round, the servers up throughout; each figure the rounds' median, each ratio the median of the rounds' ratios with its lowest-highest (quick: 1)")
	fs.StringVar(&roundsCases, "rounds-cases", "send,validate,status", "cases measured in --rounds rounds (the others, the sweep's other counts and the fixed-rate run: one window per server)")
	fs.BoolVar(&o.quick, "quick", false, "smoke test: short runs, fewer users, no results file or README update unless asked")
	fs.IntVar(&o.users, "users", 100, "users, each with a linked sim session and an API key (quick: 20)")
	fs.StringVar(&cases, "cases", strings.Join(caseIDs(), ","), "cases to run")
	fs.StringVar(&fsync, "fsync", "batch,interval", "gateway --fsync modes, one gateway each; all cases run under the first, the send cases under the others")
	fs.StringVar(&stores, "store", "badger", "record stores, one gateway phase each: badger (one per --fsync mode), nats (every case on JetStream, an embedded server; no targets yet)")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "per-request timeout (a timeout is an error)")
	fs.DurationVar(&o.settle, "settle", 500*time.Millisecond, "before each measurement, wait (up to 30s) for a window this long in which the gateway uses under 10% of a core (0 = don't wait; quick: 200ms)")
	fs.StringVar(&o.results, "results", "bench/results", "directory for <UTC date>.json (empty = none; quick: none unless given)")
	fs.StringVar(&o.readme, "readme", "bench/README.md", "README whose figures block is replaced (empty = none; quick: none unless given)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work dir (gateway data and logs)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write the load generator's own CPU profile here (to check its overhead)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if o.quick {
		given := map[string]bool{}
		fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
		defaults := map[string]string{"duration": "2s", "warmup": "500ms", "users": "20", "settle": "200ms", "results": "", "readme": "", "rate-duration": "0", "rounds": "1"}
		for name, v := range defaults {
			if !given[name] {
				_ = fs.Set(name, v)
			}
		}
	}
	var err error
	if o.sweep, err = parseInts(sweep); err != nil {
		return o, fmt.Errorf("--sweep: %w", err)
	}
	o.cases = splitList(cases)
	for _, id := range o.cases {
		if caseByID(id) == nil {
			return o, fmt.Errorf("--cases: unknown case %q (known: %s)", id, strings.Join(caseIDs(), ", "))
		}
	}
	o.roundsCases = splitList(roundsCases)
	for _, id := range o.roundsCases {
		if caseByID(id) == nil {
			return o, fmt.Errorf("--rounds-cases: unknown case %q (known: %s)", id, strings.Join(caseIDs(), ", "))
		}
	}
	o.stores = splitList(stores)
	for _, st := range o.stores {
		if st != "badger" && st != "nats" {
			return o, fmt.Errorf("--store: %q is not badger or nats", st)
		}
	}
	if len(o.stores) == 0 {
		return o, fmt.Errorf("--store: at least one store")
	}
	o.fsync = splitList(fsync)
	for _, m := range o.fsync {
		if m != "batch" && m != "interval" {
			return o, fmt.Errorf("--fsync: %q is not batch or interval", m)
		}
	}
	switch {
	case len(o.fsync) == 0:
		return o, fmt.Errorf("--fsync: at least one mode")
	case o.duration <= 0 || o.warmup < 0 || o.timeout <= 0 || o.settle < 0 || o.rateDuration < 0:
		return o, fmt.Errorf("--duration and --timeout must be positive, --warmup, --settle and --rate-duration not negative")
	case o.conns < 1 || o.conns > maxConns:
		return o, fmt.Errorf("--conns must be 1 to %d", maxConns)
	case o.users < 1 || o.users > maxUsers:
		return o, fmt.Errorf("--users must be 1 to %d", maxUsers)
	case o.rounds < 1 || o.rounds > maxRounds:
		return o, fmt.Errorf("--rounds must be 1 to %d", maxRounds)
	case o.rateFraction < 0 || o.rateFraction > 1:
		return o, fmt.Errorf("--rate-fraction must be 0 to 1")
	}
	for _, c := range o.sweep {
		if c < 1 || c > maxConns {
			return o, fmt.Errorf("--sweep: connection counts must be 1 to %d", maxConns)
		}
	}
	if o.rateDuration == 0 {
		o.rateDuration = o.duration
	}
	o.command = "bench run " + strings.Join(args, " ")
	return o, nil
}

// scaleOptions are the flags of `bench scale`.
type scaleOptions struct {
	gateway     string
	sessions    int
	campaigns   int
	fsync       string
	gogc        int
	concurrency int
	results     string
	readme      string
	keep        bool
	command     string
}

func parseScale(args []string, stderr io.Writer) (scaleOptions, error) {
	var o scaleOptions
	fs := flag.NewFlagSet("scale", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.gateway, "gateway", "bin/gateway", "gateway binary to start")
	fs.IntVar(&o.sessions, "sessions", 10000, "users, each with a session linked through the sim")
	fs.IntVar(&o.campaigns, "campaigns", 10000, "running campaigns to start (async bulk sends with a long delay; skipped while the route is missing)")
	fs.StringVar(&o.fsync, "fsync", "batch", "gateway --fsync mode")
	fs.IntVar(&o.gogc, "gogc", 10, "GOGC of the gateway while memory is measured, so the heap tracks live bytes (0 = runtime default); the reboot uses the default")
	fs.IntVar(&o.concurrency, "concurrency", 8, "provisioning requests in flight")
	fs.StringVar(&o.results, "results", "bench/results", "directory for <UTC date>-scale.json (empty = none)")
	fs.StringVar(&o.readme, "readme", "bench/README.md", "README whose scale block is replaced (empty = none)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work dir (gateway data and logs)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch {
	case fs.NArg() > 0:
		return o, fmt.Errorf("unexpected arguments: %v", fs.Args())
	case o.sessions < 1 || o.sessions > maxUsers:
		return o, fmt.Errorf("--sessions must be 1 to %d", maxUsers)
	case o.campaigns < 0:
		return o, fmt.Errorf("--campaigns must not be negative")
	case o.fsync != "batch" && o.fsync != "interval":
		return o, fmt.Errorf("--fsync must be batch or interval")
	case o.gogc < 0 || o.concurrency < 1:
		return o, fmt.Errorf("--gogc must not be negative, --concurrency positive")
	}
	o.command = "bench scale " + strings.Join(args, " ")
	return o, nil
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, p := range splitList(s) {
		n, err := strconv.Atoi(p)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}
