package main

// End to end against a real OpenID provider the project did not write: zitadel/oidc's OP
// package (its example server: in-memory storage, username/password login), run in-process
// on a loopback port. Tokens come from the authorization-code flow over HTTP, exactly as a
// dashboard gets them. Covers first sign-in, admin and client roles, forged tokens, signing
// key rotation and withdrawal, and a provider outage across a gateway restart.

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/goccy/go-json"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	"github.com/zitadel/oidc/v3/pkg/op"
)

const (
	opClient   = "gateway"
	opSecret   = "gateway-secret"
	opOther    = "other-app"
	opCallback = "http://localhost:9999/auth/callback"
	opPassword = "verysecure" // the example server's users
)

// The example storage keeps its clients in a package variable: register ours once.
var registerOPClients sync.Once

// opKey is one RSA signing key of the provider.
type opKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k *opKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k *opKey) Algorithm() jose.SignatureAlgorithm          { return jose.RS256 }
func (k *opKey) Use() string                                 { return "sig" }
func (k *opKey) ID() string                                  { return k.id }

// Key is the private key, for signing (op.SigningKey); publicOPKey is the JWKS view (op.Key).
func (k *opKey) Key() any { return k.key }

type publicOPKey struct{ *opKey }

func (k publicOPKey) Key() any { return &k.key.PublicKey }

// rotatingStorage is the example storage with keys that can be rotated and withdrawn.
type rotatingStorage struct {
	*storage.Storage
	mu        sync.Mutex
	active    *opKey
	published []*opKey
}

func newOPKey(t testing.TB, id string) *opKey {
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	return &opKey{id: id, key: k}
}

func (s *rotatingStorage) SigningKey(context.Context) (op.SigningKey, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.active, nil
}

func (s *rotatingStorage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *rotatingStorage) KeySet(context.Context) ([]op.Key, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []op.Key
	for _, k := range s.published {
		out = append(out, publicOPKey{k})
	}
	return out, nil
}

// rotate publishes k and signs with it from now on.
func (s *rotatingStorage) rotate(k *opKey) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active = k
	s.published = append(s.published, k)
}

// withdraw removes the key with id from the JWKS.
func (s *rotatingStorage) withdraw(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.published[:0]
	for _, k := range s.published {
		if k.id != id {
			kept = append(kept, k)
		}
	}
	s.published = kept
}

// realOP is the provider, served on a fixed loopback address so it can be stopped and
// started again under the same issuer.
type realOP struct {
	t       testing.TB
	addr    string
	issuer  string
	store   *rotatingStorage
	handler http.Handler
	srv     *http.Server
}

func startRealOP(t testing.TB) *realOP {
	t.Helper()
	return startRealOPAt(t, "")
}

