package httpapi

import (
	"testing"
	"time"

	"github.com/gateway/gateway/domain"

	"github.com/goccy/go-json"

	"github.com/gateway/gateway/persist"
)

// JSON of the hot request and response types: `go test -run X -bench JSON ./httpapi`.
func BenchmarkJSON(b *testing.B) {
	body := []byte(`{"phone":"+1 555 010 0001","message":"Your order #1001 has shipped","type":"text"}`)
	b.Run("decode send request", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r messageRequest
			if err := json.Unmarshal(body, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A validate's body as the bench sends it (a 57-byte key): the fast path, as the route reads it.
	validate := []byte(`{"rawKey":"gk_4bV0qXhR2mT8sLw9ZyJ3nKcE6uAaP1dF7gH5jQ2rS9tU0vW3xY8zB"}`)
	b.Run("decode validate request", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, present, ok := fastValidate(validate); !ok || !present {
				b.Fatal("not read")
			}
		}
	})
	resp := sentJSON{Success: true, MessageID: "3EB0AAAAAAAAAAAAAAAAAAAA", To: "15550100001", Session: "6f1c1c3e-9c5b-4a57-9a43-9d2f4d1b7f10", Timestamp: timestamp(time.Now())}
	b.Run("encode send response", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(resp); err != nil {
				b.Fatal(err)
			}
		}
	})
	entry := domain.OutboxEntry{
		ID: "3EB0AAAAAAAAAAAAAAAAAAAA", SessionID: "6f1c1c3e-9c5b-4a57-9a43-9d2f4d1b7f10", UserID: "alice", Origin: "api",
		Message: domain.Message{ID: "3EB0AAAAAAAAAAAAAAAAAAAA", To: "15550100001", Kind: domain.KindText, Text: "Your order #1001 has shipped"},
		Status:  domain.MsgQueued, CreatedAt: domain.MillisOf(time.Now()), UpdatedAt: domain.MillisOf(time.Now()),
	}
	b.Run("encode outbox entry", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := persist.Encode(1, entry); err != nil {
				b.Fatal(err)
			}
		}
	})
	key := accountJSON{KeyID: "k", Name: "n", UserID: "u", Scopes: []string{"send_text"}, Plan: "free", RateLimit: 1000, Reset: timestamp(time.Now())}
	b.Run("encode account response", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(key); err != nil {
				b.Fatal(err)
			}
		}
	})
}
