package httpapi

import (
	"net/url"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/identity"
	"github.com/gateway/gateway/web"
)

// The dashboard (DESIGN.md section 11): the embedded web UI at /dashboard/, the API reference
// at /docs, the sign-in configuration the page reads, and the dev sign-in that mints a token.

// TokenMinter mints dev ID tokens (the embedded dev issuer, as `gateway token` uses it).
type TokenMinter interface {
	Mint(r identity.TokenRequest) (string, error)
}

// Interface guards.
var _ TokenMinter = (*identity.Issuer)(nil)

// DashboardConfig is what the dashboard needs to know; a nil Site serves no dashboard.
type DashboardConfig struct {
	Site *web.Site
	// Auth is the gateway's ID-token mode: "dev" or "oidc".
	Auth string
	// DevIssuer mints tokens for the dev sign-in form (dev auth only).
	DevIssuer TokenMinter
	// OIDCIssuer and ClientID drive the authorization-code flow with PKCE in the browser.
	OIDCIssuer, ClientID string
	// FirebaseAPIKey turns on Firebase email and password sign-in, against FirebaseAuthURL
	// (the Identity Toolkit's base URL; "" is Google's; the Auth emulator's or a test double's).
	FirebaseAPIKey, FirebaseAuthURL string
	// Endpoints are the issuer's sign-in endpoints from its discovery document, as the
	// identity provider's background loop last read it (identity.Verifier.Endpoints); ok is
	// false until it has. A page load never waits for the provider.
	Endpoints func() (e identity.Endpoints, ok bool)
}

// firebaseAuthURL is the Identity Toolkit the page calls for Firebase sign-in.
const firebaseAuthURL = "https://identitytoolkit.googleapis.com"

func (s *Server) dashboardRoutes() {
	const GET, POST = fasthttp.MethodGet, fasthttp.MethodPost
	s.route(GET, "/api/client/usage", 0, byCaller, s.client(s.clientUsage))
	if s.cfg.Dashboard.Site == nil {
		return
	}
	s.route(GET, "/", 0, here, s.toDashboard)
	s.route(GET, "/dashboard/", 0, here, s.dashboardPage)
	s.route(GET, "/dashboard/connect-store/success", 0, here, s.dashboardPage)
	s.route(GET, "/dashboard/connect-store/error", 0, here, s.dashboardPage)
	s.route(GET, "/dashboard/config.json", 0, here, s.dashboardConfig)
	s.route(GET, "/dashboard/v/{version}/{file}", 0, here, s.dashboardAsset)
	s.route(GET, "/docs", 0, here, s.docsPage)
	if s.cfg.Dashboard.Auth == "dev" && s.cfg.Dashboard.DevIssuer != nil {
		s.route(POST, "/api/dev/token", 0, here, s.devToken)
	}
}

func (s *Server) toDashboard(ctx *fasthttp.RequestCtx) error {
	ctx.Response.Header.Set("Location", "/dashboard/")
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.SetStatusCode(fasthttp.StatusFound)
	return nil
}

func (s *Server) dashboardPage(ctx *fasthttp.RequestCtx) error {
	s.pageHeaders(ctx)
	s.cfg.Dashboard.Site.Serve(ctx, web.PageIndex, false)
	return nil
}

func (s *Server) docsPage(ctx *fasthttp.RequestCtx) error {
	s.pageHeaders(ctx)
	s.cfg.Dashboard.Site.Serve(ctx, web.PageDocs, false)
	return nil
}

func (s *Server) dashboardAsset(ctx *fasthttp.RequestCtx) error {
	site := s.cfg.Dashboard.Site
	name, _ := ctx.UserValue("file").(string)
	if strings.HasSuffix(name, ".html") || !site.Has(name) {
		return errNotFound
	}
	s.pageHeaders(ctx)
	// An old page may still ask for its version's assets: serve the current file, uncached.
	site.Serve(ctx, name, ctx.UserValue("version") == site.Version())
	return nil
}

// pageHeaders sets the security headers of every dashboard response. The content-security
// policy allows nothing but this origin, the QR code's data: image, and the identity
// provider's token endpoint the sign-in calls.
func (s *Server) pageHeaders(ctx *fasthttp.RequestCtx) {
	connect := "'self'"
	if extra := s.signInOrigins(); extra != "" {
		connect += " " + extra
	}
	h := &ctx.Response.Header
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "+
		"connect-src "+connect+"; form-action 'self'; base-uri 'none'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
}

// signInOrigins are the identity provider's origins the page calls (none in dev auth): the
// token endpoint's, or the issuer's until discovery has answered.
func (s *Server) signInOrigins() string {
	d := s.cfg.Dashboard
	var out []string
	if d.FirebaseAPIKey != "" {
		out = append(out, origin(s.firebaseAuthURL()))
	}
	if d.Auth == "oidc" && d.ClientID != "" {
		o := origin(d.OIDCIssuer)
		if e, ok := s.endpoints(); ok {
			o = origin(e.Token)
		}
		if o != "" {
			out = append(out, o)
		}
	}
	return strings.Join(out, " ")
}

