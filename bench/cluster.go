package main

// bench cluster (DESIGN.md section 19, README "Cluster"): what `bench run --store nats` measures
// (the same users, connections and cases, with the bench's generator and with wrk), measured on
// a lone `--store nats` gateway, a cluster of one node and a cluster of three, side by side on
// the same NATS, first one server (R1, embedded in this process) then three clustered servers
// (R3, embedded). The lone gateway and the 1-node cluster are up at once and measured in
// alternated windows, --rounds rounds (median and spread reported), since one window each moved
// their ratio by 0.2 from run to run on a shared machine; then, on the three nodes of R1, the
// forwarding overhead (a request sent to a node that does not own the caller's partition
// against one sent to its owner) and the hand-over times (kill -9 of a node to every partition owned and every session CONNECTED
// again; its restart to its share back; SIGTERM to exit and hand-over). Every gateway uses one
// `gateway sim` process (a cluster needs it; the lone gateway uses it too, so the network is
// the same). A cluster's connections are spread over its nodes (what a load balancer does),
// each node with its own generator and its own wrk. On a machine of two cores three nodes
// share the cores one node had: the figures show the cluster's overhead, not its scale.

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
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

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

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
	rounds     int
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
	fs.IntVar(&o.rounds, "rounds", 3, "rounds of the lone gateway's and the 1-node cluster's windows, alternated (both up at once, the order swapped each round): each figure is its rounds' median, \"1 node / lone\" the median of the rounds' ratios with their spread")
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
	if o.rounds < 1 {
		return o, fmt.Errorf("--rounds must be 1 or more")
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
	setup  string
	fl     *fleet
	// others are gateways of another setup, up beside this one and idle during its windows:
	// each window waits for them to be idle too
	others []*gatewayProc
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

// clusterRow is one case measured on one setup, in one window or in several rounds of
// windows: gen and wrk are the rounds' medians.
type clusterRow struct {
	gen, wrk float64
	// genLoad, wrkLoad: the machine's 1-minute load average as each generator's window ended
	// (uptime's first figure; other work on a shared machine moves the rates), over the rounds:
	// the lowest and highest
	genLoad, wrkLoad string
	errs             int64
	note             string
	// commits, batches and records per request of the bench generator's windows (every
	// gateway's gateway_storage_commits_total, _batches_total and _writes_total)
	commits, batches, records float64
	rounds                    []clusterRound
	// the generator's windows' requests, commit groups, batches and records, summed over the
	// rounds
	requests, groupsN, batchesN, recordsN float64
}

// clusterRound is one round's windows of a case on one setup.
type clusterRound struct {
	gen, wrk         float64
	genLoad, wrkLoad string
}

// add records a round and updates the medians, the loads' range and the counts per request.
func (r *clusterRow) add(x clusterRound, requests, groups, batches, records float64) {
	r.rounds = append(r.rounds, x)
	var gens, wrks, genLoads, wrkLoads []float64
	for _, y := range r.rounds {
		gens, wrks = append(gens, y.gen), append(wrks, y.wrk)
		if l, err := strconv.ParseFloat(y.genLoad, 64); err == nil {
			genLoads = append(genLoads, l)
		}
		if l, err := strconv.ParseFloat(y.wrkLoad, 64); err == nil {
			wrkLoads = append(wrkLoads, l)
		}
	}
	r.gen, r.wrk = median(gens), median(wrks)
	r.genLoad, r.wrkLoad = loadRange(genLoads, x.genLoad), loadRange(wrkLoads, x.wrkLoad)
	r.requests, r.groupsN, r.batchesN, r.recordsN = r.requests+requests, r.groupsN+groups, r.batchesN+batches, r.recordsN+records
	if r.requests > 0 {
		r.commits, r.batches, r.records = r.groupsN/r.requests, r.batchesN/r.requests, r.recordsN/r.requests
	}
}

// median of xs (0 if none): the middle one, or the mean of the two middle ones.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// loadRange is "lo-hi" of the loads seen (the one load if they agree), or last if none parsed.
func loadRange(loads []float64, last string) string {
	if len(loads) == 0 {
		return last
	}
	lo, hi := slices.Min(loads), slices.Max(loads)
	if lo == hi {
		return strconv.FormatFloat(lo, 'f', 2, 64)
	}
	return strconv.FormatFloat(lo, 'f', 1, 64) + "-" + strconv.FormatFloat(hi, 'f', 1, 64)
}

// roundRatios are a's rates over b's round by round (a round's ratio: each generator against
// itself, the lower of the two), as `bench run` compares the gateway with bare: the rounds
// alternate the two setups, so a slow spell of the machine weighs on both.
func roundRatios(a, b *clusterRow) []float64 {
	if a == nil || b == nil {
		return nil
	}
	var out []float64
	for i := range min(len(a.rounds), len(b.rounds)) {
		x, y := a.rounds[i], b.rounds[i]
		if y.gen == 0 {
			continue
		}
		r := x.gen / y.gen
		if x.wrk > 0 && y.wrk > 0 {
			r = min(r, x.wrk/y.wrk)
		}
		out = append(out, r)
	}
	return out
}

// ratioCell is the median of the rounds' ratios and their spread: "0.85 (0.78-0.92, 3 rounds)";
// one round, its ratio alone.
func ratioCell(rs []float64) string {
	switch len(rs) {
	case 0:
		return "-"
	case 1:
		return fmt.Sprintf("%.2f", rs[0])
	}
	return fmt.Sprintf("%.2f (%.2f-%.2f, %d rounds)", median(rs), slices.Min(rs), slices.Max(rs), len(rs))
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
		urls, nc, stop, err := startBenchNATS(work, topo)
		if err != nil {
			return err
		}
		run.rows[topo] = map[string]map[string]*clusterRow{}
		err = measureTopology(ctx, o, work, topo, urls, nc, simAddr, wrk, run, &seq, out)
		stop()
		if err != nil {
			return err
		}
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

// startBenchNATS starts the NATS of a setup: one server, or three clustered (returned too).
func startBenchNATS(work, topo string) (urls string, cluster *natstest.Cluster, stop func(), err error) {
	if topo == "r1" {
		srv, err := natstest.Run(natstest.Options{Dir: filepath.Join(work, "nats-r1")})
		if err != nil {
			return "", nil, nil, err
		}
		return srv.URL, nil, srv.Close, nil
	}
	n := 0
	c, err := natstest.RunCluster(3, func() string {
		n++
		d := filepath.Join(work, fmt.Sprintf("nats-r3-%d", n))
		_ = os.MkdirAll(d, 0o700)
		return d
	})
	if err != nil {
		return "", nil, nil, err
	}
	return c.URLs(), c, c.Close, nil
}

// placement says, on three servers, which server the setup's store connection is on and
// which lead its records streams: a publish to a stream led by another server is routed there
// and back (r3speed: about 5 µs a commit and a hop), so a lone gateway whose one stream is led
// where it is connected pays less than one whose stream is not, by the luck of the run.
func (c *benchCluster) placement(ctx context.Context, urls string, nc *natstest.Cluster) string {
	conn := nc.ServerOf("gateway " + c.prefix)
	client, err := nats.Connect(urls)
	if err != nil {
		return "placement unknown: " + err.Error()
	}
	defer client.Close()
	js, err := jetstream.New(client)
	if err != nil {
		return "placement unknown: " + err.Error()
	}
	var leaders []string
	local := 0
	for k := 0; ; k++ {
		name := c.prefix + "_records"
		if k > 0 {
			name += "_" + strconv.Itoa(k)
		}
		leader, ok := streamLeader(ctx, js, name)
		if !ok {
			break
		}
		leaders = append(leaders, leader)
		if leader == conn {
			local++
		}
	}
	return fmt.Sprintf("store connection on %s, records streams led by %s (%d of %d on its server)", cmp.Or(conn, "?"), strings.Join(leaders, ", "), local, len(leaders))
}

// streamLeader is the server leading the stream name; ok false once there is no such stream.
// A stream whose leader is being elected, or a JetStream API call that fails under load, is
// asked again for up to 5 s ("?" then): only "stream not found" ends the list.
func streamLeader(ctx context.Context, js jetstream.JetStream, name string) (leader string, ok bool) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := js.Stream(ctx, name)
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			return "", false
		}
		if err == nil {
			info, err := st.Info(ctx)
			if err == nil && info.Cluster != nil && info.Cluster.Leader != "" {
				return info.Cluster.Leader, true
			}
		}
		if time.Now().After(deadline) {
			return "?", true
		}
		time.Sleep(100 * time.Millisecond) // a poll: the election or the API's next answer
	}
}

