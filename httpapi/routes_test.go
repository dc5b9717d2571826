package httpapi

import (
	"strings"
	"testing"

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
