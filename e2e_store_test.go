package main

// End-to-end tests of the store integration (issue 6): connecting stores against a fake store
// platform started by the test (ecomtest, HTTP only), templates, and the webhook receiver
// through to the messages the customer receives at the sim.

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goccy/go-json"

	"github.com/gateway/gateway/ecom"
	"github.com/gateway/gateway/ecom/ecomtest"
	"github.com/gateway/gateway/httpapi/openapitest"
)

const (
	testPublicURL = "https://gw.example.com"
	aliceShop     = "alice-shop.myshopify.com"
	aliceToken    = "shpat_alice0123456789"
	hookSecret    = "whsec-alice-signing-secret"
)

// storeGW starts a gateway whose store-platform client talks to a fresh fake platform.
func storeGW(t *testing.T, args ...string) (*testGW, *ecomtest.Platform) {
	t.Helper()
	fake := ecomtest.New()
	t.Cleanup(fake.Close)
	tg := startGW(t, append([]string{"--ecom-api-base", fake.APIBase(), "--public-url", testPublicURL}, args...)...)
	return tg, fake
}

// webhook posts a store webhook with the given headers.
func (tg *testGW) webhook(query string, headers map[string]string, body []byte) resp {
	tg.t.Helper()
	return tg.do("POST", "/api/ecom/webhook?"+query, auth(headers), body)
}

// shopifyHook builds the headers the Shopify-type platform sends; secret "" sends no signature.
func shopifyHook(topic, shop, secret, id string, body []byte) map[string]string {
	h := map[string]string{"X-Shopify-Topic": topic, "X-Shopify-Shop-Domain": shop}
	if secret != "" {
		h["X-Shopify-Hmac-Sha256"] = ecom.SignWebhook(body, secret)
	}
	if id != "" {
		h["X-Shopify-Webhook-Id"] = id
	}
	return h
}