// measureTopology measures the setups on one NATS: the lone gateway and the 1-node cluster up
// at once, their windows alternated for o.rounds rounds (the order swapped each round), then
// both stopped; then the 3-node cluster, one window per case, with (on R1) the forwarding and
// the hand-overs.
func measureTopology(ctx context.Context, o clusterOptions, work, topo, urls string, nc *natstest.Cluster, simAddr string, wrk *wrkTool, run *clusterRun, seq *int, out io.Writer) error {
	newSetup := func(setup string) *benchCluster {
		*seq++
		c := &benchCluster{o: o, work: work, setup: setup, prefix: fmt.Sprintf("%s%s%d", setup[:1], topo, *seq)}
		c.prefix = strings.ReplaceAll(c.prefix, "-", "")
		run.rows[topo][setup] = map[string]*clusterRow{}
		return c
	}
	var pair []*benchCluster
	defer func() {
		for _, c := range pair {
			c.stopAll()
		}
	}()
	for _, setup := range clusterSetups[:2] {
		c := newSetup(setup)
		pair = append(pair, c)
		if err := c.prepare(ctx, topo, urls, simAddr, out); err != nil {
			return fmt.Errorf("%s %s: %w", topo, setup, err)
		}
	}
	pair[0].others, pair[1].others = pair[1].nodes, pair[0].nodes
	if nc != nil {
		for _, c := range pair {
			line := fmt.Sprintf("placement, %s %s: %s", strings.ToUpper(topo), c.setup, c.placement(ctx, urls, nc))
			fmt.Fprintln(out, line)
			run.extra = append(run.extra, line)
		}
	}
	for r := range o.rounds {
		for _, i := range roundOrder(r) {
			c := pair[i]
			if err := c.measureCases(ctx, topo, r, wrk, run, out); err != nil {
				return fmt.Errorf("%s %s: %w", topo, c.setup, err)
			}
		}
	}
	for _, c := range pair {
		c.stopAll()
	}
	pair = nil
	c := newSetup(clusterSetups[2])
	defer c.stopAll()
	if err := c.prepare(ctx, topo, urls, simAddr, out); err != nil {
		return fmt.Errorf("%s %s: %w", topo, c.setup, err)
	}
	if err := c.measureCases(ctx, topo, 0, wrk, run, out); err != nil {
		return fmt.Errorf("%s %s: %w", topo, c.setup, err)
	}
	if len(c.nodes) == 3 && topo == "r1" && c.o.handovers {
		return c.overheadAndHandovers(ctx, c.fl, run, out)
	}
	return nil
}

