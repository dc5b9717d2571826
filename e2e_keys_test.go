package main

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/gateway/gateway/identity"
)

var rawKeyRE = regexp.MustCompile(`^svc_live_[0-9a-f]{48}$`)

// newClient makes sure the user's profile exists (first authenticated call) and returns its token.
func (tg *testGW) newClient(uid string) string {
	tg.t.Helper()
	tok := tg.token(uid, "")
	want(tg.t, tg.do("GET", "/api/client/apikeys", bearerAuth(tok), nil), 200, "")
	return tok
}

// newKey creates a key for uid as admin and returns the create response.
func (tg *testGW) newKey(admin, uid string, extra map[string]any) resp {
	tg.t.Helper()
	body := map[string]any{"userId": uid, "name": "key of " + uid}
	for k, v := range extra {
		body[k] = v
	}
	r := tg.do("POST", "/api/admin/apikeys", bearerAuth(admin), body)
	want(tg.t, r, 201, "")
	return r
}

func TestKeyLifecycle(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	admin := tg.token("root", "admin")
	alice := tg.newClient("alice")
	bob := tg.newClient("bob")

	created := tg.newKey(admin, "alice", nil)
	k := created.obj()
	raw := created.str("rawKey")
	if !rawKeyRE.MatchString(raw) {
		t.Fatalf("rawKey %q does not match %s", raw, rawKeyRE)
	}
	if got, want := k["maskedKey"], "svc_live_***"+raw[len(raw)-4:]; got != want {
		t.Fatalf("maskedKey %v, want %v", got, want)
	}
	if fmt.Sprint(k["scopes"]) != "[send_text send_media send_bulk read_messages]" || k["status"] != "active" || k["userId"] != "alice" || k["clientName"] != "Alice" {
		t.Fatalf("create response: %s", created.raw)
	}
	id := k["id"].(string)
	tg.newKey(admin, "bob", map[string]any{"scopes": []string{"send_text"}})

	// Lists: admin sees both, each client only its own, rawKey in none.
	all := tg.do("GET", "/api/admin/apikeys", bearerAuth(admin), nil)
	want(t, all, 200, "")
	if n := len(all.list()); n != 2 {
		t.Fatalf("admin list has %d keys, want 2", n)
	}
	mine := tg.do("GET", "/api/client/apikeys", bearerAuth(alice), nil)
	if l := mine.list(); len(l) != 1 || l[0]["id"] != id || l[0]["plan"] != "free" || l[0]["rate_limit"] != float64(1000) {
		t.Fatalf("alice's list: %s", mine.raw)
	}
	for _, r := range []resp{all, mine, tg.do("GET", "/api/client/apikeys", bearerAuth(bob), nil)} {
		if bytes.Contains(r.raw, []byte("rawKey")) || bytes.Contains(r.raw, []byte(raw)) {
			t.Fatalf("a list shows the raw key: %s", r.raw)
		}
	}

	// The key works, validate says so, and calls are counted.
	want(t, tg.do("GET", "/api/v1/account", keyAuth(raw), nil), 200, "")
	acct := tg.do("GET", "/api/v1/account", bearerAuth(raw), nil)
	want(t, acct, 200, "")
	if a := acct.obj(); a["keyId"] != id || a["api_calls"] != float64(2) || a["remaining_today"] != float64(998) {
		t.Fatalf("account: %s", acct.raw)
	}
	if acct.header.Get("X-RateLimit-Limit") != "1000" || acct.header.Get("X-RateLimit-Remaining") != "998" || acct.header.Get("X-RateLimit-Reset") == "" {
		t.Fatalf("rate-limit headers: %v", acct.header)
	}
	v := tg.do("POST", "/api/admin/apikeys/validate", nil, map[string]any{"rawKey": raw})
	if want(t, v, 200, ""); v.obj()["valid"] != true || v.str("userId") != "alice" || v.str("clientName") != "Alice" {
		t.Fatalf("validate: %s", v.raw)
	}

	// Rename.
	want(t, tg.do("PATCH", "/api/admin/apikeys", bearerAuth(admin), map[string]any{"id": id, "name": "renamed"}), 200, "")
	if l := tg.do("GET", "/api/client/apikeys", bearerAuth(alice), nil).list(); l[0]["name"] != "renamed" {
		t.Fatalf("rename not applied: %v", l)
	}

	// Revoke: refused on v1 and by validate; re-activate: accepted again.
	want(t, tg.do("PATCH", "/api/admin/apikeys", bearerAuth(admin), map[string]any{"id": id, "status": "revoked"}), 200, "")
	want(t, tg.do("GET", "/api/v1/account", keyAuth(raw), nil), 401, "key_revoked")
	v = tg.do("POST", "/api/admin/apikeys/validate", nil, map[string]any{"rawKey": raw})
	if want(t, v, 401, ""); v.obj()["valid"] != false || !strings.Contains(v.str("error"), "revoked") {
		t.Fatalf("validate of a revoked key: %s", v.raw)
	}
	want(t, tg.do("PATCH", "/api/admin/apikeys", bearerAuth(admin), map[string]any{"id": id, "status": "active"}), 200, "")
	want(t, tg.do("GET", "/api/v1/account", keyAuth(raw), nil), 200, "")

	// Expiry in the past: refused; in the future: accepted and shown.
	past := tg.newKey(admin, "alice", map[string]any{"expiresAt": "2020-01-01"})
	want(t, tg.do("GET", "/api/v1/account", keyAuth(past.str("rawKey")), nil), 401, "key_expired")
	v = tg.do("POST", "/api/admin/apikeys/validate", nil, map[string]any{"rawKey": past.str("rawKey")})
	if want(t, v, 401, ""); !strings.Contains(v.str("error"), "expired") {
		t.Fatalf("validate of an expired key: %s", v.raw)
	}
	future := tg.newKey(admin, "alice", map[string]any{"expiresAt": time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339)})
	if future.str("expiresAt") == "" {
		t.Fatalf("expiresAt not shown: %s", future.raw)
	}
	want(t, tg.do("GET", "/api/v1/account", keyAuth(future.str("rawKey")), nil), 200, "")

	// Unknown key.
	v = tg.do("POST", "/api/admin/apikeys/validate", nil, map[string]any{"rawKey": "svc_live_" + strings.Repeat("0", 48)})
	if want(t, v, 401, ""); v.obj()["valid"] != false || v.str("error") != "Invalid API key" {
		t.Fatalf("validate of an unknown key: %s", v.raw)
	}

	// Delete: gone everywhere.
	want(t, tg.do("DELETE", "/api/admin/apikeys?id="+id, bearerAuth(admin), nil), 200, "")
	want(t, tg.do("GET", "/api/v1/account", keyAuth(raw), nil), 401, "invalid_api_key")
	want(t, tg.do("DELETE", "/api/admin/apikeys?id="+id, bearerAuth(admin), nil), 404, "key_not_found")
	for _, l := range tg.do("GET", "/api/admin/apikeys", bearerAuth(admin), nil).list() {
		if l["id"] == id {
			t.Fatal("deleted key still listed")
		}
	}

	// The raw keys are stored nowhere in the data dir.
	data := tg.data
	tg.stop()
	for f, b := range dataFiles(t, data, 1<<40) {
		for _, r := range []string{raw, past.str("rawKey"), future.str("rawKey")} {
			if bytes.Contains(b, []byte(r)) || bytes.Contains(b, []byte(r[9:])) {
				t.Fatalf("raw key found in %s", f)
			}
		}
	}
}

