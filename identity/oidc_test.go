package identity

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

const project = "demo-project"

// fakeIdP serves OIDC discovery and a JWKS the way Firebase does, under a Firebase-shaped
// issuer path (<server>/securetoken/<project>), since go-oidc requires the discovered issuer
// to equal the URL it was given. It can answer errors and hang, to play an outage.
type fakeIdP struct {
	srv     *httptest.Server
	issuer  string
	fetches atomic.Int64 // JWKS requests
	status  atomic.Int64 // discovery and JWKS response status; 0 = 200
	hang    atomic.Bool  // JWKS requests wait until the client gives up

	mu   sync.Mutex
	keys []jose.JSONWebKey
	algs []string
}

func newFakeIdP(t *testing.T) *fakeIdP {
	t.Helper()
	idp := &fakeIdP{algs: []string{"RS256"}}
	mux := http.NewServeMux()
	mux.HandleFunc("/securetoken/", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/.well-known/openid-configuration") {
			http.NotFound(w, r)
			return
		}
		if s := idp.status.Load(); s != 0 {
			w.WriteHeader(int(s))
			return
		}
		idp.mu.Lock()
		algs := idp.algs
		idp.mu.Unlock()
		// Always announces the one configured issuer, whatever path was asked.
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer":                                idp.issuer,
			"jwks_uri":                              idp.srv.URL + "/jwks",
			"authorization_endpoint":                idp.srv.URL + "/authorize",
			"token_endpoint":                        idp.srv.URL + "/token",
			"id_token_signing_alg_values_supported": algs,
			"response_types_supported":              []string{"id_token"},
			"subject_types_supported":               []string{"public"},
		})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		idp.fetches.Add(1)
		if idp.hang.Load() {
			<-r.Context().Done()
			return
		}
		if s := idp.status.Load(); s != 0 {
			w.WriteHeader(int(s))
			return
		}
		idp.mu.Lock()
		set := jose.JSONWebKeySet{Keys: idp.keys}
		idp.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(set)
	})
	idp.srv = httptest.NewServer(mux)
	t.Cleanup(idp.srv.Close)
	idp.issuer = idp.srv.URL + "/securetoken/" + project
	return idp
}

func (idp *fakeIdP) setKeys(keys map[string]*rsa.PrivateKey) {
	idp.mu.Lock()
	defer idp.mu.Unlock()
	idp.keys = nil
	for kid, k := range keys {
		idp.keys = append(idp.keys, jose.JSONWebKey{Key: &k.PublicKey, KeyID: kid, Algorithm: "RS256", Use: "sig"})
	}
}

// firebaseClaims are the claims of a Firebase ID token issued at now.
func (idp *fakeIdP) firebaseClaims(now time.Time) map[string]any {
	return map[string]any{
		"iss": idp.issuer, "aud": project, "sub": "fb-uid-1", "user_id": "fb-uid-1",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(), "auth_time": now.Unix(),
		"name": "Grace", "email": "grace@example.com", "email_verified": true,
		"firebase": map[string]any{"sign_in_provider": "google.com"},
	}
}

// newOIDC builds an OIDC verifier on idp with a test clock at base + *offset.
func newOIDC(t *testing.T, idp *fakeIdP, base time.Time, offset *atomic.Int64) *Verifier {
	t.Helper()
	v, err := NewOIDC(context.Background(), idp.issuer, project, OIDCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(v.Close)
	v.now = func() time.Time { return base.Add(time.Duration(offset.Load())) }
	return v
}

// waitFor polls cond every 20 ms until it holds or total passes.
func waitFor(t *testing.T, total time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(total)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", total, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func wantUnavailable(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, domain.ErrIdPUnavailable) {
		t.Fatalf("err = %v, want ErrUnavailable", err)
	}
}