// roundOrder is the order of the lone gateway's (0) and the 1-node cluster's (1) windows in
// round r: swapped each round (lone, node; node, lone; ...), so neither always runs first
// after the other's backlog or always last as the machine's load drifts.
func roundOrder(r int) [2]int {
	if r%2 == 1 {
		return [2]int{1, 0}
	}
	return [2]int{0, 1}
}

// stopAll stops the setup's gateways (SIGTERM, then kill after 30 s).
func (c *benchCluster) stopAll() {
	for i, g := range c.nodes {
		if g != nil {
			_, _ = g.stop(30 * time.Second)
			c.nodes[i] = nil
		}
	}
}

// prepare starts one setup (a lone gateway, or n nodes on their own prefix) and provisions it.
// The caller stops its gateways (stopAll) whatever happens.
func (c *benchCluster) prepare(ctx context.Context, topo, natsURLs, simAddr string, out io.Writer) error {
	setup := c.setup
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
	for i := range n {
		pprof := ""
		if c.o.profile && n == 1 {
			var err error
			if pprof, err = freeAddr(); err != nil {
				return err
			}
		}
		if _, err := c.start(ctx, i, pprof); err != nil {
			return err
		}
	}
	mint := func(uid, role string) (string, error) { return devToken(c.nodes[0].api, uid, role) }
	var err error
	if c.admin, err = mint("bench-admin", "admin"); err != nil {
		return err
	}
	if !c.lone {
		if _, err := c.waitShared(ctx, 0, c.ids, time.Minute); err != nil {
			return err
		}
	}
	needStores := slices.Contains(c.o.cases, "webhook") || slices.Contains(c.o.cases, "webhook-route")
	c.fl, err = provision(ctx, c.nodes[0], provisionOptions{users: c.o.users, concurrency: 8, scan: true, keys: true, stores: needStores, mint: mint})
	return err
}