// signToken signs arbitrary claims with the RSA key in pemPath (for tokens the dev issuer would
// never mint: expired, another issuer).
func signToken(t testing.TB, pemPath string, claims map[string]any) string {
	t.Helper()
	data, err := os.ReadFile(pemPath)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	var key *rsa.PrivateKey
	if k, err := x509.ParsePKCS8PrivateKey(block.Bytes); err == nil {
		key = k.(*rsa.PrivateKey)
	} else if key, err = x509.ParsePKCS1PrivateKey(block.Bytes); err != nil {
		t.Fatal(err)
	}
	return signWith(t, key, claims)
}

func signWith(t testing.TB, key *rsa.PrivateKey, claims map[string]any) string {
	sig, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: key}, (&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(sig).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// badTokens are ID tokens every protected route must refuse with 401 invalid_token.
func badTokens(t testing.TB, tg *testGW) map[string]string {
	now := time.Now()
	pemPath := filepath.Join(tg.data, "dev-idp.pem")
	claims := func(mod func(map[string]any)) map[string]any {
		c := map[string]any{"iss": identity.DevIssuer, "aud": identity.DevAudience, "sub": "root", "role": "admin",
			"iat": now.Unix(), "exp": now.Add(time.Hour).Unix()}
		mod(c)
		return c
	}
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	_, otherIssuer, err := identity.NewDev(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fromOtherKey, err := otherIssuer.Mint(identity.TokenRequest{UID: "root", Role: "admin"})
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{
		"malformed":     "not.a.token",
		"garbage":       "abc",
		"other-issuer":  signToken(t, pemPath, claims(func(c map[string]any) { c["iss"] = "https://evil.example" })),
		"other-aud":     signToken(t, pemPath, claims(func(c map[string]any) { c["aud"] = "someone-else" })),
		"other-key":     signWith(t, other, claims(func(map[string]any) {})),
		"other-dev-key": fromOtherKey,
		"expired": signToken(t, pemPath, claims(func(c map[string]any) {
			c["exp"] = now.Add(-time.Hour).Unix()
			c["iat"] = now.Add(-2 * time.Hour).Unix()
		})),
		"empty-sub": signToken(t, pemPath, claims(func(c map[string]any) { c["sub"] = "" })),
	}
}

type route struct {
	method, path string
	body         any
}

var (
	adminRoutes = []route{
		{"GET", "/api/admin/apikeys", nil},
		{"POST", "/api/admin/apikeys", map[string]any{"userId": "alice", "name": "x"}},
		{"PATCH", "/api/admin/apikeys", map[string]any{"id": "x", "name": "y"}},
		{"DELETE", "/api/admin/apikeys?id=x", nil},
		{"GET", "/api/admin/users", nil},
		{"POST", "/api/admin/users", map[string]any{"id": "carol"}},
		{"PATCH", "/api/admin/users", map[string]any{"id": "alice", "plan": "starter"}},
	}
	clientRoutes = []route{
		{"GET", "/api/client/apikeys", nil},
	}
	keyRoutes = []route{
		{"GET", "/api/v1/account", nil},
	}
)

func TestAuthMatrix(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	admin := tg.token("root", "admin")
	client := tg.newClient("alice")
	tokens := badTokens(t, tg)

	for _, r := range append(append([]route{}, adminRoutes...), clientRoutes...) {
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			tg := tg.with(t)
			want(t, tg.do(r.method, r.path, nil, r.body), 401, "missing_credentials")
			want(t, tg.do(r.method, r.path, auth{"Authorization": "Basic abc"}, r.body), 401, "missing_credentials")
			for name, tok := range tokens {
				if r := tg.do(r.method, r.path, bearerAuth(tok), r.body); r.status != 401 || r.str("code") != "invalid_token" {
					t.Fatalf("%s token: %d %s", name, r.status, r.raw)
				}
			}
		})
	}
	for _, r := range adminRoutes {
		t.Run("client on "+r.method+" "+r.path, func(t *testing.T) {
			tg := tg.with(t)
			want(t, tg.do(r.method, r.path, bearerAuth(client), r.body), 403, "forbidden")
		})
	}

	// API-key routes: missing, unknown, revoked, expired keys; an ID token is not a key.
	live := tg.newKey(admin, "alice", nil)
	revoked := tg.newKey(admin, "alice", nil)
	want(t, tg.do("PATCH", "/api/admin/apikeys", bearerAuth(admin), map[string]any{"id": revoked.str("id"), "status": "revoked"}), 200, "")
	expired := tg.newKey(admin, "alice", map[string]any{"expiresAt": "2001-01-01T00:00:00Z"})
	for _, r := range keyRoutes {
		t.Run(r.method+" "+r.path, func(t *testing.T) {
			tg := tg.with(t)
			want(t, tg.do(r.method, r.path, nil, r.body), 401, "missing_credentials")
			want(t, tg.do(r.method, r.path, keyAuth("svc_live_"+strings.Repeat("a", 48)), r.body), 401, "invalid_api_key")
			want(t, tg.do(r.method, r.path, keyAuth("garbage"), r.body), 401, "invalid_api_key")
			want(t, tg.do(r.method, r.path, bearerAuth(admin), r.body), 401, "invalid_api_key")
			want(t, tg.do(r.method, r.path, keyAuth(revoked.str("rawKey")), r.body), 401, "key_revoked")
			want(t, tg.do(r.method, r.path, bearerAuth(expired.str("rawKey")), r.body), 401, "key_expired")
			want(t, tg.do(r.method, r.path, keyAuth(live.str("rawKey")), r.body), 200, "")
		})
	}
}

