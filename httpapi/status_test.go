package httpapi

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/domain"
)

// TestStatusAnswerOfAnyLength: status answers with the largest queue counters and with a long
// reason are writeJSON's.
func TestStatusAnswerOfAnyLength(t *testing.T) {
	far := time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)
	for _, st := range []domain.Session{
		{ID: "s1", Status: "DISCONNECTED", Phone: "447700900001", StatusReason: "x", Queue: domain.QueueStats{Depth: math.MaxInt64, OldestAt: domain.Millis(far.UnixMilli())}},
		{ID: "s2", Status: "DISCONNECTED", StatusReason: strings.Repeat("long \"reason\" ", 60), Until: far, Queue: domain.QueueStats{Depth: 7, OldestAt: 1764000000123}},
	} {
		var want, got fasthttp.RequestCtx
		writeJSON(&want, fasthttp.StatusOK, statusOfSession(st))
		writeStatus(&got, &st)
		if string(got.Response.Body()) != string(want.Response.Body()) || got.Response.StatusCode() != 200 {
			t.Errorf("status by hand:\n%s\nwriteJSON:\n%s", got.Response.Body(), want.Response.Body())
		}
	}
}
