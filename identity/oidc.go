package identity

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/gateway/gateway/domain"
	jose "github.com/go-jose/go-jose/v4"
)

// Provider timing. A request never waits for the provider longer than fetchTimeout, and only
// when its token names a key id the gateway has not seen; known keys are always served from
// memory while the background loop keeps them fresh.
const (
	// fetchTimeout bounds each discovery and JWKS request.
	fetchTimeout = 2500 * time.Millisecond
	// refreshEvery is how often the background loop re-reads discovery and the JWKS while the
	// provider is healthy: a withdrawn key stops verifying (and its cached tokens are
	// dropped) within this time.
	refreshEvery = 5 * time.Minute
	// retryEvery is the background loop's period while the provider is unreachable: the
	// gateway recovers within retryEvery + fetchTimeout of the provider coming back.
	retryEvery = time.Second
	// kidCooldown is the least time between two fetches caused by tokens with an unknown key
	// id. Forged kids cost at most one fetch per cooldown; a rotated-in key is picked up
	// within it (see VerifySignature).
	kidCooldown  = 4 * time.Second
	maxJWKSBytes = 1 << 20
	// warnEvery limits repeated WARN lines of one ongoing outage.
	warnEvery = 30 * time.Second
)

// asymmetricAlgs are the only algorithms ever accepted (never none or HS*); the provider's
// discovery document narrows them.
var asymmetricAlgs = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.ES256, jose.ES384, jose.ES512,
	jose.PS256, jose.PS384, jose.PS512, jose.EdDSA,
}

// OIDCOptions configures NewOIDC. The zero value is usable.
type OIDCOptions struct {
	// HTTPClient fetches discovery and the JWKS; nil is a client with fetchTimeout.
	HTTPClient *http.Client
	// Logger receives provider outages (WARN, with the cause) and recoveries; nil discards.
	Logger *slog.Logger
	// AllowAnonymous accepts Firebase anonymous sign-ins (firebase.sign_in_provider
	// "anonymous"); by default they are refused with ErrNotAllowed.
	AllowAnonymous bool
	// RequireEmailVerified refuses tokens whose email_verified claim is not true.
	RequireEmailVerified bool
}

