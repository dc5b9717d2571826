package identity

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
)

// RSA key generation is slow under -race: two keys are made once and shared.
var testKeys = sync.OnceValue(func() [2]*rsa.PrivateKey {
	var ks [2]*rsa.PrivateKey
	for i := range ks {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		ks[i] = k
	}
	return ks
})

// writeKey puts key in dir/dev-idp.pem in the given PEM form.
func writeKey(t *testing.T, dir string, key *rsa.PrivateKey, pkcs1 bool) {
	t.Helper()
	block := &pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}
	if !pkcs1 {
		der, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			t.Fatal(err)
		}
		block = &pem.Block{Type: "PRIVATE KEY", Bytes: der}
	}
	if err := os.WriteFile(filepath.Join(dir, devKeyFile), pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
}

// newDev returns a dev verifier and issuer on testKeys()[0] (no key generation).
func newDev(t *testing.T) (*Verifier, *Issuer) {
	t.Helper()
	dir := t.TempDir()
	writeKey(t, dir, testKeys()[0], false)
	v, iss, err := NewDev(dir)
	if err != nil {
		t.Fatal(err)
	}
	return v, iss
}

// sign builds a token with arbitrary claims, for the cases the Issuer refuses to mint.
func sign(t *testing.T, key *rsa.PrivateKey, kid string, claims map[string]any) string {
	t.Helper()
	return signTyp(t, key, kid, "JWT", claims)
}

// signTyp is sign with the header's typ.
func signTyp(t *testing.T, key *rsa.PrivateKey, kid, typ string, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(
		jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: key, KeyID: kid}},
		(&jose.SignerOptions{}).WithType(jose.ContentType(typ)))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(claims).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// devClaims are valid claims for the dev issuer at now.
func devClaims(now time.Time) map[string]any {
	return map[string]any{
		"iss": DevIssuer, "aud": DevAudience, "sub": "u1",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
}

func with(m map[string]any, kv ...any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
		} else {
			out[kv[i].(string)] = kv[i+1]
		}
	}
	return out
}

func wantInvalid(t *testing.T, err error, reason string) {
	t.Helper()
	if !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("err = %v, want ErrInvalidToken", err)
	}
	if !strings.Contains(err.Error(), reason) {
		t.Fatalf("err = %q, want reason %q", err, reason)
	}
}

func TestDevMintVerifyRoundTrip(t *testing.T) {
	v, iss := newDev(t)
	before := time.Now().Truncate(time.Second)
	tok, err := iss.Mint(TokenRequest{UID: "u1", Role: "admin", Name: "Ada", Email: "ada@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.Verify(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	if c.UID != "u1" || c.Role != "admin" || c.Name != "Ada" || c.Email != "ada@example.com" || c.Issuer != DevIssuer {
		t.Fatalf("claims = %+v", c)
	}
	if d := c.Expiry.Sub(before); d < time.Hour || d > time.Hour+5*time.Second {
		t.Fatalf("expiry %v is not about 1h (the TTL 0 default) after %v", c.Expiry, before)
	}

	jws, err := jose.ParseSignedCompact(tok, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatal(err)
	}
	h := jws.Signatures[0].Header
	if h.KeyID == "" || h.Algorithm != "RS256" {
		t.Fatalf("header = kid %q alg %q, want a kid and RS256", h.KeyID, h.Algorithm)
	}
	var payload map[string]any
	parsed, err := jwt.ParseSigned(tok, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatal(err)
	}
	if err := parsed.Claims(&testKeys()[0].PublicKey, &payload); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"iss", "aud", "sub", "iat", "exp", "auth_time", "name", "email", "role"} {
		if _, ok := payload[k]; !ok {
			t.Errorf("minted token lacks %q: %v", k, payload)
		}
	}

	// A token without role carries no role claim and yields an empty Role.
	tok, err = iss.Mint(TokenRequest{UID: "u2"})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := v.Verify(context.Background(), tok); err != nil || c.Role != "" || c.UID != "u2" {
		t.Fatalf("Verify = %+v, %v", c, err)
	}
}

func TestMintRefusesBadRequests(t *testing.T) {
	_, iss := newDev(t)
	if _, err := iss.Mint(TokenRequest{}); err == nil {
		t.Error("Mint without uid succeeded")
	}
	if _, err := iss.Mint(TokenRequest{UID: "u1", TTL: -time.Second}); err == nil {
		t.Error("Mint with negative TTL succeeded")
	}
}

