package engine_test

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/actors/webhook"
	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/media"
	"github.com/gateway/gateway/persist"
)

// The events tests' harness: a loopback webhook receiver, signature checks as the Standard
// Webhooks specification describes them (and with its npm library once `make webhook-interop`
// installed it), and an Events on its own actor engine.

// hook is one request a test receiver got.
type hook struct {
	ID, Timestamp, Signature string
	Body                     []byte
	Type                     string
	Data                     map[string]any
}

// testReceiver is a webhook receiver on loopback. While down it answers 500 (or, with refuse,
// drops the connection).
type testReceiver struct {
	*httptest.Server
	mu     sync.Mutex
	hooks  []hook
	down   bool
	refuse bool
}

func newTestReceiver(t *testing.T) *testReceiver {
	r := &testReceiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		down, refuse := r.down, r.refuse
		r.mu.Unlock()
		if refuse {
			hj, _ := w.(http.Hijacker)
			if c, _, err := hj.Hijack(); err == nil {
				c.Close()
			}
			return
		}
		if down {
			w.WriteHeader(500)
			return
		}
		h := hook{ID: req.Header.Get("webhook-id"), Timestamp: req.Header.Get("webhook-timestamp"),
			Signature: req.Header.Get("webhook-signature"), Body: body}
		var env struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		_ = json.Unmarshal(body, &env)
		h.Type, h.Data = env.Type, env.Data
		r.mu.Lock()
		r.hooks = append(r.hooks, h)
		r.mu.Unlock()
		w.WriteHeader(204)
	}))
	t.Cleanup(r.Close)
	return r
}

func (r *testReceiver) got() []hook {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.hooks)
}

func (r *testReceiver) setDown(down, refuse bool) {
	r.mu.Lock()
	r.down, r.refuse = down, refuse
	r.mu.Unlock()
}

// verifyFromSpec checks a signature the way the Standard Webhooks specification describes,
// without the library the gateway signs with.
func verifyFromSpec(secret string, h hook) error {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return err
	}
	ts, err := strconv.ParseInt(h.Timestamp, 10, 64)
	if err != nil {
		return fmt.Errorf("timestamp %q", h.Timestamp)
	}
	if d := time.Since(time.Unix(ts, 0)); d > 5*time.Minute || d < -5*time.Minute {
		return fmt.Errorf("timestamp %d out of tolerance", ts)
	}
	mac := hmac.New(sha256.New, key)
	fmt.Fprintf(mac, "%s.%s.", h.ID, h.Timestamp)
	mac.Write(h.Body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, s := range strings.Fields(h.Signature) {
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return errors.New("no matching signature")
}

// nodeModules is where `make webhook-interop` installs the npm package standardwebhooks (the
// specification's TypeScript library), for the Node verifier; "" when it is not there.
func nodeModules() string {
	for _, dir := range []string{os.Getenv("GATEWAY_NODE_MODULES"), filepath.Join(os.Getenv("HOME"), ".cache/gateway-node/node_modules")} {
		if dir == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(dir, "standardwebhooks")); err == nil {
			if _, err := exec.LookPath("node"); err == nil {
				return dir
			}
		}
	}
	return ""
}

// verifyWithNode runs the npm standardwebhooks library's Webhook.verify on every hook.
func verifyWithNode(t *testing.T, secret string, hooks []hook) {
	t.Helper()
	dir := nodeModules()
	if dir == "" {
		t.Log("node or the npm package standardwebhooks is missing (make webhook-interop): Node verification skipped")
		return
	}
	const script = `
const { Webhook } = require("standardwebhooks");
const lines = require("fs").readFileSync(0, "utf8").trim().split("\n");
let ok = 0;
for (const line of lines) {
  const h = JSON.parse(line);
  new Webhook(h.secret).verify(Buffer.from(h.body, "base64").toString("utf8"),
    {"webhook-id": h.id, "webhook-timestamp": h.ts, "webhook-signature": h.sig});
  ok++;
}
console.log(ok);
`
	var in bytes.Buffer
	for _, h := range hooks {
		line, _ := json.Marshal(map[string]string{"secret": secret, "id": h.ID, "ts": h.Timestamp, "sig": h.Signature,
			"body": base64.StdEncoding.EncodeToString(h.Body)})
		in.Write(append(line, '\n'))
	}
	cmd := exec.Command("node", "-e", script)
	cmd.Env = append(os.Environ(), "NODE_PATH="+dir)
	cmd.Stdin = &in
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the Node standardwebhooks verifier refused a delivery: %v\n%s", err, out)
	}
	if got := strings.TrimSpace(string(out)); got != strconv.Itoa(len(hooks)) {
		t.Fatalf("Node verified %s of %d", got, len(hooks))
	}
	t.Logf("Node standardwebhooks verified %d deliveries", len(hooks))
}

type eventsHarness struct {
	ev    *engine.Events
	hw    *actor.Engine
	store *persist.Webhooks
}

// newEvents is an events facet on kv (its watchers w when given: a cluster node's, shared).
func newEvents(t testing.TB, kv persist.KV, allowPrivate bool, policy webhook.Policy, w ...*engine.Watchers) *eventsHarness {
	t.Helper()
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	guard := media.Guard{AllowPrivate: allowPrivate}
	store := persist.NewWebhooks(kv)
	cfg := engine.EventsConfig{
		Store: store, Actors: hw, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Poster: webhook.NewHTTPPoster(guard.Dialer(5*time.Second), 0, 0), Guard: guard, Policy: policy,
	}
	if len(w) > 0 {
		cfg.Watchers = w[0]
	}
	ev, err := engine.NewEvents(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Boot(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &eventsHarness{ev: ev, hw: hw, store: store}
}

func (h *eventsHarness) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	h.ev.Stop(ctx)
}

func waitUntil(t *testing.T, total time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(total)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", total, what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