func TestOIDC(t *testing.T) {
	key, other := testKeys()[0], testKeys()[1]
	idp := newFakeIdP(t)
	idp.setKeys(map[string]*rsa.PrivateKey{"k1": key})
	base := time.Now()
	var offset atomic.Int64
	v := newOIDC(t, idp, base, &offset)
	if n := idp.fetches.Load(); n != 1 {
		t.Fatalf("JWKS fetched %d times by NewOIDC, want 1", n)
	}
	ctx := context.Background()
	claims := idp.firebaseClaims(base)

	t.Run("valid token, role ignored", func(t *testing.T) {
		c, err := v.Verify(ctx, sign(t, key, "k1", with(claims, "role", "admin")))
		if err != nil {
			t.Fatal(err)
		}
		if c.UID != "fb-uid-1" || c.Name != "Grace" || c.Email != "grace@example.com" || c.Issuer != idp.issuer {
			t.Fatalf("claims = %+v", c)
		}
		if c.Role != "" {
			t.Fatalf("Role = %q from an OIDC token, want empty", c.Role)
		}
		// A role of any shape must not break OIDC verification.
		if _, err := v.Verify(ctx, sign(t, key, "k1", with(claims, "role", map[string]any{"x": 1}))); err != nil {
			t.Fatal(err)
		}
	})

	for _, tc := range []struct {
		name, token, reason string
	}{
		{"other key, known kid", sign(t, other, "k1", claims), "bad signature"},
		{"other key, unknown kid", sign(t, other, "k9", with(claims, "iat", base.Add(-2*ClockSkew).Unix())), "bad signature"},
		{"other key, no kid", sign(t, other, "", claims), "bad signature"},
		{"wrong audience", sign(t, key, "k1", with(claims, "aud", "another-project")), "wrong audience"},
		{"wrong issuer", sign(t, key, "k1", with(claims, "iss", "https://securetoken.google.com/"+project)), "wrong issuer"},
		{"dev issuer", sign(t, key, "k1", with(claims, "iss", DevIssuer, "aud", DevAudience)), "wrong issuer"},
		{"expired", sign(t, key, "k1", with(claims, "exp", base.Add(-2*ClockSkew).Unix())), "expired"},
		{"iat in the future", sign(t, key, "k1", with(claims, "iat", base.Add(2*ClockSkew).Unix())), "iat in the future"},
		{"empty sub", sign(t, key, "k1", with(claims, "sub", "")), "empty sub"},
		{"several audiences, another party", sign(t, key, "k1", with(claims, "aud", []string{project, "other"}, "azp", "other")), "azp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Verify(ctx, tc.token)
			wantInvalid(t, err, tc.reason)
		})
	}
	// Within the cooldown after NewOIDC's fetch, bad tokens made no JWKS request.
	if n := idp.fetches.Load(); n != 1 {
		t.Fatalf("JWKS fetched %d times, want 1: bad tokens must not trigger fetches", n)
	}

	t.Run("rotation", func(t *testing.T) {
		// The provider publishes k2; after the cooldown a k2 token triggers one fetch,
		// even when many arrive at once.
		idp.setKeys(map[string]*rsa.PrivateKey{"k1": key, "k2": other})
		offset.Store(int64(kidCooldown + time.Second))
		now := base.Add(kidCooldown + time.Second)
		tok := sign(t, other, "k2", idp.firebaseClaims(now))
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := v.Verify(ctx, tok); err != nil {
					t.Errorf("k2 token after rotation: %v", err)
				}
			}()
		}
		wg.Wait()
		if n := idp.fetches.Load(); n != 2 {
			t.Fatalf("JWKS fetched %d times, want 2", n)
		}
		// Another unknown kid right after, on a token older than the keys, is refused without
		// a fetch.
		_, err := v.Verify(ctx, sign(t, other, "k3", idp.firebaseClaims(now.Add(-2*ClockSkew))))
		wantInvalid(t, err, "bad signature")
		if n := idp.fetches.Load(); n != 2 {
			t.Fatalf("JWKS fetched %d times, want 2 (cooldown)", n)
		}
	})

	t.Run("rotated in during the cooldown", func(t *testing.T) {
		// k4 appears right after a fetch: its token is newer than the keys, so it waits for
		// the fetch the cooldown allows next (never a 401, which would send the user back to
		// sign-in), and is accepted on its keys.
		k4 := testKeys()[0]
		idp.setKeys(map[string]*rsa.PrivateKey{"k1": key, "k2": other, "k4": k4})
		now := base.Add(kidCooldown + 2*time.Second)
		offset.Store(int64(now.Sub(base)))
		tok := sign(t, k4, "k4", idp.firebaseClaims(now))
		done := make(chan error, 1)
		go func() { _, err := v.Verify(ctx, tok); done <- err }()
		time.Sleep(100 * time.Millisecond) // the request is waiting for the cooldown
		offset.Store(int64(now.Sub(base) + kidCooldown))
		if err := <-done; err != nil {
			t.Fatalf("k4 token once the cooldown ended: %v", err)
		}
	})

	t.Run("withdrawn key drops cached tokens", func(t *testing.T) {
		now := base.Add(3 * kidCooldown)
		offset.Store(int64(now.Sub(base)))
		tok := sign(t, key, "k1", idp.firebaseClaims(base))
		if _, err := v.Verify(ctx, tok); err != nil {
			t.Fatal(err)
		}
		// The provider withdraws k1; the next refresh (background loop) drops the cached
		// token at once, not at its expiry.
		idp.setKeys(map[string]*rsa.PrivateKey{"k2": other})
		if err := v.provider.refresh(ctx, false); err != nil {
			t.Fatal(err)
		}
		// Never accepted again: the token is recent, so it waits for the fetch the cooldown
		// allows next, which confirms its key is gone (401).
		done := make(chan error, 1)
		go func() { _, err := v.Verify(ctx, tok); done <- err }()
		time.Sleep(100 * time.Millisecond)
		now = now.Add(kidCooldown + time.Second)
		offset.Store(int64(now.Sub(base)))
		wantInvalid(t, <-done, "bad signature")
		if _, err := v.Verify(ctx, sign(t, other, "k2", idp.firebaseClaims(now))); err != nil {
			t.Fatal(err)
		}
	})
}

