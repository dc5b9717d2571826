package ecom

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/gateway/gateway/domain"
)

// The store loop's side of the platforms (DESIGN.md section 18): checkouts and cancels read from
// their real payloads, cash-on-delivery orders, and the write-backs against the fake platform.

func TestShopifyCheckoutFixture(t *testing.T) {
	for _, topic := range []string{TopicCheckoutCreated, TopicCheckoutUpdated} {
		ev, err := ParseShopify(topic, fixture(t, "shopify/checkout.json"))
		if err != nil {
			t.Fatal(err)
		}
		if ev.Topic != TopicCheckoutAbandoned || ev.CheckoutToken != "2a1ace52255252df566af0faaedfbfa7" || ev.OrderID != 450789469 ||
			ev.Completed || !strings.HasPrefix(ev.RecoveryURL, "https://checkout.local/orders/690933842/2a1ace52255252df566af0faaedfbfa7") ||
			ev.CustomerName != "Bob" || ev.Phone != "15556251199" || ev.Total != "409.94" || len(ev.Items) != 2 || ev.OrderName != "" {
			t.Fatalf("%s: %+v", topic, ev)
		}
		if k := ev.DedupeKey(); k != "shopify:checkout_abandoned:2a1ace52255252df566af0faaedfbfa7" {
			t.Fatalf("dedupe key %q", k)
		}
	}
	done := edited(t, "shopify/checkout.json", func(m map[string]any) { m["completed_at"] = "2012-10-12T07:25:27-04:00" })
	if ev, err := ParseShopify(TopicCheckoutUpdated, done); err != nil || !ev.Completed {
		t.Fatalf("completed checkout: %+v %v", ev, err)
	}
	noToken := edited(t, "shopify/checkout.json", func(m map[string]any) { delete(m, "token") })
	if _, err := ParseShopify(TopicCheckoutCreated, noToken); !errors.Is(err, ErrMalformed) {
		t.Fatalf("checkout without token: %v", err)
	}
	p, _ := Lookup(PlatformShopify)
	if sends, needsPhone := p.Topic(TopicCheckoutUpdated); !sends || needsPhone {
		t.Fatalf("checkouts/update: sends %v needsPhone %v", sends, needsPhone)
	}
	if l := p.TopicLabel([]byte(TopicCheckoutCreated)); l != TopicCheckoutCreated {
		t.Fatalf("label %q", l)
	}
}

func TestShopifyOrderCarriesItsCheckout(t *testing.T) {
	body := edited(t, "shopify/order.json", func(m map[string]any) { m["checkout_token"] = "2a1ace52255252df566af0faaedfbfa7" })
	ev, err := ParseShopify(TopicOrderCreated, body)
	if err != nil || ev.CheckoutToken != "2a1ace52255252df566af0faaedfbfa7" {
		t.Fatalf("%+v %v", ev, err)
	}
	// The fixture is a cancelled order (cancelled_at, cancel_reason): the orders/cancelled payload.
	ev, err = ParseShopify(TopicOrderCancelled, fixture(t, "shopify/order.json"))
	if err != nil || ev.Topic != TopicOrderCancelled || ev.OrderID != 123456 {
		t.Fatalf("cancel: %+v %v", ev, err)
	}
}