func TestBadInput(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	admin := tg.token("root", "admin")
	tg.newClient("alice")
	a := bearerAuth(admin)

	cases := []struct {
		name, method, path string
		body               any
		status             int
		code               string
	}{
		{"create malformed json", "POST", "/api/admin/apikeys", `{"userId":`, 400, "invalid_json"},
		{"create empty body", "POST", "/api/admin/apikeys", ``, 400, "invalid_json"},
		{"create array body", "POST", "/api/admin/apikeys", `[1,2]`, 400, "invalid_json"},
		{"create userId number", "POST", "/api/admin/apikeys", `{"userId":5,"name":"x"}`, 400, "validation_failed"},
		{"create scopes string", "POST", "/api/admin/apikeys", `{"userId":"alice","name":"x","scopes":"send_text"}`, 400, "validation_failed"},
		{"create no userId", "POST", "/api/admin/apikeys", `{"name":"x"}`, 400, "validation_failed"},
		{"create no name", "POST", "/api/admin/apikeys", `{"userId":"alice"}`, 400, "validation_failed"},
		{"create blank name", "POST", "/api/admin/apikeys", `{"userId":"alice","name":"  "}`, 400, "validation_failed"},
		{"create unknown scope", "POST", "/api/admin/apikeys", `{"userId":"alice","name":"x","scopes":["send_fax"]}`, 400, "validation_failed"},
		{"create empty scopes", "POST", "/api/admin/apikeys", `{"userId":"alice","name":"x","scopes":[]}`, 400, "validation_failed"},
		{"create bad expiresAt", "POST", "/api/admin/apikeys", `{"userId":"alice","name":"x","expiresAt":"next tuesday"}`, 400, "validation_failed"},
		{"create expiresAt number", "POST", "/api/admin/apikeys", `{"userId":"alice","name":"x","expiresAt":12}`, 400, "validation_failed"},
		{"create unknown user", "POST", "/api/admin/apikeys", `{"userId":"nobody","name":"x"}`, 404, "user_not_found"},
		{"patch malformed", "PATCH", "/api/admin/apikeys", `{`, 400, "invalid_json"},
		{"patch no id", "PATCH", "/api/admin/apikeys", `{"name":"x"}`, 400, "validation_failed"},
		{"patch nothing", "PATCH", "/api/admin/apikeys", `{"id":"x"}`, 400, "validation_failed"},
		{"patch bad status", "PATCH", "/api/admin/apikeys", `{"id":"x","status":"paused"}`, 400, "validation_failed"},
		{"patch status bool", "PATCH", "/api/admin/apikeys", `{"id":"x","status":true}`, 400, "validation_failed"},
		{"patch unknown id", "PATCH", "/api/admin/apikeys", `{"id":"nope","name":"x"}`, 404, "key_not_found"},
		{"delete no id", "DELETE", "/api/admin/apikeys", nil, 400, "validation_failed"},
		{"delete unknown id", "DELETE", "/api/admin/apikeys?id=nope", nil, 404, "key_not_found"},
		{"validate malformed", "POST", "/api/admin/apikeys/validate", `{"rawKey"`, 400, "invalid_json"},
		{"validate missing", "POST", "/api/admin/apikeys/validate", `{}`, 400, "validation_failed"},
		{"validate number", "POST", "/api/admin/apikeys/validate", `{"rawKey":1}`, 400, "validation_failed"},
		{"user create no id", "POST", "/api/admin/users", `{"name":"x"}`, 400, "validation_failed"},
		{"user create bad role", "POST", "/api/admin/users", `{"id":"dave","role":"root"}`, 400, "validation_failed"},
		{"user create bad plan", "POST", "/api/admin/users", `{"id":"dave","plan":"gold"}`, 400, "validation_failed"},
		{"user create exists", "POST", "/api/admin/users", `{"id":"alice"}`, 409, "already_exists"},
		{"user patch unknown", "PATCH", "/api/admin/users", `{"id":"nobody","plan":"starter"}`, 404, "user_not_found"},
		{"user patch nothing", "PATCH", "/api/admin/users", `{"id":"alice"}`, 400, "validation_failed"},
		{"user patch bad plan", "PATCH", "/api/admin/users", `{"id":"alice","plan":"gold"}`, 400, "validation_failed"},
		{"user patch id with spaces names alice", "PATCH", "/api/admin/users", `{"id":"  alice ","name":"Alice"}`, 200, ""},
		{"user patch plan number", "PATCH", "/api/admin/users", `{"id":"alice","plan":3}`, 400, "validation_failed"},
		{"unknown route", "GET", "/api/nope", nil, 404, "not_found"},
		{"wrong method", "PUT", "/api/admin/apikeys", nil, 405, "method_not_allowed"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg := tg.with(t)
			hdr := a
			if strings.HasPrefix(c.path, "/api/admin/apikeys/validate") {
				hdr = nil
			}
			want(t, tg.do(c.method, c.path, hdr, c.body), c.status, c.code)
		})
	}
	// A body over the route's limit is refused from its headers, before it is read: the answer
	// is read over a raw connection (an HTTP client still sending the body may see the
	// connection close under it instead).
	for _, path := range []string{"/api/admin/apikeys", "/api/admin/apikeys/validate"} {
		if got := rawStatus(t, tg.url, "POST", path, 2<<20, 5*time.Second); !strings.Contains(got, " 413 ") {
			t.Fatalf("2 MiB to %s: %q, want 413", path, got)
		}
	}
	// Nothing was half-written: no key exists, and the users are the callers only.
	if l := tg.do("GET", "/api/admin/apikeys", a, nil).list(); len(l) != 0 {
		t.Fatalf("bad requests left keys behind: %v", l)
	}
	users := tg.do("GET", "/api/admin/users", a, nil).list()
	if len(users) != 2 || users[0]["plan"] != "free" || users[1]["plan"] != "free" {
		t.Fatalf("bad requests changed users: %v", users)
	}
}

