package main

// The end-to-end harness: the real gateway, built by node.Open from the flags exactly as
// `gateway serve` builds it, served over real HTTP on a random loopback port. Every response a test reads is checked
// against /api/openapi.json.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/goccy/go-json"

	"github.com/gateway/gateway/actors/session"
	"github.com/gateway/gateway/httpapi/openapitest"
	"github.com/gateway/gateway/identity"
	"github.com/gateway/gateway/node"
	"github.com/gateway/gateway/persist"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// testStore is where the gateways of the e2e and process tests keep their records:
// GATEWAY_STORE=nats puts them on NATS JetStream (one real nats-server process for the whole
// run, its store in a temp dir, each gateway on a prefix of its own), anything else on Badger.
var (
	testStore = "badger"
	natsSrv   *sharedNATS
)

func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Short() {
		prebuild()
	}
	if v := os.Getenv("GATEWAY_STORE"); v != "" {
		testStore = v
		// The gateways get --store from storeArgs, never from the environment (GATEWAY_STORE
		// is also --store's variable).
		os.Unsetenv("GATEWAY_STORE")
	}
	if testStore == "nats" {
		srv, err := startSharedNATS()
		if err != nil {
			fmt.Fprintln(os.Stderr, "shared NATS server:", err)
			removeBuilt()
			os.Exit(2)
		}
		natsSrv = srv
	}
	code := m.Run()
	if natsSrv != nil {
		natsSrv.close()
	}
	removeBuilt()
	os.Exit(code)
}

// sharedNATS is the NATS server of a GATEWAY_STORE=nats run: nats-server built from the module
// go.mod pins (natsBinary, which the NATS fault suites build anyway) and run as its own process
// with the server's defaults (a stock server: 1 MiB messages), as a gateway runs in
// production. It was embedded in the test binary, where under -race (make test-nats) the server
// was instrumented too; the suite's time did not depend on it (CI's test-nats 432.5 s embedded,
// 438.4 s with the process: the suite waits more than it computes). The gateways' own code (in
// process and in their binaries) is what the suite checks, and the NATS client in the test
// binary is still instrumented.
type sharedNATS struct {
	URL    string
	dir    string
	cmd    *exec.Cmd
	exited chan struct{} // closed once the process is reaped
}

// startSharedNATS builds nats-server if needed and starts it on a free loopback port.
func startSharedNATS() (*sharedNATS, error) {
	bin, err := natsBinary.build()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "natstest-")
	if err != nil {
		return nil, err
	}
	addr, err := freeLoopbackAddr()
	var conf string
	if err == nil {
		conf, err = writeNATSConf(dir, addr)
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &sharedNATS{URL: "nats://" + addr, dir: dir}
	s.cmd = dieWithTest(exec.Command(bin, "-c", conf))
	var out strings.Builder
	s.cmd.Stdout, s.cmd.Stderr = &out, &out
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s.exited = make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	// Ready once JetStream answers, not only the port: a gateway started at once creates its
	// streams.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if nc, err := nats.Connect(s.URL, nats.Timeout(time.Second)); err == nil {
			js, jerr := jetstream.New(nc)
			if jerr == nil {
				ctx, cancel := context.WithTimeout(context.Background(), time.Second)
				_, jerr = js.AccountInfo(ctx)
				cancel()
			}
			nc.Close()
			if jerr == nil {
				return s, nil
			}
		}
		select {
		case <-s.exited:
			os.RemoveAll(dir)
			return nil, fmt.Errorf("nats-server exited at start:\n%s", out.String())
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.close()
			return nil, fmt.Errorf("nats-server not ready after 30s:\n%s", out.String())
		}
	}
}

// Dir is the server's store directory (dataFiles looks there too).
func (s *sharedNATS) Dir() string { return s.dir }

// close kills the server and removes its store once it is gone.
func (s *sharedNATS) close() {
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	os.RemoveAll(s.dir)
}

