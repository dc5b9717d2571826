// Package httpapi is the gateway's HTTP interface: fasthttp + fasthttp/router, JSON through
// goccy/go-json, authentication (API keys, ID tokens), the error model of DESIGN.md section 4,
// metrics and the OpenAPI document. A handler parses, authorizes, asks the engine and writes the
// response, or returns an error that route answers (errors.go); it never touches storage.
// Request bodies are read within each route's limit before routing (body.go). Its handlers
// are tested in place on an in-memory engine with golden bodies (api_test.go,
// handlers_test.go), every response checked against the OpenAPI document (openapitest).
// Imports: domain, engine, identity, media, web, internal/jsonenc, and cluster (the forwarding
// envelope a cluster node passes on).
package httpapi

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/fasthttp/router"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/identity"
)

// TokenVerifier verifies ID tokens (identity.Verifier in both auth modes).
type TokenVerifier interface {
	// VerifyBytesAt verifies a token held in a request's header: it reads the bytes during
	// the call and keeps nothing of them. at is the server's clock reading as the request
	// began (zero: the verifier reads its own clock).
	VerifyBytesAt(ctx context.Context, raw []byte, at time.Time) (identity.Claims, error)
	// VerifyBytesMemo is VerifyBytesAt with the cached token's Memo (nil when it was not
	// cached), where the server keeps the caller's profile (Server.user).
	VerifyBytesMemo(ctx context.Context, raw []byte, at time.Time) (identity.Claims, *identity.Memo, error)
	// CachedMemo is the cached token's Memo and claims (the cache's copy: read only), nil when
	// the cache does not answer it (then VerifyBytesMemo verifies it).
	CachedMemo(raw []byte, at time.Time) (*identity.Memo, *identity.Claims)
}

// Interface guards.
var _ TokenVerifier = (*identity.Verifier)(nil)

// Config is what the HTTP layer is built from.
type Config struct {
	// Engine is the core (a single node). A cluster node has one per partition it owns and
	// gives Cluster instead, with Stats and StoreStats over all of them.
	Engine   *engine.Engine
	Verifier TokenVerifier
	// DevRoles: the verifier is the embedded dev issuer, whose role claim is honoured.
	DevRoles      bool
	Logger        *slog.Logger
	Registry      *prometheus.Registry // metrics are registered here and served at /metrics
	InternalCIDRs []netip.Prefix
	// BodyLimit is the default request body cap (1 MiB); MaxBodyLimit is the largest any route
	// allows (media routes), which is what the server reads at most.
	BodyLimit    int
	MaxBodyLimit int
	// LogRequests writes one access-log line per request (info level): to AccessLog.Output
	// when it is set (queued, written in batches off the request path), else through Logger.
	LogRequests bool
	AccessLog   AccessLogConfig
	Version     string
	// WriteTimeout bounds writing a response (a sync bulk send needs a long one).
	WriteTimeout time.Duration
	// Sim is the simulated network, whose dev controls are served when it is set.
	Sim SimControls
	// SimURL is the sim process's address (--sim-url): /api/dev/sim/* is passed to it.
	SimURL string
	// BulkMaxRecipients is the most numbers one bulk request may carry (default 1000).
	BulkMaxRecipients int
	// Media configures media intake (URLs and data URIs) for the send routes.
	Media MediaOptions
	// AudioCheck, when set, refuses audio the network cannot send (WhatsApp: a voice note that
	// is not Ogg/Opus when no --ffmpeg converts it) with 415 at accept, not as a failed send.
	AudioCheck func(data []byte, mime string, ptt bool) error
	// Dashboard is the embedded web UI and its sign-in (see dashboard.go).
	Dashboard DashboardConfig
	// Webhooks is the events-out facet; its routes are served when it is set.
	Webhooks WebhookService
	// ReadyChecks are the dependencies /readyz reports (storage, identity provider).
	ReadyChecks []ReadyCheck
	// Storage is nil while storage accepts writes, else why not (persist.Badger.Health): a
	// 503 the core reports as unavailable is then answered as storage_unavailable.
	Storage func() error
	// CORSOrigins are the browser origins allowed to call the API ("*": any); none: no CORS.
	CORSOrigins []string
	// Cluster makes the server a node of a cluster (cluster.go); nil: a single node.
	Cluster Cluster
	// Stats and StoreStats are the core's counters for /metrics (default: Engine's).
	Stats      func() engine.Stats
	StoreStats func() engine.StoreStats
}