func TestWooCancelledAndCashOnDelivery(t *testing.T) {
	ev, err := ParseWoo(WooTopicOrderUpdated, fixture(t, "woocommerce-order-cancelled.json"))
	if err != nil || ev.Topic != TopicOrderCancelled || ev.OrderID != 727 {
		t.Fatalf("cancelled: %+v %v", ev, err)
	}
	cod := func(status string) []byte {
		return edited(t, "woocommerce-order.json", func(m map[string]any) { m["payment_method"], m["status"] = "cod", status })
	}
	// A cash-on-delivery order is placed in processing: placed, not paid.
	if ev, err := ParseWoo(WooTopicOrderCreated, cod("processing")); err != nil || ev.Topic != TopicOrderCreated {
		t.Fatalf("cod created: %+v %v", ev, err)
	}
	if _, err := ParseWoo(WooTopicOrderUpdated, cod("processing")); !errors.Is(err, ErrIgnored) || !strings.Contains(err.Error(), "cash-on-delivery") {
		t.Fatalf("cod processing update: %v", err)
	}
	if ev, err := ParseWoo(WooTopicOrderUpdated, cod("completed")); err != nil || ev.Topic != TopicOrderFulfilled {
		t.Fatalf("cod completed: %+v %v", ev, err)
	}
	// Other gateways keep processing as paid.
	if ev, err := ParseWoo(WooTopicOrderUpdated, fixture(t, "woocommerce-order.json")); err != nil || ev.Topic != TopicOrderPaid {
		t.Fatalf("bacs processing: %+v %v", ev, err)
	}
}

func TestWooAbandonedCartFixture(t *testing.T) {
	body := fixture(t, "woocommerce-abandoned-cart.form")
	ev, err := ParseWoo(TopicCheckoutAbandoned, body)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Topic != TopicCheckoutAbandoned || ev.CustomerName != "John" || ev.Phone != "15555555555" || ev.Total != "29.35" ||
		ev.RecoveryURL != "https://example.com/checkout/?wcf_ac_token=QmJ2Z0V2dTdQbmV4dDI0" || ev.Completed || ev.CheckoutToken == "" ||
		len(ev.Items) != 1 || ev.Items[0].Title != "Woo Single #1, Ship Your Idea – Color: Black, Size: M Test" {
		t.Fatalf("%+v", ev)
	}
	if got := Render("{items_list} at {recovery_url}", ev, "S"); got != "Woo Single #1, Ship Your Idea – Color: Black, Size: M Test at "+ev.RecoveryURL {
		t.Fatalf("render %q", got)
	}
	done, err := ParseWoo(TopicCheckoutAbandoned, []byte(strings.Replace(string(body), "order_status=abandoned", "order_status=completed", 1)))
	if err != nil || !done.Completed || done.CheckoutToken != ev.CheckoutToken {
		t.Fatalf("completed: %+v %v", done, err)
	}
	// A plugin (or a test) posting the same fields as JSON reads the same.
	js, err := ParseWoo(TopicCheckoutAbandoned, []byte(`{"first_name":"John","phone_number":"+15555555555","checkout_url":"https://example.com/c","order_status":"abandoned"}`))
	if err != nil || js.Phone != "15555555555" {
		t.Fatalf("json: %+v %v", js, err)
	}
	if _, err := ParseWoo(TopicCheckoutAbandoned, []byte("first_name=John")); !errors.Is(err, ErrMalformed) {
		t.Fatalf("no checkout_url: %v", err)
	}
	p, _ := Lookup(PlatformWooCommerce)
	if f, ok := p.(FormTopics); !ok || !f.FormBody(TopicCheckoutAbandoned) || f.FormBody(WooTopicOrderCreated) {
		t.Fatal("woocommerce: abandoned carts come as a form body")
	}
}