// NewOIDC returns a verifier for issuer's ID tokens; audience is required. For Firebase,
// issuer is https://securetoken.google.com/<project> and audience is <project>. The issuer and
// its jwks_uri must be https unless they are on a loopback address.
//
// It fails only on a bad configuration. The provider being down is not an error: NewOIDC
// tries once (within fetchTimeout), then a background loop keeps trying every retryEvery;
// until keys load, Verify answers ErrUnavailable. Close stops the loop.
func NewOIDC(ctx context.Context, issuer, audience string, o OIDCOptions) (*Verifier, error) {
	if issuer == "" || audience == "" {
		return nil, errors.New("identity: oidc issuer and audience are required")
	}
	if err := CheckIssuer(issuer); err != nil {
		return nil, err
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{Timeout: fetchTimeout}
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	p := &provider{
		issuer: strings.TrimSuffix(issuer, "/"), audience: audience, client: o.HTTPClient, log: log, now: time.Now,
		kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	// go-oidc checks the algorithm against this list before it calls VerifySignature, which
	// narrows it to what the provider's discovery announces now.
	algs := make([]string, len(asymmetricAlgs))
	for i, a := range asymmetricAlgs {
		algs[i] = string(a)
	}
	v := newVerifier(issuer, p, oidc.Config{ClientID: audience, SupportedSigningAlgs: algs}, false)
	v.provider = p
	v.allowAnonymous, v.requireEmailVerified = o.AllowAnonymous, o.RequireEmailVerified
	v.firebase = strings.HasPrefix(issuer, "https://securetoken.google.com/")
	p.now = func() time.Time { return v.now() } // one clock for the verifier and its keys
	p.metrics = v.metrics
	if err := p.refresh(ctx, false); err != nil {
		p.warn(err)
	}
	go p.run()
	return v, nil
}

// CheckIssuer refuses an issuer URL that can never be used, before anything is contacted: not
// https (plain http only on loopback), no host, a port outside 1-65535, credentials, a query or
// a fragment (discovery is the issuer with /.well-known/openid-configuration appended).
func CheckIssuer(raw string) error {
	if err := checkSecureURL(raw); err != nil {
		return fmt.Errorf("identity: oidc issuer: %w", err)
	}
	u, _ := url.Parse(raw)
	if u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return fmt.Errorf("identity: oidc issuer: %q: must have no query or fragment", raw)
	}
	return nil
}

func checkSecureURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	switch {
	case u.Host == "" || u.Hostname() == "":
		return fmt.Errorf("%q: no host", raw)
	case u.User != nil:
		return fmt.Errorf("%q: must not carry credentials", raw)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: port %s is not 1 to 65535", raw, p)
		}
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

// provider is the identity provider as the gateway sees it: its discovery document and JWKS,
// loaded by a background loop and by tokens with unknown key ids. Verification reads the
// current keySet through an atomic pointer and never takes mu; mu guards the fetch
// bookkeeping below it, and the fetch itself runs outside mu.
type provider struct {
	issuer   string
	audience string
	client   *http.Client
	log      *slog.Logger
	now      func() time.Time
	metrics  *verifierMetrics

	keys atomic.Pointer[keySet] // nil until the first successful load
	// endpoints are the discovery document's browser endpoints (the dashboard's sign-in), kept
	// from the last discovery that answered, even when its JWKS did not.
	endpoints atomic.Pointer[Endpoints]

	mu        sync.Mutex
	attempted time.Time     // last fetch started
	inflight  chan struct{} // closed when the running fetch ends; nil when none runs
	lastErr   error         // of the last fetch; nil after a success
	warned    time.Time     // last WARN of the ongoing outage

	kick       chan struct{} // wakes the background loop early
	stop, done chan struct{}
	closeOnce  sync.Once
}

// keySet is one successful load: immutable once published.
type keySet struct {
	keys    []jose.JSONWebKey
	kids    map[string]bool
	algs    map[jose.SignatureAlgorithm]bool // from discovery
	fetched time.Time
	gen     uint64
}

var _ oidc.KeySet = (*provider)(nil)

// sigErrKey carries a *error from Verify to VerifySignature through go-oidc.
type sigErrKey struct{}

// unavailable wraps ErrUnavailable with the cause (the caller logs it; clients see a 503).
func unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", domain.ErrIdPUnavailable, fmt.Sprintf(format, args...))
}

// VerifySignature implements oidc.KeySet. go-oidc has already checked that the algorithm is
// asymmetric and that there is exactly one signature.
//
// A token whose key id is unknown may come from a key the provider has just rotated in: the
// JWKS is fetched at once unless a fetch ran within kidCooldown. A token that would be refused
// whatever its key (another issuer or audience, expired: read unverified, only to choose the
// refusal) fetches nothing. Inside the cooldown, a token issued before the current keys were
// fetched (by more than ClockSkew) is refused at once: the provider published its keys before
// signing. One that may be newer than the keys waits for the next fetch the cooldown allows
// and is decided on its keys: accepted when its key was rotated in, refused (401) when the kid
// is still unknown. Only a fetch that fails answers ErrUnavailable (503).
func (p *provider) VerifySignature(ctx context.Context, raw string) (payload []byte, err error) {
	if h, ok := ctx.Value(sigErrKey{}).(*error); ok {
		// go-oidc flattens this error to text: Verify reads it from here to tell an
		// unavailable provider from a bad token.
		defer func() { *h = err }()
	}
	jws, err := jose.ParseSignedCompact(raw, asymmetricAlgs)
	if err != nil || len(jws.Signatures) != 1 {
		return nil, fmt.Errorf("malformed jwt: %v", err)
	}
	hdr := jws.Signatures[0].Header
	ks := p.keys.Load()
	if ks == nil {
		p.wake()
		return nil, unavailable("the identity provider's keys are not loaded yet")
	}
	if hdr.KeyID != "" && !ks.kids[hdr.KeyID] {
		if reason := p.refusedAnyway(jws); reason != "" {
			return nil, &refusal{reason}
		}
		if ks, err = p.keysFor(ctx, jws, ks); err != nil {
			return nil, err
		}
	}
	if !ks.algs[jose.SignatureAlgorithm(hdr.Algorithm)] {
		return nil, fmt.Errorf("unexpected signature algorithm %q", hdr.Algorithm)
	}
	if payload = verifyWith(jws, hdr.KeyID, hdr.Algorithm, ks.keys); payload != nil {
		return payload, nil
	}
	return nil, errors.New("no key verifies the signature")
}

