package httpapi

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/fasthttp/router"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// hereRoutes are the /api/ routes the receiving node of a cluster answers itself (declared
// here in routes.go): none runs on a partition's engine, which a cluster node does not have
// of its own. Any other /api/ route declared here fails TestEveryRouteDeclaresItsPartition.
var hereRoutes = map[string]bool{
	"GET /api/openapi.json": true, "GET /api/admin/cluster": true, "GET /api/ecom/test": true,
	// The admin lists, read from every partition's records (Cluster.Records).
	"GET /api/admin/apikeys": true, "GET /api/admin/users": true, "GET /api/admin/sessions": true,
	// Live events, from NATS (Cluster.Listen); the dev sign-in; the sim's dev routes.
	"GET /api/client/events/stream": true, "POST /api/dev/token": true,
}

// Every route declares the partition its requests run on in a cluster, beside it in
// routes.go; an /api/ route the receiving node answers is one of hereRoutes.
func TestEveryRouteDeclaresItsPartition(t *testing.T) {
	for _, mode := range []struct {
		name string
		edit func(*Config)
	}{
		{"embedded sim", func(*Config) {}},
		{"sim process", func(c *Config) { c.Sim, c.SimURL = nil, "http://127.0.0.1:9" }},
	} {
		t.Run(mode.name, func(t *testing.T) {
			s := newAPI(t, mode.edit).srv
			n := 0
			for method, paths := range s.router.List() {
				for _, path := range paths {
					route := method + " " + path
					part := s.parts[route]
					switch {
					case part == nil:
						t.Errorf("%s declares no partition", route)
					case part == here && strings.HasPrefix(path, "/api/") && !hereRoutes[route] && !strings.HasPrefix(path, "/api/dev/sim/"):
						t.Errorf("%s is answered by the receiving node of a cluster (here): give it the partition it runs on (routes.go)", route)
					}
					if strings.HasPrefix(path, "/api/") {
						n++
					}
				}
			}
			if n < 50 {
				t.Fatalf("only %d /api/ routes registered", n)
			}
		})
	}
}

// A route registered without a partition stops the server's construction.
func TestRouteWithoutPartitionPanics(t *testing.T) {
	s := newAPI(t).srv
	defer func() {
		if v := recover(); v == nil || !strings.Contains(v.(string), "GET /api/v1/new declares no partition") {
			t.Fatalf("recovered %v", v)
		}
	}()
	s.route("GET", "/api/v1/new", 0, nil, func(*fasthttp.RequestCtx) error { return nil })
}

// dispatch finds a route without parameters by its method and path (static) before the
// router's tree: the router resolves the same requests to the same routes. First on a server
// whose routes overlap (a static path beside a parameter, a catch-all and an optional
// parameter at the same place), then over every route of the gateway's own server without
// parameters, which the router must resolve to that route (its request counter rises).
func TestStaticDispatchIsTheRouters(t *testing.T) {
	const GET, POST, PUT = fasthttp.MethodGet, fasthttp.MethodPost, fasthttp.MethodPut
	metrics, err := newHTTPMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{cfg: Config{BodyLimit: 1 << 20}, log: slog.New(slog.DiscardHandler), router: router.New(), metrics: metrics}
	for _, r := range [][2]string{
		{GET, "/things/{id}"}, {GET, "/things/new"}, {POST, "/things/new"}, {GET, "/files/{path:*}"},
		{GET, "/files/readme"}, {GET, "/opt/{x?}"}, {GET, "/opt/new"}, {GET, "/a/{b}/c"}, {GET, "/a/b/c"},
	} {
		name := r[0] + " " + r[1]
		s.route(r[0], r[1], 0, here, func(ctx *fasthttp.RequestCtx) error { ctx.SetBodyString(name); return nil })
	}
	if len(s.static) != 5 {
		t.Fatalf("%d static routes: %v", len(s.static), s.static)
	}
	for _, req := range [][2]string{
		{GET, "/things/new"}, {POST, "/things/new"}, {GET, "/things/7"}, {GET, "/things/new/"}, {GET, "/Things/new"},
		{GET, "/files/readme"}, {GET, "/files/readme.md"}, {GET, "/files/a/b"}, {GET, "/opt"}, {GET, "/opt/1"}, {GET, "/opt/new"},
		{GET, "/a/b/c"}, {GET, "/a/x/c"}, {PUT, "/things/new"}, {GET, "/nothing"}, {GET, "/things/new?x=1"},
	} {
		answer := func(h fasthttp.RequestHandler) string {
			var ctx fasthttp.RequestCtx
			ctx.Request.Header.SetMethod(req[0])
			ctx.Request.SetRequestURI(req[1])
			h(&ctx)
			return fmt.Sprintf("%d %s %s", ctx.Response.StatusCode(), ctx.Response.Header.Peek("Location"), ctx.Response.Body())
		}
		if got, want := answer(s.dispatch), answer(s.router.Handler); got != want {
			t.Errorf("%s %s: dispatch answered %q, the router %q", req[0], req[1], got, want)
		}
	}

	a := newAPI(t)
	reg := a.srv.cfg.Registry
	count := func(route string) float64 {
		t.Helper()
		fams, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		n := 0.0
		for _, f := range fams {
			if f.GetName() != "gateway_http_requests_total" {
				continue
			}
			for _, m := range f.GetMetric() {
				for _, l := range m.GetLabel() {
					if l.GetName() == "route" && l.GetValue() == route {
						n += m.GetCounter().GetValue()
					}
				}
			}
		}
		return n
	}
	if len(a.srv.static) < 50 {
		t.Fatalf("only %d static routes", len(a.srv.static))
	}
	for route := range a.srv.static {
		method, path, _ := strings.Cut(route, " ")
		if strings.HasSuffix(path, "/stream") {
			continue // answers as a stream, from another goroutine
		}
		before := count(route)
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod(method)
		ctx.Request.SetRequestURI(path)
		a.srv.router.Handler(&ctx)
		if after := count(route); after != before+1 {
			t.Errorf("%s: the router did not answer it as that route (%v requests counted, %v before)", route, after, before)
		}
	}
}

// The probes' routes answer HEAD as GET, without a body (RFC 9110): uptime checkers send it.
func TestHealthAnswersHEAD(t *testing.T) {
	a := newAPI(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		get := a.do(t, "GET", path, "", nil, nil)
		head := a.do(t, "HEAD", path, "", nil, nil)
		if head.status != get.status || len(head.body) != 0 {
			t.Errorf("HEAD %s: %d with %d bytes, want %d with none", path, head.status, len(head.body), get.status)
		}
	}
}