// Server is the gateway's HTTP server.
type Server struct {
	cfg     Config
	log     *slog.Logger
	eng     *engine.Engine
	router  *router.Router
	srv     *fasthttp.Server
	metrics *httpMetrics
	ecom    *ecomMetrics
	media   *mediaFetcher
	ready   atomic.Bool
	reqPfx  string
	// base is the parent of every request's context, cancelled once the server has shut down.
	base       context.Context
	cancelBase context.CancelFunc
	// limits holds the body limits of routes other than the default, by "METHOD /path";
	// written only while routes are registered. minLimit is the smallest of them and the
	// default.
	limits   map[string]int
	minLimit int
	// parts holds each route's partition (routes.go), by "METHOD /path".
	parts map[string]*partitionOf
	// static holds the handlers of the routes without parameters in their path, by
	// "METHOD /path": dispatch finds them with one map lookup, before the router's tree.
	static map[string]fasthttp.RequestHandler
	// guesses rate-limits failed attempts on the public routes that take guesses.
	guesses *guessLimits
	// signins limits ID tokens that do not verify, per client address.
	signins *guessLimits
	// refusals rate-limits the log lines of 503s.
	refusals refusalLog
	// simOnly: the server of `gateway sim` (NewSim), which serves only the sim's dev routes.
	simOnly bool
	// simClient asks the sim process (--sim-url).
	simClient *fasthttp.Client
	// streams is closed when the server shuts down: open event streams end (live.go), so the
	// shutdown does not wait for them.
	streams      chan struct{}
	closeStreams sync.Once
	fresh        sync.Map // connections that sent nothing yet (lingerListener)
	// access is the batched access log (nil: none, or through the logger).
	access *accessLog
	// slowSends reports v1 sends whose handler took long (slowsend.go).
	slowSends *slowSends
}

const (
	ctxRoute = "route"
	ctxGrant = "api_key_grant"
)

// grantBy is what a refund of an API-key call needs (ctxGrant): its key, the end of the day it
// was counted in, and the engine that counted it. Not the grant whole: a grant is 224 bytes
// with ten pointers, and copying it into the pooled grantBy and clearing it after was a third
// of apiKey's own time in the send's profile (bench/README.md, issue 32's eighteenth pass,
// branch http11).
type grantBy struct {
	keyID string
	reset time.Time
	eng   *engine.Engine
}

// grants pools the grantBy each API-key call leaves in its request's user values (a grant
// boxed there allocated on every v1 call); route puts it back once the request is answered.
var grants = sync.Pool{New: func() any { return new(grantBy) }}

// New builds the server and its routes.
func New(cfg Config) (*Server, error) {
	if (cfg.Engine == nil && cfg.Cluster == nil) || cfg.Verifier == nil {
		return nil, errors.New("httpapi: engine (or cluster) and verifier are required")
	}
	if cfg.Stats == nil {
		cfg.Stats = cfg.Engine.Stats
	}
	if cfg.StoreStats == nil {
		cfg.StoreStats = cfg.Engine.Stores.Stats
	}
	s, err := newServer(cfg)
	if err != nil {
		return nil, err
	}
	cfg = s.cfg
	s.eng, s.streams = cfg.Engine, make(chan struct{})
	if s.ecom, err = newEcomMetrics(cfg.Registry, cfg.StoreStats); err != nil {
		return nil, err
	}
	if s.slowSends, err = newSlowSends(cfg.Registry, s.log); err != nil {
		return nil, err
	}
	for _, c := range engineCollectors(cfg.Stats) {
		if err := cfg.Registry.Register(c); err != nil {
			return nil, err
		}
	}
	switch {
	case cfg.LogRequests && cfg.AccessLog.Output != nil:
		s.access = newAccessLog(cfg.AccessLog, s.reqPfx)
	case cfg.LogRequests && !cfg.Logger.Enabled(context.Background(), slog.LevelInfo):
		s.cfg.LogRequests = false // the logger would drop every line
	}
	s.media = newMediaFetcher(cfg.Media)
	s.signins = newGuessLimitsOf(signinBurst, signinRate)
	s.routes()
	s.simProxyRoutes()
	s.srv = &fasthttp.Server{
		Handler:               s.Handler(),
		Name:                  "gateway",
		MaxRequestBodySize:    cfg.MaxBodyLimit,
		StreamRequestBody:     true, // read by readBody, within each route's limit
		HeaderReceived:        s.headerReceived,
		ReadTimeout:           30 * time.Second,
		WriteTimeout:          cfg.WriteTimeout,
		IdleTimeout:           2 * time.Minute,
		NoDefaultServerHeader: true,
		NoDefaultContentType:  true,
		ErrorHandler:          s.transportError,
		Logger:                fasthttpLogger{s.log},
	}
	return s, nil
}

