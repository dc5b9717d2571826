package httpapi

import (
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
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
		writeJSON(&want, fasthttp.StatusOK, sentResponse(&e))
		writeSent(&got, &e)
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
			writeJSON(&ctx, fasthttp.StatusOK, sentResponse(&e))
		}
	})
	b.Run("byHand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			ctx.Response.ResetBody()
			writeSent(&ctx, &e)
		}
	})
}

// The validate and status answers written by hand are byte for byte writeJSON's.
func TestValidAndStatusAnswersAreWriteJSONs(t *testing.T) {
	exp := time.Date(2027, 1, 2, 3, 4, 5, 6e6, time.FixedZone("y", -7200))
	for _, v := range []engine.KeyView{
		{Grant: domain.Grant{Key: domain.APIKey{ID: "k1", Name: "shop \"one\"", UserID: "u1", CreatedAt: time.Date(2026, 11, 26, 19, 30, 1, 123e6, time.UTC), Scopes: []string{"send_text", "send_media"}}}, ClientName: "Ann <b>\u2028"},
		{Grant: domain.Grant{Key: domain.APIKey{ID: "k2", ExpiresAt: &exp}}},
		{},
	} {
		var want fasthttp.RequestCtx
		k := v.Key
		created := timestamp(k.CreatedAt)
		writeJSON(&want, fasthttp.StatusOK, validateJSON{Valid: true, ID: k.ID, Name: k.Name, UserID: k.UserID, ClientName: v.ClientName,
			CreatedAt: &created, ExpiresAt: tsPtr(k.ExpiresAt), Scopes: k.Scopes})
		if got := appendValid(nil, &v); string(got) != string(want.Response.Body()) || string(want.Response.Header.ContentType()) != string(contentTypeJSON) {
			t.Errorf("validate by hand:\n%s\nwriteJSON:\n%s", got, want.Response.Body())
		}
	}
	for _, st := range []domain.Session{
		{Status: domain.StatusNotCreated},
		{ID: "s1", Status: domain.StatusConnected, Phone: "447700900001", StatusReason: "ignored when connected", Queue: domain.QueueStats{Depth: 3, OldestAt: 1764000000123}},
		{ID: "s\"2", Status: "DISCONNECTED", StatusReason: "banned", Until: exp, TimelockUntil: exp.Add(time.Hour), LogoutAt: exp.Add(2 * time.Hour)},
	} {
		var want, got fasthttp.RequestCtx
		writeJSON(&want, fasthttp.StatusOK, statusOfSession(st))
		writeStatus(&got, &st)
		if string(got.Response.Body()) != string(want.Response.Body()) || got.Response.StatusCode() != 200 {
			t.Errorf("status by hand:\n%s\nwriteJSON:\n%s", got.Response.Body(), want.Response.Body())
		}
	}
}