func TestOIDCCacheRefusesAfterExpiry(t *testing.T) {
	key := testKeys()[0]
	idp := newFakeIdP(t)
	idp.setKeys(map[string]*rsa.PrivateKey{"k1": key})
	base := time.Now().Truncate(time.Second)
	var offset atomic.Int64
	v := newOIDC(t, idp, base, &offset)

	tok := sign(t, key, "k1", idp.firebaseClaims(base))
	first, err := v.Verify(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := v.Verify(context.Background(), tok); err != nil || again != first {
		t.Fatalf("second Verify = %+v, %v; want %+v", again, err, first)
	}
	offset.Store(int64(time.Hour + ClockSkew + time.Second))
	_, err = v.Verify(context.Background(), tok)
	wantInvalid(t, err, "expired")
}

func TestNewOIDCConfigErrors(t *testing.T) {
	idp := newFakeIdP(t)
	ctx := context.Background()
	for _, tc := range []struct{ name, issuer, audience string }{
		{"no audience", idp.issuer, ""},
		{"no issuer", "", project},
		{"plain http off loopback", "http://idp.example.com/securetoken/" + project, project},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if v, err := NewOIDC(ctx, tc.issuer, tc.audience, OIDCOptions{}); err == nil {
				v.Close()
				t.Fatalf("NewOIDC succeeded: %+v", v)
			}
		})
	}
}

