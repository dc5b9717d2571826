package main

// bench cluster (DESIGN.md section 19, README "Cluster"): what `bench run --store nats` measures
// (the same users, connections and cases, with the bench's generator and with wrk), measured on
// a lone `--store nats` gateway, a cluster of one node and a cluster of three, side by side on
// the same NATS, first one server (R1, embedded in this process) then three clustered servers
// (R3, embedded); then, on the three nodes of R1, the forwarding overhead (a request sent to a
// node that does not own the caller's partition against one sent to its owner) and the
// hand-over times (kill -9 of a node to every partition owned and every session CONNECTED
// again; its restart to its share back; SIGTERM to exit and hand-over). Every gateway uses one
// `gateway sim` process (a cluster needs it; the lone gateway uses it too, so the network is
// the same). A cluster's connections are spread over its nodes (what a load balancer does),
// each node with its own generator and its own wrk. On a machine of two cores three nodes
// share the cores one node had: the figures show the cluster's overhead, not its scale.

import (
	"cmp"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/gateway/gateway/persist/natstest"
)

type clusterOptions struct {
	gateway    string
	users      int
	conns      int
	duration   time.Duration
	warmup     time.Duration
	timeout    time.Duration
	settle     time.Duration
	cases      []string
	topologies []string
	wrk        string
	profile    bool
	handovers  bool
	readme     string
	streams    int
	keep       bool
}

func parseCluster(args []string, stderr io.Writer) (clusterOptions, error) {
	var o clusterOptions
	var cases, topologies string
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.gateway, "gateway", "bin/gateway", "gateway binary to start")
	fs.IntVar(&o.users, "users", 100, "users, each with a linked sim session, an API key and a store (bench run's default)")
	fs.IntVar(&o.conns, "conns", 64, "connections per case, spread over a cluster's nodes (bench run's default)")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per case")
	fs.DurationVar(&o.warmup, "warmup", 3*time.Second, "warm-up before each measurement, not recorded")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "per-request timeout (a timeout is an error)")
	fs.DurationVar(&o.settle, "settle", 500*time.Millisecond, "before each measurement, wait (up to 30s) for a window this long in which every gateway uses under 10% of a core (0 = don't)")
	fs.StringVar(&cases, "cases", strings.Join(caseIDs(), ","), "cases to run (bench run's)")
	fs.StringVar(&topologies, "nats", "r1,r3", "NATS setups: r1 (one server), r3 (three clustered servers, R3 streams)")
	fs.StringVar(&o.wrk, "wrk", "auto", "wrk binary measuring every case beside the bench's generator (auto: from PATH; off: none)")
	fs.BoolVar(&o.profile, "profile", true, "profile the lone gateway and the 1-node cluster during v1 send (CPU per message by component)")
	fs.BoolVar(&o.handovers, "handovers", true, "on R1's three nodes, measure the forwarding overhead and the hand-over times")
	fs.StringVar(&o.readme, "readme", "", "README whose cluster figures block is replaced (bench/README.md; empty = none)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work dir (data and logs)")
	fs.IntVar(&o.streams, "nats-streams", 0, "the cluster nodes' --nats-streams (0: not given, the nodes' default: one records stream per NATS server, at most 3)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.cases, o.topologies = splitList(cases), splitList(topologies)
	for _, id := range o.cases {
		if caseByID(id) == nil {
			return o, fmt.Errorf("--cases: no case %q", id)
		}
	}
	for _, t := range o.topologies {
		if t != "r1" && t != "r3" {
			return o, fmt.Errorf("--nats: %q (r1 or r3)", t)
		}
	}
	if o.users < 3 || o.conns < 3 {
		return o, fmt.Errorf("--users and --conns must be 3 or more")
	}
	return o, nil
}

// clusterSecret seals the bench cluster's secrets (GATEWAY_SECRET_KEY): 32 bytes, hex.
const clusterSecret = "62656e63682d636c75737465722d7365637265742d6b65792d33322d62797465"

// benchCluster is a set of gateways on one prefix: a lone --store nats gateway (one, not a
// cluster), or the nodes of a cluster.
type benchCluster struct {
	o      clusterOptions
	work   string
	prefix string
	args   []string
	nodes  []*gatewayProc
	ids    []string
	lone   bool
	admin  string
}