// newServer is what New and NewSim (the sim process's server) share: cfg's defaults, request
// ids, the base context, the request metrics, the guess limits and the router's own answers.
// Routes are the caller's.
func newServer(cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.BodyLimit <= 0 {
		cfg.BodyLimit = 1 << 20
	}
	if cfg.BulkMaxRecipients <= 0 {
		cfg.BulkMaxRecipients = 1000
	}
	if cfg.Media.MaxBytes <= 0 {
		cfg.Media.MaxBytes = 16 << 20
	}
	cfg.MaxBodyLimit = max(cfg.MaxBodyLimit, cfg.BodyLimit, mediaBodyLimit(cfg.Media.MaxBytes))
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 2 * time.Hour
	}
	var pfx [4]byte
	_, _ = rand.Read(pfx[:])
	s := &Server{cfg: cfg, log: cfg.Logger, router: router.New(), reqPfx: hex.EncodeToString(pfx[:]), minLimit: cfg.BodyLimit}
	s.base, s.cancelBase = context.WithCancel(context.Background())
	var err error
	if s.metrics, err = newHTTPMetrics(cfg.Registry); err != nil {
		return nil, err
	}
	s.guesses = newGuessLimits()
	s.router.NotFound = func(ctx *fasthttp.RequestCtx) { s.requestID(ctx); s.writeError(ctx, errNotFound) }
	s.router.MethodNotAllowed = func(ctx *fasthttp.RequestCtx) { s.requestID(ctx); s.writeError(ctx, errMethod) }
	s.router.PanicHandler = nil // recovery is ours: see wrap
	return s, nil
}

// Handler is the full request handler (tests and benchmarks may serve it themselves): the
// body is read first, within its route's limit (body.go), then routed.
func (s *Server) Handler() fasthttp.RequestHandler {
	h := s.dispatch
	if len(s.cfg.CORSOrigins) > 0 {
		h = s.cors(h)
	}
	return func(ctx *fasthttp.RequestCtx) {
		if err := s.readBody(ctx); err != nil {
			s.refuseUnread(ctx, err)
			return
		}
		h(ctx)
	}
}

// dispatch routes a request: a route without parameters by its method and path in one map
// lookup (static), else through the router. The router would find the same handler: a path
// equal to a route's without parameters is that route's, before any route with parameters or a
// catch-all (fasthttp/router's order; TestStaticDispatchIsTheRouters). Its tree walk compared
// the path against each level's children: about 0.1 µs a request in process, 0.3 under load
// (bench/README.md, eighth pass).
func (s *Server) dispatch(ctx *fasthttp.RequestCtx) {
	if h := s.staticHandler(ctx); h != nil {
		h(ctx)
		return
	}
	s.router.Handler(ctx)
}

// staticHandler is the handler of the route without parameters that the request's method and
// path name (the path as the router reads it: PathOriginal), or nil.
func (s *Server) staticHandler(ctx *fasthttp.RequestCtx) fasthttp.RequestHandler {
	method, path := ctx.Request.Header.Method(), ctx.Request.URI().PathOriginal()
	var buf [128]byte
	if len(method)+1+len(path) > len(buf) {
		return nil // longer than any route's
	}
	key := append(append(append(buf[:0], method...), ' '), path...)
	return s.static[string(key)] // no allocation: a lookup by the bytes
}

