package main

// bench cluster (issue 20, README "Cluster"): the same cases against a cluster of three nodes
// and a cluster of one, side by side in one run, on one NATS server with JetStream embedded in
// this process and one `gateway sim` process; the forwarding overhead (a request sent to a node
// that does not own the caller's partition against one sent to its owner); and the hand-over
// times (kill -9 of a node to every partition owned and every session CONNECTED again; its
// restart to its share back; SIGTERM to exit and hand-over). On a machine of two cores three
// nodes share the cores one node had: the figures show the cluster's overhead, not its scale.

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/gateway/gateway/persist/natstest"
)

type clusterOptions struct {
	gateway  string
	users    int
	conns    int
	duration time.Duration
	warmup   time.Duration
	timeout  time.Duration
	cases    []string
	keep     bool
}

func parseCluster(args []string, stderr io.Writer) (clusterOptions, error) {
	var o clusterOptions
	var cases string
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.gateway, "gateway", "bin/gateway", "gateway binary to start")
	fs.IntVar(&o.users, "users", 30, "users, each with a linked sim session, an API key and a store")
	fs.IntVar(&o.conns, "conns", 24, "connections per case, spread over the nodes")
	fs.DurationVar(&o.duration, "duration", 10*time.Second, "measured time per case")
	fs.DurationVar(&o.warmup, "warmup", 2*time.Second, "warm-up before each measurement, not recorded")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "per-request timeout (a timeout is an error)")
	fs.StringVar(&cases, "cases", "send,validate,webhook", "cases to run (of bench run's)")
	fs.BoolVar(&o.keep, "keep", false, "keep the work dir (data and logs)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	o.cases = splitList(cases)
	for _, id := range o.cases {
		if caseByID(id) == nil {
			return o, fmt.Errorf("--cases: no case %q", id)
		}
	}
	if o.users < 3 || o.conns < 3 {
		return o, fmt.Errorf("--users and --conns must be 3 or more")
	}
	return o, nil
}

// clusterSecret seals the bench cluster's secrets (GATEWAY_SECRET_KEY): 32 bytes, hex.
const clusterSecret = "62656e63682d636c75737465722d7365637265742d6b65792d33322d62797465"

// benchCluster is a set of nodes on one prefix.
type benchCluster struct {
	o      clusterOptions
	work   string
	prefix string
	args   []string
	nodes  []*gatewayProc
	ids    []string
	admin  string
}