func (c *benchCluster) start(ctx context.Context, i int, pprof string) (time.Duration, error) {
	extra := c.args
	if !c.lone {
		extra = append([]string{"--node-id", c.ids[i]}, c.args...)
	}
	g, took, err := startGateway(ctx, gatewaySpec{
		bin: c.o.gateway, data: dataDir(c.work, fmt.Sprintf("%s-%s", c.prefix, c.ids[i])),
		log: filepath.Join(c.work, fmt.Sprintf("%s-%s.log", c.prefix, c.ids[i])), fsync: "batch", pprof: pprof,
		extra: extra, env: []string{"GATEWAY_SECRET_KEY=" + clusterSecret},
	})
	if err != nil {
		return 0, err
	}
	c.nodes[i] = g
	return took, nil
}

// owners reads GET /api/admin/cluster through node i: partition → owner.
func (c *benchCluster) owners(i int) map[int]string {
	st, body, err := c.nodes[i].api.do("GET", "/api/admin/cluster", []header{bearer(c.admin)}, nil)
	if err != nil || st != 200 {
		return nil
	}
	var s struct {
		Partitions []struct {
			ID    int    `json:"id"`
			Owner string `json:"owner"`
		} `json:"partitions"`
	}
	if json.Unmarshal(body, &s) != nil {
		return nil
	}
	out := map[int]string{}
	for _, p := range s.Partitions {
		out[p.ID] = p.Owner
	}
	return out
}