// Serve accepts connections on ln until Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	s.ready.Store(true)
	return s.srv.Serve(lingerListener{Listener: ln, fresh: &s.fresh})
}

// Shutdown stops accepting, then waits for in-flight requests to finish, within ctx.
func (s *Server) Shutdown(ctx context.Context) error {
	s.ready.Store(false)
	s.closeStreams.Do(func() { close(s.streams) })
	go func() { // after fasthttp has stopped accepting; again in case one came meanwhile
		for range 2 {
			time.Sleep(50 * time.Millisecond)
			closeFresh(&s.fresh)
		}
	}()
	err := s.srv.ShutdownWithContext(ctx)
	s.cancelBase()
	if s.access != nil {
		s.access.close() // the last requests' lines are written
	}
	return err
}

// reqContext is the context a handler passes to the engine, media and identity: it ends when
// the server has shut down (handlers still running then stop waiting). It carries the request id
// for logs. fasthttp's RequestCtx is itself a context, but its Done races with the server's
// shutdown (fasthttp v1.74.0 reads the server's done channel unsynchronised), so it is not
// passed down.
//
// A request another node of a cluster forwarded here runs under the forwarding's context
// instead (it ends at the route's wait, or when this node leaves the cluster): this node's HTTP
// server shuts down before it hands its partitions over, and what it runs for the others must
// finish meanwhile.
func (s *Server) reqContext(ctx *fasthttp.RequestCtx) context.Context {
	base := s.base
	if fc, ok := ctx.UserValue(ctxForwarded).(context.Context); ok {
		base = fc
	}
	return base
}

// handler is a route's handler, like caddy's Handler: it writes its response and returns nil,
// or returns an error without writing a body (route drops any it began; headers it set, such
// as X-RateLimit-*, stay), which route answers in the error model (errors.go).
type handler func(ctx *fasthttp.RequestCtx) error

// route registers a handler wrapped with recovery, request id, body limit, metrics and the
// access log; limit 0 means the default body limit. part is the partition the request runs on
// in a cluster (cluster.go; every route declares one). It is the one place where a handler's
// error becomes its response (writeError).
func (s *Server) route(method, path string, limit int, part *partitionOf, h handler) {
	if s.simOnly && !simOnlyRoute(path) {
		return
	}
	s.handle(method, path, limit, part, h)
}

// handle is route without the sim process's filter; routes that openapi.json documents under
// other paths (the --sim-url pass-through of the sim's documented dev routes) use it directly.
func (s *Server) handle(method, path string, limit int, part *partitionOf, h handler) {
	if part == nil {
		panic("httpapi: route " + method + " " + path + " declares no partition (routes.go)")
	}
	if s.parts == nil {
		s.parts = map[string]*partitionOf{}
	}
	s.parts[method+" "+path] = part
	h = s.clustered(method, path, part, h)
	if limit <= 0 {
		limit = s.cfg.BodyLimit
	}
	if limit != s.cfg.BodyLimit {
		if s.limits == nil {
			s.limits = map[string]int{}
		}
		s.limits[method+" "+path] = limit
		s.minLimit = min(s.minLimit, limit)
	}
	m := s.metrics.routes.route(method + " " + path)
	logRoute := newAccessRoute(method, path)
	s.handleRoute(method, path, func(ctx *fasthttp.RequestCtx) {
		// fasthttp's own clock reading as it called the handler (time.Now per request is
		// not free: this is the hottest path).
		start := ctx.Time()
		if start.IsZero() { // a RequestCtx not served by fasthttp's server (a benchmark)
			start = time.Now()
		}
		clientID := s.markNew(ctx)
		defer func() {
			if v := recover(); v != nil {
				s.reqLog(ctx).Error("panic in handler", "route", path, "panic", fmt.Sprint(v), "stack", string(debug.Stack()))
				ctx.Response.Reset()
				s.markRequest(ctx)
				s.writeError(ctx, fmt.Errorf("panic: %v", v))
			}
			status := ctx.Response.StatusCode()
			took := time.Since(start)
			m.observe(ctx.ConnID(), status, took)
			switch {
			case s.access != nil:
				r := accessRecord{at: start.Add(took), seq: ctx.ID(), route: logRoute, status: status, duration: took, remoteText: remoteText(ctx)}
				if r.remoteText == "" {
					r.remote = ctx.RemoteIP()
				}
				if clientID != nil {
					r.id = string(clientID)
				}
				s.access.add(ctx.ConnID(), r)
			case s.cfg.LogRequests:
				s.log.Info("request", "request_id", s.requestID(ctx), "method", method, "route", path,
					"status", status, "duration_ms", float64(took.Microseconds())/1000, "remote", ctx.RemoteIP().String())
			}
			if g, ok := ctx.UserValue(ctxGrant).(*grantBy); ok {
				ctx.RemoveUserValue(ctxGrant)
				*g = grantBy{}
				grants.Put(g)
			}
		}()
		var err error
		if len(ctx.Request.Body()) > limit {
			err = fmt.Errorf("%w: the limit is %d bytes", errBodyTooLarge, limit)
		} else {
			err = h(ctx)
		}
		if err != nil {
			ctx.Response.ResetBody()
			s.writeError(ctx, err)
			if g, ok := ctx.UserValue(ctxGrant).(*grantBy); ok && ctx.Response.StatusCode() == fasthttp.StatusServiceUnavailable {
				// The gateway could not serve the call: it does not count against the key's day.
				g.eng.Keys.Refund(domain.Grant{Key: domain.APIKey{ID: g.keyID}, Reset: g.reset})
			}
		}
	})
}