// storeArgs are the flags that put a gateway on data dir data on the test store, unless args
// choose a store themselves. The NATS prefix is derived from the data dir, so a restart on the
// same dir finds the same records.
func storeArgs(data string, args []string) []string {
	if testStore != "nats" || slices.Contains(args, "--store") {
		return nil
	}
	sum := sha256.Sum256([]byte(data))
	return []string{"--store", "nats", "--nats", natsSrv.URL, "--nats-prefix", "t" + hex.EncodeToString(sum[:8])}
}

// outboxArgs is GATEWAY_OUTBOX (badger or log) as --outbox, unless args name one: make
// test-badger-outbox runs the suites on the records' store's outbox, where the default is the
// log. A gateway on NATS gets badger (the gateway reads GATEWAY_OUTBOX itself, and refuses the
// log with --store nats).
func outboxArgs(args []string) []string {
	v := os.Getenv("GATEWAY_OUTBOX")
	switch {
	case v == "" || flagValue(args, "--outbox") != "":
		return nil
	case flagValue(args, "--store") == "nats":
		v = "badger"
	}
	return []string{"--outbox", v}
}

// flagValue is the last value of flag in args ("" if absent).
func flagValue(args []string, flag string) string {
	v := ""
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			v = args[i+1]
		}
	}
	return v
}

// sideBySide marks a test that runs beside the other such tests once the serial ones are done
// (make test and make test-nats pass -parallel 4): every end-to-end test that bounds no latency
// or rate, and the process suites that spend seconds waiting (on a wall clock, a restart, a
// provider, a static build) and bound none, so their waits overlap. Every gateway a test starts
// has its own data dir, port and NATS prefix, and its metrics of its own. A test that sets
// environment variables (t.Setenv), bounds a latency or a rate, or starts a thousand sessions
// stays serial: it runs alone, before the others.
func sideBySide(t *testing.T) { t.Parallel() }

// testGW is one gateway under test, seen from one test: its helpers fail t. A subtest takes its
// own view with tg.with(t), so a failure (a timeout in eventually, say) fails the subtest that
// saw it and not its parent from the subtest's goroutine (which Go reports as a second, confusing
// failure). Every view shares the gateway itself.
type testGW struct {
	t testing.TB
	*gwState
}

// gwState is the gateway a test and its subtests share.
type gwState struct {
	args   []string
	data   string // the data dir
	g      *node.Node
	url    string
	issuer *identity.Issuer
	client *http.Client
	errc   chan error
	clock  func() time.Time // the engine's clock (nil: time.Now)
	// after: the engine's timers by that clock (nil: time.AfterFunc); see skewClock.
	after func(time.Duration, func()) session.Timer
	// kv holds the records instead of the store the flags name (nil: those).
	kv persist.Durable
}

// with is the view of the gateway from t (a subtest): its helpers fail t.
func (tg *testGW) with(t testing.TB) *testGW { return &testGW{t: t, gwState: tg.gwState} }

// startGW starts a gateway on a fresh data dir (unless args set --data) with args added to the
// defaults.
func startGW(t testing.TB, args ...string) *testGW {
	t.Helper()
	return startGWClock(t, nil, args...)
}

// startGWClock is startGW with the engine's clock given (tests that move time).
func startGWClock(t testing.TB, clock func() time.Time, args ...string) *testGW {
	t.Helper()
	return startGWTimers(t, clock, nil, args...)
}

// startGWTimers is startGWClock with the engine's timers given too (see skewClock).
func startGWTimers(t testing.TB, clock func() time.Time, after func(time.Duration, func()) session.Timer, args ...string) *testGW {
	t.Helper()
	base := []string{"--data", t.TempDir(), "--addr", "127.0.0.1:0", "--log-level", "warn", "--log-requests=false"}
	args = append(base, args...)
	args = append(args, storeArgs(flagValue(args, "--data"), args)...)
	args = append(args, outboxArgs(args)...)
	tg := &testGW{t: t, gwState: &gwState{args: args, client: &http.Client{Timeout: 30 * time.Second}, clock: clock, after: after}}
	tg.start()
	t.Cleanup(tg.stop)
	return tg
}

