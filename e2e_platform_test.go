package main

// A store platform the gateway has never heard of, added the way a new platform is added: one
// type implementing ecom.Platform and one Register line. Nothing else in the gateway changes,
// and a webhook for it goes through the receiver, the durable inbox and the store's actor to
// the customer's phone.

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
	"testing"

	"github.com/goccy/go-json"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/ecom"
)

func init() { ecom.Register(fakeShop{}) }

// fakeShop signs its webhooks in its own header and form (`X-Fake-Signature: sha256=<hex>`,
// GitHub's style, unlike the base64 of the built-in platforms) and sends one flat event.
type fakeShop struct{}

func (fakeShop) Name() domain.Platform { return "fakeshop" }

func (fakeShop) Headers() ecom.WebhookHeaders {
	return ecom.WebhookHeaders{
		Topic: []string{"X-Fake-Event"}, ShopDomain: []string{"X-Fake-Shop"},
		Signature: []string{"X-Fake-Signature"}, DeliveryID: []string{"X-Fake-Delivery"},
	}
}

func (fakeShop) ParseSignature(h []byte) (ecom.WebhookSignature, bool) {
	var sig ecom.WebhookSignature
	hexSig, ok := bytes.CutPrefix(bytes.TrimSpace(h), []byte("sha256="))
	if !ok || hex.DecodedLen(len(hexSig)) != len(sig) {
		return sig, false
	}
	_, err := hex.Decode(sig[:], hexSig)
	return sig, err == nil
}

func (fakeShop) IsPing(body []byte) bool { return string(body) == "ping" }

func (fakeShop) Topic(topic string) (sends, needsPhone bool) {
	return topic == "order.placed", topic == "order.placed"
}

func (fakeShop) TopicLabel(topic []byte) string {
	switch string(bytes.TrimSpace(topic)) {
	case "":
		return "none"
	case "order.placed":
		return "order.placed"
	}
	return "other"
}

func (fakeShop) Parse(topic string, body []byte) (ecom.Event, error) {
	var o struct {
		ID       int64  `json:"id"`
		Customer string `json:"customer"`
		Phone    string `json:"phone"`
		Total    string `json:"total"`
	}
	if err := json.Unmarshal(body, &o); err != nil || o.ID <= 0 {
		return ecom.Event{}, ecom.ErrMalformed
	}
	ev := ecom.Event{Platform: "fakeshop", Topic: ecom.TopicOrderCreated, OrderID: o.ID, OrderName: "#" + strconv.FormatInt(o.ID, 10),
		CustomerName: o.Customer, Total: o.Total, Currency: "EUR", PhoneRaw: o.Phone}
	if ev.Phone, _ = ecom.NormalizePhone(o.Phone); ev.Phone == "" {
		ev.SkipReason = "no usable phone"
	}
	return ev, nil
}

func (fakeShop) Connect() ecom.ConnectMethod { return ecom.ConnectByDomain }

func (fakeShop) Domain(in string) (string, bool) {
	d := strings.ToLower(strings.TrimSpace(in))
	return d, strings.HasSuffix(d, ".fake.test")
}

// fakeSign is the fake platform's signature header value.
func fakeSign(body []byte, secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

func TestNewPlatformThroughTheRegistry(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	alice := tg.newClient("alice")
	tg.link(alice, "447700900001")

	want(t, tg.do("POST", "/api/client/store/connect", bearerAuth(alice), map[string]any{"platform": "fakeshop", "domain": "shop.example.com"}), 400, "validation_failed")
	want(t, tg.do("POST", "/api/client/store/connect", bearerAuth(alice),
		map[string]any{"platform": "FakeShop", "domain": " Corner.Fake.Test ", "webhookSecret": "fake-secret"}), 200, "")
	st := tg.store(alice)
	if st["platform"] != "fakeshop" || st["shop"] != "corner.fake.test" || st["hasWebhookSecret"] != true {
		t.Fatalf("store: %v", st)
	}

	body := []byte(`{"id": 4711, "customer": "Ann", "phone": "+44 7700 900123", "total": "9.50"}`)
	hook := func(sig, delivery string) map[string]string {
		return map[string]string{"X-Fake-Event": "order.placed", "X-Fake-Shop": "corner.fake.test", "X-Fake-Signature": sig, "X-Fake-Delivery": delivery}
	}
	// The platform's own ping, unsigned.
	r := tg.webhook("", map[string]string{"X-Fake-Shop": "corner.fake.test"}, []byte("ping"))
	if want(t, r, 200, ""); r.str("status") != "ignored" {
		t.Fatalf("ping: %s", r.raw)
	}
	// Its signature is read from its header in its form only: the built-in platforms' form, or
	// their header, does not pass.
	want(t, tg.webhook("", hook(ecom.SignWebhook(body, "fake-secret"), "d-1"), body), 401, "invalid_signature")
	h := hook("", "d-1")
	h["X-Shopify-Hmac-Sha256"] = ecom.SignWebhook(body, "fake-secret")
	want(t, tg.webhook("", h, body), 401, "invalid_signature")
	want(t, tg.webhook("", hook(fakeSign(body, "another-secret"), "d-1"), body), 401, "invalid_signature")

	r = tg.webhook("", hook(fakeSign(body, "fake-secret"), "d-1"), body)
	if want(t, r, 200, ""); r.str("status") != "queued" {
		t.Fatalf("signed webhook: %s", r.raw)
	}
	r = tg.webhook("uid=alice", hook(fakeSign(body, "fake-secret"), "d-1"), body)
	if want(t, r, 200, ""); r.str("status") != "duplicate" {
		t.Fatalf("the same delivery again: %s", r.raw)
	}
	r = tg.webhook("", map[string]string{"X-Fake-Event": "order.refunded", "X-Fake-Shop": "corner.fake.test", "X-Fake-Signature": fakeSign(body, "fake-secret")}, body)
	if want(t, r, 200, ""); r.str("status") != "ignored" {
		t.Fatalf("a topic the platform sends nothing for: %s", r.raw)
	}

	ev := tg.waitEvent(alice, "d-1")
	if ev["status"] != "sent" || ev["orderName"] != "#4711" {
		t.Fatalf("event: %v", ev)
	}
	got := tg.simDelivered("447700900123", 1)
	if len(got) != 1 || !strings.Contains(got[0]["text"].(string), "Ann") || !strings.Contains(got[0]["text"].(string), "#4711") {
		t.Fatalf("delivered: %v", got)
	}
}