// refusal is a token refused before its signature is checked (the reason is the 401's).
type refusal struct{ reason string }

func (r *refusal) Error() string { return r.reason }

// refusedAnyway says why a token would be refused whatever key signed it (its claims read
// unverified): such a token must not cost a JWKS fetch.
func (p *provider) refusedAnyway(jws *jose.JSONWebSignature) string {
	var c struct {
		Issuer   string          `json:"iss"`
		Audience json.RawMessage `json:"aud"`
		Expiry   *float64        `json:"exp"`
	}
	if json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &c) != nil {
		return "malformed"
	}
	switch {
	case strings.TrimSuffix(c.Issuer, "/") != p.issuer:
		return "wrong issuer"
	case p.audience != "" && !audienceHas(c.Audience, p.audience):
		return "wrong audience"
	case c.Expiry != nil && time.Unix(int64(*c.Expiry), 0).Add(ClockSkew).Before(p.now()):
		return "expired"
	}
	return ""
}

func audienceHas(raw json.RawMessage, aud string) bool {
	var one string
	if json.Unmarshal(raw, &one) == nil {
		return one == aud
	}
	var many []string
	return json.Unmarshal(raw, &many) == nil && slices.Contains(many, aud)
}

// keysFor fetches the JWKS for a token whose kid is not in ks, within the limits above.
func (p *provider) keysFor(ctx context.Context, jws *jose.JSONWebSignature, ks *keySet) (*keySet, error) {
	err := p.refresh(ctx, true)
	if errors.Is(err, errCooldown) {
		// iat has whole seconds and the provider's clock may differ from ours: within
		// ClockSkew of the fetch, the token may be newer than the keys.
		iat, ok := unverifiedIssuedAt(jws)
		if !ok || !iat.Add(ClockSkew).After(ks.fetched) {
			return ks, nil
		}
		err = p.refreshAfterCooldown(ctx, ks.fetched)
	}
	if err != nil {
		return nil, unavailable("fetching keys for a new key id: %v", err)
	}
	return p.keys.Load(), nil
}

// refreshAfterCooldown waits until the kid cooldown allows a fetch, then fetches (or shares
// the fetch another waiting request started), and returns once keys fetched after since are
// loaded or the fetch failed. It waits at most the cooldown (in real time) plus one fetch.
func (p *provider) refreshAfterCooldown(ctx context.Context, since time.Time) error {
	deadline := time.Now().Add(kidCooldown + 100*time.Millisecond)
	for {
		// Another request's fetch may have loaded newer keys already (its attempt is what
		// the cooldown counts from): decide on those instead of waiting the cooldown out.
		if ks := p.keys.Load(); ks != nil && ks.fetched.After(since) {
			return nil
		}
		p.mu.Lock()
		wait := kidCooldown - p.now().Sub(p.attempted)
		p.mu.Unlock()
		if wait > 0 {
			if time.Now().After(deadline) {
				return errors.New("the key fetch cooldown did not end")
			}
			t := time.NewTimer(min(wait, 50*time.Millisecond)) // short steps: the clock may be moved
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
			continue
		}
		err := p.refresh(ctx, true)
		if !errors.Is(err, errCooldown) {
			return err
		}
		// Another request fetched first: decide on its keys (above).
		if err := p.failing(); err != nil {
			return err
		}
	}
}

// unverifiedIssuedAt reads iat from a token whose signature is not verified yet; it only
// chooses between two refusals, never grants anything.
func unverifiedIssuedAt(jws *jose.JSONWebSignature) (time.Time, bool) {
	var c struct {
		IssuedAt *float64 `json:"iat"`
	}
	if json.Unmarshal(jws.UnsafePayloadWithoutVerification(), &c) != nil || c.IssuedAt == nil {
		return time.Time{}, false
	}
	return time.Unix(int64(*c.IssuedAt), 0), true
}