func (tg *testGW) start() {
	tg.t.Helper()
	cfg, err := parseServe(tg.args, io.Discard)
	if err != nil {
		tg.t.Fatalf("flags: %v", err)
	}
	cfg.Now, cfg.Version, cfg.KV = tg.clock, version, tg.kv
	if tg.after != nil {
		cfg.AfterFunc = tg.after
	}
	tg.data = cfg.Data
	// Logs go to stderr at error level (a test's goroutines may outlive testing.T's logger).
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	g, err := node.Open(context.Background(), cfg.Config, log)
	if err != nil {
		tg.t.Fatalf("open: %v", err)
	}
	ln, err := net.Listen("tcp", cfg.addr)
	if err != nil {
		g.Shutdown(context.Background())
		tg.t.Fatalf("listen: %v", err)
	}
	errc := make(chan error, 1)
	tg.g, tg.url, tg.errc = g, "http://"+ln.Addr().String(), errc
	go func() { errc <- g.Serve(ln) }()
	_, issuer, err := identity.NewDev(cfg.Data)
	if err != nil {
		tg.t.Fatalf("dev issuer: %v", err)
	}
	tg.issuer = issuer
}

func (tg *testGW) stop() {
	if tg.g == nil {
		return
	}
	// Close the client's idle connections first: a connection the client opened and never used
	// would otherwise keep the server's shutdown waiting for its read timeout.
	tg.client.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tg.g.Shutdown(ctx)
	tg.g = nil
}

// restart stops the gateway gracefully and starts it again on the same data dir and port-less
// address (a new random port).
func (tg *testGW) restart() {
	tg.t.Helper()
	tg.stop()
	tg.start()
}

// token mints a dev ID token.
func (tg *testGW) token(uid, role string) string {
	tg.t.Helper()
	tok, err := tg.issuer.Mint(identity.TokenRequest{UID: uid, Role: role, Name: strings.ToUpper(uid[:1]) + uid[1:], Email: uid + "@example.com"})
	if err != nil {
		tg.t.Fatalf("mint: %v", err)
	}
	return tok
}

// resp is a decoded response.
type resp struct {
	status int
	header http.Header
	raw    []byte
}

func (r resp) obj() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.raw, &m)
	return m
}

func (r resp) list() []map[string]any {
	var l []map[string]any
	_ = json.Unmarshal(r.raw, &l)
	return l
}

func (r resp) str(field string) string {
	s, _ := r.obj()[field].(string)
	return s
}

// auth is how a request authenticates: "Bearer X" or "x-api-key: X" style header pairs.
type auth map[string]string

func bearerAuth(tok string) auth { return auth{"Authorization": "Bearer " + tok} }
func keyAuth(raw string) auth    { return auth{"x-api-key": raw} }

// do sends a request; body is JSON-encoded unless it is a string or []byte (sent as is).
func (tg *testGW) do(method, path string, a auth, body any) resp {
	tg.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			tg.t.Fatalf("encode: %v", err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, tg.url+path, rd)
	if err != nil {
		tg.t.Fatalf("request: %v", err)
	}
	for k, v := range a {
		req.Header.Set(k, v)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := tg.client.Do(req)
	if err != nil {
		tg.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		tg.t.Fatalf("%s %s: read: %v", method, path, err)
	}
	ct := res.Header.Get("Content-Type")
	if res.StatusCode >= 400 && !strings.HasPrefix(ct, "application/json") {
		tg.t.Errorf("%s %s: status %d with content type %q, want JSON: %s", method, path, res.StatusCode, ct, raw)
	}
	openapitest.Check(tg.t, method, path, res.StatusCode, ct, raw)
	return resp{status: res.StatusCode, header: res.Header, raw: raw}
}

// want fails the test unless the response has the status (and, for errors, the code).
func want(t testing.TB, r resp, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.raw)
	}
	if code != "" && r.str("code") != code {
		t.Fatalf("code %q, want %q: %s", r.str("code"), code, r.raw)
	}
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t testing.TB, total time.Duration, what string, cond func() bool) {
	t.Helper()
	start := time.Now()
	for !cond() {
		waited := time.Since(start)
		if waited > total {
			t.Fatalf("timed out after %v waiting for %s", total, what)
		}
		// Every 10 ms for the first second, then every 50: a condition read through the API
		// is a request that counts against the key's daily cap, and a long wait under load
		// must not spend it.
		step := 10 * time.Millisecond
		if waited > time.Second {
			step = 50 * time.Millisecond
		}
		time.Sleep(step)
	}
}