func TestUsersAndPromotion(t *testing.T) {
	tg := startGW(t, "--admin-uids", "boss")
	boss := tg.token("boss", "client") // an --admin-uids uid is admin whatever the token says
	want(t, tg.do("GET", "/api/admin/users", bearerAuth(boss), nil), 200, "")

	r := tg.do("POST", "/api/admin/users", bearerAuth(boss), map[string]any{"id": "carol", "name": "Carol", "plan": "starter"})
	want(t, r, 201, "")
	carol := tg.token("carol", "")
	want(t, tg.do("GET", "/api/admin/users", bearerAuth(carol), nil), 403, "forbidden")
	want(t, tg.do("PATCH", "/api/admin/users", bearerAuth(boss), map[string]any{"id": "carol", "role": "admin"}), 200, "")
	want(t, tg.do("GET", "/api/admin/users", bearerAuth(carol), nil), 200, "")

	// A plan change reaches the user's keys at once.
	k := tg.newKey(boss, "carol", nil)
	acct := tg.do("GET", "/api/v1/account", keyAuth(k.str("rawKey")), nil)
	if acct.obj()["rate_limit"] != float64(10000) || acct.str("plan") != "starter" {
		t.Fatalf("starter account: %s", acct.raw)
	}
	want(t, tg.do("PATCH", "/api/admin/users", bearerAuth(boss), map[string]any{"id": "carol", "plan": "unlimited"}), 200, "")
	eventually(t, 2*time.Second, "plan change reaches the key", func() bool {
		a := tg.do("GET", "/api/v1/account", keyAuth(k.str("rawKey")), nil).obj()
		return a["plan"] == "unlimited" && a["remaining_today"] == nil
	})
	if h := tg.do("GET", "/api/v1/account", keyAuth(k.str("rawKey")), nil).header; h.Get("X-RateLimit-Limit") != "" {
		t.Fatalf("an uncapped plan sends rate-limit headers: %v", h)
	}

	// Promotion and keys survive a restart.
	tg.restart()
	carol = tg.token("carol", "")
	want(t, tg.do("GET", "/api/admin/users", bearerAuth(carol), nil), 200, "")
	want(t, tg.do("GET", "/api/v1/account", keyAuth(k.str("rawKey")), nil), 200, "")

	// Dev tokens' role claim makes an admin in dev auth.
	want(t, tg.do("GET", "/api/admin/apikeys", bearerAuth(tg.token("eve", "admin")), nil), 200, "")
}