// A provider that cannot be used at start is not a start-up failure: the verifier is not
// ready and answers ErrUnavailable, and recovers on its own once the provider answers.
func TestOIDCProviderDownAtStart(t *testing.T) {
	key := testKeys()[0]
	for _, tc := range []struct {
		name        string
		break_, fix func(idp *fakeIdP)
	}{
		{"jwks 503", func(idp *fakeIdP) { idp.status.Store(503) }, func(idp *fakeIdP) { idp.status.Store(0) }},
		{"jwks hangs", func(idp *fakeIdP) { idp.hang.Store(true) }, func(idp *fakeIdP) { idp.hang.Store(false) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idp := newFakeIdP(t)
			idp.setKeys(map[string]*rsa.PrivateKey{"k1": key})
			tc.break_(idp)
			start := time.Now()
			v, err := NewOIDC(context.Background(), idp.issuer, project, OIDCOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer v.Close()
			if d := time.Since(start); d > fetchTimeout+time.Second {
				t.Fatalf("NewOIDC took %v with the provider down", d)
			}
			if st := v.Status(); st.Ready || st.Err == nil {
				t.Fatalf("Status = %+v, want not ready with a cause", st)
			}
			tok := sign(t, key, "k1", idp.firebaseClaims(time.Now()))
			_, err = v.Verify(context.Background(), tok)
			wantUnavailable(t, err)

			tc.fix(idp)
			waitFor(t, retryEvery+fetchTimeout+2*time.Second, "keys loaded", func() bool { return v.Status().Ready })
			if _, err := v.Verify(context.Background(), tok); err != nil {
				t.Fatal(err)
			}
			if st := v.Status(); st.Err != nil {
				t.Fatalf("Status after recovery = %+v", st)
			}
		})
	}
}

// While the provider hangs, known keys answer at once and an unknown kid waits at most
// fetchTimeout, then gets ErrUnavailable; the last good keys are kept.
func TestOIDCProviderHangsLater(t *testing.T) {
	key, other := testKeys()[0], testKeys()[1]
	idp := newFakeIdP(t)
	idp.setKeys(map[string]*rsa.PrivateKey{"k1": key})
	v, err := NewOIDC(context.Background(), idp.issuer, project, OIDCOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	idp.hang.Store(true)
	ctx := context.Background()
	now := time.Now()

	start := time.Now()
	if _, err := v.Verify(ctx, sign(t, key, "k1", idp.firebaseClaims(now))); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Fatalf("known key took %v while the provider hangs", d)
	}
	// Past the kid cooldown, a token with a new kid makes one fetch, which times out.
	v.now = func() time.Time { return time.Now().Add(kidCooldown) }
	start = time.Now()
	_, err = v.Verify(ctx, sign(t, other, "k2", idp.firebaseClaims(now.Add(kidCooldown))))
	wantUnavailable(t, err)
	if d := time.Since(start); d > fetchTimeout+time.Second {
		t.Fatalf("unknown kid took %v, want at most about %v", d, fetchTimeout)
	}
	if st := v.Status(); !st.Ready || st.Err == nil {
		t.Fatalf("Status = %+v, want ready (last good keys) with the fetch error", st)
	}
}

// The accepted algorithms follow the discovery document as it changes (RS256 → ES256)
// without a restart; none and HS* are never accepted.
func TestOIDCAlgorithmsFollowDiscovery(t *testing.T) {
	key := testKeys()[0]
	idp := newFakeIdP(t)
	idp.setKeys(map[string]*rsa.PrivateKey{"k1": key})
	base := time.Now()
	var offset atomic.Int64
	v := newOIDC(t, idp, base, &offset)
	ctx := context.Background()

	ec, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signES := func(claims map[string]any) string {
		s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: jose.JSONWebKey{Key: ec, KeyID: "e1"}},
			(&jose.SignerOptions{}).WithType("JWT"))
		if err != nil {
			t.Fatal(err)
		}
		tok, err := jwt.Signed(s).Claims(claims).Serialize()
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	// The provider switches: new EC key, discovery announces ES256 only.
	idp.mu.Lock()
	idp.keys = []jose.JSONWebKey{{Key: &ec.PublicKey, KeyID: "e1", Algorithm: "ES256", Use: "sig"}}
	idp.algs = []string{"ES256"}
	idp.mu.Unlock()
	now := base.Add(kidCooldown + time.Second)
	offset.Store(int64(now.Sub(base)))
	if _, err := v.Verify(ctx, signES(idp.firebaseClaims(now))); err != nil {
		t.Fatalf("ES256 token after the provider switched: %v", err)
	}
	// An HS256 token keyed with anything is refused before any key is tried.
	hs, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("0123456789abcdef0123456789abcdef")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(hs).Claims(idp.firebaseClaims(now)).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	_, err = v.Verify(ctx, tok)
	wantInvalid(t, err, "")
}