// handleRoute registers a route's whole handler with the router, and with static when its path
// has no parameters.
func (s *Server) handleRoute(method, path string, h fasthttp.RequestHandler) {
	s.router.Handle(method, path, h)
	if strings.Contains(path, "{") || len(method)+1+len(path) > 128 {
		return
	}
	if s.static == nil {
		s.static = map[string]fasthttp.RequestHandler{}
	}
	s.static[method+" "+path] = h
}

// requestID is the request's id: the caller's X-Request-Id when it is sane, else this server's
// prefix and the request's number (ctx.ID(): unique in this process); it is echoed in the
// response (markRequest).
func (s *Server) requestID(ctx *fasthttp.RequestCtx) string {
	s.markRequest(ctx)
	return string(ctx.Response.Header.PeekCanonical(requestIDKey))
}

const requestIDHeader = "X-Request-Id"

// Header names as fasthttp keeps them (normalized: it normalizes what it parses and what is
// set), read and set with the Canonical methods, which do not copy and normalize the name per
// call as Peek and Set do: the hot routes read them on every request.
var (
	requestIDKey      = []byte(requestIDHeader)
	hdrAuthorization  = []byte(fasthttp.HeaderAuthorization)
	hdrAPIKey         = []byte("X-Api-Key")
	hdrIdempotencyKey = []byte("Idempotency-Key")
	hdrPrefer         = []byte("Prefer")
)

// markRequest echoes the request's id in the response unless it is there already, without an
// allocation. It stores nothing: the id follows from the request.
func (s *Server) markRequest(ctx *fasthttp.RequestCtx) {
	if len(ctx.Response.Header.PeekCanonical(requestIDKey)) > 0 {
		return
	}
	s.markNew(ctx)
}

// markNew echoes the request's id in a response that has none yet (a route's, as it starts),
// and returns the caller's own id (nil: the server made one).
func (s *Server) markNew(ctx *fasthttp.RequestCtx) []byte {
	if id := clientRequestID(ctx); id != nil {
		ctx.Response.Header.SetCanonical(requestIDKey, id)
		return id
	}
	var buf [48]byte
	ctx.Response.Header.SetCanonical(requestIDKey, appendRequestID(buf[:0], s.reqPfx, ctx.ID()))
	return nil
}

// clientRequestID is the caller's X-Request-Id when it is sane (nil otherwise).
func clientRequestID(ctx *fasthttp.RequestCtx) []byte {
	id := ctx.Request.Header.PeekCanonical(requestIDKey)
	if len(id) == 0 || len(id) > 128 || !printable(id) {
		return nil
	}
	return id
}

