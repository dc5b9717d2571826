// Package identity verifies identity-provider ID tokens and hosts the embedded dev issuer.
//
// It owns token verification for both auth modes through one go-oidc IDTokenVerifier: OIDC
// mode (Firebase Auth, Keycloak, Auth0...: discovery plus the provider's JWKS) and dev mode
// (a static key set holding the public half of DATA/dev-idp.pem, whose private half the
// embedded Issuer signs with). It may import only the standard library and third-party
// modules, never other gateway packages.
package identity

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/gateway/gateway/domain"

	"github.com/coreos/go-oidc/v3/oidc"
)

const (
	// DevIssuer is the iss of tokens minted by the embedded dev issuer.
	DevIssuer = "gateway-dev"
	// DevAudience is the aud of tokens minted by the embedded dev issuer.
	DevAudience = "gateway"

	// ClockSkew is the tolerance between our clock and the issuer's: a token is accepted up
	// to ClockSkew after its exp, and its iat may be up to ClockSkew in the future.
	ClockSkew = 60 * time.Second

	// maxTokenBytes refuses absurd inputs before any parsing; real ID tokens are 1-2 KiB.
	maxTokenBytes = 16 << 10
	// cacheSize bounds the verified-token cache (a few hundred bytes per entry).
	cacheSize = 4096
)

// ErrInvalidToken is wrapped by every verification failure, with a short reason
// (malformed, bad signature, wrong issuer, wrong audience, expired, ...).
var ErrInvalidToken = errors.New("invalid token")

// Claims is what the gateway takes from a verified ID token.
type Claims struct {
	UID    string // sub
	Name   string // name claim
	Email  string // email claim
	Role   string // the "role" claim; filled only by a dev-mode verifier, never trusted in OIDC mode
	Issuer string
	Expiry time.Time
}

// Verifier verifies ID tokens of one issuer and audience. It is safe for concurrent use.
type Verifier struct {
	oidc      *oidc.IDTokenVerifier
	trustRole bool // dev mode only: the role claim comes from our own issuer
	audience  string
	now       func() time.Time
	cache     *tokenCache
	metrics   *verifierMetrics
	// provider is the remote issuer (OIDC mode); nil for the dev verifier's static key.
	provider *provider
	// Claim checks of OIDC mode (see OIDCOptions).
	firebase, allowAnonymous, requireEmailVerified bool
}

func newVerifier(issuer string, keys oidc.KeySet, cfg oidc.Config, trustRole bool) *Verifier {
	v := &Verifier{trustRole: trustRole, now: time.Now, cache: newTokenCache(cacheSize), metrics: newVerifierMetrics()}
	// go-oidc compares exp with Now() without leeway: shifting its clock back by ClockSkew
	// gives the skew. Reading v.now at call time lets tests move the clock.
	cfg.Now = func() time.Time { return v.now().Add(-ClockSkew) }
	v.oidc = oidc.NewVerifier(issuer, keys, &cfg)
	v.audience = cfg.ClientID
	return v
}

// Verify checks rawToken's signature, issuer, audience, expiry, sub, iat and auth_time (with
// ClockSkew) and returns its claims. A token verified before is answered from a cache until it
// expires or its key leaves the provider's key set. It fails with ErrInvalidToken,
// ErrNotAllowed or ErrUnavailable.
func (v *Verifier) Verify(ctx context.Context, rawToken string) (Claims, error) {
	return v.VerifyBytes(ctx, unsafe.Slice(unsafe.StringData(rawToken), len(rawToken)))
}

// VerifyBytes is Verify of a token held in bytes (a request's header): a token answered from the
// cache costs no copy of it; the bytes are only read, and kept by nothing.
func (v *Verifier) VerifyBytes(ctx context.Context, rawToken []byte) (Claims, error) {
	return v.VerifyBytesAt(ctx, rawToken, time.Time{})
}

// VerifyBytesAt is VerifyBytes for a request whose server already read the clock as it began
// (at; zero: the verifier reads its own): a cached token is checked against at, a clock
// reading less per request (a server's request time is microseconds old, so a token is
// accepted as it would have been at the request's start). A token verified in full is
// checked against the verifier's own clock.
func (v *Verifier) VerifyBytesAt(ctx context.Context, rawToken []byte, at time.Time) (Claims, error) {
	c, _, err := v.VerifyBytesMemo(ctx, rawToken, at)
	return c, err
}

