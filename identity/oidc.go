package identity

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	jose "github.com/go-jose/go-jose/v4"
)

const (
	httpTimeout = 10 * time.Second
	// jwksCooldown is the least time between two JWKS fetches. go-oidc's RemoteKeySet fetches
	// on every token it cannot verify, so anyone could make us hammer the provider with
	// made-up kids; 30 s is what panva/jose uses. A rotated-in key is picked up on first use.
	jwksCooldown = 30 * time.Second
	// jwksMaxAge makes a key the provider withdrew stop verifying within about an hour.
	jwksMaxAge   = time.Hour
	maxJWKSBytes = 1 << 20
)

// NewOIDC discovers issuer's configuration (issuer + "/.well-known/openid-configuration") and
// fetches its JWKS; audience is required. For Firebase, issuer is
// https://securetoken.google.com/<project> and audience is <project>. httpClient may be nil.
// The issuer and its jwks_uri must be https unless they are on a loopback address.
func NewOIDC(ctx context.Context, issuer, audience string, httpClient *http.Client) (*Verifier, error) {
	if issuer == "" || audience == "" {
		return nil, errors.New("identity: oidc issuer and audience are required")
	}
	if err := checkSecureURL(issuer); err != nil {
		return nil, fmt.Errorf("identity: oidc issuer: %w", err)
	}
	if httpClient == nil {
		httpClient = &http.Client{Timeout: httpTimeout}
	}
	provider, err := oidc.NewProvider(oidc.ClientContext(ctx, httpClient), issuer)
	if err != nil {
		return nil, fmt.Errorf("identity: oidc discovery for %s: %w", issuer, err)
	}
	var meta struct {
		JWKSURL string   `json:"jwks_uri"`
		Algs    []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := provider.Claims(&meta); err != nil {
		return nil, fmt.Errorf("identity: oidc discovery for %s: %w", issuer, err)
	}
	if meta.JWKSURL == "" {
		return nil, fmt.Errorf("identity: oidc discovery for %s: no jwks_uri", issuer)
	}
	if err := checkSecureURL(meta.JWKSURL); err != nil {
		return nil, fmt.Errorf("identity: oidc jwks_uri: %w", err)
	}
	keys := &remoteKeys{url: meta.JWKSURL, client: httpClient, now: time.Now}
	if err := keys.refresh(ctx); err != nil {
		return nil, fmt.Errorf("identity: oidc keys for %s: %w", issuer, err)
	}
	cfg := oidc.Config{ClientID: audience, SupportedSigningAlgs: signingAlgs(meta.Algs)}
	v := newVerifier(issuer, keys, cfg, false)
	keys.now = func() time.Time { return v.now() } // one clock for the verifier and its keys
	return v, nil
}

// signingAlgs keeps the asymmetric algorithms the provider announces (never none or HS*);
// RS256 when it announces none we know.
func signingAlgs(announced []string) []string {
	var algs []string
	for _, a := range announced {
		switch a {
		case oidc.RS256, oidc.RS384, oidc.RS512, oidc.ES256, oidc.ES384, oidc.ES512,
			oidc.PS256, oidc.PS384, oidc.PS512, oidc.EdDSA:
			algs = append(algs, a)
		}
	}
	if len(algs) == 0 {
		algs = []string{oidc.RS256}
	}
	return algs
}

func checkSecureURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if u.Scheme == "https" {
		return nil
	}
	if u.Scheme == "http" {
		host := u.Hostname()
		if host == "localhost" {
			return nil
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
			return nil
		}
	}
	return fmt.Errorf("%q: must be https (plain http only on loopback)", raw)
}

// remoteKeys is the provider's JWKS, cached. It replaces go-oidc's RemoteKeySet, which
// re-fetches the JWKS for every token whose signature does not verify: here a token whose
// kid is known but whose signature is wrong is refused without a fetch, and fetches for
// unknown kids (or stale keys) are at most one per jwksCooldown. Safe for concurrent use:
// mu guards every field below it; the fetch runs outside mu.
type remoteKeys struct {
	url    string
	client *http.Client
	now    func() time.Time

	mu        sync.Mutex
	keys      []jose.JSONWebKey
	fetched   time.Time     // last successful fetch
	attempted time.Time     // last fetch started
	inflight  chan struct{} // closed when the running fetch ends; nil when none runs
}

var _ oidc.KeySet = (*remoteKeys)(nil)

