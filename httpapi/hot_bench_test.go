package httpapi

import (
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/internal/cputime"
)

// BenchmarkHotRoutes is the hot routes' own work, in process: the whole handler (routing,
// request id, metrics, the access log's record, authentication, the route) against a handler
// that only writes the same answer (bare), on a RequestCtx reused as fasthttp reuses it (no
// network: what is left is the gateway's own CPU per request, cpu-ns/op from the process's CPU
// time, which a shared machine does not inflate as it does ns/op). The load test measures the
// same routes with the sockets (bench/README.md).
//
//	go test -run X -bench HotRoutes -benchtime 200000x ./httpapi
//	go test -run X -bench HotRoutes/send/gateway -benchtime 50000x -cpuprofile cpu.prof ./httpapi
func BenchmarkHotRoutes(b *testing.B) {
	a, raw, tok := hotFixture(b)
	// A daily cap, so its counting code and its X-RateLimit-* headers run as in the load test
	// (whose plan caps at 10^9): 100,000 calls a day, over which the loop below fails.
	if r := a.do(b, "PATCH", "/api/admin/users", "root", nil, map[string]any{"id": "alice", "plan": "business"}); r.status != 200 {
		b.Fatalf("plan: %d %s", r.status, r.body)
	}
	cases := []struct {
		name, method, path, auth string
		body                     string
	}{
		{"validate", "POST", "/api/admin/apikeys/validate", "", `{"rawKey":"` + raw + `"}`},
		{"status", "GET", "/api/client/status", "Bearer " + tok, ""},
		// The v1 send: the route's work and the engine's accept (in-memory records, the sim);
		// its profile tells the HTTP layer's share (go test -cpuprofile).
		{"send", "POST", "/api/v1/messages/send", "Bearer " + raw, `{"phone":"15550001234","message":"hello from the bench"}`},
	}
	h := a.srv.Handler()
	for _, c := range cases {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod(c.method)
		ctx.Request.SetRequestURI(c.path)
		if c.auth != "" {
			ctx.Request.Header.Set("Authorization", c.auth)
		}
		if c.body != "" {
			ctx.Request.SetBodyString(c.body)
		}
		h(&ctx)
		if ctx.Response.StatusCode() != 200 {
			b.Fatalf("%s: %d %s", c.name, ctx.Response.StatusCode(), ctx.Response.Body())
		}
		answer := append([]byte(nil), ctx.Response.Body()...)
		b.Run(c.name+"/gateway", func(b *testing.B) {
			b.ReportAllocs()
			start := cputime.Process()
			for b.Loop() {
				ctx.Response.Reset()
				h(&ctx)
				if ctx.Response.StatusCode() != 200 {
					b.Fatalf("%s: %d %s", c.name, ctx.Response.StatusCode(), ctx.Response.Body())
				}
			}
			b.ReportMetric(float64((cputime.Process()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
		b.Run(c.name+"/bare", func(b *testing.B) {
			b.ReportAllocs()
			start := cputime.Process()
			for b.Loop() {
				ctx.Response.Reset()
				ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
				ctx.Response.SetBody(answer)
			}
			b.ReportMetric(float64((cputime.Process()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// hotFixture is the hot routes' server (the access log on, written nowhere) with alice signed
// in, her API key (raw), her ID token and her session linked.
func hotFixture(b testing.TB) (a *api, raw, tok string) {
	a = newAPI(b, func(c *Config) { c.LogRequests = true; c.AccessLog = AccessLogConfig{Output: discard{}} })
	a.do(b, "GET", "/api/client/apikeys", "alice", nil, nil) // alice signs in
	r := a.do(b, "POST", "/api/admin/apikeys", "root", nil, map[string]any{"userId": "alice", "name": "bench", "scopes": []string{"send_text"}})
	if raw = r.str("rawKey"); raw == "" {
		b.Fatalf("no key: %s", r.body)
	}
	a.linked(b, "15550000001")
	return a, raw, a.token("alice")
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