func TestDevKeyCreatedOnceAndReused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nested", "data")
	v1, iss1, err := NewDev(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, devKeyFile)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key mode = %v, want 0600", st.Mode().Perm())
	}
	if dst, err := os.Stat(dir); err != nil || dst.Mode().Perm() != 0o700 {
		t.Errorf("data dir: %v, %v; want mode 0700", dst.Mode().Perm(), err)
	}
	pem1, _ := os.ReadFile(path)
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("data dir holds %d entries, want only %s (no temp files left)", len(entries), devKeyFile)
	}

	tok, err := iss1.Mint(TokenRequest{UID: "u1", Role: "client"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v1.Verify(context.Background(), tok); err != nil {
		t.Fatal(err)
	}

	// Reload: same file, and the old token still verifies with the new verifier.
	v2, iss2, err := NewDev(dir)
	if err != nil {
		t.Fatal(err)
	}
	pem2, _ := os.ReadFile(path)
	if string(pem1) != string(pem2) {
		t.Fatal("key file changed on reload")
	}
	if c, err := v2.Verify(context.Background(), tok); err != nil || c.UID != "u1" || c.Role != "client" {
		t.Fatalf("token minted before reload: %+v, %v", c, err)
	}
	tok2, err := iss2.Mint(TokenRequest{UID: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	if kid(t, tok) != kid(t, tok2) {
		t.Errorf("kid changed across reload: %q vs %q", kid(t, tok), kid(t, tok2))
	}
}

func kid(t *testing.T, tok string) string {
	t.Helper()
	jws, err := jose.ParseSignedCompact(tok, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		t.Fatal(err)
	}
	return jws.Signatures[0].Header.KeyID
}

func TestDevKeyFormats(t *testing.T) {
	t.Run("pkcs1", func(t *testing.T) {
		dir := t.TempDir()
		writeKey(t, dir, testKeys()[1], true)
		v, iss, err := NewDev(dir)
		if err != nil {
			t.Fatal(err)
		}
		tok, err := iss.Mint(TokenRequest{UID: "u1"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := v.Verify(context.Background(), tok); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("garbage", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, devKeyFile), []byte("not a key"), 0o600); err != nil {
			t.Fatal(err)
		}
		if _, _, err := NewDev(dir); err == nil {
			t.Fatal("NewDev accepted a garbage key file")
		}
	})
	t.Run("too small", func(t *testing.T) {
		small, err := rsa.GenerateKey(rand.Reader, 1024)
		if err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		writeKey(t, dir, small, false)
		if _, _, err := NewDev(dir); err == nil {
			t.Fatal("NewDev accepted a 1024-bit key")
		}
	})
}

func TestVerifyRefuses(t *testing.T) {
	v, _ := newDev(t)
	now := time.Now()
	key, other := testKeys()[0], testKeys()[1]
	noneHeader := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","typ":"JWT"}`))
	body := base64.RawURLEncoding.EncodeToString([]byte(`{"iss":"gateway-dev","aud":"gateway","sub":"u1"}`))
	hsSigner, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: x509.MarshalPKCS1PublicKey(&key.PublicKey)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	hsToken, err := jwt.Signed(hsSigner).Claims(devClaims(now)).Serialize()
	if err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name, token, reason string
	}{
		{"expired", sign(t, key, "", with(devClaims(now), "iat", now.Add(-2*time.Hour).Unix(), "exp", now.Add(-ClockSkew-time.Second).Unix())), "expired"},
		{"other key", sign(t, other, "", devClaims(now)), "bad signature"},
		{"wrong issuer", sign(t, key, "", with(devClaims(now), "iss", "someone-else")), "wrong issuer"},
		{"wrong audience", sign(t, key, "", with(devClaims(now), "aud", "other-app")), "wrong audience"},
		{"empty sub", sign(t, key, "", with(devClaims(now), "sub", "")), "empty sub"},
		{"no sub", sign(t, key, "", with(devClaims(now), "sub", nil)), "empty sub"},
		{"iat in the future", sign(t, key, "", with(devClaims(now), "iat", now.Add(ClockSkew+10*time.Second).Unix())), "iat in the future"},
		{"no iat", sign(t, key, "", with(devClaims(now), "iat", nil)), "missing iat"},
		{"no exp", sign(t, key, "", with(devClaims(now), "exp", nil)), "expired"},
		{"role not a string", sign(t, key, "", with(devClaims(now), "role", []string{"admin"})), "malformed role"},
		{"empty", "", "malformed"},
		{"garbage", "not-a-token", "malformed"},
		{"garbage with dots", "a.b.c", "malformed"},
		{"huge", strings.Repeat("a", maxTokenBytes) + ".b.c", "malformed"},
		{"alg none", noneHeader + "." + body + ".", "unsupported algorithm"},
		{"HS256 keyed with the public key", hsToken, "unsupported algorithm"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := v.Verify(context.Background(), tc.token)
			if err == nil {
				t.Fatalf("accepted: %+v", c)
			}
			wantInvalid(t, err, tc.reason)
		})
	}
	if n := v.cache.len(); n != 0 {
		t.Errorf("refused tokens left %d cache entries", n)
	}
}

func TestVerifyClockSkew(t *testing.T) {
	v, _ := newDev(t)
	now := time.Now()
	key := testKeys()[0]
	for _, tc := range []struct {
		name   string
		claims map[string]any
	}{
		{"expired within skew", with(devClaims(now), "exp", now.Add(-ClockSkew/2).Unix())},
		{"iat ahead within skew", with(devClaims(now), "iat", now.Add(ClockSkew/2).Unix())},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := v.Verify(context.Background(), sign(t, key, "", tc.claims)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// countingKeys counts signature verifications, to tell cache hits from real verifications.
type countingKeys struct {
	inner oidc.KeySet
	n     atomic.Int64
}

func (c *countingKeys) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	c.n.Add(1)
	return c.inner.VerifySignature(ctx, raw)
}

func TestCache(t *testing.T) {
	key := testKeys()[0]
	keys := &countingKeys{inner: &oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{&key.PublicKey}}}
	v := newVerifier(DevIssuer, keys, oidc.Config{ClientID: DevAudience}, true)
	base := time.Now().Truncate(time.Second)
	var offset atomic.Int64 // test clock: base + offset
	v.now = func() time.Time { return base.Add(time.Duration(offset.Load())) }

	tok := sign(t, key, "", with(devClaims(base), "name", "Ada", "role", "admin", "exp", base.Add(10*time.Minute).Unix()))
	first, err := v.Verify(context.Background(), tok)
	if err != nil {
		t.Fatal(err)
	}
	// Concurrent hits on the same token (the dashboard's pattern) are served from the cache.
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				c, err := v.Verify(context.Background(), tok)
				if err != nil || c != first {
					t.Errorf("cached Verify = %+v, %v; want %+v", c, err, first)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n := keys.n.Load(); n != 1 {
		t.Fatalf("%d signature verifications, want 1 (the rest from the cache)", n)
	}
	// Every hit is counted once, whichever of the hit counter's shards it went to.
	if got := decisionCounts(t, v); got["cached"] != 8*50 || got["ok"] != 1 || len(got) != 2 {
		t.Fatalf("decisions %v, want 400 cached and 1 ok", got)
	}

	// A cached token is checked against the request's own clock reading when one is given.
	// Past exp+skew by that reading, the cached entry is dropped and the token verified in full
	// (by the verifier's clock, here still before exp).
	late := base.Add(10*time.Minute + ClockSkew + time.Second)
	if _, err := v.VerifyBytesAt(context.Background(), []byte(tok), late); err != nil || keys.n.Load() != 2 {
		t.Fatalf("a request that began after exp+skew: %v after %d signature checks, want a second check", err, keys.n.Load())
	}
	offset.Store(int64(10*time.Minute + ClockSkew + time.Second))
	if _, err := v.VerifyBytesAt(context.Background(), []byte(tok), base.Add(time.Minute)); err != nil || keys.n.Load() != 2 {
		t.Fatalf("a request that began before exp+skew: %v after %d signature checks, want it from the cache", err, keys.n.Load())
	}
	// Still served just before exp+skew, refused from then on.
	offset.Store(int64(10*time.Minute + ClockSkew - time.Second))
	if _, err := v.Verify(context.Background(), tok); err != nil {
		t.Fatalf("just before exp+skew: %v", err)
	}
	offset.Store(int64(10*time.Minute + ClockSkew + time.Second))
	_, err = v.Verify(context.Background(), tok)
	wantInvalid(t, err, "expired")
	if n := v.cache.len(); n != 0 {
		t.Errorf("expired token still cached (%d entries)", n)
	}
}

func TestCacheBounded(t *testing.T) {
	c := newTokenCache(8)
	now := time.Now()
	key := func(i int) string { return "token-" + strconv.Itoa(i) }

	for i := range 100 {
		c.put(key(i), cachedClaims{claims: Claims{UID: "u"}, until: now.Add(time.Hour)}, now)
		if n := c.len(); n > 8 {
			t.Fatalf("cache holds %d entries, bound is 8", n)
		}
	}
	if _, ok := c.get([]byte(key(99)), now); !ok {
		t.Error("the newest entry was evicted")
	}

	// Expired entries go first: a full cache of expired entries makes room without
	// dropping anything live.
	c = newTokenCache(8)
	for i := range 8 {
		c.put(key(i), cachedClaims{until: now.Add(time.Second)}, now)
	}
	later := now.Add(time.Minute)
	c.put(key(100), cachedClaims{claims: Claims{UID: "live"}, until: later.Add(time.Hour)}, later)
	if n := c.len(); n != 1 {
		t.Errorf("after evicting expired entries the cache holds %d, want 1", n)
	}
	if got, ok := c.get([]byte(key(100)), later); !ok || got.claims.UID != "live" {
		t.Errorf("get = %+v, %v", got, ok)
	}
	if _, ok := c.get([]byte(key(0)), later); ok {
		t.Error("expired entry returned")
	}
}

// A cached token comes with one Memo, the same on every hit; a token verified in full has none,
// and once it is verified again (its entry expired) it gets a new, empty one.
func TestMemoPerCachedToken(t *testing.T) {
	key := testKeys()[0]
	v := newVerifier(DevIssuer, &oidc.StaticKeySet{PublicKeys: []crypto.PublicKey{&key.PublicKey}}, oidc.Config{ClientID: DevAudience}, true)
	base := time.Now().Truncate(time.Second)
	var offset atomic.Int64
	v.now = func() time.Time { return base.Add(time.Duration(offset.Load())) }
	tok := []byte(sign(t, key, "", with(devClaims(base), "exp", base.Add(10*time.Minute).Unix())))
	memo := func() *Memo {
		t.Helper()
		_, m, err := v.VerifyBytesMemo(context.Background(), tok, time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	if m, c := v.CachedMemo(tok, time.Time{}); m != nil || c != nil {
		t.Fatal("CachedMemo answered a token never verified")
	}
	if m := memo(); m != nil {
		t.Fatal("a token verified in full came with a Memo")
	}
	m := memo()
	if m == nil || memo() != m {
		t.Fatal("a cached token's Memo is not one and the same")
	}
	// CachedMemo: the same Memo, the claims VerifyBytesMemo gives; nil for a forged token
	// with the cached one's tail (the cache compares the whole token).
	want, _, _ := v.VerifyBytesMemo(context.Background(), tok, time.Time{})
	if cm, c := v.CachedMemo(tok, time.Time{}); cm != m || c == nil || *c != want {
		t.Fatalf("CachedMemo = %p, %+v; want %p, %+v", cm, c, m, want)
	}
	forged := append([]byte(nil), tok...)
	forged[10] ^= 1
	if cm, _ := v.CachedMemo(forged, time.Time{}); cm != nil {
		t.Fatal("CachedMemo answered a token that differs from the cached one in its header")
	}
	m.Store("kept")
	if got := memo().Load(); got != "kept" {
		t.Fatalf("Memo holds %v", got)
	}
	// Expiry: by the request's clock reading (at), then by the verifier's.
	if cm, _ := v.CachedMemo(tok, base.Add(10*time.Minute+ClockSkew+time.Second)); cm != nil {
		t.Fatal("CachedMemo answered a token past its deadline by the request's clock")
	}
	if got := decisionCounts(t, v); got["cached"] != 5 || got["ok"] != 1 {
		t.Fatalf("decisions %v, want 5 cached (each answer from the cache once) and 1 ok", got)
	}
	// Verified in full again (the entry above went), then past its deadline.
	memo()
	offset.Store(int64(10*time.Minute + ClockSkew + time.Second))
	if cm, _ := v.CachedMemo(tok, time.Time{}); cm != nil {
		t.Fatal("CachedMemo answered an expired token")
	}
	if _, _, err := v.VerifyBytesMemo(context.Background(), tok, time.Time{}); err == nil {
		t.Fatal("an expired token verified")
	}
	offset.Store(0)
	if memo() != nil {
		t.Fatal("a token verified again came with a Memo")
	}
	if m2 := memo(); m2 == nil || m2 == m || m2.Load() != nil {
		t.Fatalf("the token verified again has Memo %p, the old one %p", m2, m)
	}
}
