package identity

import (
	"context"
	"crypto/rsa"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
)

const project = "demo-project"

// fakeIdP serves OIDC discovery and a JWKS the way Firebase does, under a Firebase-shaped
// issuer path (<server>/securetoken/<project>), since go-oidc requires the discovered issuer
// to equal the URL it was given.
type fakeIdP struct {
	srv     *httptest.Server
	issuer  string
	fetches atomic.Int64 // JWKS requests
	status  atomic.Int64 // JWKS response status; 0 = 200

	mu   sync.Mutex
	keys []jose.JSONWebKey
}

func newFakeIdP(t *testing.T) *fakeIdP {
	t.Helper()
	idp := &fakeIdP{}
	mux := http.NewServeMux()
	mux.HandleFunc("/securetoken/", func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/.well-known/openid-configuration") {
			http.NotFound(w, r)
			return
		}
		// Always announces the one configured issuer, whatever path was asked.
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"issuer":                                idp.issuer,
			"jwks_uri":                              idp.srv.URL + "/jwks",
			"id_token_signing_alg_values_supported": []string{"RS256"},
			"response_types_supported":              []string{"id_token"},
			"subject_types_supported":               []string{"public"},
		})
	})
	mux.HandleFunc("/jwks", func(w http.ResponseWriter, r *http.Request) {
		idp.fetches.Add(1)
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
	v, err := NewOIDC(context.Background(), idp.issuer, project, nil)
	if err != nil {
		t.Fatal(err)
	}
	v.now = func() time.Time { return base.Add(time.Duration(offset.Load())) }
	return v
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
		{"other key, unknown kid", sign(t, other, "k9", claims), "bad signature"},
		{"other key, no kid", sign(t, other, "", claims), "bad signature"},
		{"wrong audience", sign(t, key, "k1", with(claims, "aud", "another-project")), "wrong audience"},
		{"wrong issuer", sign(t, key, "k1", with(claims, "iss", "https://securetoken.google.com/"+project)), "wrong issuer"},
		{"dev issuer", sign(t, key, "k1", with(claims, "iss", DevIssuer, "aud", DevAudience)), "wrong issuer"},
		{"expired", sign(t, key, "k1", with(claims, "exp", base.Add(-2*ClockSkew).Unix())), "expired"},
		{"iat in the future", sign(t, key, "k1", with(claims, "iat", base.Add(2*ClockSkew).Unix())), "iat in the future"},
		{"empty sub", sign(t, key, "k1", with(claims, "sub", "")), "empty sub"},
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
		offset.Store(int64(jwksCooldown + time.Second))
		now := base.Add(jwksCooldown + time.Second)
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
		// Another unknown kid right after is refused without a fetch.
		_, err := v.Verify(ctx, sign(t, other, "k3", idp.firebaseClaims(now)))
		wantInvalid(t, err, "bad signature")
		if n := idp.fetches.Load(); n != 2 {
			t.Fatalf("JWKS fetched %d times, want 2 (cooldown)", n)
		}
	})

	t.Run("withdrawn key", func(t *testing.T) {
		// Once the cached set is older than jwksMaxAge it is fetched again, and a key the
		// provider withdrew stops verifying.
		idp.setKeys(map[string]*rsa.PrivateKey{"k2": other})
		now := base.Add(jwksMaxAge + 2*jwksCooldown)
		offset.Store(int64(now.Sub(base)))
		_, err := v.Verify(ctx, sign(t, key, "k1", idp.firebaseClaims(now)))
		wantInvalid(t, err, "bad signature")
		if n := idp.fetches.Load(); n != 3 {
			t.Fatalf("JWKS fetched %d times, want 3", n)
		}
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

func TestNewOIDCErrors(t *testing.T) {
	idp := newFakeIdP(t)
	idp.setKeys(map[string]*rsa.PrivateKey{"k1": testKeys()[0]})
	ctx := context.Background()
	for _, tc := range []struct {
		name, issuer, audience string
		jwksStatus             int
	}{
		{"no audience", idp.issuer, "", 0},
		{"no issuer", "", project, 0},
		{"plain http off loopback", "http://idp.example.com/securetoken/" + project, project, 0},
		{"discovered issuer differs", idp.srv.URL + "/securetoken/other", project, 0},
		{"no discovery document", idp.srv.URL + "/nothing", project, 0},
		{"jwks unavailable", idp.issuer, project, http.StatusInternalServerError},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idp.status.Store(int64(tc.jwksStatus))
			defer idp.status.Store(0)
			if v, err := NewOIDC(ctx, tc.issuer, tc.audience, nil); err == nil {
				t.Fatalf("NewOIDC succeeded: %+v", v)
			}
		})
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
