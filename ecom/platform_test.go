package ecom

import (
	"slices"
	"testing"

	"github.com/gateway/gateway/domain"
)

func TestRegistry(t *testing.T) {
	if got := Names(); !slices.Equal(got, []domain.Platform{PlatformShopify, PlatformWooCommerce}) {
		t.Fatalf("Names() = %v", got)
	}
	// A record written before the platform field is Shopify-type.
	if p, ok := Lookup(""); !ok || p.Name() != PlatformShopify {
		t.Fatalf("Lookup(\"\") = %v, %v", p, ok)
	}
	if _, ok := Lookup("magento"); ok {
		t.Fatal("an unregistered platform was found")
	}
	if got, want := ShopDomainHeaders(), []string{"X-Ecom-Shop-Domain", "X-Shopify-Shop-Domain", "X-Wc-Webhook-Source"}; !slices.Equal(got, want) &&
		!slices.Equal(got, []string{"X-Wc-Webhook-Source", "X-Ecom-Shop-Domain", "X-Shopify-Shop-Domain"}) {
		t.Fatalf("ShopDomainHeaders() = %v, want %v in some registration order", got, want)
	}
	for _, name := range []domain.Platform{PlatformShopify, ""} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Register(%q) did not panic", name)
				}
			}()
			Register(named(name))
		}()
	}
}

// named is a platform that only has a name (Register reads nothing else but its headers).
type named domain.Platform

func (n named) Name() domain.Platform                        { return domain.Platform(n) }
func (named) Headers() WebhookHeaders                        { return WebhookHeaders{} }
func (named) ParseSignature([]byte) (WebhookSignature, bool) { return WebhookSignature{}, false }
func (named) IsPing([]byte) bool                             { return false }
func (named) Topic(string) (bool, bool)                      { return false, false }
func (named) TopicLabel([]byte) string                       { return "none" }
func (named) Parse(string, []byte) (Event, error)            { return Event{}, ErrIgnored }
func (named) Connect() ConnectMethod                         { return ConnectByDomain }
func (named) Domain(string) (string, bool)                   { return "", false }

func TestPlatformTopics(t *testing.T) {
	shop, _ := Lookup(PlatformShopify)
	woo, _ := Lookup(PlatformWooCommerce)
	for _, c := range []struct {
		p                 Platform
		topic             string
		sends, needsPhone bool
	}{
		{shop, TopicOrderCreated, true, true},
		{shop, TopicOrderPaid, true, true},
		{shop, TopicOrderCancelled, true, true},
		{shop, TopicOrderFulfilled, true, false},
		{shop, "REFUNDS/CREATE", true, false},
		{shop, "products/update", false, false},
		{woo, WooTopicOrderCreated, true, true},
		{woo, WooTopicOrderUpdated, true, true},
		{woo, "product.updated", false, false},
		{woo, TopicOrderCreated, false, false},
	} {
		if s, n := c.p.Topic(c.topic); s != c.sends || n != c.needsPhone {
			t.Errorf("%s.Topic(%q) = %v, %v; want %v, %v", c.p.Name(), c.topic, s, n, c.sends, c.needsPhone)
		}
	}
	if !woo.IsPing([]byte("webhook_id=12")) || shop.IsPing([]byte("webhook_id=12")) {
		t.Error("only WooCommerce pings")
	}
	if shop.Connect() != ConnectByToken || woo.Connect() != ConnectByDomain {
		t.Error("connect methods")
	}
}