// waitShared waits (through node via) until every partition is owned by one of live, each
// within one of its fair share, and returns how long it took.
func (c *benchCluster) waitShared(ctx context.Context, via int, live []string, total time.Duration) (time.Duration, error) {
	start := time.Now()
	for {
		o := c.owners(via)
		counts := map[string]int{}
		for _, w := range o {
			counts[w]++
		}
		ok := len(o) == benchPartitions
		share := benchPartitions / len(live)
		for _, id := range live {
			ok = ok && counts[id] >= share && counts[id] <= share+1
		}
		if ok && counts[""] == 0 {
			return time.Since(start), nil
		}
		if time.Since(start) > total {
			return 0, fmt.Errorf("partitions not shared by %v after %v: %v", live, total, counts)
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// benchPartitions is the gateway's default partition count (--partitions).
const benchPartitions = 64

// partitionOf is the gateway's partition of a user id (cluster.PartitionOf: FNV-1a 64, modulo
// the partition count); bench imports no package of the core.
func partitionOf(uid string) int {
	h := fnv.New64a()
	h.Write([]byte(uid))
	return int(h.Sum64() % benchPartitions)
}

// clusterRow is one case measured on one setup: the rates with each generator.
type clusterRow struct {
	gen, wrk float64
	// genLoad, wrkLoad: the machine's 1-minute load average as each generator's window ended
	// (uptime's first figure; other work on a shared machine moves the rates)
	genLoad, wrkLoad string
	errs             int64
	note             string
	// commits and batches per request of the bench generator's window (every gateway's
	// gateway_storage_commits_total and _batches_total)
	commits, batches float64
}

// clusterRun holds the figures of a whole run, by NATS setup, then setup name, then case.
type clusterRun struct {
	rows   map[string]map[string]map[string]*clusterRow
	runs   int               // measurements so far: their recipients and request ids are unique
	failed int               // cases with error responses
	cpu    map[string]string // "r1 lone" → its CPU per message line
	extra  []string          // forwarding, hand-overs
	load   string
}

var clusterSetups = []string{"lone", "cluster-1", "cluster-3"}

func runCluster(ctx context.Context, o clusterOptions, out io.Writer) error {
	work, cleanup, err := workDir(o.gateway, "bench-cluster-", o.keep, out)
	if err != nil {
		return err
	}
	defer cleanup()
	var wrk *wrkTool
	if o.wrk != "off" {
		if wrk, err = findWrk(o.wrk, work); err != nil {
			fmt.Fprintf(out, "WARNING: %s: measuring with the bench's generator only\n", err)
		}
	}
	simAddr, err := freeAddr()
	if err != nil {
		return err
	}
	simLog, err := os.Create(filepath.Join(work, "sim.log"))
	if err != nil {
		return err
	}
	defer simLog.Close()
	sim := exec.Command(o.gateway, "sim", "--addr", simAddr, "--data", filepath.Join(work, "sim"))
	sim.Stdout, sim.Stderr = simLog, simLog
	if err := sim.Start(); err != nil {
		return err
	}
	defer func() { _ = sim.Process.Kill(); _ = sim.Wait() }()

	m := thisMachine()
	fmt.Fprintf(out, "bench cluster: %s, %d users, %d connections, %v per case after %v warm-up, cases %s; %s (load average %s)\n",
		gatewayVersion(o.gateway), o.users, o.conns, o.duration, o.warmup, strings.Join(o.cases, ","), m, m.Load)
	run := &clusterRun{rows: map[string]map[string]map[string]*clusterRow{}, cpu: map[string]string{}, load: m.Load}
	seq := 0
	for _, topo := range o.topologies {
		urls, stop, err := startBenchNATS(work, topo)
		if err != nil {
			return err
		}
		run.rows[topo] = map[string]map[string]*clusterRow{}
		for _, setup := range clusterSetups {
			seq++
			c := &benchCluster{o: o, work: work, prefix: fmt.Sprintf("%s%s%d", setup[:1], topo, seq)}
			c.prefix = strings.ReplaceAll(c.prefix, "-", "")
			rows, err := c.measure(ctx, topo, setup, urls, simAddr, wrk, run, out)
			run.rows[topo][setup] = rows
			if err != nil {
				stop()
				return fmt.Errorf("%s %s: %w", topo, setup, err)
			}
		}
		stop()
	}
	printClusterSummary(out, o, run)
	if o.readme != "" {
		if err := updateClusterReadme(o, run); err != nil {
			return err
		}
		fmt.Fprintf(out, "figures updated in %s\n", o.readme)
	}
	if run.failed > 0 {
		return fmt.Errorf("%d case(s) had error responses (above)", run.failed)
	}
	return nil
}

// startBenchNATS starts the NATS of a setup: one server, or three clustered.
func startBenchNATS(work, topo string) (urls string, stop func(), err error) {
	if topo == "r1" {
		srv, err := natstest.Run(natstest.Options{Dir: filepath.Join(work, "nats-r1")})
		if err != nil {
			return "", nil, err
		}
		return srv.URL, srv.Close, nil
	}
	n := 0
	c, err := natstest.RunCluster(3, func() string {
		n++
		d := filepath.Join(work, fmt.Sprintf("nats-r3-%d", n))
		_ = os.MkdirAll(d, 0o700)
		return d
	})
	if err != nil {
		return "", nil, err
	}
	return c.URLs(), c.Close, nil
}

// measure starts one setup (a lone gateway, or n nodes on their own prefix), provisions it and
// measures every case through all of its gateways; with three nodes on R1, the forwarding and
// the hand-overs after. It stops its gateways whatever happens.
func (c *benchCluster) measure(ctx context.Context, topo, setup, natsURLs, simAddr string, wrk *wrkTool, run *clusterRun, out io.Writer) (map[string]*clusterRow, error) {
	n := 1
	if setup == "cluster-3" {
		n = 3
	}
	c.lone = setup == "lone"
	c.nodes = make([]*gatewayProc, n)
	c.args = []string{"--store", "nats", "--nats", natsURLs, "--nats-prefix", c.prefix, "--sim-url", "http://" + simAddr}
	if !c.lone {
		c.args = append([]string{"--cluster"}, c.args...)
		if c.o.streams > 0 {
			c.args = append(c.args, "--nats-streams", strconv.Itoa(c.o.streams))
		}
	}
	for i := range n {
		c.ids = append(c.ids, fmt.Sprintf("node%d", i+1))
	}
	defer func() {
		for _, g := range c.nodes {
			if g != nil {
				_, _ = g.stop(30 * time.Second)
			}
		}
	}()
	profile := c.o.profile && n == 1
	for i := range n {
		pprof := ""
		if profile {
			var err error
			if pprof, err = freeAddr(); err != nil {
				return nil, err
			}
		}
		if _, err := c.start(ctx, i, pprof); err != nil {
			return nil, err
		}
	}
	mint := func(uid, role string) (string, error) { return devToken(c.nodes[0].api, uid, role) }
	var err error
	if c.admin, err = mint("bench-admin", "admin"); err != nil {
		return nil, err
	}
	if !c.lone {
		if _, err := c.waitShared(ctx, 0, c.ids, time.Minute); err != nil {
			return nil, err
		}
	}
	needStores := slices.Contains(c.o.cases, "webhook") || slices.Contains(c.o.cases, "webhook-route")
	fl, err := provision(ctx, c.nodes[0], provisionOptions{users: c.o.users, concurrency: 8, scan: true, keys: true, stores: needStores, mint: mint})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "\n== NATS %s, %s (%d gateway process(es)):\n", strings.ToUpper(topo), setup, n)
	rows := map[string]*clusterRow{}
	for _, id := range c.o.cases {
		bc := caseByID(id)
		row := &clusterRow{}
		rows[id] = row
		if bc.needs == "stores" && !fl.stores {
			row.note = "skipped: " + fl.storesNote
			continue
		}
		var prof *windowProfile
		if profile && id == "send" && c.nodes[0].pprof != "" {
			prof = &windowProfile{g: c.nodes[0], duration: c.o.duration}
		}
		before := c.storeCounters()
		gen, err := c.measureCase(ctx, bc, fl, run, nil, prof)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", id, err)
		}
		row.gen, row.errs, row.genLoad = gen.RPS, gen.Errors, loadNow()
		if after := c.storeCounters(); gen.Requests > 0 {
			row.commits = (after[0] - before[0]) / float64(gen.Requests)
			row.batches = (after[1] - before[1]) / float64(gen.Requests)
		}
		if prof != nil {
			cpu, err := prof.finish(gen.Requests, filepath.Join(c.work, fmt.Sprintf("%s-%s-send-cpu.prof", topo, setup)))
			if err == nil && cpu != nil {
				run.cpu[topo+" "+setup] = cpuLine(cpu)
			}
		}
		if wrk != nil {
			w, err := c.measureCase(ctx, bc, fl, run, wrk, nil)
			if err != nil {
				return rows, fmt.Errorf("%s (wrk): %w", id, err)
			}
			row.wrk, row.wrkLoad = w.RPS, loadNow()
			row.errs += w.Errors
		}
		fmt.Fprintf(out, "  %-26s %9.0f req/s  wrk %9.0f req/s  errors %d  (%.2f commit groups, %.3f batches per request; load %s / %s)\n", bc.name, row.gen, row.wrk, row.errs, row.commits, row.batches, row.genLoad, row.wrkLoad)
		if row.errs > 0 {
			// Reported (the figures and the run's end say so), not the end of the run: the
			// other setups' figures still count.
			line := fmt.Sprintf("errors: NATS %s, %s, %s: %d error responses", strings.ToUpper(topo), setup, bc.name, row.errs)
			if len(gen.ErrorSamples) > 0 {
				line += " (" + strings.Join(gen.ErrorSamples, "; ") + ")"
			}
			fmt.Fprintln(out, "  "+line)
			run.extra = append(run.extra, line)
			run.failed++
		}
	}
	if n == 3 && topo == "r1" && c.o.handovers {
		if err := c.overheadAndHandovers(ctx, fl, run, out); err != nil {
			return rows, err
		}
	}
	return rows, nil
}

// storeCounters sums the gateways' commit groups and batches (a little after the window: the
// commits it caused).
func (c *benchCluster) storeCounters() [2]float64 {
	var out [2]float64
	for _, g := range c.nodes {
		if v, err := scrapeCounters(g.api, "gateway_storage_commits_total", "gateway_storage_batches_total"); err == nil {
			out[0], out[1] = out[0]+v[0], out[1]+v[1]
		}
	}
	return out
}

// cpuLine is a profile's figure in one line: µs per message and its largest components.
func cpuLine(cpu *cpuFigures) string {
	parts := []string{fmt.Sprintf("%.1f µs per message (%.2f s of CPU over %.0f s)", cpu.GatewayUS, cpu.CPUSeconds, cpu.WindowSeconds)}
	for i, comp := range cpu.Components {
		if i == 5 {
			break
		}
		parts = append(parts, fmt.Sprintf("%s %.1f", comp.Name, comp.MicrosPerMsg))
	}
	return strings.Join(parts, "; ")
}

// measureCase measures one case through every gateway of the setup at once, the connections
// spread over them: with the bench's generator (w nil) or with wrk. The deliveries are checked
// after.
func (c *benchCluster) measureCase(ctx context.Context, bc *benchCase, fl *fleet, run *clusterRun, w *wrkTool, prof *windowProfile) (stats, error) {
	n := len(c.nodes)
	var all stats
	for _, g := range c.nodes {
		if c.o.settle > 0 {
			if _, _, err := settle(ctx, g.api, c.o.settle, settleLimit); err != nil {
				return all, err
			}
		}
	}
	type part struct {
		s     stats
		err   error
		recip []string
	}
	parts := make([]part, n)
	var wg sync.WaitGroup
	for i, g := range c.nodes {
		conns := c.o.conns / n
		if i < c.o.conns%n {
			conns++
		}
		run.runs++
		id := run.runs
		t, recip := bc.build(fl, id)
		parts[i].recip = recip
		if _, err := capture(g.api, t, id); err != nil {
			return all, fmt.Errorf("capture: %w", err)
		}
		wg.Go(func() {
			l := load{addr: g.addr, conns: conns, warmup: c.o.warmup, duration: c.o.duration, timeout: c.o.timeout, run: id, pid: g.cmd.Process.Pid}
			if prof != nil && i == 0 {
				l.onWindow = prof.mark
			}
			if w == nil {
				parts[i].s = measure(ctx, l, t)
				parts[i].s.OK++ // the capture's
				return
			}
			n := 8192
			if bc.unique {
				n = int(8000*wholeSeconds(c.o.duration)) + 2000
			}
			warm, err := w.writePool(t, g.addr, id, wrkWarmupWorker, int(8000*wholeSeconds(c.o.warmup))+2000, "warmup")
			if err == nil {
				var pool string
				if pool, err = w.writePool(t, g.addr, id, wrkWorker, n, "measure"); err == nil {
					parts[i].s, err = w.measure(ctx, wrkLoad{addr: g.addr, conns: conns, warmup: c.o.warmup, duration: c.o.duration,
						timeout: c.o.timeout, warmupPool: warm, pool: pool, cycle: !bc.unique, pid: g.cmd.Process.Pid})
					parts[i].s.OK++ // the capture's
					os.Remove(pool)
				}
				os.Remove(warm)
			}
			parts[i].err = err
		})
	}
	wg.Wait()
	for _, p := range parts {
		if p.err != nil {
			return all, p.err
		}
		all.RPS += p.s.RPS
		all.Requests += p.s.Requests
		all.Errors += p.s.Errors
	}
	if bc.delivers {
		wait := 30 * time.Second
		if bc.async {
			wait = 2 * time.Minute
		}
		for i, p := range parts {
			unanswered := int64(0)
			if w != nil {
				unanswered = 2 * int64(c.o.conns)
			}
			if _, err := checkDeliveries(ctx, c.nodes[i].api, p.recip, p.s.OK, p.s.Errors, unanswered, wait); err != nil {
				return all, err
			}
		}
	}
	return all, nil
}

// overheadAndHandovers measures a forwarded request against a local one, then the hand-overs.
func (c *benchCluster) overheadAndHandovers(ctx context.Context, fl *fleet, run *clusterRun, out io.Writer) error {
	owners := c.owners(0)
	u := fl.users[0]
	owner := -1
	for i, id := range c.ids {
		if owners[partitionOf(u.id)] == id {
			owner = i
		}
	}
	if owner < 0 {
		return fmt.Errorf("no owner of %s's partition", u.id)
	}
	other := (owner + 1) % len(c.nodes)
	single := &fleet{users: []benchUser{u}}
	t, _ := buildAccount(single, 0)
	conns := max(1, c.o.conns/8)
	local := measure(ctx, load{addr: c.nodes[owner].addr, conns: conns, warmup: c.o.warmup, duration: c.o.duration, timeout: c.o.timeout}, t)
	fwd := measure(ctx, load{addr: c.nodes[other].addr, conns: conns, warmup: c.o.warmup, duration: c.o.duration, timeout: c.o.timeout}, t)
	line := fmt.Sprintf("forwarding (v1 account, %d connections, R1): local p50 %.2f ms p99 %.2f ms; forwarded p50 %.2f ms p99 %.2f ms; overhead p50 %+.2f ms p99 %+.2f ms",
		conns, local.P50, local.P99, fwd.P50, fwd.P99, fwd.P50-local.P50, fwd.P99-local.P99)
	fmt.Fprintln(out, "  "+line)
	run.extra = append(run.extra, line)

	// kill -9 of the last node: its partitions owned by the others and its users' sessions
	// CONNECTED again.
	last := len(c.nodes) - 1
	var moved []benchUser
	for _, usr := range fl.users {
		if owners[partitionOf(usr.id)] == c.ids[last] {
			moved = append(moved, usr)
		}
	}
	killed := time.Now()
	c.nodes[last].kill()
	c.nodes[last] = nil
	reowned, err := c.waitShared(ctx, 0, c.ids[:last], time.Minute)
	if err != nil {
		return err
	}
	if err := waitConnected(ctx, c.nodes[0], &fleet{users: moved}, 8, time.Minute); err != nil {
		return err
	}
	line = fmt.Sprintf("kill -9 of %s: partitions re-owned after %v, its %d users' sessions CONNECTED after %v",
		c.ids[last], reowned.Round(time.Millisecond), len(moved), time.Since(killed).Round(time.Millisecond))
	fmt.Fprintln(out, "  "+line)
	run.extra = append(run.extra, line)
	if _, err := c.start(ctx, last, ""); err != nil {
		return err
	}
	back, err := c.waitShared(ctx, 0, c.ids, time.Minute)
	if err != nil {
		return err
	}
	line = fmt.Sprintf("%s restarted: its share back %v after it was ready", c.ids[last], back.Round(time.Millisecond))
	fmt.Fprintln(out, "  "+line)
	run.extra = append(run.extra, line)
	took, err := c.nodes[last].stop(time.Minute)
	c.nodes[last] = nil
	if err != nil {
		return err
	}
	if _, err := c.waitShared(ctx, 0, c.ids[:last], time.Minute); err != nil {
		return err
	}
	line = fmt.Sprintf("SIGTERM of %s: every partition handed over and the process exited after %v", c.ids[last], took.Round(time.Millisecond))
	fmt.Fprintln(out, "  "+line)
	run.extra = append(run.extra, line)
	return nil
}

// devToken mints a dev ID token through a node's POST /api/dev/token (loopback is internal):
// the cluster's issuer, whose key is in the store (a lone gateway's, in its data dir).
func devToken(api *apiClient, uid, role string) (string, error) {
	body := map[string]any{"uid": uid, "name": "Bench " + uid, "email": uid + "@bench.example.com", "ttlSeconds": 6 * 3600}
	if role != "" {
		body["role"] = role
	}
	st, raw, err := api.do("POST", "/api/dev/token", nil, mustJSON(body))
	if err := want2xx("POST /api/dev/token", st, raw, err); err != nil {
		return "", err
	}
	var t struct {
		Token string `json:"token"`
	}
	if err := json.Unmarshal(raw, &t); err != nil || t.Token == "" {
		return "", fmt.Errorf("POST /api/dev/token: no token in %.200s", strings.TrimSpace(string(raw)))
	}
	return t.Token, nil
}

// loadNow is the machine's 1-minute load average (uptime's first figure), "?" when unknown.
func loadNow() string {
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			return f[0]
		}
	}
	return "?"
}