// verifyWith tries the keys with the token's kid (every key when the token has none) whose
// own alg, when set, is the token's.
func verifyWith(jws *jose.JSONWebSignature, kid, alg string, keys []jose.JSONWebKey) []byte {
	for i := range keys {
		if (kid != "" && keys[i].KeyID != kid) || (keys[i].Algorithm != "" && keys[i].Algorithm != alg) {
			continue
		}
		if p, err := jws.Verify(&keys[i]); err == nil {
			return p
		}
	}
	return nil
}

var errCooldown = errors.New("keys fetched recently")

// refresh loads discovery and the JWKS. With forKid (a request's unknown kid) it refuses to
// start a fetch within kidCooldown of the last one (errCooldown). Callers that arrive while a
// fetch runs wait for it and share its result.
func (p *provider) refresh(ctx context.Context, forKid bool) error {
	p.mu.Lock()
	if ch := p.inflight; ch != nil {
		p.mu.Unlock()
		select {
		case <-ch:
			p.mu.Lock()
			err := p.lastErr
			p.mu.Unlock()
			return err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	now := p.now()
	if forKid && !p.attempted.IsZero() && now.Sub(p.attempted) < kidCooldown {
		p.mu.Unlock()
		return errCooldown
	}
	p.attempted = now
	ch := make(chan struct{})
	p.inflight = ch
	p.mu.Unlock()

	// Shared by every waiter, so one caller giving up must not cancel it.
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), fetchTimeout)
	ks, err := p.load(fctx)
	cancel()
	p.metrics.fetch(err)

	// The keys and the fetch's outcome change together under mu, so that status never reads
	// the new keys beside the last fetch's error.
	p.mu.Lock()
	if err == nil {
		if old := p.keys.Load(); old != nil {
			ks.gen = old.gen + 1
		}
		ks.fetched = now
		p.keys.Store(ks)
	}
	recovered := err == nil && p.lastErr != nil
	p.lastErr = err
	p.inflight = nil
	p.mu.Unlock()
	close(ch)
	if recovered {
		p.log.Info("identity provider reachable again", "issuer", p.issuer, "keys", len(ks.keys))
	}
	return err
}

// Endpoints are the identity provider's endpoints a browser uses to sign in (authorization
// code with PKCE), from its discovery document.
type Endpoints struct {
	Authorization, Token string
}

// load reads the discovery document, then the JWKS it names.
func (p *provider) load(ctx context.Context) (*keySet, error) {
	var meta struct {
		Issuer   string   `json:"issuer"`
		JWKSURL  string   `json:"jwks_uri"`
		Algs     []string `json:"id_token_signing_alg_values_supported"`
		AuthzURL string   `json:"authorization_endpoint"`
		TokenURL string   `json:"token_endpoint"`
	}
	body, err := p.get(ctx, p.issuer+"/.well-known/openid-configuration")
	if err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	if err := json.Unmarshal(body, &meta); err != nil {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	if strings.TrimSuffix(meta.Issuer, "/") != p.issuer {
		return nil, fmt.Errorf("discovery: the document names issuer %q", meta.Issuer)
	}
	if meta.AuthzURL != "" && meta.TokenURL != "" {
		p.endpoints.Store(&Endpoints{Authorization: meta.AuthzURL, Token: meta.TokenURL})
	}
	if meta.JWKSURL == "" {
		return nil, errors.New("discovery: no jwks_uri")
	}
	if err := checkSecureURL(meta.JWKSURL); err != nil {
		return nil, fmt.Errorf("discovery: jwks_uri: %w", err)
	}
	body, err = p.get(ctx, meta.JWKSURL)
	if err != nil {
		return nil, fmt.Errorf("jwks: %w", err)
	}
	keys, err := parseJWKS(body)
	if err != nil {
		return nil, err
	}
	ks := &keySet{keys: keys, kids: make(map[string]bool, len(keys)), algs: signingAlgs(meta.Algs)}
	for _, k := range keys {
		ks.kids[k.KeyID] = true
	}
	return ks, nil
}

func (p *provider) get(ctx context.Context, u string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s answered %s", u, resp.Status)
	}
	if len(body) > maxJWKSBytes {
		return nil, fmt.Errorf("%s: response too large", u)
	}
	return body, nil
}