// dataFiles reads the first limit bytes of every regular file under dir and, on the NATS
// store, under the NATS server's store (for "the raw key is stored nowhere" checks).
func dataFiles(t testing.TB, dir string, limit int64) map[string][]byte {
	dirs := []string{dir}
	if natsSrv != nil {
		dirs = append(dirs, natsSrv.Dir())
	}
	out := map[string][]byte{}
	for _, d := range dirs {
		err := filepath.Walk(d, func(p string, info os.FileInfo, err error) error {
			if err != nil || !info.Mode().IsRegular() {
				return nil
			}
			f, err := os.Open(p)
			if errors.Is(err, fs.ErrNotExist) {
				// Another test's NATS stream (the server is shared, the tests run side by
				// side) was deleted between the walk and the read: not this test's data.
				return nil
			}
			if err != nil {
				return err
			}
			defer f.Close()
			b, err := io.ReadAll(io.LimitReader(f, limit))
			if err != nil {
				return err
			}
			out[p] = b
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// skewClock is the engine's clock in tests that jump ahead: real time plus an offset the test
// moves. Its timers fire on real time as usual, and at once when a move passes their deadline,
// so a deliverer waiting for tomorrow wakes when the test says it is tomorrow.
type skewClock struct {
	mu     sync.Mutex
	offset time.Duration
	timers map[*skewTimer]struct{}
}

type skewTimer struct {
	c    *skewClock
	at   time.Time
	f    func()
	once sync.Once
	real *time.Timer
}

func newSkewClock() *skewClock { return &skewClock{timers: map[*skewTimer]struct{}{}} }

func (c *skewClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *skewClock) AfterFunc(d time.Duration, f func()) session.Timer {
	t := &skewTimer{c: c, at: c.Now().Add(d), f: f}
	c.mu.Lock()
	c.timers[t] = struct{}{}
	t.real = time.AfterFunc(d, t.fire) // under mu: Advance reads it
	c.mu.Unlock()
	return t
}

func (t *skewTimer) fire() {
	t.once.Do(func() {
		t.c.mu.Lock()
		delete(t.c.timers, t)
		t.c.mu.Unlock()
		t.f()
	})
}

func (t *skewTimer) Stop() bool {
	t.c.mu.Lock()
	_, pending := t.c.timers[t]
	delete(t.c.timers, t)
	t.c.mu.Unlock()
	t.real.Stop()
	return pending
}

// Advance moves the clock by d and fires every timer whose deadline it passed.
func (c *skewClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	now := time.Now().Add(c.offset)
	var due []*skewTimer
	for t := range c.timers {
		if !t.at.After(now) {
			due = append(due, t)
			t.real.Stop()
		}
	}
	c.mu.Unlock()
	for _, t := range due {
		t.fire()
	}
}

// startGWSkew is startGW on a skew clock.
func startGWSkew(t testing.TB, c *skewClock, args ...string) *testGW {
	t.Helper()
	return startGWTimers(t, c.Now, c.AfterFunc, args...)
}
