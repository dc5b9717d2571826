package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"github.com/gateway/gateway/domain"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/identity"
)

var bearerPrefix = []byte("Bearer ")

// bearer returns the token of an `Authorization: Bearer` header, if any.
func bearer(ctx *fasthttp.RequestCtx) []byte {
	h := ctx.Request.Header.PeekCanonical(hdrAuthorization)
	if len(h) > len(bearerPrefix) && bytes.EqualFold(h[:len(bearerPrefix)], bearerPrefix) {
		return bytes.TrimSpace(h[len(bearerPrefix):])
	}
	return nil
}

// apiKey authorizes an API-key call for scope ("" = none needed): the key comes from
// `Authorization: Bearer` or `x-api-key`. It counts against the key's daily cap and sets the
// rate-limit headers; a key over its cap is refused with a Retry-After of when its day ends.
func (s *Server) apiKey(ctx *fasthttp.RequestCtx, scope string) (domain.Grant, error) {
	raw := s.rawKey(ctx)
	if len(raw) == 0 {
		s.metrics.keyDecision("missing")
		return domain.Grant{}, errNoCredentials
	}
	r, err := s.engine(ctx).Keys.Authorize(raw, scope)
	if r.Key.ID != "" {
		s.rateHeaders(ctx, r)
	}
	if err != nil {
		s.metrics.keyDecision(errCode(err))
		if errors.Is(err, domain.ErrRateLimited) {
			err = retryAfter(err, max(int64(time.Until(r.Reset).Seconds()), 1))
		}
		return r, err
	}
	s.metrics.keyDecision("allowed")
	// route refunds the call if it is answered 503, to the engine that counted it (in a
	// cluster, the request may be answered after that engine's partition was lost).
	g := grants.Get().(*grantBy)
	*g = grantBy{r.Key.ID, r.Reset, s.engine(ctx)}
	ctx.SetUserValue(ctxGrant, g)
	return r, nil
}

// rateHeaders sets X-RateLimit-* (omitted for a plan without a daily cap).
func (s *Server) rateHeaders(ctx *fasthttp.RequestCtx, r domain.Grant) {
	if r.Limit <= 0 {
		return
	}
	// Every v1 call writes them: by their normalized names, the numbers in a stack buffer.
	h := &ctx.Response.Header
	var buf [20]byte
	h.SetCanonical(hdrRateLimit, strconv.AppendInt(buf[:0], r.Limit, 10))
	h.SetCanonical(hdrRateRemaining, strconv.AppendInt(buf[:0], r.Remaining, 10))
	h.SetCanonical(hdrRateReset, strconv.AppendInt(buf[:0], r.Reset.Unix(), 10))
}

var (
	hdrRateLimit     = []byte("X-Ratelimit-Limit")
	hdrRateRemaining = []byte("X-Ratelimit-Remaining")
	hdrRateReset     = []byte("X-Ratelimit-Reset")
)

// user authenticates the caller's ID token and returns the profile (created on a first call).
// In a cluster, a request the receiving node authenticated carries its principal instead.
func (s *Server) user(ctx *fasthttp.RequestCtx) (domain.User, error) {
	u, _, err := s.userMemo(ctx)
	return u, err
}

// userMemo is user with what the server keeps with the caller's cached ID token (nil when
// nothing is kept: a token verified in full, a request a cluster node routed).
func (s *Server) userMemo(ctx *fasthttp.RequestCtx) (domain.User, *signedIn, error) {
	m, u, err := s.signedInMemo(ctx)
	if m != nil {
		return m.user, m, nil
	}
	return u, nil, err
}

