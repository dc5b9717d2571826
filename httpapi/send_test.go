package httpapi

import (
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/domain"
)

// The send's answer, written by hand, is byte for byte what writeJSON writes for it, whatever
// its strings hold.
func TestSentAnswerIsWriteJSONs(t *testing.T) {
	at := domain.MillisOf(time.Date(2026, 11, 26, 19, 30, 1, 123e6, time.FixedZone("x", 3600)))
	for _, e := range []domain.OutboxEntry{
		{ID: "3EB0ABCDEF0123456789ABCD", SessionID: "s1", Status: domain.MsgQueued, CreatedAt: at, Message: domain.Message{To: "4915112345678"}},
		{ID: "m1", SessionID: "s\"1\\<b>&\u2028\x01\t", Status: domain.MsgSent, CreatedAt: at, SentAt: at + 1500, Message: domain.Message{To: "é\xff"}},
		{},
	} {
		var want, got fasthttp.RequestCtx
		writeJSON(&want, fasthttp.StatusOK, sentResponse(e))
		writeSent(&got, e)
		if string(got.Response.Body()) != string(want.Response.Body()) || got.Response.StatusCode() != 200 ||
			string(got.Response.Header.ContentType()) != string(want.Response.Header.ContentType()) {
			t.Errorf("by hand:\n%s %q\nwriteJSON:\n%s %q", got.Response.Body(), got.Response.Header.ContentType(), want.Response.Body(), want.Response.Header.ContentType())
		}
	}
}

// BenchmarkSentAnswer: the send's answer through writeJSON and by hand.
// `go test -run X -bench SentAnswer ./httpapi`.
func BenchmarkSentAnswer(b *testing.B) {
	e := domain.OutboxEntry{ID: "3EB0ABCDEF0123456789ABCD", SessionID: "0b6a2c1e-5f7d-4e0a-9a77-3c1d2e4f5a6b", Status: domain.MsgQueued,
		CreatedAt: domain.MillisOf(time.Now()), Message: domain.Message{To: "4915112345678"}}
	var ctx fasthttp.RequestCtx
	b.Run("writeJSON", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ctx.Response.ResetBody()
			writeJSON(&ctx, fasthttp.StatusOK, sentResponse(e))
		}
	})
	b.Run("byHand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ctx.Response.ResetBody()
			writeSent(&ctx, e)
		}
	})
}
