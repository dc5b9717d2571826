package httpapi

import (
	"fmt"
	"log/slog"
	"testing"
	"time"

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

// 503 refusals are logged once when they start, then at most every refusalReminder with how
// many there were, and again at once after a quiet spell.
func TestRefusalLogIsRateLimited(t *testing.T) {
	var r refusalLog
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	lines := 0
	for i := range 7000 {
		now := t0.Add(time.Duration(i) * 25 * time.Second / 7000) // 7,000 refusals in 25 s
		if first, n := r.note("storage_unavailable", now); first || n > 0 {
			lines++
		}
	}
	if lines != 1 {
		t.Fatalf("%d lines for 7,000 refusals in 25 s, want 1", lines)
	}
	if first, n := r.note("storage_unavailable", t0.Add(31*time.Second)); first || n != 7000 {
		t.Fatalf("the reminder: first %v, count %d; want the 7,000 since", first, n)
	}
	if first, _ := r.note("idp_unavailable", t0.Add(31*time.Second)); !first {
		t.Fatal("another code is its own series")
	}
	if first, _ := r.note("storage_unavailable", t0.Add(10*time.Minute)); !first {
		t.Fatal("after a quiet spell a refusal starts a new series")
	}
}
