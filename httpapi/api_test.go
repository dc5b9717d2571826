package httpapi

// The handler tests' harness: the HTTP layer over a real engine on in-memory storage and the
// simulated network, served on a loopback port, with a fake store platform. Every response is
// checked against the OpenAPI document (openapitest) and, for the calls a table names, against
// its golden body in testdata/golden (go test ./httpapi -args -update rewrites them).

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/goccy/go-json"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gateway/gateway/actors/webhook"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/ecom"
	"github.com/gateway/gateway/ecom/ecomtest"
	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/httpapi/openapitest"
	"github.com/gateway/gateway/identity"
	"github.com/gateway/gateway/media"
	"github.com/gateway/gateway/network/sim"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/web"
)

var update = flag.Bool("update", false, "rewrite the golden bodies in testdata/golden")

// api is one gateway's HTTP layer under test.
type api struct {
	t      testing.TB
	url    string
	srv    *Server
	eng    *engine.Engine
	sim    *sim.Network
	issuer *identity.Issuer
	fake   *ecomtest.Platform
	client *http.Client
	// vars are values earlier calls kept ({name} in a later call's path or body).
	vars map[string]string
}

// newAPI starts the HTTP layer; edit adjusts its configuration before it is built.
// testPlans are the default plans, and for a benchmark the load test's as well (bench/gateway.go:
// caps far above what a benchmark sends, so the counting code runs on every request without
// refusing one). Tests see the default plans only: their answers list them.
func testPlans(t testing.TB) engine.Plans {
	p := engine.DefaultPlans()
	if _, bench := t.(*testing.B); bench {
		p["bench"] = domain.Plan{RateLimit: 1_000_000_000, MonthlyMessages: 1_000_000_000}
	}
	return p
}