// Memo is where a caller keeps what it derived from a cached token's claims (the gateway: the
// signed-in profile, with what it was derived from to tell whether it still holds), for as
// long as the token stays cached. A token verified again gets a new, empty Memo. What is kept
// there must hold no secret beyond what the claims hold.
type Memo struct{ atomic.Value }

// VerifyBytesMemo is VerifyBytesAt that also gives the cached token's Memo (nil for a token
// verified in full: the next call, from the cache, has one).
func (v *Verifier) VerifyBytesMemo(ctx context.Context, rawToken []byte, at time.Time) (Claims, *Memo, error) {
	c, memo, err := v.verify(ctx, rawToken, at)
	if memo == nil { // a hit is counted by verify
		v.metrics.decision(err)
	}
	return c, memo, err
}

// CachedMemo answers rawToken from the cache alone: the cached token's Memo and its claims (the
// cache's own copy, which the caller reads and never changes), or nil when the token is not
// cached, is past its deadline by at (zero: the verifier's clock) or its key left the
// provider's set: the checks VerifyBytesMemo makes of a cached token, and a cached decision
// counted likewise. On nil, VerifyBytesMemo verifies it (in full). A caller that needs only
// the Memo (the gateway's kept profile) reads none of the claims: the cache entry's first
// cache line holds what a hit reads, and the token.
func (v *Verifier) CachedMemo(rawToken []byte, at time.Time) (*Memo, *Claims) {
	if at.IsZero() {
		at = v.now()
	}
	if e := v.cached(rawToken, at); e != nil {
		return &e.memo, &e.claims
	}
	return nil, nil
}

// cached is rawToken's cache entry if the cache answers it at now (counted as a cached
// decision), else nil (an entry whose key was withdrawn is dropped: verify again, and refuse).
func (v *Verifier) cached(raw []byte, now time.Time) *cachedClaims {
	e, ok := v.cache.get(raw, now)
	if !ok {
		return nil
	}
	if v.provider != nil && !v.provider.live(e.kid, e.gen) {
		v.cache.drop(raw)
		return nil
	}
	v.metrics.cacheHit(e.hash)
	return e
}

func (v *Verifier) verify(ctx context.Context, raw []byte, at time.Time) (_ Claims, memo *Memo, _ error) {
	if len(raw) > maxTokenBytes {
		return Claims{}, nil, invalid("malformed")
	}
	now := at
	if now.IsZero() {
		now = v.now()
	}
	// The cache holds only tokens that verified, so a hit is well-formed: the shape is checked
	// on a miss (the token's bytes are read once per request, by the cache's hash).
	if e := v.cached(raw, now); e != nil {
		return e.claims, &e.memo, nil
	}
	if bytes.Count(raw, []byte(".")) != 2 {
		return Claims{}, nil, invalid("malformed")
	}
	if !at.IsZero() {
		now = v.now() // verified in full: by the verifier's own clock
	}
	var gen uint64
	if v.provider != nil {
		gen = v.provider.generation()
	}
	rawToken := string(raw) // verified in full: a copy of its own

	hdr := tokenHeader(rawToken)
	if accessTokenType(hdr.Typ) {
		return Claims{}, nil, invalid("an access token (typ " + hdr.Typ + "), not an ID token")
	}
	var sigErr error
	tok, err := v.oidc.Verify(context.WithValue(ctx, sigErrKey{}, &sigErr), rawToken)
	if err != nil {
		var r *refusal
		switch {
		case errors.Is(sigErr, domain.ErrIdPUnavailable):
			return Claims{}, nil, sigErr
		case errors.As(sigErr, &r):
			return Claims{}, nil, invalid(r.reason)
		}
		return Claims{}, nil, invalid(oidcReason(err))
	}
	if tok.Subject == "" {
		return Claims{}, nil, invalid("empty sub")
	}
	if tok.IssuedAt.IsZero() {
		return Claims{}, nil, invalid("missing iat")
	}
	if tok.IssuedAt.After(now.Add(ClockSkew)) {
		return Claims{}, nil, invalid("iat in the future")
	}

	c := Claims{UID: tok.Subject, Issuer: tok.Issuer, Expiry: tok.Expiry.UTC()}
	// Decode only the claims we use. In OIDC mode "role" is never read, so whatever shape a
	// provider gives it cannot break verification.
	var extra struct {
		Name          string          `json:"name"`
		Email         string          `json:"email"`
		EmailVerified *bool           `json:"email_verified"`
		AuthTime      json.RawMessage `json:"auth_time"`
		Firebase      struct {
			SignInProvider string `json:"sign_in_provider"`
		} `json:"firebase"`
		Role      json.RawMessage `json:"role"`
		AZP       string          `json:"azp"`
		NotBefore *float64        `json:"nbf"`
	}
	if err := tok.Claims(&extra); err != nil {
		return Claims{}, nil, invalid("malformed claims")
	}
	// go-oidc allows nbf 5 minutes ahead; the gateway's skew is ClockSkew, as for iat.
	if extra.NotBefore != nil && time.Unix(int64(*extra.NotBefore), 0).After(now.Add(ClockSkew)) {
		return Claims{}, nil, invalid("nbf in the future")
	}
	// auth_time, when present (Firebase: always), is a number not in the future.
	if len(extra.AuthTime) > 0 || v.firebase {
		var at float64
		if err := json.Unmarshal(extra.AuthTime, &at); err != nil || at <= 0 {
			return Claims{}, nil, invalid("missing or malformed auth_time")
		}
		if time.Unix(int64(at), 0).After(now.Add(ClockSkew)) {
			return Claims{}, nil, invalid("auth_time in the future")
		}
	}
	// A token for several audiences is ours only if we are the party it was issued to
	// (OIDC Core 3.1.3.7; Dex trusted peers issue such tokens to other clients).
	if len(tok.Audience) > 1 && extra.AZP != v.audience {
		return Claims{}, nil, invalid("issued to another party (azp)")
	}
	if extra.Firebase.SignInProvider == "anonymous" && !v.allowAnonymous {
		return Claims{}, nil, fmt.Errorf("%w: anonymous sign-in is not accepted", domain.ErrSignInNotAllowed)
	}
	if v.requireEmailVerified && (extra.EmailVerified == nil || !*extra.EmailVerified) {
		return Claims{}, nil, fmt.Errorf("%w: the email address is not verified", domain.ErrSignInNotAllowed)
	}
	c.Name, c.Email = extra.Name, extra.Email
	if v.trustRole && len(extra.Role) > 0 {
		if err := json.Unmarshal(extra.Role, &c.Role); err != nil {
			return Claims{}, nil, invalid("malformed role claim")
		}
	}

	// Cached until the moment verification itself would start refusing it, or until its key
	// leaves the provider's set.
	v.cache.put(rawToken, cachedClaims{claims: c, until: c.Expiry.Add(ClockSkew), kid: hdr.Kid, gen: gen}, now)
	return c, nil, nil
}