func readFixture(t testing.TB, name string) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("ecom", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// orderBody is the platform's Order fixture with its id, name and customer phone set.
func orderBody(t testing.TB, id int64, name, phone string) []byte {
	m := readFixture(t, "shopify/order.json")
	m["id"], m["name"] = id, name
	m["customer"].(map[string]any)["phone"] = phone
	return mustJSON(t, m)
}

// storeEvents reads the caller's store view.
func (tg *testGW) store(tok string) map[string]any {
	tg.t.Helper()
	r := tg.do("GET", "/api/client/store", bearerAuth(tok), nil)
	want(tg.t, r, 200, "")
	return r.obj()
}

// storeEvent finds an event of the caller's store by webhook id.
func (tg *testGW) storeEvent(tok, webhookID string) map[string]any {
	tg.t.Helper()
	for _, e := range tg.store(tok)["events"].([]any) {
		if ev := e.(map[string]any); ev["webhookId"] == webhookID {
			return ev
		}
	}
	return nil
}

// waitEvent waits for the event with this webhook id to reach a final status and returns it.
func (tg *testGW) waitEvent(tok, webhookID string) map[string]any {
	tg.t.Helper()
	var ev map[string]any
	eventually(tg.t, 15*time.Second, "store event "+webhookID+" processed", func() bool {
		ev = tg.storeEvent(tok, webhookID)
		return ev != nil && ev["status"] != "pending"
	})
	return ev
}

// noRedirect is a client that shows redirects instead of following them.
var noRedirect = &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// callback plays the platform redirecting the owner back to the gateway, and returns the
// redirect's Location.
func (tg *testGW) callback(t *testing.T, q url.Values) string {
	t.Helper()
	res, err := noRedirect.Get(tg.url + "/api/ecom/callback?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(res.Body)
	res.Body.Close()
	openapitest.Check(t, "GET", "/api/ecom/callback", res.StatusCode, res.Header.Get("Content-Type"), raw)
	if res.StatusCode != http.StatusFound {
		t.Fatalf("callback status %d: %s", res.StatusCode, raw)
	}
	return res.Header.Get("Location")
}

func TestStoreOAuthRoundTrip(t *testing.T) {
	sideBySide(t)
	tg, fake := storeGW(t)
	fake.AddShop(aliceShop, "Alice Shop", "")
	fake.SetApp("app-client-id", "app-client-secret")
	alice := tg.newClient("alice")
	bob := tg.newClient("bob")

	init := func(tok string) (state string) {
		t.Helper()
		r := tg.do("POST", "/api/ecom/oauth-init", bearerAuth(tok), map[string]any{
			"shop": "https://Alice-Shop.myshopify.com/admin", "clientId": "app-client-id", "clientSecret": "app-client-secret"})
		want(t, r, 200, "")
		if r.str("shop") != aliceShop {
			t.Fatalf("oauth-init shop: %s", r.raw)
		}
		u, err := url.Parse(r.str("authUrl"))
		if err != nil || u.Path != "/"+aliceShop+"/admin/oauth/authorize" {
			t.Fatalf("authUrl %q", r.str("authUrl"))
		}
		q := u.Query()
		if q.Get("client_id") != "app-client-id" || q.Get("scope") != "read_orders,write_orders,read_customers" ||
			q.Get("redirect_uri") != testPublicURL+"/api/ecom/callback" || !strings.HasPrefix(q.Get("state"), "alice___") && tok == alice {
			t.Fatalf("authUrl query %v", q)
		}
		return q.Get("state")
	}
	signed := func(code, state, secret string) url.Values {
		q := url.Values{"code": {code}, "shop": {aliceShop}, "state": {state}, "timestamp": {fmt.Sprint(time.Now().Unix())}}
		q.Set("hmac", ecom.SignOAuthQuery(q, secret))
		return q
	}
	errorPage := func(loc, reason string) {
		t.Helper()
		if loc != "/dashboard/connect-store/error?reason="+reason {
			t.Fatalf("redirect %q, want the error page with reason %s", loc, reason)
		}
	}
	noStore := func() {
		t.Helper()
		for _, tok := range []string{alice, bob} {
			if s := tg.store(tok); s["connected"] != false {
				t.Fatalf("a store was saved after a failed callback: %v", s)
			}
		}
		if subs := fake.Subscriptions(aliceShop); len(subs) != 0 {
			t.Fatalf("webhooks registered after a failed callback: %v", subs)
		}
	}

	state := init(alice)
	fake.AddCode(aliceShop, "code-1", aliceToken, "read_orders,read_customers")
	// A forged hmac, an unknown nonce, a state for another uid, a missing code: error page,
	// nothing saved.
	errorPage(tg.callback(t, signed("code-1", state, "not-the-app-secret")), "invalid_hmac")
	errorPage(tg.callback(t, signed("code-1", "alice___0123456789abcdef0123456789abcdef", "app-client-secret")), "invalid_state")
	_, nonce, _ := strings.Cut(state, "___")
	errorPage(tg.callback(t, signed("code-1", "bob___"+nonce, "app-client-secret")), "invalid_state")
	errorPage(tg.callback(t, url.Values{"shop": {aliceShop}, "state": {state}}), "invalid_request")
	noStore()

	// The real round trip.
	loc := tg.callback(t, signed("code-1", state, "app-client-secret"))
	if loc != "/dashboard/connect-store/success?shop="+aliceShop {
		t.Fatalf("redirect %q", loc)
	}
	exchanged := false
	for _, r := range fake.Requests() {
		if r.Path == "/admin/oauth/access_token" && strings.Contains(string(r.Body), `"code":"code-1"`) {
			exchanged = true
		}
	}
	if !exchanged {
		t.Fatal("the platform saw no code exchange")
	}
	subs := fake.Subscriptions(aliceShop)
	wantURI := testPublicURL + "/api/ecom/webhook?uid=alice&shop=" + aliceShop
	if len(subs) != 7 { // the five, and the checkout topics (abandoned checkouts)
		t.Fatalf("%d subscriptions, want 7: %v", len(subs), subs)
	}
	topics := map[string]bool{}
	for _, s := range subs {
		u, err := url.Parse(s.URI)
		if err != nil || u.Query().Get("uid") != "alice" || u.Query().Get("shop") != aliceShop || s.URI != wantURI {
			t.Fatalf("subscription address %q, want %s", s.URI, wantURI)
		}
		topics[s.Topic] = true
	}
	for _, tp := range []string{"ORDERS_CREATE", "ORDERS_PAID", "ORDERS_CANCELLED", "FULFILLMENTS_CREATE", "REFUNDS_CREATE"} {
		if !topics[tp] {
			t.Fatalf("no subscription for %s: %v", tp, subs)
		}
	}
	st := tg.store(alice)
	if st["connected"] != true || st["shop"] != aliceShop || st["method"] != "oauth" || st["platform"] != "shopify" ||
		st["shopName"] != "Alice Shop" || st["hasWebhookSecret"] != true || st["webhooksRegistered"] != float64(5) || st["webhookUrl"] != wantURI {
		t.Fatalf("store after OAuth: %v", st)
	}
	// The nonce is single use: the same callback again fails and changes nothing.
	errorPage(tg.callback(t, signed("code-1", state, "app-client-secret")), "invalid_state")

	// Webhooks the app registered are signed with its client secret.
	body := orderBody(t, 1001, "#1001", "+1 312 555 0101")
	want(t, tg.webhook("uid=alice&shop="+aliceShop, shopifyHook("orders/create", aliceShop, "app-client-secret", "w-oauth-1", body), body), 200, "")
	want(t, tg.webhook("uid=alice&shop="+aliceShop, shopifyHook("orders/create", aliceShop, "someone-else", "w-oauth-2", body), body), 401, "invalid_signature")
	// No secret or token shows in the data dir's files in the clear (the write-ahead log and
	// the value log, read while the gateway runs, hold every record as written; records from
	// 128 bytes are in the value log, a sparse file of which only the start is written here).
	sawRecord := false
	for f, b := range dataFiles(t, tg.data, 16<<20) {
		sawRecord = sawRecord || bytes.Contains(b, []byte(`"shopName":"Alice Shop"`))
		for _, secret := range []string{aliceToken, "app-client-secret"} {
			if bytes.Contains(b, []byte(secret)) {
				t.Fatalf("%s holds %q in the clear", f, secret)
			}
		}
	}
	if !sawRecord {
		t.Fatal("the store record is not readable in the data files: this check proves nothing")
	}
}

func TestStoreManualConnect(t *testing.T) {
	sideBySide(t)
	tg, fake := storeGW(t)
	fake.AddShop(aliceShop, "Alice Shop", aliceToken)
	alice := tg.newClient("alice")

	// A shop outside .myshopify.com: refused before any outbound call.
	r := tg.do("POST", "/api/ecom/manual-connect", bearerAuth(alice), map[string]any{"shop": "alice.example.com", "accessToken": aliceToken})
	want(t, r, 400, "invalid_shop")
	r = tg.do("POST", "/api/client/store/verify-shopify", bearerAuth(alice), map[string]any{"domain": "evil.com/x.myshopify.com", "access_token": aliceToken})
	want(t, r, 400, "invalid_shop")
	if n := len(fake.Requests()); n != 0 {
		t.Fatalf("the platform got %d requests for invalid shops", n)
	}
	want(t, tg.do("POST", "/api/ecom/manual-connect", bearerAuth(alice), map[string]any{"shop": aliceShop, "accessToken": "not-a-token"}), 400, "validation_failed")
	want(t, tg.do("POST", "/api/ecom/manual-connect", bearerAuth(alice), map[string]any{"shop": aliceShop}), 400, "validation_failed")
	want(t, tg.do("POST", "/api/ecom/manual-connect", bearerAuth(alice), `{"shop":`), 400, "invalid_json")
	want(t, tg.do("POST", "/api/ecom/manual-connect", nil, map[string]any{"shop": aliceShop, "accessToken": aliceToken}), 401, "missing_credentials")

	// A token the platform rejects: a clear error, nothing saved.
	r = tg.do("POST", "/api/ecom/manual-connect", bearerAuth(alice), map[string]any{"shop": aliceShop, "accessToken": "shpat_revoked"})
	want(t, r, 400, "store_token_rejected")
	if !strings.Contains(r.str("error"), "rejected") {
		t.Fatalf("rejected token error: %s", r.raw)
	}
	if tg.store(alice)["connected"] != false {
		t.Fatal("a store was saved with a rejected token")
	}

	// verify-shopify checks without saving.
	r = tg.do("POST", "/api/client/store/verify-shopify", bearerAuth(alice), map[string]any{"domain": aliceShop, "access_token": aliceToken})
	if want(t, r, 200, ""); r.str("shopName") != "Alice Shop" {
		t.Fatalf("verify-shopify: %s", r.raw)
	}

	r = tg.do("POST", "/api/ecom/manual-connect", bearerAuth(alice), map[string]any{"shop": aliceShop, "accessToken": aliceToken})
	want(t, r, 200, "")
	if o := r.obj(); o["webhooksRegistered"] != float64(5) || o["shopifyVerified"] != true || o["webhooksSkipped"] != false || o["shop"] != aliceShop || o["message"] == "" {
		t.Fatalf("manual-connect: %s", r.raw)
	}
	if n := len(fake.Subscriptions(aliceShop)); n != 7 { // the five, and the checkout topics
		t.Fatalf("%d subscriptions", n)
	}
	// Again: "already taken" subscriptions count as registered.
	r = tg.do("POST", "/api/ecom/manual-connect", bearerAuth(alice), map[string]any{"shop": aliceShop, "accessToken": aliceToken})
	if want(t, r, 200, ""); r.obj()["webhooksRegistered"] != float64(5) {
		t.Fatalf("manual-connect again: %s", r.raw)
	}
	st := tg.store(alice)
	if st["method"] != "manual" || st["hasWebhookSecret"] != false || st["shopName"] != "Alice Shop" {
		t.Fatalf("store: %v", st)
	}
	if strings.Contains(fmt.Sprint(st), aliceToken) {
		t.Fatal("GET /api/client/store shows the token")
	}

	// The platform down: 502.
	fake.FailNext(1, 503)
	want(t, tg.do("POST", "/api/client/store/verify-shopify", bearerAuth(alice), map[string]any{"domain": aliceShop, "access_token": aliceToken}), 502, "store_platform_error")

	// Disconnect.
	want(t, tg.do("DELETE", "/api/client/store", bearerAuth(alice), nil), 200, "")
	if tg.store(alice)["connected"] != false {
		t.Fatal("store still connected")
	}
	want(t, tg.do("DELETE", "/api/client/store", bearerAuth(alice), nil), 404, "store_not_found")
}

// connectedStore links alice's session and connects her store by access token with the signing
// secret; the platform knows order 450789469 for fulfillment and refund events.
func connectedStore(t *testing.T, tg *testGW, fake *ecomtest.Platform) (alice string) {
	t.Helper()
	fake.AddShop(aliceShop, "Alice Shop", aliceToken)
	fake.AddOrder(aliceShop, 450789469, `{
  "legacyResourceId": "450789469", "name": "#1001", "phone": null,
  "paymentGatewayNames": ["bogus"],
  "totalPriceSet": {"shopMoney": {"amount": "598.94", "currencyCode": "USD"}},
  "customer": {"firstName": "Bob", "defaultPhoneNumber": {"phoneNumber": "+1 312-555-0199"}},
  "shippingAddress": {"firstName": "Bob", "address1": "Chestnut Street 92", "city": "Louisville", "phone": null, "countryCodeV2": "US"},
  "billingAddress": null,
  "lineItems": {"nodes": [{"title": "IPod Nano - 8gb", "quantity": 3}]},
  "fulfillments": []
}`)
	alice = tg.newClient("alice")
	tg.link(alice, "447700900001")
	r := tg.do("POST", "/api/ecom/manual-connect", bearerAuth(alice), map[string]any{"shop": aliceShop, "accessToken": aliceToken, "webhookSecret": hookSecret})
	want(t, r, 200, "")
	return alice
}

func TestStoreWebhooksEveryTopic(t *testing.T) {
	sideBySide(t)
	tg, fake := storeGW(t)
	alice := connectedStore(t, tg, fake)
	q := "uid=alice&shop=" + aliceShop
	post := func(topic, id string, body []byte) {
		t.Helper()
		r := tg.webhook(q, shopifyHook(topic, aliceShop, hookSecret, id, body), body)
		if want(t, r, 200, ""); r.str("status") != "queued" {
			t.Fatalf("%s: %s", topic, r.raw)
		}
	}
	const customer = "13125550101"
	wantDelivered := func(n int, contains ...string) string {
		t.Helper()
		var msgs []map[string]any
		eventually(t, 15*time.Second, fmt.Sprintf("%d messages at the customer", n), func() bool {
			msgs = tg.simMessages(customer)
			return len(msgs) >= n
		})
		if len(msgs) != n {
			t.Fatalf("%d messages, want %d: %v", len(msgs), n, msgs)
		}
		text := msgs[n-1]["text"].(string)
		for _, c := range contains {
			if !strings.Contains(text, c) {
				t.Fatalf("message %d %q lacks %q", n, text, c)
			}
		}
		if msgs[n-1]["from"] != "447700900001" {
			t.Fatalf("sent from %v", msgs[n-1]["from"])
		}
		return text
	}

	// orders/create with the default template: name, number, items, total, currency, store.
	post("orders/create", "w-create", orderBody(t, 1001, "#1001", "+1 (312) 555-0101"))
	text := wantDelivered(1)
	if text != "Hi John, thank you for your order #1001 at Alice Shop!\n\nSoda x 1\nAnother Beer For Good Times x 1\n\nTotal: 10.00 USD\n\nWe will let you know when it ships." {
		t.Fatalf("orders/create message: %q", text)
	}
	ev := tg.waitEvent(alice, "w-create")
	if ev["status"] != "sent" || ev["orderName"] != "#1001" || ev["phone"] != customer || ev["messageId"] == nil || ev["topic"] != "orders/create" {
		t.Fatalf("event: %v", ev)
	}

	post("orders/paid", "w-paid", orderBody(t, 1001, "#1001", "+1 (312) 555-0101"))
	wantDelivered(2, "John", "10.00 USD", "#1001", "Alice Shop")
	post("orders/cancelled", "w-cancelled", orderBody(t, 1001, "#1001", "+1 (312) 555-0101"))
	wantDelivered(3, "John", "#1001", "cancelled")

	// A fulfillment carries no customer: the order is fetched through the Admin API (its
	// customer Bob is at +1 312-555-0199, another number).
	ful := readFixture(t, "shopify/fulfillment.json")
	post("fulfillments/create", "w-fulfilled", mustJSON(t, ful))
	var bob []map[string]any
	eventually(t, 15*time.Second, "shipping message", func() bool { bob = tg.simMessages("13125550199"); return len(bob) == 1 })
	if txt := bob[0]["text"].(string); !strings.Contains(txt, "Hi Bob") || !strings.Contains(txt, "#1001") ||
		!strings.Contains(txt, "Tracking number: 123456789 (Bluedart)") || !strings.Contains(txt, "https://shipping.xyz/track.php?num=123456789") {
		t.Fatalf("fulfillment message %q", txt)
	}
	fetched := false
	for _, r := range fake.Requests() {
		fetched = fetched || (strings.Contains(string(r.Body), "gid://shopify/Order/450789469") && r.Token == aliceToken)
	}
	if !fetched {
		t.Fatal("the order was not fetched with the store's token")
	}
	// A refund, in its own shape.
	refund := map[string]any{"id": 929361462, "order_id": 450789469, "created_at": "2026-03-01T12:00:00-05:00", "note": "wrong size",
		"refund_line_items": []any{map[string]any{"id": 1, "quantity": 1, "line_item_id": 466157049, "line_item": map[string]any{"title": "IPod Nano - 8gb", "quantity": 3}}},
		"transactions":      []any{map[string]any{"id": 1, "amount": "199.00", "kind": "refund", "status": "success", "currency": "USD"}}}
	post("refunds/create", "w-refund", mustJSON(t, refund))
	eventually(t, 15*time.Second, "refund message", func() bool { bob = tg.simMessages("13125550199"); return len(bob) == 2 })
	if txt := bob[1]["text"].(string); !strings.Contains(txt, "Hi Bob") || !strings.Contains(txt, "199.00 USD") || !strings.Contains(txt, "#1001") {
		t.Fatalf("refund message %q", txt)
	}

	// A custom template is used once saved (both placeholder forms).
	tpl := tg.do("GET", "/api/client/templates", bearerAuth(alice), nil)
	want(t, tpl, 200, "")
	list := tpl.obj()["templates"].([]any)
	if len(list) != 6 || list[0].(map[string]any)["isDefault"] != true || list[0].(map[string]any)["enabled"] != true {
		t.Fatalf("templates: %s", tpl.raw)
	}
	custom := "Order {orderId}: {customerName}, {{order_number}} = {totalPrice} {currency}; {items_count} lines: {items_list} {unknown_thing}"
	r := tg.do("PUT", "/api/client/templates", bearerAuth(alice), map[string]any{"topic": "orders/create", "text": custom})
	if want(t, r, 200, ""); r.obj()["template"].(map[string]any)["isDefault"] != false {
		t.Fatalf("put template: %s", r.raw)
	}
	post("orders/create", "w-create-2", orderBody(t, 1002, "#1002", "+1 (312) 555-0101"))
	if text := wantDelivered(4); text != "Order 1002: John, #1002 = 10.00 USD; 2 lines: Soda x 1\nAnother Beer For Good Times x 1 {unknown_thing}" {
		t.Fatalf("custom template message: %q", text)
	}

	// A disabled topic sends nothing.
	want(t, tg.do("PUT", "/api/client/templates", bearerAuth(alice), map[string]any{"topic": "orders/paid", "enabled": false}), 200, "")
	post("orders/paid", "w-paid-2", orderBody(t, 1002, "#1002", "+1 (312) 555-0101"))
	if ev := tg.waitEvent(alice, "w-paid-2"); ev["status"] != "skipped" || ev["reason"] != "template disabled" {
		t.Fatalf("disabled topic: %v", ev)
	}
	if n := len(tg.simMessages(customer)); n != 4 {
		t.Fatalf("%d messages after a disabled topic, want 4", n)
	}
	// Back to the default, enabled again.
	r = tg.do("PUT", "/api/client/templates", bearerAuth(alice), map[string]any{"topic": "orders/create", "text": ""})
	if o := r.obj()["template"].(map[string]any); o["isDefault"] != true || !strings.HasPrefix(o["text"].(string), "Hi {customer_name}") {
		t.Fatalf("reset template: %s", r.raw)
	}
	want(t, tg.do("PUT", "/api/client/templates", bearerAuth(alice), map[string]any{"topic": "orders/other", "text": "x"}), 400, "validation_failed")
	want(t, tg.do("PUT", "/api/client/templates", bearerAuth(alice), map[string]any{"topic": "orders/paid"}), 400, "validation_failed")

	// The account counted every message; the metrics saw the webhooks.
	if sent := tg.metric(`gateway_store_events_total{outcome="sent"}`); sent != 6 {
		t.Fatalf("store events sent metric %v, want 6", sent)
	}
	if q := tg.metric(`gateway_store_webhooks_total{outcome="queued",topic="orders/create"}`); q != 2 {
		t.Fatalf("queued orders/create metric %v", q)
	}
}

func TestStoreWebhookRefusalsAndDedupe(t *testing.T) {
	sideBySide(t)
	tg, fake := storeGW(t)
	alice := connectedStore(t, tg, fake)
	q := "uid=alice&shop=" + aliceShop
	body := orderBody(t, 2001, "#2001", "+1 312 555 0102")
	const customer = "13125550102"

	// A bad or missing signature: 401, nothing queued or sent.
	want(t, tg.webhook(q, shopifyHook("orders/create", aliceShop, "wrong-secret", "w-bad", body), body), 401, "invalid_signature")
	want(t, tg.webhook(q, shopifyHook("orders/create", aliceShop, "", "w-unsigned", body), body), 401, "invalid_signature")
	tampered := append([]byte(nil), body...)
	tampered[len(tampered)-2] = ' '
	h := shopifyHook("orders/create", aliceShop, hookSecret, "w-tampered", body)
	want(t, tg.webhook(q, h, tampered), 401, "invalid_signature")
	if tg.metric("gateway_store_webhook_signature_failures_total") != 3 {
		t.Fatalf("signature failures metric %v", tg.metric("gateway_store_webhook_signature_failures_total"))
	}

	// The same webhook id twice: one message.
	r := tg.webhook(q, shopifyHook("orders/create", aliceShop, hookSecret, "w-dup", body), body)
	if want(t, r, 200, ""); r.str("status") != "queued" {
		t.Fatalf("first delivery: %s", r.raw)
	}
	r = tg.webhook(q, shopifyHook("orders/create", aliceShop, hookSecret, "w-dup", body), body)
	if want(t, r, 200, ""); r.str("status") != "duplicate" {
		t.Fatalf("second delivery: %s", r.raw)
	}
	tg.waitEvent(alice, "w-dup")
	// The platform repeating the same order event under another delivery id is not sent again.
	want(t, tg.webhook(q, shopifyHook("orders/create", aliceShop, hookSecret, "w-dup-other-id", body), body), 200, "")
	if ev := tg.waitEvent(alice, "w-dup-other-id"); ev["status"] != "skipped" {
		t.Fatalf("repeated event: %v", ev)
	}
	if n := len(tg.simMessages(customer)); n != 1 {
		t.Fatalf("%d messages for one webhook id, want 1", n)
	}
	for _, id := range []string{"w-bad", "w-unsigned", "w-tampered"} {
		if tg.storeEvent(alice, id) != nil {
			t.Fatalf("a refused webhook %s was recorded", id)
		}
	}

	// No phone anywhere: 200 ignored, recorded as skipped.
	m := readFixture(t, "shopify/order.json")
	m["id"], m["name"] = 2002, "#2002"
	delete(m["customer"].(map[string]any), "phone")
	m["customer"].(map[string]any)["default_address"].(map[string]any)["phone"] = nil
	m["billing_address"].(map[string]any)["phone"] = nil
	m["shipping_address"].(map[string]any)["phone"] = ""
	m["shipping_lines"].([]any)[0].(map[string]any)["phone"] = nil
	noPhone := mustJSON(t, m)
	r = tg.webhook(q, shopifyHook("orders/create", aliceShop, hookSecret, "w-nophone", noPhone), noPhone)
	if want(t, r, 200, ""); r.str("status") != "ignored" || !strings.Contains(r.str("reason"), "phone") {
		t.Fatalf("no phone: %s", r.raw)
	}
	eventually(t, 5*time.Second, "the ignored event recorded", func() bool {
		ev := tg.storeEvent(alice, "w-nophone")
		return ev != nil && ev["status"] == "skipped" && strings.Contains(ev["reason"].(string), "phone")
	})
	// A phone that does not parse is skipped by the worker with the fields it tried.
	m["shipping_address"].(map[string]any)["phone"] = "call me"
	m["id"] = 2003
	badPhone := mustJSON(t, m)
	want(t, tg.webhook(q, shopifyHook("orders/create", aliceShop, hookSecret, "w-badphone", badPhone), badPhone), 200, "")
	if ev := tg.waitEvent(alice, "w-badphone"); ev["status"] != "skipped" || !strings.Contains(ev["reason"].(string), "shipping_address.phone") {
		t.Fatalf("unusable phone: %v", ev)
	}

	// A topic that sends nothing.
	r = tg.webhook(q, shopifyHook("products/update", aliceShop, hookSecret, "w-product", body), body)
	if want(t, r, 200, ""); r.str("status") != "ignored" {
		t.Fatalf("other topic: %s", r.raw)
	}

	// Malformed JSON: 400.
	for _, bad := range [][]byte{[]byte(`{"id": 1, "name": `), []byte(`[{"id": 1}]`), nil} {
		want(t, tg.webhook(q, shopifyHook("orders/create", aliceShop, hookSecret, "w-malformed", bad), bad), 400, "invalid_json")
	}
	// An order with no usable id, which no message can be made of: 400 at once, with the
	// reason (the platform shows the store owner a refused delivery), not accepted and failed.
	for _, id := range []string{`null`, `-1`, `1e300`} {
		noID := []byte(`{"id": ` + id + `, "name": "#9", "customer": {"phone": "+1 312 555 0101"}}`)
		r := tg.webhook(q, shopifyHook("orders/create", aliceShop, hookSecret, "w-noid-"+id, noID), noID)
		if want(t, r, 400, "invalid_json"); !strings.Contains(r.str("error"), "order without id") {
			t.Fatalf("an order with id %s answered %s", id, r.raw)
		}
	}
	// No topic: 400.
	h = shopifyHook("orders/create", aliceShop, hookSecret, "w-notopic", body)
	delete(h, "X-Shopify-Topic")
	want(t, tg.webhook(q, h, body), 400, "validation_failed")

	// Unknown stores: 404.
	want(t, tg.webhook("uid=nobody&shop="+aliceShop, shopifyHook("orders/create", aliceShop, hookSecret, "w-x", body), body), 404, "store_not_found")
	want(t, tg.webhook("uid=alice&shop=other.myshopify.com", shopifyHook("orders/create", aliceShop, hookSecret, "w-x", body), body), 404, "store_not_found")
	want(t, tg.webhook("shop=other.myshopify.com", shopifyHook("orders/create", aliceShop, hookSecret, "w-x", body), body), 404, "store_not_found")
	// Without uid, the store is found by its shop (query, else header, as x-ecom-*).
	b2 := orderBody(t, 2004, "#2004", "+1 312 555 0102")
	hh := map[string]string{"x-ecom-topic": "orders/create", "x-ecom-shop-domain": aliceShop,
		"X-Shopify-Hmac-Sha256": ecom.SignWebhook(b2, hookSecret), "X-Shopify-Webhook-Id": "w-by-header"}
	r = tg.webhook("", hh, b2)
	if want(t, r, 200, ""); r.str("status") != "queued" {
		t.Fatalf("by header: %s", r.raw)
	}
	eventually(t, 15*time.Second, "second order delivered", func() bool { return len(tg.simMessages(customer)) == 2 })

	// GET /api/ecom/test is public.
	if r := tg.do("GET", "/api/ecom/test", nil, nil); r.status != 200 || r.str("status") != "ok" || r.str("timestamp") == "" {
		t.Fatalf("ecom test: %s", r.raw)
	}
}

func TestStoreRequireWebhookSignature(t *testing.T) {
	sideBySide(t)
	tg, _ := storeGW(t, "--require-webhook-signature")
	alice := tg.newClient("alice")
	want(t, tg.do("POST", "/api/ecom/native-connect", bearerAuth(alice), map[string]any{"shop": aliceShop}), 200, "")
	body := orderBody(t, 3001, "#3001", "+1 312 555 0103")
	r := tg.webhook("uid=alice&shop="+aliceShop, shopifyHook("orders/create", aliceShop, "", "w-1", body), body)
	want(t, r, 401, "invalid_signature")
	// With a secret, signed webhooks pass.
	r = tg.do("POST", "/api/ecom/native-connect", bearerAuth(alice), map[string]any{"shop": aliceShop, "webhookSecret": hookSecret})
	if want(t, r, 200, ""); !strings.Contains(r.str("message"), testPublicURL+"/api/ecom/webhook?uid=alice&shop="+aliceShop) {
		t.Fatalf("native-connect message: %s", r.raw)
	}
	want(t, tg.webhook("uid=alice&shop="+aliceShop, shopifyHook("orders/create", aliceShop, hookSecret, "w-2", body), body), 200, "")
	// Another user cannot claim the shop without proving access to it.
	bob := tg.newClient("bob")
	want(t, tg.do("POST", "/api/ecom/native-connect", bearerAuth(bob), map[string]any{"shop": aliceShop}), 409, "store_connected_elsewhere")
	want(t, tg.do("POST", "/api/ecom/native-connect", bearerAuth(bob), map[string]any{"shop": "bob.example.com"}), 400, "invalid_shop")
}

func TestStoreWooCommerce(t *testing.T) {
	sideBySide(t)
	tg, _ := storeGW(t)
	alice := tg.newClient("alice")
	tg.link(alice, "447700900001")
	want(t, tg.do("POST", "/api/client/store/connect", bearerAuth(alice), map[string]any{"platform": "woocommerce", "domain": "https://Shop.Example.com/", "webhookSecret": hookSecret}), 200, "")
	want(t, tg.do("POST", "/api/client/store/connect", bearerAuth(alice), map[string]any{"platform": "magento", "domain": "x.example.com"}), 400, "validation_failed")
	want(t, tg.do("POST", "/api/client/store/connect", bearerAuth(alice), map[string]any{"platform": "shopify", "domain": aliceShop}), 400, "validation_failed")
	st := tg.store(alice)
	if st["platform"] != "woocommerce" || st["shop"] != "shop.example.com" || st["hasWebhookSecret"] != true {
		t.Fatalf("woo store: %v", st)
	}
	q := "uid=alice&shop=shop.example.com"

	// The ping WooCommerce sends when a webhook is created: unsigned form body.
	r := tg.do("POST", "/api/ecom/webhook?"+q, auth{"Content-Type": "application/x-www-form-urlencoded", "X-WC-Webhook-Source": "https://shop.example.com/"}, "webhook_id=17")
	if want(t, r, 200, ""); r.str("status") != "ignored" {
		t.Fatalf("ping: %s", r.raw)
	}

	body, err := os.ReadFile(filepath.Join("ecom", "testdata", "woocommerce-order.json"))
	if err != nil {
		t.Fatal(err)
	}
	wh := func(sig, id string) map[string]string {
		return map[string]string{"X-WC-Webhook-Topic": "order.created", "X-WC-Webhook-Source": "https://shop.example.com/",
			"X-WC-Webhook-Signature": sig, "X-WC-Webhook-Delivery-ID": id, "X-WC-Webhook-Resource": "order", "X-WC-Webhook-Event": "created"}
	}
	want(t, tg.webhook(q, wh(ecom.SignWebhook(body, "wrong"), "11"), body), 401, "invalid_signature")
	r = tg.webhook(q, wh(ecom.SignWebhook(body, hookSecret), "12"), body)
	if want(t, r, 200, ""); r.str("status") != "queued" {
		t.Fatalf("order.created: %s", r.raw)
	}
	var msgs []map[string]any
	eventually(t, 15*time.Second, "the WooCommerce customer's message", func() bool {
		msgs = tg.simMessages("15555555555")
		return len(msgs) == 1
	})
	// The fixture's order is processing: the payment message, HTML entities decoded.
	if txt := msgs[0]["text"].(string); !strings.Contains(txt, "Hi John") || !strings.Contains(txt, "29.35 USD") || !strings.Contains(txt, "#727") {
		t.Fatalf("woo message %q", txt)
	}
	if ev := tg.waitEvent(alice, "12"); ev["status"] != "sent" || ev["topic"] != "orders/paid" {
		t.Fatalf("woo event: %v", ev)
	}

	// Without a query, the store is found by its source address. The order completed: the
	// shipping message.
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	m["status"] = "completed"
	done := mustJSON(t, m)
	h := wh(ecom.SignWebhook(done, hookSecret), "13")
	h["X-WC-Webhook-Topic"] = "order.updated"
	if r := tg.webhook("", h, done); r.status != 200 || r.str("status") != "queued" {
		t.Fatalf("by source: %d %s", r.status, r.raw)
	}
	eventually(t, 15*time.Second, "the shipping message", func() bool {
		msgs = tg.simMessages("15555555555")
		return len(msgs) == 2
	})
	if txt := msgs[1]["text"].(string); !strings.Contains(txt, "on its way") || !strings.Contains(txt, "#727") {
		t.Fatalf("woo shipping message %q", txt)
	}
}

func TestStoreWebhookWhileSessionDisconnected(t *testing.T) {
	sideBySide(t)
	tg, fake := storeGW(t)
	alice := connectedStore(t, tg, fake)
	sid := tg.status(alice)["id"].(string)
	// The phone logs the session out: it stays disconnected until linked again.
	want(t, tg.do("POST", "/api/dev/sim/drop", nil, map[string]any{"sessionId": sid, "logout": true}), 200, "")
	tg.waitStatus(alice, "DISCONNECTED")

	body := orderBody(t, 4001, "#4001", "+1 312 555 0104")
	r := tg.webhook("uid=alice&shop="+aliceShop, shopifyHook("orders/create", aliceShop, hookSecret, "w-offline", body), body)
	if want(t, r, 200, ""); r.str("status") != "queued" {
		t.Fatalf("webhook while disconnected: %s", r.raw)
	}
	eventually(t, 10*time.Second, "the event waiting for the session", func() bool {
		ev := tg.storeEvent(alice, "w-offline")
		return ev != nil && ev["status"] == "pending" && ev["attempts"].(float64) >= 1 && strings.Contains(fmt.Sprint(ev["reason"]), "not connected")
	})
	if tg.metric("gateway_store_events_pending") != 1 {
		t.Fatalf("pending metric %v", tg.metric("gateway_store_events_pending"))
	}
	if n := len(tg.simMessages("13125550104")); n != 0 {
		t.Fatalf("%d messages while disconnected", n)
	}

	// Linked again: the message goes out.
	want(t, tg.do("POST", "/api/client/start", bearerAuth(alice), ""), 200, "")
	want(t, tg.do("GET", "/api/client/qr", bearerAuth(alice), nil), 200, "")
	want(t, tg.do("POST", "/api/dev/sim/scan", nil, map[string]any{"sessionId": sid, "phone": "447700900001"}), 200, "")
	eventually(t, 15*time.Second, "the message delivered after the reconnect", func() bool { return len(tg.simMessages("13125550104")) == 1 })
	if ev := tg.waitEvent(alice, "w-offline"); ev["status"] != "sent" {
		t.Fatalf("event after reconnect: %v", ev)
	}
	eventually(t, 5*time.Second, "nothing pending", func() bool { return tg.metric("gateway_store_events_pending") == 0 })
}

// An OAuth nonce lives 10 minutes: a callback after that is sent to the error page, over HTTP,
// and nothing is saved.
func TestStoreOAuthExpiredNonce(t *testing.T) {
	sideBySide(t)
	var mu sync.Mutex
	now := time.Now()
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	fake := ecomtest.New()
	t.Cleanup(fake.Close)
	tg := startGWClock(t, clock, "--ecom-api-base", fake.APIBase(), "--public-url", testPublicURL)
	fake.AddShop(aliceShop, "Alice Shop", "")
	fake.SetApp("app-client-id", "app-client-secret")
	alice := tg.newClient("alice")
	r := tg.do("POST", "/api/ecom/oauth-init", bearerAuth(alice), map[string]any{
		"shop": aliceShop, "clientId": "app-client-id", "clientSecret": "app-client-secret"})
	want(t, r, 200, "")
	u, err := url.Parse(r.str("authUrl"))
	if err != nil {
		t.Fatal(err)
	}
	state := u.Query().Get("state")
	fake.AddCode(aliceShop, "code-1", aliceToken, "read_orders,read_customers")

	mu.Lock()
	now = now.Add(11 * time.Minute)
	mu.Unlock()
	q := url.Values{"code": {"code-1"}, "shop": {aliceShop}, "state": {state}, "timestamp": {fmt.Sprint(time.Now().Unix())}}
	q.Set("hmac", ecom.SignOAuthQuery(q, "app-client-secret"))
	if loc := tg.callback(t, q); loc != "/dashboard/connect-store/error?reason=invalid_state" {
		t.Fatalf("redirect %q, want the error page with reason invalid_state", loc)
	}
	if s := tg.store(alice); s["connected"] != false {
		t.Fatalf("a store was saved after an expired nonce: %v", s)
	}
	if subs := fake.Subscriptions(aliceShop); len(subs) != 0 {
		t.Fatalf("webhooks registered after an expired nonce: %v", subs)
	}
}