func TestShopifyWriteAnswer(t *testing.T) {
	fake, c := newFake(t)
	w := OrderWriter(shopify{})
	cr := Credentials{Shop: testShop, Token: testToken}
	ctx := context.Background()
	yes := Answer{OrderID: 1001, Yes: true, Tag: "cod-confirmed", Note: "Confirmed by the customer on WhatsApp"}
	if err := w.WriteAnswer(ctx, c, cr, yes); err != nil {
		t.Fatal(err)
	}
	// Again (a retry after a lost answer): the same tags, the note once.
	if err := w.WriteAnswer(ctx, c, cr, yes); err != nil {
		t.Fatal(err)
	}
	o, ok := fake.Order(testShop, 1001)
	if !ok || len(o.Tags) != 1 || o.Tags[0] != "cod-confirmed" || o.Note != yes.Note || o.Cancelled {
		t.Fatalf("order %+v", o)
	}
	no := Answer{OrderID: 1002, Tag: "cod-cancelled", Note: "Cancelled by the customer on WhatsApp", Cancel: true}
	if err := w.WriteAnswer(ctx, c, cr, no); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteAnswer(ctx, c, cr, no); err != nil {
		t.Fatal(err) // cancelled already: not cancelled again
	}
	o, _ = fake.Order(testShop, 1002)
	if !o.Cancelled || o.CancelReason != "CUSTOMER" || !o.Restock || o.NotifyCustomer || !o.Refund || o.StaffNote != no.Note || o.Tags[0] != "cod-cancelled" {
		t.Fatalf("cancelled order %+v", o)
	}
	var ops []string
	for _, wb := range fake.WriteBacks() {
		ops = append(ops, wb.Op)
	}
	if got := strings.Join(ops, ","); got != "tagsAdd,orderUpdate,tagsAdd,tagsAdd,orderUpdate,orderCancel,tagsAdd" {
		t.Fatalf("write-backs %s", got)
	}
	if w.CanWrite(Credentials{Shop: testShop}) {
		t.Fatal("no token: nothing to write with")
	}
	if err := w.WriteAnswer(ctx, c, Credentials{Shop: testShop, Token: "shpat_other"}, yes); !Permanent(err) || !errors.Is(err, domain.ErrStoreTokenRejected) {
		t.Fatalf("bad token: %v", err)
	}
	fake.FailNext(1, http.StatusServiceUnavailable)
	if err := w.WriteAnswer(ctx, c, cr, yes); err == nil || Permanent(err) || !errors.Is(err, domain.ErrStorePlatform) {
		t.Fatalf("platform down: %v", err)
	}
}

func TestWooWriteAnswer(t *testing.T) {
	fake, c := newFake(t)
	const host = "shop.example.com"
	fake.AddWooStore(host, "ck_key", "cs_secret")
	w := OrderWriter(wooCommerce{})
	cr := Credentials{Shop: host, Key: "ck_key", Secret: "cs_secret"}
	ctx := context.Background()
	yes := Answer{OrderID: 727, Yes: true, Note: "Confirmed by the customer on WhatsApp"}
	for range 2 {
		if err := w.WriteAnswer(ctx, c, cr, yes); err != nil {
			t.Fatal(err)
		}
	}
	if o, _ := fake.Order(host, 727); o.Status != "processing" || len(o.Notes) != 1 || o.Notes[0] != yes.Note {
		t.Fatalf("order %+v", o)
	}
	no := Answer{OrderID: 728, Note: "Cancelled by the customer on WhatsApp", Cancel: true}
	if err := w.WriteAnswer(ctx, c, cr, no); err != nil {
		t.Fatal(err)
	}
	if o, _ := fake.Order(host, 728); o.Status != "cancelled" || !o.Cancelled || len(o.Notes) != 1 {
		t.Fatalf("order %+v", o)
	}
	// No without cancelOnNo: the note only.
	if err := w.WriteAnswer(ctx, c, cr, Answer{OrderID: 729, Note: "Declined"}); err != nil {
		t.Fatal(err)
	}
	if o, _ := fake.Order(host, 729); o.Status != "" || len(o.Notes) != 1 {
		t.Fatalf("order %+v", o)
	}
	if err := w.WriteAnswer(ctx, c, Credentials{Shop: host, Key: "ck_key", Secret: "wrong"}, yes); !Permanent(err) {
		t.Fatalf("bad keys: %v", err)
	}
	if w.CanWrite(Credentials{Shop: host}) {
		t.Fatal("no keys: nothing to write with")
	}
	for _, wb := range fake.WriteBacks() {
		if strings.Contains(wb.Note, "secret") {
			t.Fatal("a secret in a write-back")
		}
	}
}