// Status is the provider's state for /readyz: Ready once keys are loaded (the last good keys
// keep it ready through a later outage, which Err then reports). The dev verifier is always
// ready.
type Status struct {
	Ready   bool
	KeysAge time.Duration
	Err     error
}

// Status reports the identity provider's state.
func (v *Verifier) Status() Status {
	if v.provider == nil {
		return Status{Ready: true}
	}
	loaded, age, err := v.provider.status()
	return Status{Ready: loaded, KeysAge: age, Err: err}
}

// Endpoints are the provider's sign-in endpoints from its last discovery document that
// answered (ok false until one has, and always in dev mode). Never fetches: the background
// loop keeps them.
func (v *Verifier) Endpoints() (e Endpoints, ok bool) {
	if v.provider == nil {
		return Endpoints{}, false
	}
	if p := v.provider.endpoints.Load(); p != nil {
		return *p, true
	}
	return Endpoints{}, false
}

// Close stops the background key refresh (OIDC mode). Verify keeps working on the keys it has.
func (v *Verifier) Close() {
	if v.provider != nil {
		v.provider.close()
	}
}

func invalid(reason string) error {
	return fmt.Errorf("%w: %s", ErrInvalidToken, reason)
}

// oidcReason turns a go-oidc error into a short reason. go-oidc has a typed error only for
// expiry, so the others are recognised by their text; an unrecognised one still refuses.
func oidcReason(err error) string {
	var exp *oidc.TokenExpiredError
	if errors.As(err, &exp) {
		return "expired"
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "unexpected signature algorithm"), strings.Contains(msg, "unsupported algorithm"):
		return "unsupported algorithm"
	case strings.Contains(msg, "malformed jwt"), strings.Contains(msg, "failed to unmarshal claims"):
		return "malformed"
	case strings.Contains(msg, "failed to verify signature"):
		return "bad signature"
	case strings.Contains(msg, "different provider"):
		return "wrong issuer"
	case strings.Contains(msg, "expected audience"):
		return "wrong audience"
	case strings.Contains(msg, "nbf"):
		return "not yet valid"
	default:
		return "rejected"
	}
}