// signingAlgs keeps the asymmetric algorithms the provider announces; RS256 when it
// announces none we know (the OIDC default).
func signingAlgs(announced []string) map[jose.SignatureAlgorithm]bool {
	algs := map[jose.SignatureAlgorithm]bool{}
	for _, a := range announced {
		for _, ok := range asymmetricAlgs {
			if string(ok) == a {
				algs[ok] = true
			}
		}
	}
	if len(algs) == 0 {
		algs[jose.RS256] = true
	}
	return algs
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

// run is the background loop: it refreshes every refreshEvery while the provider answers,
// every retryEvery while it does not, and early when a request wakes it.
func (p *provider) run() {
	defer close(p.done)
	next := retryEvery
	if p.keys.Load() != nil && p.failing() == nil {
		next = refreshEvery
	}
	for {
		t := time.NewTimer(next)
		select {
		case <-p.stop:
			t.Stop()
			return
		case <-t.C:
		case <-p.kick:
			t.Stop()
		}
		err := p.refresh(context.Background(), false)
		if err != nil {
			p.warn(err)
			next = retryEvery
			continue
		}
		next = refreshEvery
	}
}

// wake asks the background loop for a fetch now (at most one per retryEvery is made while
// requests keep asking: the loop's own fetch takes that long at least when failing).
func (p *provider) wake() {
	p.mu.Lock()
	recent := p.inflight != nil || p.now().Sub(p.attempted) < retryEvery
	p.mu.Unlock()
	if recent {
		return
	}
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

func (p *provider) failing() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastErr
}

// warn logs a failed fetch at WARN with its cause, once per warnEvery of an ongoing outage.
func (p *provider) warn(err error) {
	p.mu.Lock()
	now := time.Now()
	quiet := now.Sub(p.warned) < warnEvery
	if !quiet {
		p.warned = now
	}
	p.mu.Unlock()
	if quiet {
		return
	}
	ks := p.keys.Load()
	if ks == nil {
		p.log.Warn("identity provider unreachable: ID-token routes answer 503 until its keys load", "issuer", p.issuer, "err", err)
		return
	}
	p.log.Warn("identity provider unreachable: keeping the last keys", "issuer", p.issuer, "keys_age", time.Since(ks.fetched).Round(time.Second).String(), "err", err)
}

// status says whether keys are loaded, and the last fetch's error.
func (p *provider) status() (loaded bool, age time.Duration, err error) {
	p.mu.Lock()
	ks, err := p.keys.Load(), p.lastErr
	p.mu.Unlock()
	if ks != nil {
		age = p.now().Sub(ks.fetched)
	}
	return ks != nil, age, err
}

// live says whether a token verified with kid (or, without kid, under generation gen) may
// still be answered from the cache: its key is still in the current set.
func (p *provider) live(kid string, gen uint64) bool {
	ks := p.keys.Load()
	if ks == nil {
		return false
	}
	if kid == "" {
		return ks.gen == gen
	}
	return ks.kids[kid]
}

func (p *provider) generation() uint64 {
	if ks := p.keys.Load(); ks != nil {
		return ks.gen
	}
	return 0
}

func (p *provider) close() {
	p.closeOnce.Do(func() { close(p.stop) })
	<-p.done
}

// joseHeader is what the gateway reads of a compact JWS header before verifying anything.
type joseHeader struct {
	Kid string `json:"kid"`
	Typ string `json:"typ"`
}

func tokenHeader(raw string) joseHeader {
	var h joseHeader
	i := strings.IndexByte(raw, '.')
	if i <= 0 {
		return h
	}
	b, err := base64.RawURLEncoding.DecodeString(raw[:i])
	if err == nil {
		_ = json.Unmarshal(b, &h)
	}
	return h
}

// accessTokenType reports whether typ marks a JWT access token (RFC 9068), not an ID token.
func accessTokenType(typ string) bool {
	return strings.TrimPrefix(strings.ToLower(typ), "application/") == "at+jwt"
}