func (c *benchCluster) start(ctx context.Context, i int) (time.Duration, error) {
	g, took, err := startGateway(ctx, gatewaySpec{
		bin: c.o.gateway, data: dataDir(c.work, fmt.Sprintf("%s-%s", c.prefix, c.ids[i])),
		log: filepath.Join(c.work, fmt.Sprintf("%s-%s.log", c.prefix, c.ids[i])), fsync: "batch",
		extra: append([]string{"--node-id", c.ids[i]}, c.args...), env: []string{"GATEWAY_SECRET_KEY=" + clusterSecret},
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

func runCluster(ctx context.Context, o clusterOptions, out io.Writer) error {
	work, cleanup, err := workDir(o.gateway, "bench-cluster-", o.keep, out)
	if err != nil {
		return err
	}
	defer cleanup()
	srv, err := natstest.Run(natstest.Options{Dir: filepath.Join(work, "nats")})
	if err != nil {
		return err
	}
	defer srv.Close()
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

	fmt.Fprintf(out, "bench cluster: %s, %d users, %d connections, %v per case, NATS embedded (R1), one sim process\n\n",
		gatewayVersion(o.gateway), o.users, o.conns, o.duration)
	rates := map[string][2]float64{}
	for phase, n := range []int{1, 3} {
		if err := runClusterPhase(ctx, o, work, srv.URL, simAddr, phase, n, rates, out); err != nil {
			return err
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintln(out, "3 nodes against 1 node (same machine, same NATS):")
	for _, id := range o.cases {
		if r, ok := rates[id]; ok && r[0] > 0 {
			fmt.Fprintf(out, "  %-10s %.2fx\n", id, r[1]/r[0])
		}
	}
	return nil
}

// runClusterPhase starts n nodes on their own prefix, measures the cases through all of them
// (rates[case][phase]) and, with 3 nodes, the forwarding and the hand-overs; it stops the nodes
// whatever happens.
func runClusterPhase(ctx context.Context, o clusterOptions, work, natsURL, simAddr string, phase, n int, rates map[string][2]float64, out io.Writer) error {
	c := &benchCluster{o: o, work: work, prefix: fmt.Sprintf("bench%d", n), nodes: make([]*gatewayProc, n)}
	c.args = []string{"--cluster", "--store", "nats", "--nats", natsURL, "--nats-prefix", c.prefix, "--sim-url", "http://" + simAddr}
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
	for i := range n {
		if _, err := c.start(ctx, i); err != nil {
			return err
		}
	}
	mint := func(uid, role string) (string, error) { return devToken(c.nodes[0].api, uid, role) }
	var err error
	if c.admin, err = mint("bench-admin", "admin"); err != nil {
		return err
	}
	if _, err := c.waitShared(ctx, 0, c.ids, time.Minute); err != nil {
		return err
	}
	fl, err := provision(ctx, c.nodes[0], provisionOptions{users: o.users, concurrency: 8, scan: true, keys: true, stores: true, mint: mint})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d node(s):\n", n)
	for ci, id := range o.cases {
		bc := caseByID(id)
		if bc.needs == "stores" && !fl.stores {
			continue
		}
		// One load per node, the connections spread over them, each with its own run
		// number (so ids made per request stay unique).
		results := make(chan stats, n)
		for i, g := range c.nodes {
			run := 100*phase + 10*ci + i
			t, _ := bc.build(fl, run)
			conns := o.conns / n
			if i < o.conns%n {
				conns++
			}
			go func() {
				results <- measure(ctx, load{addr: g.addr, conns: conns, warmup: o.warmup, duration: o.duration, timeout: o.timeout, run: run}, t)
			}()
		}
		var rps float64
		var errs int64
		var p50, p99 float64
		for range n {
			s := <-results
			rps += s.RPS
			errs += s.Errors
			p50, p99 = max(p50, s.P50), max(p99, s.P99)
		}
		r := rates[id]
		r[phase] = rps
		rates[id] = r
		fmt.Fprintf(out, "  %-10s %9.0f req/s  p50 %6.2f ms  p99 %7.2f ms  errors %d\n", id, rps, p50, p99, errs)
	}
	if n == 3 {
		if err := c.overheadAndHandovers(ctx, fl, out); err != nil {
			return err
		}
	}
	return nil
}

// overheadAndHandovers measures a forwarded request against a local one, then the hand-overs.
func (c *benchCluster) overheadAndHandovers(ctx context.Context, fl *fleet, out io.Writer) error {
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
	fmt.Fprintf(out, "  forwarding (v1 account, %d connections): local p50 %.2f ms p99 %.2f ms; forwarded p50 %.2f ms p99 %.2f ms; overhead p50 %+.2f ms p99 %+.2f ms\n",
		conns, local.P50, local.P99, fwd.P50, fwd.P99, fwd.P50-local.P50, fwd.P99-local.P99)

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
	fmt.Fprintf(out, "  kill -9 of %s: partitions re-owned after %v, its %d users' sessions CONNECTED after %v\n",
		c.ids[last], reowned.Round(time.Millisecond), len(moved), time.Since(killed).Round(time.Millisecond))
	if _, err := c.start(ctx, last); err != nil {
		return err
	}
	back, err := c.waitShared(ctx, 0, c.ids, time.Minute)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  %s restarted: its share back %v after it was ready\n", c.ids[last], back.Round(time.Millisecond))
	took, err := c.nodes[last].stop(time.Minute)
	c.nodes[last] = nil
	if err != nil {
		return err
	}
	if _, err := c.waitShared(ctx, 0, c.ids[:last], time.Minute); err != nil {
		return err
	}
	fmt.Fprintf(out, "  SIGTERM of %s: every partition handed over and the process exited after %v\n", c.ids[last], took.Round(time.Millisecond))
	return nil
}

// devToken mints a dev ID token through a node's POST /api/dev/token (loopback is internal):
// the cluster's issuer, whose key is in the store.
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