// measureCases measures every case of the setup once (round r of o.rounds), each through all of
// its gateways, and adds the windows to the setup's rows. The first round of v1 send is profiled
// on a setup of one process.
func (c *benchCluster) measureCases(ctx context.Context, topo string, r int, wrk *wrkTool, run *clusterRun, out io.Writer) error {
	rows, fl, n := run.rows[topo][c.setup], c.fl, len(c.nodes)
	rounds := ""
	if c.setup != clusterSetups[2] && c.o.rounds > 1 {
		rounds = fmt.Sprintf(", round %d of %d", r+1, c.o.rounds)
	}
	fmt.Fprintf(out, "\n== NATS %s, %s (%d gateway process(es)%s):\n", strings.ToUpper(topo), c.setup, n, rounds)
	for _, id := range c.o.cases {
		bc := caseByID(id)
		row := rows[id]
		if row == nil {
			row = &clusterRow{}
			rows[id] = row
		}
		if bc.needs == "stores" && !fl.stores {
			row.note = "skipped: " + fl.storesNote
			continue
		}
		var prof *windowProfile
		if c.o.profile && r == 0 && n == 1 && id == "send" && c.nodes[0].pprof != "" {
			prof = &windowProfile{g: c.nodes[0], duration: c.o.duration}
		}
		// The store's counters at the window's start and end: its requests' commits (a
		// warm-up's and a drain's requests are not in gen.Requests).
		var edges [2][3]float64
		gen, err := c.measureCase(ctx, bc, fl, run, nil, prof, func(start bool) {
			if start {
				edges[0] = c.storeCounters()
			} else {
				edges[1] = c.storeCounters()
			}
		})
		if err != nil {
			return fmt.Errorf("%s: %w", id, err)
		}
		x := clusterRound{gen: gen.RPS, genLoad: loadNow()}
		errs := gen.Errors
		before, after := edges[0], edges[1]
		if prof != nil {
			cpu, err := prof.finish(gen.Requests, filepath.Join(c.work, fmt.Sprintf("%s-%s-send-cpu.prof", topo, c.setup)))
			if err == nil && cpu != nil {
				run.cpu[topo+" "+c.setup] = cpuLine(cpu)
			}
		}
		if wrk != nil {
			w, err := c.measureCase(ctx, bc, fl, run, wrk, nil, nil)
			if err != nil {
				return fmt.Errorf("%s (wrk): %w", id, err)
			}
			x.wrk, x.wrkLoad = w.RPS, loadNow()
			errs += w.Errors
		}
		row.add(x, float64(gen.Requests), after[0]-before[0], after[1]-before[1], after[2]-before[2])
		row.errs += errs
		fmt.Fprintf(out, "  %-26s %9.0f req/s  wrk %9.0f req/s  errors %d  (%.2f commit groups, %.3f batches, %.2f records per request; load %s / %s)\n", bc.name, x.gen, x.wrk, errs, row.commits, row.batches, row.records, x.genLoad, x.wrkLoad)
		if errs > 0 {
			// Reported (the figures and the run's end say so), not the end of the run: the
			// other setups' figures still count.
			line := fmt.Sprintf("errors: NATS %s, %s, %s: %d error responses", strings.ToUpper(topo), c.setup, bc.name, errs)
			if len(gen.ErrorSamples) > 0 {
				line += " (" + strings.Join(gen.ErrorSamples, "; ") + ")"
			}
			fmt.Fprintln(out, "  "+line)
			run.extra = append(run.extra, line)
			run.failed++
		}
	}
	return nil
}