// VerifySignature implements oidc.KeySet. go-oidc has already checked the algorithm and that
// there is exactly one signature.
func (r *remoteKeys) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSignedCompact(raw, []jose.SignatureAlgorithm{
		jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512,
		jose.PS256, jose.PS384, jose.PS512, jose.EdDSA,
	})
	if err != nil || len(jws.Signatures) != 1 {
		return nil, fmt.Errorf("malformed jwt: %v", err)
	}
	kid := jws.Signatures[0].Header.KeyID

	keys, stale := r.snapshot()
	if stale {
		// The provider may have withdrawn a key. If the fetch fails, the old keys are kept:
		// an outage of the provider must not lock every user out.
		if err := r.refresh(ctx); err == nil {
			keys, _ = r.snapshot()
		}
	}
	payload, matched := verifyWith(jws, kid, keys)
	if payload != nil {
		return payload, nil
	}
	if matched || stale {
		return nil, errors.New("no key verifies the signature")
	}
	// Unknown kid: the provider may have rotated in a new key. Fetch, unless in cooldown.
	if err := r.refresh(ctx); err != nil && !errors.Is(err, errCooldown) {
		return nil, err
	}
	keys, _ = r.snapshot()
	if payload, _ := verifyWith(jws, kid, keys); payload != nil {
		return payload, nil
	}
	return nil, fmt.Errorf("no key for kid %q", kid)
}

// verifyWith tries the keys with the token's kid (every key when the token has none).
// matched says whether some key was tried.
func verifyWith(jws *jose.JSONWebSignature, kid string, keys []jose.JSONWebKey) (payload []byte, matched bool) {
	for i := range keys {
		if kid != "" && keys[i].KeyID != kid {
			continue
		}
		matched = true
		if p, err := jws.Verify(&keys[i]); err == nil {
			return p, true
		}
	}
	return nil, matched
}

func (r *remoteKeys) snapshot() (keys []jose.JSONWebKey, stale bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.keys, r.now().Sub(r.fetched) > jwksMaxAge
}

var errCooldown = errors.New("jwks fetched recently")

// refresh fetches the JWKS unless one was fetched less than jwksCooldown ago; callers that
// arrive while a fetch runs wait for it instead of starting another.
func (r *remoteKeys) refresh(ctx context.Context) error {
	r.mu.Lock()
	if ch := r.inflight; ch != nil {
		r.mu.Unlock()
		select {
		case <-ch:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	now := r.now()
	if !r.attempted.IsZero() && now.Sub(r.attempted) < jwksCooldown {
		r.mu.Unlock()
		return errCooldown
	}
	r.attempted = now
	ch := make(chan struct{})
	r.inflight = ch
	r.mu.Unlock()

	// Shared by every waiter, so one caller giving up must not cancel it; bounded on its own
	// (the caller's http.Client may have no timeout).
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), httpTimeout)
	keys, err := r.fetch(fctx)
	cancel()

	r.mu.Lock()
	if err == nil {
		r.keys, r.fetched = keys, now
	}
	r.inflight = nil
	r.mu.Unlock()
	close(ch)
	return err
}

func (r *remoteKeys) fetch(ctx context.Context) ([]jose.JSONWebKey, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetch jwks: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, fmt.Errorf("fetch jwks: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("fetch jwks: %s", resp.Status)
	}
	if len(body) > maxJWKSBytes {
		return nil, errors.New("fetch jwks: response too large")
	}
	return parseJWKS(body)
}

// parseJWKS keeps the public signing keys it understands and skips the rest, as go-oidc does:
// one exotic key in a provider's set must not lock everyone out.
func parseJWKS(body []byte) ([]jose.JSONWebKey, error) {
	var set struct {
		Keys []json.RawMessage `json:"keys"`
	}
	if err := json.Unmarshal(body, &set); err != nil {
		return nil, fmt.Errorf("decode jwks: %w", err)
	}
	var keys []jose.JSONWebKey
	for _, raw := range set.Keys {
		var k jose.JSONWebKey
		if err := json.Unmarshal(raw, &k); err != nil || !k.Valid() {
			continue
		}
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		if pub := k.Public(); pub.IsPublic() {
			keys = append(keys, pub)
		}
	}
	if len(keys) == 0 {
		return nil, errors.New("jwks has no usable signing key")
	}
	return keys, nil
}