func TestOIDCClaimChecks(t *testing.T) {
	key := testKeys()[0]
	idp := newFakeIdP(t)
	idp.setKeys(map[string]*rsa.PrivateKey{"k1": key})
	now := time.Now()
	ctx := context.Background()
	claims := idp.firebaseClaims(now)
	anon := with(claims, "firebase", map[string]any{"sign_in_provider": "anonymous"})

	v := newOIDC(t, idp, now, new(atomic.Int64))
	v.firebase = true // the fake's issuer is not securetoken.google.com
	_, err := v.Verify(ctx, sign(t, key, "k1", anon))
	if !errors.Is(err, domain.ErrSignInNotAllowed) {
		t.Fatalf("anonymous sign-in: err = %v, want ErrNotAllowed", err)
	}
	_, err = v.Verify(ctx, sign(t, key, "k1", with(claims, "auth_time", now.Add(time.Hour).Unix())))
	wantInvalid(t, err, "auth_time in the future")
	_, err = v.Verify(ctx, sign(t, key, "k1", with(claims, "auth_time", nil)))
	wantInvalid(t, err, "auth_time")
	_, err = v.Verify(ctx, sign(t, key, "k1", with(claims, "auth_time", "yesterday")))
	wantInvalid(t, err, "auth_time")
	if _, err := v.Verify(ctx, sign(t, key, "k1", with(claims, "email_verified", false))); err != nil {
		t.Fatalf("unverified email without the option: %v", err)
	}
	if _, err := v.Verify(ctx, sign(t, key, "k1", with(claims, "aud", []string{project, "other"}, "azp", project))); err != nil {
		t.Fatalf("several audiences, issued to us: %v", err)
	}

	v, err = NewOIDC(ctx, idp.issuer, project, OIDCOptions{AllowAnonymous: true, RequireEmailVerified: true})
	if err != nil {
		t.Fatal(err)
	}
	defer v.Close()
	if _, err := v.Verify(ctx, sign(t, key, "k1", anon)); err != nil {
		t.Fatalf("anonymous sign-in with AllowAnonymous: %v", err)
	}
	for _, c := range []map[string]any{with(claims, "email_verified", false), with(claims, "email_verified", nil)} {
		_, err = v.Verify(ctx, sign(t, key, "k1", c))
		if !errors.Is(err, domain.ErrSignInNotAllowed) {
			t.Fatalf("unverified email with RequireEmailVerified: err = %v", err)
		}
	}
}

