package ecom

import (
	"os"
	"testing"
)

// The webhook receiver's hot path (DESIGN.md section 8: at least 50 % of a bare handler):
// signature check, then parse and render in the storeevents actor.

func BenchmarkVerifyWebhookHMAC(b *testing.B) {
	body, err := os.ReadFile("testdata/shopify/order.json")
	if err != nil {
		b.Fatal(err)
	}
	sig := SignWebhook(body, "secret")
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if !VerifyWebhookHMAC(body, sig, "secret") {
			b.Fatal("no match")
		}
	}
}

// BenchmarkWebhookVerifier is the form the receiver runs: one verifier per store secret.
func BenchmarkWebhookVerifier(b *testing.B) {
	body, err := os.ReadFile("testdata/shopify/order.json")
	if err != nil {
		b.Fatal(err)
	}
	v, header := NewWebhookVerifier("secret"), []byte(SignWebhook(body, "secret"))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		sig, ok := ParseWebhookSignature(header)
		if !ok || !v.Verify(body, sig) {
			b.Fatal("no match")
		}
	}
}

func BenchmarkParseShopifyOrder(b *testing.B) {
	body, err := os.ReadFile("testdata/shopify/order.json")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseShopify(TopicOrderCreated, body); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRenderDefault(b *testing.B) {
	ev, tmpl := sampleEvent(), DefaultTemplate(TopicOrderCreated)
	b.ReportAllocs()
	for b.Loop() {
		_ = Render(tmpl, ev, "Acme")
	}
}