// startRealOPAt starts the provider under issuer ("": its own address), for a provider that
// is reached through a proxy.
func startRealOPAt(t testing.TB, issuer string) *realOP {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the OIDC suite runs a real OpenID provider")
	}
	registerOPClients.Do(func() {
		storage.RegisterClients(storage.WebClient(opClient, opSecret, opCallback), storage.WebClient(opOther, opSecret, opCallback))
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &realOP{t: t, addr: ln.Addr().String(), issuer: issuer}
	if o.issuer == "" {
		o.issuer = "http://" + o.addr
	}
	o.store = &rotatingStorage{Storage: storage.NewStorage(storage.NewUserStore(o.issuer))}
	o.store.rotate(newOPKey(t, "k1"))
	o.handler = exampleop.SetupServer(o.issuer, o.store, nil, false)
	o.serve(ln)
	t.Cleanup(o.stop)
	return o
}

func (o *realOP) serve(ln net.Listener) {
	o.srv = &http.Server{Handler: o.handler, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = o.srv.Serve(ln) }()
}

// stop takes the provider down: connections to it are refused.
func (o *realOP) stop() {
	if o.srv != nil {
		_ = o.srv.Close()
		o.srv = nil
	}
}

// start brings it back on the same address, with the same keys and users.
func (o *realOP) start() {
	o.t.Helper()
	var ln net.Listener
	eventually(o.t, 5*time.Second, "the provider's port free again", func() bool {
		var err error
		ln, err = net.Listen("tcp", o.addr)
		return err == nil
	})
	o.serve(ln)
}

// idToken signs username in through the authorization-code flow for client and returns the
// ID token.
func (o *realOP) idToken(username, client string) string {
	t := o.t
	t.Helper()
	noRedirect := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	location := func(res *http.Response, err error) *url.URL {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusFound && res.StatusCode != http.StatusSeeOther {
			body, _ := io.ReadAll(res.Body)
			t.Fatalf("%s: status %d, want a redirect: %s", res.Request.URL, res.StatusCode, body)
		}
		u, err := res.Request.URL.Parse(res.Header.Get("Location"))
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	q := url.Values{"client_id": {client}, "redirect_uri": {opCallback}, "response_type": {"code"},
		"scope": {"openid profile email"}, "state": {"s"}, "nonce": {"n"}}
	login := location(noRedirect.Get(o.issuer + "/auth?" + q.Encode()))
	id := login.Query().Get("authRequestID")
	if id == "" {
		t.Fatalf("login page %s has no authRequestID", login)
	}
	cb := location(noRedirect.PostForm(o.issuer+"/login/username", url.Values{"username": {username}, "password": {opPassword}, "id": {id}}))
	done := location(noRedirect.Get(cb.String()))
	code := done.Query().Get("code")
	if code == "" {
		t.Fatalf("redirect %s has no code", done)
	}
	req, _ := http.NewRequest("POST", o.issuer+"/oauth/token", strings.NewReader(url.Values{
		"grant_type": {"authorization_code"}, "code": {code}, "redirect_uri": {opCallback}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.SetBasicAuth(client, opSecret)
	res, err := noRedirect.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var tok struct {
		IDToken string `json:"id_token"`
	}
	if err := json.NewDecoder(res.Body).Decode(&tok); err != nil || tok.IDToken == "" {
		t.Fatalf("token endpoint: status %d, %v", res.StatusCode, err)
	}
	return tok.IDToken
}

// claimsOf decodes a token's payload without verifying it.
func claimsOf(t testing.TB, tok string) map[string]any {
	t.Helper()
	parts := strings.Split(tok, ".")
	raw, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// forge signs claims with key under the header's kid and alg.
func forge(t testing.TB, alg jose.SignatureAlgorithm, key any, kid string, claims map[string]any) string {
	t.Helper()
	return forgeTyp(t, alg, key, kid, "JWT", claims)
}

// forgeTyp is forge with the header's typ.
func forgeTyp(t testing.TB, alg jose.SignatureAlgorithm, key any, kid, typ string, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: jose.JSONWebKey{Key: key, KeyID: kid}}, (&jose.SignerOptions{}).WithType(jose.ContentType(typ)))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// pollStatus calls path with tok until it answers want, and returns every other status seen.
func (tg *testGW) pollStatus(path, tok string, want int, total time.Duration) (others []int, took time.Duration) {
	tg.t.Helper()
	start := time.Now()
	eventually(tg.t, total, path+" answering "+http.StatusText(want), func() bool {
		r := tg.do("GET", path, bearerAuth(tok), nil)
		if r.status != want {
			others = append(others, r.status)
		}
		return r.status == want
	})
	return others, time.Since(start)
}

func TestOIDCAgainstRealProvider(t *testing.T) {
	sideBySide(t)
	o := startRealOP(t)
	const adminUID, clientUID = "id1", "id2" // the example server's users
	data := t.TempDir()
	oidcArgs := []string{"--data", data, "--auth", "oidc", "--oidc-issuer", o.issuer, "--oidc-audience", opClient, "--admin-uids", adminUID}
	tg := startGW(t, oidcArgs...)

	admin := o.idToken("test-user@127.0.0.1", opClient)
	client := o.idToken("test-user2", opClient)
	if c := claimsOf(t, client); c["sub"] != clientUID || c["aud"] == nil {
		t.Fatalf("client token claims: %v", c)
	}

	t.Run("first sign-in and roles", func(t *testing.T) {
		tg := tg.with(t)
		want(t, tg.do("GET", "/api/client/status", bearerAuth(client), nil), 200, "")
		want(t, tg.do("GET", "/api/admin/users", bearerAuth(client), nil), 403, "forbidden")
		users := tg.do("GET", "/api/admin/users", bearerAuth(admin), nil)
		want(t, users, 200, "")
		if !strings.Contains(string(users.raw), `"`+clientUID+`"`) {
			t.Fatalf("the client's first sign-in made no profile: %s", users.raw)
		}
	})

	// The client's linked session and API key, used again during the outage.
	phone := "447700900777"
	tg.link(client, phone)
	key := tg.newKey(admin, clientUID, nil).str("rawKey")

	t.Run("forged tokens", func(t *testing.T) {
		tg := tg.with(t)
		good := claimsOf(t, client)
		// Issued before the gateway loaded its keys, so an unknown kid is refused (401) at
		// once rather than retried (503) as a possible rotation.
		old := map[string]any{}
		for k, v := range good {
			old[k] = v
		}
		old["iat"] = time.Now().Add(-10 * time.Minute).Unix()
		stranger := newOPKey(t, "k1")
		other := o.idToken("test-user2", opOther)
		alg := func(tok, alg string) string { // same payload and signature, header alg changed
			parts := strings.Split(tok, ".")
			parts[0] = base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"` + alg + `","kid":"k1","typ":"JWT"}`))
			return strings.Join(parts, ".")
		}
		none := alg(client, "none")
		none = none[:strings.LastIndexByte(none, '.')+1]
		pub, _ := json.Marshal(jose.JSONWebKey{Key: &o.store.active.key.PublicKey})
		tampered := strings.Split(client, ".")
		evil := map[string]any{}
		for k, v := range good {
			evil[k] = v
		}
		evil["sub"] = adminUID
		payload, _ := json.Marshal(evil)
		tampered[1] = base64.RawURLEncoding.EncodeToString(payload)
		for name, tok := range map[string]string{
			"alg none":                  none,
			"alg none, signature kept":  alg(client, "none"),
			"HS256 keyed with the JWK":  forge(t, jose.HS256, pub, "k1", good),
			"PS256 over RS256":          alg(client, "PS256"),
			"another key, provider kid": forge(t, jose.RS256, stranger.key, "k1", good),
			"another key, unknown kid":  forge(t, jose.RS256, stranger.key, "k-evil", old),
			"payload changed to admin":  strings.Join(tampered, "."),
			"another client's token":    other,
		} {
			t.Run(name, func(t *testing.T) {
				tg := tg.with(t)
				want(t, tg.do("GET", "/api/admin/users", bearerAuth(tok), nil), 401, "invalid_token")
			})
		}
	})

	t.Run("rotation and withdrawal", func(t *testing.T) {
		tg := tg.with(t)
		// A new signing key: its tokens are accepted within 5 s, and never answered 401 (a
		// 401 sends the dashboard back to sign-in): inside the fetch cooldown the request
		// waits for the next fetch (at most 503 with Retry-After, if that fetch fails).
		o.store.rotate(newOPKey(t, "k2"))
		fresh := o.idToken("test-user2", opClient)
		others, took := tg.pollStatus("/api/client/status", fresh, 200, 6*time.Second)
		for _, s := range others {
			if s != 503 {
				t.Fatalf("a token of the rotated-in key got %d before 200 (%v)", s, others)
			}
		}
		t.Logf("new key id accepted after %v (%d retries)", took.Round(time.Millisecond), len(others))

		// k1 is withdrawn: the token verified (and cached) before is never accepted again
		// once the gateway loads the new set (here: fetched for k3's first token); while a
		// fetch that would confirm the withdrawal is within the cooldown (the token is
		// recent), the request waits for the next fetch, then gets 401 (503 only if the
		// provider failed).
		want(t, tg.do("GET", "/api/client/status", bearerAuth(client), nil), 200, "")
		o.store.withdraw("k1")
		o.store.rotate(newOPKey(t, "k3"))
		tg.pollStatus("/api/client/status", o.idToken("test-user2", opClient), 200, 6*time.Second)
		others, took = tg.pollStatus("/api/client/status", client, 401, 6*time.Second)
		for _, s := range others {
			if s != 503 {
				t.Fatalf("a token of the withdrawn key got %d (%v)", s, others)
			}
		}
		t.Logf("withdrawn key's cached token: 401 after %v", took.Round(time.Millisecond))
	})

	t.Run("provider down at start", func(t *testing.T) {
		tg := tg.with(t)
		client := o.idToken("test-user2", opClient) // signed with k3
		tg.stop()
		o.stop()
		tg.start() // no provider: starts anyway
		// API-key routes work.
		eventually(t, 10*time.Second, "a v1 send with an API key", func() bool {
			r := tg.do("POST", "/api/v1/messages/send", keyAuth(key), map[string]any{"phone": "15550100077", "message": "during the outage"})
			return r.status == 200
		})
		// ID-token routes answer 503 idp_unavailable with Retry-After.
		r := tg.do("GET", "/api/client/status", bearerAuth(client), nil)
		want(t, r, 503, "idp_unavailable")
		if r.header.Get("Retry-After") == "" {
			t.Fatal("503 idp_unavailable without Retry-After")
		}
		ready := tg.do("GET", "/readyz", nil, nil)
		want(t, ready, 200, "")
		if !strings.Contains(string(ready.raw), `"identity":"unavailable"`) {
			t.Fatalf("/readyz does not report the provider: %s", ready.raw)
		}
		// The provider comes back: 200 within 5 s, no restart.
		o.start()
		back := time.Now()
		tg.pollStatus("/api/client/status", client, 200, 5*time.Second)
		t.Logf("ID-token route 200 %v after the provider came back", time.Since(back).Round(time.Millisecond))
		if !strings.Contains(string(tg.do("GET", "/readyz", nil, nil).raw), `"identity":"ok"`) {
			t.Fatal("/readyz still reports the provider down")
		}
	})
}