func newAPI(t testing.TB, edit ...func(*Config)) *api {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	fake := ecomtest.New()
	t.Cleanup(fake.Close)
	simNet, err := sim.Open(sim.Options{Dir: t.TempDir(), Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	verifier, issuer, err := identity.NewDev(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	kv := persist.NewMemory()
	reg := prometheus.NewRegistry()
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	events, err := engine.NewEvents(engine.EventsConfig{Store: persist.NewWebhooks(kv), Actors: hw, Log: log, Metrics: reg,
		Poster: webhook.NewHTTPPoster(nil, time.Second, 0), Guard: media.Guard{}})
	if err != nil {
		t.Fatal(err)
	}
	if err := events.Boot(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs := persist.NewRecords(kv)
	eng, err := engine.New(engine.Config{
		Store: recs.Store, Logger: log,
		Records: engine.Records{Outbox: recs.Outbox, Accounts: recs.Accounts, Sessions: recs.Sessions, Protections: recs.Protections,
			Campaigns: recs.Campaigns, Shops: recs.Stores, Inbox: recs.Inbox, History: recs.History, Notes: recs.Notes, StoreLoop: recs.StoreLoop}, Plans: testPlans(t), DefaultPlan: "free",
		AdminUIDs: []string{"root"}, DevRoles: true, Network: simNet, Events: events,
		Stores: engine.StoreConfig{Client: ecom.NewClient(ecom.ClientOptions{APIBase: fake.APIBase()}), PublicURL: "https://gw.example.com",
			Sealer: persist.NewSealer(nil, "")},
	})
	if err != nil {
		t.Fatal(err)
	}
	site, err := web.New()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Engine: eng, Verifier: verifier, DevRoles: true, Logger: log, Registry: reg, Webhooks: events,
		InternalCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}, Version: "test", Sim: simNet,
		Dashboard:   DashboardConfig{Site: site, Auth: "dev", DevIssuer: issuer},
		ReadyChecks: []ReadyCheck{{Name: "storage", Critical: true, Check: func() error { return nil }}},
	}
	for _, e := range edit {
		e(&cfg)
	}
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	a := &api{t: t, url: "http://" + ln.Addr().String(), srv: srv, eng: eng, sim: simNet, issuer: issuer, fake: fake,
		// Redirects are answers to check, not to follow.
		client: &http.Client{Timeout: 20 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		vars:   map[string]string{}}
	t.Cleanup(func() {
		a.client.CloseIdleConnections()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		eng.Stop(ctx)
		events.Stop(ctx)
		_ = simNet.Close()
	})
	return a
}

// token mints a dev ID token for uid ("root" is an admin).
func (a *api) token(uid string) string {
	a.t.Helper()
	role := "client"
	if uid == "root" {
		role = "admin"
	}
	tok, err := a.issuer.Mint(identity.TokenRequest{UID: uid, Role: role, Name: strings.ToUpper(uid[:1]) + uid[1:], Email: uid + "@example.com"})
	if err != nil {
		a.t.Fatal(err)
	}
	return tok
}

// res is one response.
type res struct {
	status int
	header http.Header
	body   []byte
}

func (r res) obj() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.body, &m)
	return m
}

func (r res) str(field string) string { s, _ := r.obj()[field].(string); return s }

// call is one request of a table and what it must answer.
type call struct {
	// name names the call's golden body in the table's file; "" checks no body.
	name   string
	method string
	// path and a string body may hold {var}: a value an earlier call kept.
	path string
	// as is who calls: "" nobody, a user id (its dev ID token), "key" (x-api-key: {key}),
	// "bearer-key" (Authorization: Bearer {key}).
	as     string
	header map[string]string
	body   any // JSON-encoded unless a string
	status int
	code   string // the error code, when status is an error
	// keep stores top-level string fields of the answer as vars (field → var).
	keep map[string]string
	// check looks at the answer beyond its status, code and golden body.
	check func(t testing.TB, r res)
}

func (a *api) expand(s string) string {
	for k, v := range a.vars {
		s = strings.ReplaceAll(s, "{"+k+"}", v)
	}
	return s
}

// do sends one request and checks it against the OpenAPI document.
func (a *api) do(t testing.TB, method, path, as string, header map[string]string, body any) res {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(a.expand(b))
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader([]byte(a.expand(string(data))))
	}
	path = a.expand(path)
	req, err := http.NewRequest(method, a.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	switch as {
	case "":
	case "key":
		req.Header.Set("x-api-key", a.vars["key"])
	case "bearer-key":
		req.Header.Set("Authorization", "Bearer "+a.vars["key"])
	default:
		req.Header.Set("Authorization", "Bearer "+a.token(as))
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range header {
		req.Header.Set(k, a.expand(v))
	}
	resp, err := a.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	if method != http.MethodOptions { // CORS preflights are the router's, not operations
		openapitest.Check(t, method, path, resp.StatusCode, resp.Header.Get("Content-Type"), raw)
	}
	return res{status: resp.StatusCode, header: resp.Header, body: raw}
}

// run makes the calls in order; their golden bodies are the file testdata/golden/<table>.txt.
func (a *api) run(t *testing.T, table string, calls []call) {
	t.Helper()
	g := &golden{file: filepath.Join("testdata", "golden", table+".txt")}
	for _, c := range calls {
		r := a.do(t, c.method, c.path, c.as, c.header, c.body)
		where := c.method + " " + c.path
		if c.name != "" {
			where = c.name
		}
		if r.status != c.status {
			t.Fatalf("%s: status %d, want %d: %s", where, r.status, c.status, r.body)
		}
		if c.code != "" {
			if got := r.str("code"); got != c.code {
				t.Fatalf("%s: code %q, want %q: %s", where, got, c.code, r.body)
			}
			if r.obj()["success"] != false {
				t.Fatalf("%s: an error without success false: %s", where, r.body)
			}
		}
		for field, v := range c.keep {
			s, ok := r.obj()[field].(string)
			if !ok {
				t.Fatalf("%s: no string %q to keep: %s", where, field, r.body)
			}
			a.vars[v] = s
		}
		if c.check != nil {
			c.check(t, r)
		}
		if c.name != "" {
			g.add(c.name, c.method+" "+c.path, r)
		}
	}
	g.compare(t)
}

// golden collects a table's normalised answers and compares them with its file.
type golden struct {
	file string
	buf  bytes.Buffer
}

// volatile are the parts of an answer that differ from run to run, with what stands for them.
var volatile = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "<uuid>"},
	{regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`), "<time>"},
	{regexp.MustCompile(`svc_live_[0-9a-f]{40,}`), "<rawKey>"},
	{regexp.MustCompile(`svc_live_\*\*\*[0-9a-f]{4}`), "svc_live_***<last4>"},
	{regexp.MustCompile(`3EB0[0-9A-F]{20}`), "<messageId>"},
	{regexp.MustCompile(`SIMIN[0-9A-F]{20}`), "<inboundId>"},
	{regexp.MustCompile(`120363\d{12}@g\.us`), "<groupId>"},
	{regexp.MustCompile(`chat\.whatsapp\.com/[A-Za-z0-9_-]+`), "chat.whatsapp.com/<code>"},
	{regexp.MustCompile(`wh_[a-z0-9]{16}`), "wh_<id>"},
	{regexp.MustCompile(`whsec_[A-Za-z0-9+/=]+`), "whsec_<secret>"},
	{regexp.MustCompile(`data:image/png;base64,[A-Za-z0-9+/=]+`), "data:image/png;base64,<qr>"},
	{regexp.MustCompile(`eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+`), "<jwt>"},
	{regexp.MustCompile(`"code":"[A-Z0-9]{4}-[A-Z0-9]{4}"`), `"code":"<pair-code>"`},
	{regexp.MustCompile(`state=[^&"]+`), "state=<nonce>"},
	{regexp.MustCompile(`127\.0\.0\.1:\d+`), "127.0.0.1:<port>"},
	{regexp.MustCompile(`"(reset|resetsAt)":"<time>"`), `"$1":"<time>"`},
	{regexp.MustCompile(`"(durationMs|id)":"?\d{10,}"?`), `"$1":"<n>"`},
}

func (g *golden) add(name, call string, r res) {
	body := bytes.TrimSpace(r.body)
	for _, v := range volatile {
		body = v.re.ReplaceAll(body, []byte(v.with))
	}
	fmt.Fprintf(&g.buf, "### %s\n%s → %d\n%s\n\n", name, call, r.status, body)
}

func (g *golden) compare(t *testing.T) {
	t.Helper()
	if *update {
		if err := os.MkdirAll(filepath.Dir(g.file), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(g.file, g.buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(g.file)
	if err != nil {
		t.Fatalf("%v (go test ./httpapi -run %s -args -update writes it)", err, t.Name())
	}
	if got := g.buf.Bytes(); !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			var gotLine, wantLine string
			if i < len(gl) {
				gotLine = gl[i]
			}
			if i < len(wl) {
				wantLine = wl[i]
			}
			if gotLine != wantLine {
				t.Fatalf("%s differs at line %d:\n got: %s\nwant: %s\n(go test ./httpapi -run %s -args -update rewrites it after a deliberate change)", g.file, i+1, gotLine, wantLine, t.Name())
			}
		}
	}
}

// eventually polls cond until it holds (every 10 ms) or total passes.
func eventually(t testing.TB, total time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(total)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", total, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Shutdown does not wait for a connection a client opened and never sent a request on (Go's
// http.Transport parks one it dialed for a request another connection served): it closes it,
// and an idle keep-alive connection, and returns at once.
func TestShutdownClosesUnusedConnections(t *testing.T) {
	a := newAPI(t)
	a.do(t, "GET", "/healthz", "", nil, nil) // a keep-alive connection, idle after this
	unused, err := net.Dial("tcp", strings.TrimPrefix(a.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer unused.Close()
	time.Sleep(50 * time.Millisecond) // accepted
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	began := time.Now()
	if err := a.srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown: %v", err)
	}
	if took := time.Since(began); took > 2*time.Second {
		t.Fatalf("shutdown took %v with an unused connection open", took)
	}
}