// ratio of two rows, each generator's rates compared with the same generator's, the lower kept.
func ratio(a, b *clusterRow) float64 {
	if a == nil || b == nil || b.gen == 0 {
		return 0
	}
	r := a.gen / b.gen
	if a.wrk > 0 && b.wrk > 0 {
		r = min(r, a.wrk/b.wrk)
	}
	return r
}

// clusterTable is the run's figures as a markdown table.
func clusterTable(o clusterOptions, run *clusterRun) string {
	var b strings.Builder
	fmt.Fprintln(&b, "| NATS | case | lone req/s, gen / wrk (load) | 1 node, gen / wrk (load) | 3 nodes, gen / wrk (load) | 1 node / lone | 3 nodes / 1 node |")
	fmt.Fprintln(&b, "| --- | --- | ---: | ---: | ---: | ---: | ---: |")
	for _, topo := range o.topologies {
		setups := run.rows[topo]
		for _, id := range o.cases {
			bc := caseByID(id)
			cell := func(s string) string {
				r := setups[s][id]
				if r == nil {
					return "-"
				}
				if r.note != "" {
					return r.note
				}
				return fmt.Sprintf("%.0f / %.0f (%s / %s)", r.gen, r.wrk, r.genLoad, cmp.Or(r.wrkLoad, "-"))
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.2f | %.2f |\n", strings.ToUpper(topo), bc.name, cell("lone"), cell("cluster-1"), cell("cluster-3"),
				ratio(setups["cluster-1"][id], setups["lone"][id]), ratio(setups["cluster-3"][id], setups["cluster-1"][id]))
		}
	}
	return b.String()
}

