package httpapi

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/domain"
)

// An error that carries its Retry-After keeps its text, status and code; other errors get the
// Retry-After their code implies, or none.
func TestWriteErrorRetryAfter(t *testing.T) {
	s := &Server{log: slog.New(slog.DiscardHandler)}
	for _, c := range []struct {
		name   string
		err    error
		status int
		retry  string
		body   string
	}{
		{"carried", retryAfter(fmt.Errorf("%w: key k1", domain.ErrRateLimited), 42), 429, "42",
			`{"success":false,"error":"daily request limit reached: key k1","code":"rate_limited"}`},
		{"wrapped", fmt.Errorf("outer: %w", retryAfter(domain.ErrRateLimited, 7)), 429, "7",
			`{"success":false,"error":"outer: daily request limit reached","code":"rate_limited"}`},
		{"by code", errTooManyAttempts, 429, "1",
			`{"success":false,"error":"too many failed attempts; retry later","code":"too_many_attempts"}`},
		{"node unavailable", fmt.Errorf("%w (partition 3: handing over)", domain.ErrNodeUnavailable), 503, "1",
			`{"success":false,"error":"the node that owns this data is unavailable; retry shortly (partition 3: handing over)","code":"node_unavailable"}`},
		{"none", missing("phone"), 400, "",
			`{"success":false,"error":"phone is required","code":"validation_failed"}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var ctx fasthttp.RequestCtx
			s.writeError(&ctx, c.err)
			if got := ctx.Response.StatusCode(); got != c.status {
				t.Errorf("status %d, want %d", got, c.status)
			}
			if got := string(ctx.Response.Header.Peek("Retry-After")); got != c.retry {
				t.Errorf("Retry-After %q, want %q", got, c.retry)
			}
			if got := string(ctx.Response.Body()); got != c.body+"\n" {
				t.Errorf("body %s, want %s", got, c.body)
			}
		})
	}
}
