// Package identity verifies identity-provider ID tokens and hosts the embedded dev issuer.
//
// It owns token verification for both auth modes through one go-oidc IDTokenVerifier: OIDC
// mode (Firebase Auth, Keycloak, Auth0...: discovery plus the provider's JWKS) and dev mode
// (a static key set holding the public half of DATA/dev-idp.pem, whose private half the
// embedded Issuer signs with). It may import only the standard library and third-party
// modules, never other gateway packages.
package identity

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

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
	now       func() time.Time
	cache     *tokenCache
}

func newVerifier(issuer string, keys oidc.KeySet, cfg oidc.Config, trustRole bool) *Verifier {
	v := &Verifier{trustRole: trustRole, now: time.Now, cache: newTokenCache(cacheSize)}
	// go-oidc compares exp with Now() without leeway: shifting its clock back by ClockSkew
	// gives the skew. Reading v.now at call time lets tests move the clock.
	cfg.Now = func() time.Time { return v.now().Add(-ClockSkew) }
	v.oidc = oidc.NewVerifier(issuer, keys, &cfg)
	return v
}

// Verify checks rawToken's signature, issuer, audience, expiry, sub and iat (with ClockSkew)
// and returns its claims. A token verified before is answered from a cache until it expires.
func (v *Verifier) Verify(ctx context.Context, rawToken string) (Claims, error) {
	if len(rawToken) > maxTokenBytes || strings.Count(rawToken, ".") != 2 {
		return Claims{}, invalid("malformed")
	}
	now := v.now()
	sum := sha256.Sum256([]byte(rawToken))
	if c, ok := v.cache.get(sum, now); ok {
		return c, nil
	}

	tok, err := v.oidc.Verify(ctx, rawToken)
	if err != nil {
		return Claims{}, invalid(oidcReason(err))
	}
	if tok.Subject == "" {
		return Claims{}, invalid("empty sub")
	}
	if tok.IssuedAt.IsZero() {
		return Claims{}, invalid("missing iat")
	}
	if tok.IssuedAt.After(now.Add(ClockSkew)) {
		return Claims{}, invalid("iat in the future")
	}

	c := Claims{UID: tok.Subject, Issuer: tok.Issuer, Expiry: tok.Expiry.UTC()}
	// Decode only the claims we use. In OIDC mode "role" is never read, so whatever shape a
	// provider gives it cannot break verification.
	var extra struct {
		Name  string          `json:"name"`
		Email string          `json:"email"`
		Role  json.RawMessage `json:"role"`
	}
	if err := tok.Claims(&extra); err != nil {
		return Claims{}, invalid("malformed claims")
	}
	c.Name, c.Email = extra.Name, extra.Email
	if v.trustRole && len(extra.Role) > 0 {
		if err := json.Unmarshal(extra.Role, &c.Role); err != nil {
			return Claims{}, invalid("malformed role claim")
		}
	}

	// Cached until the moment verification itself would start refusing it.
	v.cache.put(sum, c, c.Expiry.Add(ClockSkew), now)
	return c, nil
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
	case strings.Contains(msg, "unexpected signature algorithm"):
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
