package httpapi

import (
	"fmt"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/domain"
)

// A v1 call answered 503 does not count against its key's day: the route gives it back to the
// engine that counted it, from what the request kept of its grant (grantBy).
func TestUnavailableCallIsRefunded(t *testing.T) {
	a, raw, _ := hotFixture(t)
	if r := a.do(t, "PATCH", "/api/admin/users", "root", nil, map[string]any{"id": "alice", "plan": "business"}); r.status != 200 {
		t.Fatalf("plan: %d %s", r.status, r.body)
	}
	// A route that counts the call, then finds the gateway unable to serve it.
	a.srv.route("POST", "/test/unavailable", 0, here, func(ctx *fasthttp.RequestCtx) error {
		if _, err := a.srv.apiKey(ctx, ""); err != nil {
			return err
		}
		return fmt.Errorf("%w: the test's dependency is down", domain.ErrUnavailable)
	})
	h := a.srv.Handler()
	call := func(method, path string) int {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod(method)
		ctx.Request.SetRequestURI(path)
		ctx.Request.Header.Set("x-api-key", raw)
		h(&ctx)
		return ctx.Response.StatusCode()
	}
	used := func() int64 {
		ks, err := a.srv.eng.Keys.List("alice") // through the key's actor: after any refund sent before
		if err != nil || len(ks) != 1 {
			t.Fatalf("keys: %v %v", ks, err)
		}
		return ks[0].Used
	}
	before := used()
	if st := call("GET", "/api/v1/account"); st != 200 {
		t.Fatalf("account: %d", st)
	}
	if st := call("POST", "/test/unavailable"); st != 503 {
		t.Fatalf("unavailable: %d", st)
	}
	if st := call("GET", "/api/v1/account"); st != 200 {
		t.Fatalf("account: %d", st)
	}
	if got := used(); got != before+2 {
		t.Errorf("%d calls counted after two answered 200 and one 503, want 2", got-before)
	}
}