// appendRequestID appends a request id this server makes: its prefix and the request's number
// in base 36 (appendBase36).
func appendRequestID(b []byte, pfx string, n uint64) []byte {
	return appendBase36(append(append(b, pfx...), '-'), n)
}

// appendBase36 appends n as strconv.AppendUint(b, n, 36) does. A request's number
// (fasthttp's ctx.ID: the connection's number above bit 32) has 7 to 13 digits, and AppendUint
// divides by a base it is given, one 64-bit division per digit; by the constant the compiler
// multiplies instead (TestAppendBase36 compares both): each request formats its id twice, for
// its header and for its access-log line.
func appendBase36(b []byte, n uint64) []byte {
	const digits = "0123456789abcdefghijklmnopqrstuvwxyz"
	var buf [13]byte // 36^13 > 2^64
	i := len(buf)
	for n >= 36 {
		q := n / 36
		i--
		buf[i] = digits[n-q*36]
		n = q
	}
	i--
	buf[i] = digits[n]
	return append(b, buf[i:]...)
}

// reqLog is the logger of one request: every line carries its request id.
func (s *Server) reqLog(ctx *fasthttp.RequestCtx) *slog.Logger {
	return s.log.With("request_id", s.requestID(ctx))
}

// headerReceived gives each request its route's body limit once its headers are read. A
// Content-Length over it is refused from the header alone: the length is zeroed, so fasthttp
// reads none of the body, and the request is marked for readBody to answer 413 (a client's own
// copy of the mark is removed first). Otherwise the limit bounds what fasthttp reads ahead of a
// streamed body, and readBody enforces it. Routes with parameters in their path use the
// default.
//
// A request without a body, or with a Content-Length within the smallest limit any route has
// (minLimit), is within its route's limit whichever route it is, and fasthttp reads such a body
// the same under any limit at least its length (min(length, 8 KiB) ahead): its route's limit is
// not looked up (a map lookup by method and path, about 0.03 µs a request in process).
func (s *Server) headerReceived(h *fasthttp.RequestHeader) fasthttp.RequestConfig {
	if h.PeekCanonical(bodyRefusedKey) != nil {
		h.Del(bodyRefusedHeader)
	}
	if n := h.ContentLength(); n == -2 || (n >= 0 && n <= s.minLimit) {
		return fasthttp.RequestConfig{MaxRequestBodySize: s.minLimit}
	}
	limit := s.bodyLimit(h)
	if h.ContentLength() > limit {
		h.Set(bodyRefusedHeader, "1")
		h.SetContentLength(0)
	}
	return fasthttp.RequestConfig{MaxRequestBodySize: limit}
}

func (s *Server) bodyLimit(h *fasthttp.RequestHeader) int {
	if len(s.limits) == 0 {
		return s.cfg.BodyLimit
	}
	uri := h.RequestURI()
	if i := bytes.IndexByte(uri, '?'); i >= 0 {
		uri = uri[:i]
	}
	var buf [256]byte
	key := append(append(append(buf[:0], h.Method()...), ' '), uri...)
	if l, ok := s.limits[string(key)]; ok { // no allocation: a lookup by the bytes
		return l
	}
	return s.cfg.BodyLimit
}

// transportError answers what fasthttp rejects before routing (body over the route's limit,
// malformed HTTP) in the same JSON error model.
func (s *Server) transportError(ctx *fasthttp.RequestCtx, err error) {
	s.requestID(ctx)
	if lc, ok := ctx.Conn().(*lingerConn); ok {
		lc.linger.Store(true) // what follows on the connection is unread: let the client read this
	}
	if errors.Is(err, fasthttp.ErrBodyTooLarge) {
		writeJSON(ctx, fasthttp.StatusRequestEntityTooLarge, errorBody{Error: fmt.Sprintf("request body too large: the limit is %d bytes", s.bodyLimit(&ctx.Request.Header)), Code: "body_too_large"})
		return
	}
	writeJSON(ctx, fasthttp.StatusBadRequest, errorBody{Error: "malformed HTTP request", Code: "bad_request"})
}

func printable[T string | []byte](s T) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

type fasthttpLogger struct{ log *slog.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	l.log.Warn(fmt.Sprintf(format, args...), "component", "fasthttp")
}
