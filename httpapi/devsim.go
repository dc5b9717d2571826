package httpapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"github.com/fasthttp/router"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/domain"
)

// The simulated network as its own process (DESIGN.md section 13): `gateway sim` serves the
// /api/dev/sim/* routes with the same handlers as an embedded sim (NewSim), and each node
// started with --sim-url answers its own /api/dev/sim/* by passing the request as it is to
// that process (simProxy), so a dev route added to the sim works through every node without
// more code.

// SimServerConfig configures the HTTP side of `gateway sim`.
type SimServerConfig struct {
	Sim    SimControls
	Logger *slog.Logger
	// Registry: the request metrics are registered here (nil: a registry of its own).
	Registry *prometheus.Registry
	// InternalCIDRs are the addresses allowed on the dev routes: the nodes' (there is no ID
	// token check in the sim process).
	InternalCIDRs []netip.Prefix
	LogRequests   bool
	Version       string
}

// NewSim builds the server of `gateway sim`: the sim's dev routes (exactly those an embedded
// sim has), /healthz and /metrics; nothing of the gateway's API. Handler serves them.
func NewSim(cfg SimServerConfig) (*Server, error) {
	if cfg.Sim == nil {
		return nil, errors.New("httpapi: the sim is required")
	}
	s, err := newServer(Config{Sim: cfg.Sim, Logger: cfg.Logger, Registry: cfg.Registry, InternalCIDRs: cfg.InternalCIDRs,
		LogRequests: cfg.LogRequests, Version: cfg.Version})
	if err != nil {
		return nil, err
	}
	s.simOnly = true
	s.routes()
	return s, nil
}

// simOnlyRoute: in the sim process only the sim's dev routes and the process's own health
// and metrics are served.
func simOnlyRoute(path string) bool {
	return strings.HasPrefix(path, "/api/dev/sim/") || path == "/healthz" || path == "/metrics"
}

// simProxyRoutes serves /api/dev/sim/* by asking the sim process (--sim-url).
func (s *Server) simProxyRoutes() {
	if s.cfg.SimURL == "" {
		return
	}
	s.simClient = &fasthttp.Client{Name: "gateway", MaxConnsPerHost: 256, ReadTimeout: time.Minute, WriteTimeout: time.Minute}
	// Any method, any path: the sim's dev routes (documented as /api/dev/sim/*) as they are.
	s.handle(router.MethodWild, "/api/dev/sim/{path:*}", 0, here, s.internal(s.simProxy))
}

// simProxy passes the request to the sim process as it is (less the caller's credentials,
// which the sim has no use for) and its answer back as it is.
func (s *Server) simProxy(ctx *fasthttp.RequestCtx) error {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	ctx.Request.CopyTo(req)
	req.Header.Del("Authorization")
	req.Header.Del("Cookie")
	req.UseHostHeader = false
	req.SetRequestURI(strings.TrimRight(s.cfg.SimURL, "/") + string(ctx.RequestURI()))
	if err := s.simClient.DoTimeout(req, resp, time.Minute); err != nil {
		return fmt.Errorf("%w: the simulated network (%s) did not answer: %w", domain.ErrUnavailable, s.cfg.SimURL, err)
	}
	ctx.SetStatusCode(resp.StatusCode())
	if ct := resp.Header.ContentType(); len(ct) > 0 {
		ctx.Response.Header.SetContentTypeBytes(ct)
	}
	if ra := resp.Header.Peek("Retry-After"); len(ra) > 0 {
		ctx.Response.Header.SetBytesV("Retry-After", ra)
	}
	ctx.SetBody(resp.Body())
	return nil
}