// storeCounters sums the gateways' commit groups, batches and records written (at a window's
// start and end: in a steady window the commits still due for its last requests match those
// of the warm-up's last ones it counts).
func (c *benchCluster) storeCounters() [3]float64 {
	var out [3]float64
	for _, g := range c.nodes {
		if v, err := scrapeCounters(g.api, "gateway_storage_commits_total", "gateway_storage_batches_total", "gateway_storage_writes_total"); err == nil {
			out[0], out[1], out[2] = out[0]+v[0], out[1]+v[1], out[2]+v[2]
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
// after. edge, when set, is called as the bench generator's measured window starts (true) and
// ends (false).
func (c *benchCluster) measureCase(ctx context.Context, bc *benchCase, fl *fleet, run *clusterRun, w *wrkTool, prof *windowProfile, edge func(start bool)) (stats, error) {
	n := len(c.nodes)
	var all stats
	for _, g := range append(slices.Clip(c.nodes), c.others...) {
		if g != nil && c.o.settle > 0 {
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
			if i == 0 && (prof != nil || edge != nil) {
				l.onWindow = func(start bool) {
					if prof != nil {
						prof.mark(start)
					}
					if edge != nil {
						edge(start)
					}
				}
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

// ratio of two rows (their medians), each generator's rates compared with the same
// generator's, the lower kept.
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
	fmt.Fprintf(&b, "| NATS | case | lone req/s, gen / wrk (load)%[1]s | 1 node, gen / wrk (load)%[1]s | 3 nodes, gen / wrk (load) | 1 node / lone%[2]s | 3 nodes / 1 node |\n", medians(o), spread(o))
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
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %.2f |\n", strings.ToUpper(topo), bc.name, cell("lone"), cell("cluster-1"), cell("cluster-3"),
				ratioCell(roundRatios(setups["cluster-1"][id], setups["lone"][id])), ratio(setups["cluster-3"][id], setups["cluster-1"][id]))
		}
	}
	return b.String()
}

// medians and spread say, in the table's header, what its lone and 1-node cells are over
// several rounds.
func medians(o clusterOptions) string {
	if o.rounds > 1 {
		return fmt.Sprintf(", median of %d", o.rounds)
	}
	return ""
}

func spread(o clusterOptions) string {
	if o.rounds > 1 {
		return " (median of the rounds' ratios, lowest-highest)"
	}
	return ""
}

// roundsLines are, for each case, each round's lone and 1-node rates and their ratio.
func roundsLines(o clusterOptions, run *clusterRun) []string {
	var out []string
	for _, topo := range o.topologies {
		for _, id := range o.cases {
			lone, node := run.rows[topo]["lone"][id], run.rows[topo]["cluster-1"][id]
			if lone == nil || node == nil || len(lone.rounds) < 2 {
				continue
			}
			rs := roundRatios(node, lone)
			var parts []string
			for i := range min(len(lone.rounds), len(node.rounds), len(rs)) {
				l, n := lone.rounds[i], node.rounds[i]
				parts = append(parts, fmt.Sprintf("%.0f / %.0f against %.0f / %.0f: %.2f", n.gen, n.wrk, l.gen, l.wrk, rs[i]))
			}
			out = append(out, fmt.Sprintf("rounds, %s %s, 1 node against lone (gen / wrk): %s", strings.ToUpper(topo), caseByID(id).name, strings.Join(parts, "; ")))
		}
	}
	return out
}

func printClusterSummary(out io.Writer, o clusterOptions, run *clusterRun) {
	fmt.Fprintln(out, "\n== summary (ratios: each generator against itself, the lower of the two)")
	tw := tabwriter.NewWriter(out, 2, 4, 2, ' ', 0)
	fmt.Fprint(tw, strings.ReplaceAll(strings.ReplaceAll(clusterTable(o, run), " | ", "\t"), "|", ""))
	tw.Flush()
	for _, l := range roundsLines(o, run) {
		fmt.Fprintln(out, l)
	}
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
	if o.rounds != 3 {
		cmd += fmt.Sprintf(" --rounds %d", o.rounds)
	}
	fmt.Fprintf(&b, "%s\nRun %s, gateway `%s`, on %s. Command: `%s`. Load average when it started: %s.\n\n",
		begin, time.Now().UTC().Format("2006-01-02 15:04 UTC"), gatewayVersion(o.gateway), m, cmd, run.load)
	b.WriteString(clusterTable(o, run))
	b.WriteString("\n")
	for _, l := range roundsLines(o, run) {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	for _, k := range sortedKeys(run.cpu) {
		fmt.Fprintf(&b, "- CPU, %s, v1 send: %s\n", k, run.cpu[k])
	}
	for _, l := range run.extra {
		fmt.Fprintf(&b, "- %s\n", l)
	}
	b.WriteString(end)
	return os.WriteFile(o.readme, []byte(string(raw[:i])+b.String()+string(raw[j+len(end):])), 0o644)
}