func printClusterSummary(out io.Writer, o clusterOptions, run *clusterRun) {
	fmt.Fprintln(out, "\n== summary (ratios: each generator against itself, the lower of the two)")
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprint(tw, strings.ReplaceAll(strings.ReplaceAll(clusterTable(o, run), " | ", "\t"), "|", ""))
	tw.Flush()
	for _, k := range sortedKeys(run.cpu) {
		fmt.Fprintf(out, "CPU, %s, v1 send: %s\n", k, run.cpu[k])
	}
	for _, l := range run.extra {
		fmt.Fprintln(out, l)
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// updateClusterReadme replaces the cluster figures block of o.readme.
func updateClusterReadme(o clusterOptions, run *clusterRun) error {
	raw, err := os.ReadFile(o.readme)
	if err != nil {
		return err
	}
	const begin, end = "<!-- cluster:begin (written by bench cluster --readme) -->", "<!-- cluster:end -->"
	i, j := strings.Index(string(raw), begin), strings.Index(string(raw), end)
	if i < 0 || j < i {
		return fmt.Errorf("%s: no cluster figures block (%s ... %s)", o.readme, begin, end)
	}
	var b strings.Builder
	m := thisMachine()
	cmd := fmt.Sprintf("bench cluster --gateway %s --users %d --conns %d --duration %v --warmup %v", o.gateway, o.users, o.conns, o.duration, o.warmup)
	if !slices.Equal(o.cases, caseIDs()) {
		cmd += " --cases " + strings.Join(o.cases, ",")
	}
	if !slices.Equal(o.topologies, []string{"r1", "r3"}) {
		cmd += " --nats " + strings.Join(o.topologies, ",")
	}
	if o.streams > 0 {
		cmd += fmt.Sprintf(" --nats-streams %d", o.streams)
	}
	if !o.handovers {
		cmd += " --handovers=false"
	}
	fmt.Fprintf(&b, "%s\nRun %s, gateway `%s`, on %s. Command: `%s`. Load average when it started: %s.\n\n",
		begin, time.Now().UTC().Format("2006-01-02 15:04 UTC"), gatewayVersion(o.gateway), m, cmd, run.load)
	b.WriteString(clusterTable(o, run))
	b.WriteString("\n")
	for _, k := range sortedKeys(run.cpu) {
		fmt.Fprintf(&b, "- CPU, %s, v1 send: %s\n", k, run.cpu[k])
	}
	for _, l := range run.extra {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	b.WriteString(end)
	return os.WriteFile(o.readme, []byte(string(raw[:i])+b.String()+string(raw[j+len(end):])), 0o644)
}
