package httpapi

import (
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// simStub records the latency set; the other controls are not called (the embedded
// interface keeps the stub a SimControls as the interface grows).
type simStub struct {
	SimControls
	latency time.Duration
}

func (s *simStub) SetLatency(d time.Duration) { s.latency = d }

// The sim process serves the sim's dev routes (the same handlers as an embedded sim) to the
// addresses in its --internal-cidrs, and nothing of the gateway's API.
func TestSimServer(t *testing.T) {
	sim := &simStub{}
	s, err := NewSim(SimServerConfig{Sim: sim, InternalCIDRs: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler()
	do := func(from, method, path, body string) *fasthttp.Response {
		var req fasthttp.Request
		req.Header.SetMethod(method)
		req.SetRequestURI(path)
		req.SetBodyString(body)
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP(from), Port: 1234}, nil)
		h(&ctx)
		return &ctx.Response
	}
	if r := do("10.1.2.3", "POST", "/api/dev/sim/latency", `{"ms":25}`); r.StatusCode() != 200 || sim.latency != 25*time.Millisecond {
		t.Fatalf("latency from a node: %d %s, latency %v", r.StatusCode(), r.Body(), sim.latency)
	}
	if r := do("192.0.2.1", "POST", "/api/dev/sim/latency", `{"ms":5}`); r.StatusCode() != 403 {
		t.Fatalf("latency from outside: %d %s", r.StatusCode(), r.Body())
	}
	if r := do("10.1.2.3", "GET", "/healthz", ""); r.StatusCode() != 200 {
		t.Fatalf("healthz: %d", r.StatusCode())
	}
	for _, path := range []string{"/api/v1/account", "/api/admin/apikeys", "/dashboard/"} {
		if r := do("10.1.2.3", "GET", path, ""); r.StatusCode() != 404 {
			t.Errorf("%s on the sim process: %d, want 404", path, r.StatusCode())
		}
	}
}