func TestParseJWKSSkipsUnusableKeys(t *testing.T) {
	key := testKeys()[0]
	good, err := json.Marshal(jose.JSONWebKey{Key: &key.PublicKey, KeyID: "k1", Algorithm: "RS256", Use: "sig"})
	if err != nil {
		t.Fatal(err)
	}
	enc, err := json.Marshal(jose.JSONWebKey{Key: &key.PublicKey, KeyID: "e1", Use: "enc"})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"keys":[{"kty":"oct","k":"c2VjcmV0","kid":"h1"},{"kty":"OKP","crv":"X448","x":"AA","kid":"x1"},` +
		string(enc) + `,` + string(good) + `]}`
	keys, err := parseJWKS([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 1 || keys[0].KeyID != "k1" {
		t.Fatalf("keys = %+v, want only k1", keys)
	}
	if _, err := parseJWKS([]byte(`{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}`)); err == nil {
		t.Fatal("a JWKS without a usable key was accepted")
	}
}

// The identity edge cases of the second review: an unknown kid while the keys are fresh is a
// 401 (not an outage), a token that would be refused anyway costs no fetch, access tokens and
// an nbf past the skew are refused, and the browser's endpoints come from discovery.
func TestOIDCEdgeCases(t *testing.T) {
	key, stranger := testKeys()[0], testKeys()[1]
	idp := newFakeIdP(t)
	idp.setKeys(map[string]*rsa.PrivateKey{"k1": key})
	base := time.Now()
	var offset atomic.Int64
	v := newOIDC(t, idp, base, &offset)
	ctx := context.Background()
	claims := idp.firebaseClaims(base)

	// Foreign, mis-addressed or expired tokens with an unknown kid: refused at once, no fetch.
	for name, c := range map[string]map[string]any{
		"wrong issuer":   with(claims, "iss", "https://other.example.com"),
		"wrong audience": with(claims, "aud", "other"),
		"expired":        with(claims, "exp", base.Add(-time.Hour).Unix()),
	} {
		_, err := v.Verify(ctx, sign(t, stranger, "k-evil", c))
		wantInvalid(t, err, name)
	}
	if n := idp.fetches.Load(); n != 1 {
		t.Fatalf("JWKS fetched %d times, want 1", n)
	}

	// Ours in every claim, signed by a stranger under an unknown kid, issued now: it waits
	// for the fetch the cooldown allows, then is refused on the fresh keys (401), never 503.
	done := make(chan error, 1)
	go func() { _, err := v.Verify(ctx, sign(t, stranger, "k-evil", claims)); done <- err }()
	time.Sleep(100 * time.Millisecond)
	offset.Store(int64(kidCooldown + time.Second))
	err := <-done
	wantInvalid(t, err, "bad signature")
	if n := idp.fetches.Load(); n != 2 {
		t.Fatalf("JWKS fetched %d times, want 2", n)
	}
	now := base.Add(kidCooldown + time.Second)

	for _, typ := range []string{"at+jwt", "application/at+JWT"} {
		_, err := v.Verify(ctx, signTyp(t, key, "k1", typ, idp.firebaseClaims(now)))
		wantInvalid(t, err, "access token")
	}
	_, err = v.Verify(ctx, sign(t, key, "k1", with(idp.firebaseClaims(now), "nbf", now.Add(2*time.Minute).Unix())))
	wantInvalid(t, err, "nbf in the future")
	if _, err := v.Verify(ctx, sign(t, key, "k1", with(idp.firebaseClaims(now), "nbf", now.Add(ClockSkew/2).Unix()))); err != nil {
		t.Fatalf("nbf within the skew: %v", err)
	}

	if e, ok := v.Endpoints(); !ok || e.Authorization != idp.srv.URL+"/authorize" || e.Token != idp.srv.URL+"/token" {
		t.Fatalf("Endpoints() = %+v, %v", e, ok)
	}
}

func TestCheckIssuer(t *testing.T) {
	for _, bad := range []string{
		"http://127.0.0.1:99999/dex", "http://127.0.0.1:0/dex", "http://localhost:15556/dex?x=1#f",
		"http://localhost:15556/dex#f", "https://user:pw@idp.example.com", "https:///dex", "http://idp.example.com/",
		"%zz://bad", "ftp://idp.example.com",
	} {
		if err := CheckIssuer(bad); err == nil {
			t.Errorf("CheckIssuer(%q) passed", bad)
		}
	}
	for _, good := range []string{"https://securetoken.google.com/p", "http://127.0.0.1:5556/dex", "http://localhost/x", "https://idp.example.com:8443/realms/r"} {
		if err := CheckIssuer(good); err != nil {
			t.Errorf("CheckIssuer(%q): %v", good, err)
		}
	}
}
