package cluster

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/gateway/gateway/cluster/clustertest"
)

// engineStub plays the engine of every node of one test: it records which node runs each
// partition and fails the test when two run one at once (what leases exist to prevent).
type engineStub struct {
	t  testing.TB
	mu sync.Mutex
	// running: partition → node that was told to Acquire it and not yet to Release it or Fenced.
	running    map[int]string
	zombies    map[int]string // partitions of a paused node (they run there too until it wakes)
	acquiredAt map[int][]acquisition
	released   int
	fenced     int
	violations []string
	// releaseDelay makes Release take a while (finishing work in flight).
	releaseDelay time.Duration
}

type acquisition struct {
	node string
	at   time.Time
}

func newEngineStub(t testing.TB) *engineStub {
	e := &engineStub{t: t, running: map[int]string{}, zombies: map[int]string{}, acquiredAt: map[int][]acquisition{}}
	t.Cleanup(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, v := range e.violations {
			t.Error(v)
		}
	})
	return e
}

type stubHandler struct {
	e  *engineStub
	id string
}

func (e *engineStub) handler(id string) Handler { return stubHandler{e, id} }

func (h stubHandler) Acquire(_ context.Context, a *Acquisition) error {
	p := a.Partition()
	h.e.mu.Lock()
	defer h.e.mu.Unlock()
	if o, ok := h.e.running[p]; ok {
		h.e.violations = append(h.e.violations, fmt.Sprintf("partition %d acquired by %s while %s runs it", p, h.id, o))
	}
	h.e.running[p] = h.id
	h.e.acquiredAt[p] = append(h.e.acquiredAt[p], acquisition{h.id, time.Now()})
	return nil
}

func (h stubHandler) Release(_ context.Context, p int) error {
	time.Sleep(h.e.releaseDelay)
	h.e.mu.Lock()
	defer h.e.mu.Unlock()
	h.stop(p, "released")
	h.e.released++
	return nil
}

func (h stubHandler) Fenced(p int) {
	h.e.mu.Lock()
	defer h.e.mu.Unlock()
	h.stop(p, "fenced")
	h.e.fenced++
}

func (h stubHandler) stop(p int, how string) {
	if h.e.zombies[p] == h.id {
		delete(h.e.zombies, p)
		return
	}
	if o := h.e.running[p]; o != h.id {
		h.e.violations = append(h.e.violations, fmt.Sprintf("partition %d %s by %s, but %q runs it", p, how, h.id, o))
		return
	}
	delete(h.e.running, p)
}

// died forgets what a killed node ran (its process is gone).
func (e *engineStub) died(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for p, o := range e.running {
		if o == id {
			delete(e.running, p)
		}
	}
}

// paused moves what a paused node runs aside: another node may start it (fencing keeps the
// paused one from writing), and the paused one stops it when it wakes.
func (e *engineStub) paused(id string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for p, o := range e.running {
		if o == id {
			e.zombies[p] = id
			delete(e.running, p)
		}
	}
}

// owners counts the partitions each node runs.
func (e *engineStub) owners() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := map[string]int{}
	for _, o := range e.running {
		c[o]++
	}
	return c
}

func (e *engineStub) runningOf(id string) []int {
	e.mu.Lock()
	defer e.mu.Unlock()
	var ps []int
	for p, o := range e.running {
		if o == id {
			ps = append(ps, p)
		}
	}
	slices.Sort(ps)
	return ps
}

type testCluster struct {
	t      *testing.T
	nats   *clustertest.Cluster
	prefix string
	eng    *engineStub
	mods   []func(*Config)
}

// testLeaseTTL is the lease of the tests' clusters (the mods given may change it): 4 s, not the
// default 2 s. TestCluster's subtests run in parallel under the race detector beside every
// other package of make test, and a renewal starved of CPU for the default's 1.5 s fence
// deadline fenced partitions of live nodes again and again (355 fences in one run at load 13):
// shares that never settled within 20 s, a graceful stop that fenced, a node's heartbeat key
// that lapsed under it. What the tests check does not depend on the TTL; the waits that do
// are in terms of it.
const testLeaseTTL = 4 * time.Second

// settleWithin bounds the wait for a cluster's fair shares. Alone they settle in 1-3 s; under
// the race detector at load 10-15, nodes that start together hand partitions back and forth
// (a node that saw only itself took all, a view that lost a heartbeat for a moment took more)
// and took over 20 s. Polled: it costs nothing when they settle sooner.
const settleWithin = 45 * time.Second

func newTestCluster(t *testing.T, nc *clustertest.Cluster, mods ...func(*Config)) *testCluster {
	mods = append([]func(*Config){func(c *Config) { c.LeaseTTL = testLeaseTTL }}, mods...)
	return &testCluster{t: t, nats: nc, prefix: "t" + randomID()[:8], eng: newEngineStub(t), mods: mods}
}

// start starts a node on its own connection.
func (tc *testCluster) start(id string, mods ...func(*Config)) *Node {
	tc.t.Helper()
	n, err := tc.tryStart(id, mods...)
	if err != nil {
		tc.t.Fatalf("start %s: %v", id, err)
	}
	return n
}

func (tc *testCluster) tryStart(id string, mods ...func(*Config)) (*Node, error) {
	nc := tc.nats.Connect(tc.t)
	cfg := Config{Conn: nc, Prefix: tc.prefix, NodeID: id, Handler: tc.eng.handler(id), Replicas: min(3, tc.nats.N()),
		Serve: echo(id), Secret: testSecret}
	for _, m := range append(tc.mods, mods...) {
		m(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n, err := Start(ctx, cfg)
	if err != nil {
		return nil, err
	}
	tc.t.Cleanup(n.abort)
	return n, nil
}

// kill is a kill -9: the node's goroutines stop and its connection closes, nothing released.
func (tc *testCluster) kill(n *Node) {
	n.abort()
	n.cfg.Conn.Close()
	tc.eng.died(n.ID())
}

// testSecret signs the test nodes' forwarded requests.
var testSecret = []byte("the cluster tests' forwarding secret")

// echo answers a forwarded request with the node's id and the body it got.
func echo(id string) ServeFunc {
	return func(_ context.Context, p int, req *Envelope) *Response {
		return &Response{Status: 200, Header: []Header{{"X-Node", id}, {"X-Partition", fmt.Sprint(p)}}, Body: req.Body}
	}
}

func eventually(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// settled: every partition runs somewhere and each live node runs its fair share.
func (tc *testCluster) settled(nodes ...*Node) func() bool {
	return func() bool {
		ids := make([]string, len(nodes))
		for i, n := range nodes {
			ids[i] = n.ID()
		}
		slices.Sort(ids)
		counts := tc.eng.owners()
		total := 0
		for _, id := range ids {
			if counts[id] != share(id, ids, DefaultPartitions) {
				return false
			}
			total += counts[id]
		}
		return total == DefaultPartitions
	}
}

func conn(t testing.TB, c *clustertest.Cluster) *nats.Conn { return c.Connect(t) }