func writePlans(t testing.TB, rateLimit int) string {
	p := filepath.Join(t.TempDir(), "plans.json")
	body := fmt.Sprintf(`{"free": {"rate_limit": %d, "monthly_messages": 100}, "unlimited": {"rate_limit": 0, "monthly_messages": 0}}`, rateLimit)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDailyCapExactUnderConcurrency(t *testing.T) {
	sideBySide(t)
	const capacity, calls = 250, 400
	tg := startGW(t, "--plans", writePlans(t, capacity))
	admin := tg.token("root", "admin")
	tg.newClient("alice")
	raw := tg.newKey(admin, "alice", nil).str("rawKey")

	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for i := 0; i < calls; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := tg.do("GET", "/api/v1/account", keyAuth(raw), nil)
			if r.status == 429 && (r.header.Get("Retry-After") == "" || r.str("code") != "rate_limited") {
				t.Errorf("429 without Retry-After or code: %v %s", r.header, r.raw)
			}
			mu.Lock()
			statuses[r.status]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if statuses[200] != capacity || statuses[429] != calls-capacity {
		t.Fatalf("statuses %v, want %d×200 and %d×429", statuses, capacity, calls-capacity)
	}

	// After a restart the count goes on: still capped, never reset early.
	tg.restart()
	r := tg.do("GET", "/api/v1/account", keyAuth(raw), nil)
	want(t, r, 429, "rate_limited")
	if r.header.Get("X-RateLimit-Remaining") != "0" {
		t.Fatalf("remaining after restart: %v", r.header)
	}
}

func TestCountersSurviveGracefulRestart(t *testing.T) {
	sideBySide(t)
	tg := startGW(t, "--plans", writePlans(t, 1000))
	admin := tg.token("root", "admin")
	tg.newClient("alice")
	raw := tg.newKey(admin, "alice", nil).str("rawKey")
	for i := 0; i < 37; i++ {
		want(t, tg.do("GET", "/api/v1/account", keyAuth(raw), nil), 200, "")
	}
	tg.restart()
	// A graceful stop flushes exact counters: nothing is lost.
	a := tg.do("GET", "/api/v1/account", keyAuth(raw), nil).obj()
	if a["remaining_today"] != float64(1000-38) || a["api_calls"] != float64(38) {
		t.Fatalf("after restart: %v", a)
	}
	if l := tg.do("GET", "/api/admin/apikeys", bearerAuth(admin), nil).list(); len(l) != 1 || l[0]["api_calls"] != float64(38) {
		t.Fatalf("admin list after restart: %v", l)
	}
}

// A gateway restarted with a plan table that lacks a user's plan gives that user the default
// plan's caps (daily, with its X-RateLimit-* headers, and monthly), never "no cap"; the admin
// still sees the plan the profile names and can edit the profile without changing it, but
// cannot set a plan that is not in the table.
func TestRemovedPlanFallsBackToTheDefault(t *testing.T) {
	sideBySide(t)
	dir := t.TempDir()
	withTiny, withoutTiny := filepath.Join(dir, "p1.json"), filepath.Join(dir, "p2.json")
	for p, body := range map[string]string{
		withTiny:    `{"free": {"rate_limit": 3, "monthly_messages": 7}, "tiny": {"rate_limit": 50, "monthly_messages": 100}}`,
		withoutTiny: `{"free": {"rate_limit": 3, "monthly_messages": 7}}`,
	} {
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tg := startGW(t, "--plans", withTiny)
	admin := tg.token("root", "admin")
	bobTok := tg.newClient("bob")
	want(t, tg.do("PATCH", "/api/admin/users", bearerAuth(admin), map[string]any{"id": "bob", "plan": "tiny"}), 200, "")
	raw := tg.newKey(admin, "bob", nil).str("rawKey")

	tg.stop()
	for i, a := range tg.args {
		if a == withTiny {
			tg.args[i] = withoutTiny
		}
	}
	tg.start()

	for i := range 3 {
		r := tg.do("GET", "/api/v1/account", keyAuth(raw), nil)
		want(t, r, 200, "")
		a := r.obj()
		if a["plan"] != "free" || a["rate_limit"] != float64(3) || a["remaining_today"] != float64(2-i) || a["monthly_limit"] != float64(7) {
			t.Fatalf("call %d: account %v", i, a)
		}
		if r.header.Get("X-RateLimit-Limit") != "3" || r.header.Get("X-RateLimit-Remaining") != strconv.Itoa(2-i) {
			t.Fatalf("call %d: headers %v", i, r.header)
		}
	}
	want(t, tg.do("GET", "/api/v1/account", keyAuth(raw), nil), 429, "rate_limited")
	if u := tg.do("GET", "/api/client/usage", bearerAuth(bobTok), nil).obj(); u["plan"] != "free" || u["monthlyLimit"] != float64(7) {
		t.Fatalf("usage: %v", u)
	}
	if l := tg.do("GET", "/api/admin/apikeys", bearerAuth(admin), nil).list(); len(l) != 1 || l[0]["plan"] != "free" || l[0]["rate_limit"] != float64(3) {
		t.Fatalf("admin key list: %v", l)
	}

	// The profile names its own plan still, and can be edited without changing it.
	r := tg.do("PATCH", "/api/admin/users", bearerAuth(admin), map[string]any{"id": "bob", "name": "B"})
	want(t, r, 200, "")
	found := false
	for _, u := range tg.do("GET", "/api/admin/users", bearerAuth(admin), nil).list() {
		if u["id"] == "bob" {
			found = u["plan"] == "tiny" && u["name"] == "B"
		}
	}
	if !found {
		t.Fatalf("admin user list lacks bob on plan tiny named B (patch: %s)", r.raw)
	}
	want(t, tg.do("PATCH", "/api/admin/users", bearerAuth(admin), map[string]any{"id": "bob", "plan": "tiny"}), 400, "")
	want(t, tg.do("PATCH", "/api/admin/users", bearerAuth(admin), map[string]any{"id": "bob", "plan": "free"}), 200, "")
}

func TestHealthAndMetrics(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	want(t, tg.do("GET", "/healthz", nil, nil), 200, "")
	want(t, tg.do("GET", "/readyz", nil, nil), 200, "")
	doc := tg.do("GET", "/api/openapi.json", nil, nil)
	if want(t, doc, 200, ""); !bytes.Contains(doc.raw, []byte(`"openapi"`)) {
		t.Fatalf("openapi: %.100s", doc.raw)
	}
	tg.do("GET", "/api/v1/account", keyAuth("svc_live_nope"), nil)
	m := tg.do("GET", "/metrics", nil, nil)
	want(t, m, 200, "")
	for _, s := range []string{
		`gateway_http_requests_total{route="GET /healthz",status="200"} 1`,
		`gateway_api_key_decisions_total{outcome="invalid_api_key"} 1`,
		`gateway_http_request_duration_seconds_bucket{route="GET /api/v1/account"`,
	} {
		if !bytes.Contains(m.raw, []byte(s)) {
			t.Fatalf("metrics lack %q", s)
		}
	}
	if id := m.header.Get("X-Request-Id"); id == "" {
		t.Fatal("no request id")
	}
	req, _ := http.NewRequest("GET", tg.url+"/healthz", nil)
	req.Header.Set("X-Request-Id", "trace-123")
	res, err := tg.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.Header.Get("X-Request-Id") != "trace-123" {
		t.Fatalf("request id not echoed: %v", res.Header)
	}
}

// Sign-in guesses: a client sending ID tokens that do not verify is refused with 429 once it
// spent its failures; a good token is never charged.
func TestIDTokenGuessesLimited(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	good := tg.token("alice", "client")
	for range 5 {
		want(t, tg.do("GET", "/api/client/status", bearerAuth(good), nil), 200, "")
	}
	var limited resp
	for i := range 400 {
		r := tg.do("GET", "/api/client/status", bearerAuth(fmt.Sprintf("forged.%d.token", i)), nil)
		if r.status == 429 {
			limited = r
			break
		}
		want(t, r, 401, "invalid_token")
	}
	if limited.status != 429 || limited.str("code") != "too_many_attempts" || limited.header.Get("Retry-After") == "" {
		t.Fatalf("no 429 after 400 forged tokens: %d %s", limited.status, limited.raw)
	}
	// A token that verifies is never refused for the failures of its address.
	want(t, tg.do("GET", "/api/client/status", bearerAuth(good), nil), 200, "")
}
