package node

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gateway/gateway/identity"
	"github.com/gateway/gateway/persist"
)

// testConfig is a node on the embedded defaults (dev auth, the sim), its records in kv (nil:
// Badger in a temp dir).
func testConfig(t testing.TB) Config {
	return Config{
		Data: t.TempDir(), Fsync: "batch", Store: "badger", Network: "sim", Auth: "dev",
		DefaultPlan: "free", PublicURL: "http://localhost", InternalCIDRs: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")},
		MediaMaxBytes: 16 << 20, BulkMaxRecipients: 1000, BodyLimit: 1 << 20, LogFormat: "json",
		BootWindow: -1, PaceMinGap: -1, PaceJitter: -1, PacePerMinute: -1, PaceNewContacts: -1, PaceRampDays: -1, PacePerDay: -1,
		MemTableSize: persist.DefaultMemTableSize, ShutdownTimeout: 10 * time.Second, LeaseTTL: 2 * time.Second,
		Partitions: DefaultPartitions, Version: "test",
	}
}

// testLog is the nodes' logger: errors only, to stderr (a node's goroutines may outlive t).
func testLog() *slog.Logger {
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
}

// served is a node serving on a loopback port.
type served struct {
	*Node
	url string
}

// start opens a node from c and serves it; cleanup shuts it down (unless the test did).
func start(t testing.TB, c Config) *served {
	t.Helper()
	n, err := Open(context.Background(), c, testLog())
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		n.Shutdown(context.Background())
		t.Fatal(err)
	}
	go n.Serve(ln) //nolint:errcheck // ends with Shutdown
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		n.Shutdown(ctx)
	})
	return &served{Node: n, url: "http://" + ln.Addr().String()}
}

// token mints a dev ID token for uid (role "admin" or "").
func (s *served) token(t testing.TB, uid, role string) string {
	t.Helper()
	tok, err := s.DevIssuer().Mint(identity.TokenRequest{UID: uid, Role: role, Name: strings.ToUpper(uid[:1]) + uid[1:]})
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// reply is a decoded response.
type reply struct {
	status int
	raw    []byte
}

func (r reply) obj() map[string]any {
	var m map[string]any
	_ = json.Unmarshal(r.raw, &m)
	return m
}

func (r reply) list() []map[string]any {
	var l []map[string]any
	_ = json.Unmarshal(r.raw, &l)
	return l
}

func (r reply) str(field string) string {
	s, _ := r.obj()[field].(string)
	return s
}

var client = &http.Client{Timeout: 30 * time.Second}

// do sends a JSON request with a bearer token ("": none).
func (s *served) do(t testing.TB, method, path, bearer string, body any) reply {
	t.Helper()
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, s.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return reply{status: res.StatusCode, raw: raw}
}

// must is do that fails t unless the status is want.
func (s *served) must(t testing.TB, want int, method, path, bearer string, body any) reply {
	t.Helper()
	r := s.do(t, method, path, bearer, body)
	if r.status != want {
		t.Fatalf("%s %s: %d, want %d: %s", method, path, r.status, want, r.raw)
	}
	return r
}

// signIn makes uid's profile (a first call) and returns its token.
func (s *served) signIn(t testing.TB, uid string) string {
	t.Helper()
	tok := s.token(t, uid, "")
	s.must(t, 200, "GET", "/api/client/apikeys", tok, nil)
	return tok
}

// newKey creates a key for uid as admin: its raw key and id.
func (s *served) newKey(t testing.TB, admin, uid, name string) (raw, id string) {
	t.Helper()
	r := s.must(t, 201, "POST", "/api/admin/apikeys", admin, map[string]any{"userId": uid, "name": name})
	return r.str("rawKey"), r.str("id")
}

// scanner links sessions on the sim (its dev control Scan).
type scanner interface {
	Scan(sessionID, phone string) error
}

// link creates tok's session through the QR route, scans it with phone and waits until it is
// connected; it returns the session's id.
func (s *served) link(t testing.TB, sim scanner, tok, phone string) string {
	t.Helper()
	id := s.must(t, 200, "GET", "/api/client/qr", tok, nil).str("sessionId")
	if err := sim.Scan(id, phone); err != nil {
		t.Fatalf("scan: %v", err)
	}
	eventually(t, 10*time.Second, "session connected", func() bool {
		return s.must(t, 200, "GET", "/api/client/status", tok, nil).str("status") == "CONNECTED"
	})
	return id
}

// eventually polls cond until it holds or total passes.
func eventually(t testing.TB, total time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(total)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", total, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// recordingKV is the memory KV as a node's store, which records what reaches it after Close.
type recordingKV struct {
	*persist.Memory
	mu      sync.Mutex
	closed  int      // Close calls
	late    []string // the first key of each commit made after Close
	atClose func()   // runs at Close, before the store closes
}

func newRecordingKV() *recordingKV { return &recordingKV{Memory: persist.NewMemory()} }

func (k *recordingKV) Health() error { return nil }

func (k *recordingKV) Commit(ctx context.Context, ops ...persist.Op) error {
	k.mu.Lock()
	if k.closed > 0 && len(ops) > 0 {
		k.late = append(k.late, string(ops[0].Key))
	}
	k.mu.Unlock()
	return k.Memory.Commit(ctx, ops...)
}

func (k *recordingKV) Close() error {
	k.mu.Lock()
	at := k.atClose
	k.closed++
	k.mu.Unlock()
	if at != nil {
		at()
	}
	return k.Memory.Close()
}