// signedInMemo is userMemo without a copy of a kept profile: m when the caller's cached ID
// token keeps one (u then unset), else the profile (u, m nil).
func (s *Server) signedInMemo(ctx *fasthttp.RequestCtx) (_ *signedIn, u domain.User, _ error) {
	if who := principalOf(ctx); who != nil {
		switch who.Kind {
		case "admin":
			return nil, *who.User, nil
		case "user":
			u, err := s.signIn(ctx, engine.Principal{UID: who.UID, Name: who.Name, Email: who.Email, ClaimsAdmin: who.ClaimsAdmin})
			return nil, u, err
		}
	}
	if _, routed := ctx.UserValue(ctxBackend).(*Backend); s.cfg.Cluster != nil && !routed {
		u, err := s.clusterUser(ctx) // a route this node answers itself (admin lists)
		return nil, u, err
	}
	c, memo, err := s.verifyMemo(ctx)
	if err != nil {
		return nil, u, err
	}
	eng := s.engine(ctx)
	if memo != nil {
		if m, ok := memo.Load().(*signedIn); ok && m.eng == eng && m.ver == eng.Users.Version() {
			return m, u, nil
		}
	}
	// The directory's version before the profile is read: a profile stored meanwhile raises
	// it, so the profile kept below is never given once a newer one is stored.
	ver := eng.Users.Version()
	u, err = s.signIn(ctx, engine.Principal{
		UID: c.UID, Name: c.Name, Email: c.Email, ClaimsAdmin: s.cfg.DevRoles && c.Role == engine.RoleAdmin,
	})
	if err != nil || memo == nil {
		return nil, u, err
	}
	m := &signedIn{eng: eng, ver: ver, user: u}
	memo.Store(m)
	return m, domain.User{}, nil
}

// signedIn is a cached ID token's profile as signIn gave it (Server.user keeps it in the
// token's Memo): given again, without signIn's lookups, while the engine's user directory is
// at the version it was read at. The profile follows from the token's claims (fixed for the
// token), the directory (its version rises on every profile stored; profiles are never
// removed) and the server's configuration (fixed); a token verified again gets a new Memo.
// It holds no secret (the profile is what /api/client/me answers).
//
// A status call reads eng, ver, status and the user's ID: they come first, on the first cache
// line of the allocation (the rest of the profile is read only by the routes that copy it).
type signedIn struct {
	eng *engine.Engine
	ver uint64
	// status is where the user's session was found (clientStatus: the dashboard polls it).
	status engine.StatusRef
	user   domain.User
}

// verify authenticates the caller's ID token (user signs the caller in after it; a cluster node
// routing a request needs only the claims).
func (s *Server) verify(ctx *fasthttp.RequestCtx) (identity.Claims, error) {
	c, _, err := s.verifyMemo(ctx)
	if err != nil {
		return identity.Claims{}, err
	}
	return *c, nil
}

// verifyMemo is verify with the cached token's Memo (nil on a token verified in full). The
// claims of a cached token are the cache's own copy (read only), not read by a caller that
// finds what it needs in the Memo.
func (s *Server) verifyMemo(ctx *fasthttp.RequestCtx) (*identity.Claims, *identity.Memo, error) {
	tok := bearer(ctx)
	if len(tok) == 0 {
		return nil, nil, errNoCredentials
	}
	// fasthttp's clock reading as the request began (zero outside its server): a cached
	// token is checked against it, one clock reading less per request.
	if memo, c := s.cfg.Verifier.CachedMemo(tok, ctx.Time()); memo != nil {
		return c, memo, nil
	}
	c, memo, err := s.cfg.Verifier.VerifyBytesMemo(s.reqContext(ctx), tok, ctx.Time())
	if err != nil {
		return nil, nil, s.tokenRefused(ctx, err)
	}
	return &c, memo, nil
}

// tokenRefused is the answer to an ID token that did not verify.
func (s *Server) tokenRefused(ctx *fasthttp.RequestCtx, err error) error {
	s.reqLog(ctx).Debug("ID token refused", "err", err)
	if errors.Is(err, domain.ErrIdPUnavailable) || errors.Is(err, domain.ErrSignInNotAllowed) {
		return err // 503 idp_unavailable (retry), 403 sign_in_not_allowed
	}
	// Sign-in guesses: a client whose ID tokens keep failing is answered 429
	// too_many_attempts past its budget; a token that verifies is never refused for it.
	if guess := ctx.RemoteIP().String(); s.signins != nil {
		if !s.signins.allow(guess) {
			return errTooManyAttempts
		}
		s.signins.fail(guess)
	}
	// The verifier's reason as text only (%v): whatever it wraps, the answer is 401.
	return fmt.Errorf("%w: %v", errInvalidToken, err)
}