func origin(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// endpoints are the issuer's sign-in endpoints, if discovery has answered.
func (s *Server) endpoints() (identity.Endpoints, bool) {
	if f := s.cfg.Dashboard.Endpoints; f != nil {
		return f()
	}
	return identity.Endpoints{}, false
}

type dashboardOIDC struct {
	Issuer                string `json:"issuer"`
	ClientID              string `json:"clientId"`
	AuthorizationEndpoint string `json:"authorizationEndpoint,omitempty"`
	TokenEndpoint         string `json:"tokenEndpoint,omitempty"`
	Error                 string `json:"error,omitempty"`
}

type dashboardFirebase struct {
	APIKey  string `json:"apiKey"`
	AuthURL string `json:"authUrl"`
}

func (s *Server) firebaseAuthURL() string {
	if u := s.cfg.Dashboard.FirebaseAuthURL; u != "" {
		return strings.TrimSuffix(u, "/")
	}
	return firebaseAuthURL
}

type dashboardConfigJSON struct {
	Auth      string             `json:"auth"`
	DevSignIn bool               `json:"devSignIn"`
	OIDC      *dashboardOIDC     `json:"oidc"`
	Firebase  *dashboardFirebase `json:"firebase"`
	Version   string             `json:"version"`
	// Cluster: a node of a cluster (the admin screens add the cluster's).
	Cluster bool `json:"cluster,omitempty"`
}

// dashboardConfig is GET /dashboard/config.json: how this gateway signs users in.
func (s *Server) dashboardConfig(ctx *fasthttp.RequestCtx) error {
	d := s.cfg.Dashboard
	out := dashboardConfigJSON{Auth: d.Auth, Version: s.cfg.Version, Cluster: s.cfg.Cluster != nil,
		DevSignIn: d.Auth == "dev" && d.DevIssuer != nil && s.isInternal(ctx)}
	if d.Auth == "oidc" && d.ClientID != "" {
		o := &dashboardOIDC{Issuer: d.OIDCIssuer, ClientID: d.ClientID}
		if e, ok := s.endpoints(); ok {
			o.AuthorizationEndpoint, o.TokenEndpoint = e.Authorization, e.Token
		} else {
			// The provider has not answered discovery yet (its outage is logged once by the
			// identity package): the page says so and the user tries again.
			o.Error = "the identity provider cannot be reached; try again in a moment"
		}
		out.OIDC = o
	}
	if d.FirebaseAPIKey != "" {
		out.Firebase = &dashboardFirebase{APIKey: d.FirebaseAPIKey, AuthURL: s.firebaseAuthURL()}
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}

type devTokenRequest struct {
	UID        *string `json:"uid"`
	Role       string  `json:"role"`
	Name       string  `json:"name"`
	Email      string  `json:"email"`
	TTLSeconds int     `json:"ttlSeconds"`
}

type devTokenJSON struct {
	Success   bool      `json:"success"`
	Token     string    `json:"token"`
	ExpiresAt timestamp `json:"expiresAt"`
}

// devToken is POST /api/dev/token: the dev sign-in form's token, minted by the same issuer as
// `gateway token`. Served with --auth dev only, and only to --internal-cidrs.
func (s *Server) devToken(ctx *fasthttp.RequestCtx) error {
	if !s.isInternal(ctx) {
		return errDevSignInInternal
	}
	var req devTokenRequest
	if err := bind(ctx, &req, need("uid", &req.UID)); err != nil {
		return err
	}
	uid := strings.TrimSpace(*req.UID)
	switch {
	case uid == "":
		return badInput("validation_failed", "uid must not be empty")
	case req.Role != "" && req.Role != engine.RoleClient && req.Role != engine.RoleAdmin:
		return badInput("validation_failed", "role must be client or admin")
	case req.TTLSeconds < 0 || req.TTLSeconds > 86400:
		return badInput("validation_failed", "ttlSeconds must be from 0 to 86400")
	}
	ttl := time.Duration(req.TTLSeconds) * time.Second
	if ttl == 0 {
		ttl = time.Hour
	}
	tok, err := s.cfg.Dashboard.DevIssuer.Mint(identity.TokenRequest{UID: uid, Role: req.Role, Name: req.Name, Email: req.Email, TTL: ttl})
	if err != nil {
		return badInput("validation_failed", "%s", err.Error())
	}
	ctx.Response.Header.Set("Cache-Control", "no-store")
	writeJSON(ctx, fasthttp.StatusOK, devTokenJSON{Success: true, Token: tok, ExpiresAt: timestamp(time.Now().Add(ttl))})
	return nil
}