// signIn returns the verified caller's profile, created on a first call.
func (s *Server) signIn(ctx *fasthttp.RequestCtx, p engine.Principal) (domain.User, error) {
	u, err := s.engine(ctx).Users.Authenticate(s.reqContext(ctx), p)
	if errors.Is(err, domain.ErrValidation) {
		// A verified token whose subject cannot be a user id (too long, unprintable): a 403,
		// since signing in again would not help.
		// As text (%v): the validation error must not turn the 403 into a 400.
		return domain.User{}, fmt.Errorf("%w: %v", errUnsupportedSubject, err)
	}
	return u, err
}

// userHandler is a handler for an authenticated dashboard or admin user.
type userHandler func(ctx *fasthttp.RequestCtx, u domain.User) error

// client wraps a route for any signed-in user: dashboard routes serve clients, and admins may
// use them for their own sessions and keys too.
func (s *Server) client(h userHandler) handler {
	return func(ctx *fasthttp.RequestCtx) error {
		u, err := s.user(ctx)
		if err != nil {
			return err
		}
		return h(ctx, u)
	}
}

// clientMemo is client for a route that uses what the server keeps with the caller's cached
// ID token (m; nil when nothing is kept).
// The profile is given by its address: the kept one is not copied (a status call reads its ID).
func (s *Server) clientMemo(h func(ctx *fasthttp.RequestCtx, u *domain.User, m *signedIn) error) handler {
	return func(ctx *fasthttp.RequestCtx) error {
		m, u, err := s.signedInMemo(ctx)
		switch {
		case err != nil:
			return err
		case m != nil:
			return h(ctx, &m.user, m)
		}
		return callWith(ctx, h, u)
	}
}

// callWith is h with u, nothing kept: u alone escapes to the heap, on this path only.
func callWith(ctx *fasthttp.RequestCtx, h func(ctx *fasthttp.RequestCtx, u *domain.User, m *signedIn) error, u domain.User) error {
	return h(ctx, &u, nil)
}

// admin wraps a route that needs role admin.
func (s *Server) admin(h userHandler) handler {
	return func(ctx *fasthttp.RequestCtx) error {
		u, err := s.user(ctx)
		if err != nil {
			return err
		}
		if u.Role != engine.RoleAdmin {
			return errNotAdmin
		}
		return h(ctx, u)
	}
}

// internal wraps a route SPEC.md makes public "for internal use": callers inside
// --internal-cidrs pass without a token; anyone else needs an admin ID token.
func (s *Server) internal(h handler) handler {
	return func(ctx *fasthttp.RequestCtx) error {
		if s.isInternal(ctx) {
			return h(ctx)
		}
		if who := principalOf(ctx); who != nil && who.Internal {
			return h(ctx) // checked by the node that received it
		}
		if len(bearer(ctx)) == 0 || s.simOnly { // the sim process verifies no tokens
			return errInternalOnly
		}
		u, err := s.user(ctx)
		if err != nil {
			return err
		}
		if u.Role != engine.RoleAdmin {
			return errInternalOnly
		}
		return h(ctx)
	}
}

// isInternal: the peer address is inside --internal-cidrs. Forwarded-for headers are not
// trusted: a proxy in front must restrict these routes itself.
func (s *Server) isInternal(ctx *fasthttp.RequestCtx) bool {
	addr, ok := netip.AddrFromSlice(ctx.RemoteIP())
	if !ok {
		return false
	}
	addr = addr.Unmap()
	for _, p := range s.cfg.InternalCIDRs {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}
