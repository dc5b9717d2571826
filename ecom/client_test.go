package ecom

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	json "github.com/goccy/go-json"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/ecom/ecomtest"
)

const (
	testShop  = "acme-store.myshopify.com"
	testToken = "shpat_0123456789abcdef"
)

func newFake(t *testing.T) (*ecomtest.Platform, *Client) {
	t.Helper()
	p := ecomtest.New()
	t.Cleanup(p.Close)
	p.AddShop(testShop, "Acme Store", testToken)
	return p, NewClient(ClientOptions{APIBase: p.APIBase(), APIVersion: "2026-10", Timeout: 5 * time.Second})
}

func TestValidShopDomain(t *testing.T) {
	for shop, want := range map[string]bool{
		"acme.myshopify.com":                       true,
		"Acme-Store.MyShopify.com":                 true,
		"a1.myshopify.com":                         true,
		"1-2-3.myshopify.com":                      true,
		"-acme.myshopify.com":                      false,
		".myshopify.com":                           false,
		"acme.myshopify.com.evil.com":              false,
		"acme.evil.com":                            false,
		"acme_store.myshopify.com":                 false,
		"a.b.myshopify.com":                        false,
		"https://acme.myshopify.com":               false,
		"acme.myshopify.com/":                      false,
		"acme.myshopify.com:443":                   false,
		"":                                         false,
		strings.Repeat("a", 64) + ".myshopify.com": false,
		strings.Repeat("a", 63) + ".myshopify.com": true,
	} {
		if got := ValidShopDomain(shop); got != want {
			t.Errorf("ValidShopDomain(%q) = %v, want %v", shop, got, want)
		}
	}
	if s, ok := NormalizeShopDomain(" https://Acme.myshopify.com/admin?x=1 "); !ok || s != "acme.myshopify.com" {
		t.Errorf("NormalizeShopDomain = %q, %v", s, ok)
	}
	if _, ok := NormalizeShopDomain("https://acme.example.com"); ok {
		t.Error("NormalizeShopDomain accepted another domain")
	}
}

func TestNormalizeHost(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"shop.example.com", "shop.example.com"},
		{"  https://Shop.Example.com/wp-admin?x=1#y ", "shop.example.com"},
		{"http://shop.example.com.", "shop.example.com"},
		{"shop.example.com:8443", "shop.example.com:8443"},
		{"localhost:8080", "localhost:8080"},
		{"", ""},
		{"https://", ""},
		{"shop", ""},              // no dot, not localhost
		{".example.com", ""},      // starts with a dot
		{"-shop.example.com", ""}, // starts with a hyphen
		{"shop_1.example.com", ""},
		{"user@shop.example.com", ""},
		{strings.Repeat("a", 250) + ".com", ""}, // over 253 bytes
	} {
		got, ok := NormalizeHost(c.in)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("NormalizeHost(%q) = %q, %v; want %q", c.in, got, ok, c.want)
		}
	}
}

func TestValidAccessToken(t *testing.T) {
	for tok, want := range map[string]bool{
		"shpat_abc": true, "shpca_abc": true, "shppa_abc": true,
		"": false, "shpss_abc": false, "abc": false, " shpat_abc": false, "SHPAT_abc": false,
	} {
		if got := ValidAccessToken(tok); got != want {
			t.Errorf("ValidAccessToken(%q) = %v, want %v", tok, got, want)
		}
	}
}

func TestVerifyToken(t *testing.T) {
	p, c := newFake(t)
	ctx := context.Background()
	name, err := c.VerifyToken(ctx, "Acme-Store.myshopify.com", testToken)
	if err != nil || name != "Acme Store" {
		t.Fatalf("VerifyToken = %q, %v", name, err)
	}
	reqs := p.Requests()
	if len(reqs) != 1 || reqs[0].Shop != testShop || reqs[0].Path != "/admin/api/2026-10/graphql.json" || reqs[0].Token != testToken {
		t.Fatalf("request %+v", reqs)
	}
	var body struct {
		Query string `json:"query"`
	}
	if err := json.Unmarshal(reqs[0].Body, &body); err != nil || !strings.Contains(body.Query, "shop { name }") {
		t.Fatalf("query %q err %v", body.Query, err)
	}

	_, err = c.VerifyToken(ctx, testShop, "shpat_wrong")
	if !errors.Is(err, domain.ErrStoreTokenRejected) {
		t.Fatalf("wrong token: err = %v", err)
	}
	if strings.Contains(err.Error(), "shpat_wrong") {
		t.Fatalf("token in error: %v", err)
	}
	if _, err := c.VerifyToken(ctx, testShop, ""); !errors.Is(err, domain.ErrStoreTokenRejected) {
		t.Fatalf("empty token: err = %v", err)
	}

	p.FailNext(1, http.StatusServiceUnavailable)
	if _, err := c.VerifyToken(ctx, testShop, testToken); !errors.Is(err, domain.ErrStorePlatform) || !strings.Contains(err.Error(), "503") {
		t.Fatalf("503: err = %v", err)
	}
}

func TestInvalidShopSendsNothing(t *testing.T) {
	p, c := newFake(t)
	ctx := context.Background()
	for _, shop := range []string{"evil.com", "acme.myshopify.com.evil.com", "x/../acme.myshopify.com", ""} {
		if _, err := c.VerifyToken(ctx, shop, testToken); !errors.Is(err, domain.ErrInvalidShop) {
			t.Errorf("VerifyToken(%q): %v", shop, err)
		}
		if n, err := c.RegisterWebhooks(ctx, shop, testToken, "https://gw.example/api/ecom/webhook"); n != 0 || !errors.Is(err, domain.ErrInvalidShop) {
			t.Errorf("RegisterWebhooks(%q): %d %v", shop, n, err)
		}
		if _, _, err := c.ExchangeCode(ctx, shop, "id", "secret", "code"); !errors.Is(err, domain.ErrInvalidShop) {
			t.Errorf("ExchangeCode(%q): %v", shop, err)
		}
		if _, err := c.FetchOrder(ctx, shop, testToken, 1); !errors.Is(err, domain.ErrInvalidShop) {
			t.Errorf("FetchOrder(%q): %v", shop, err)
		}
		if u := c.AuthorizeURL(shop, "id", "read_orders", "https://gw.example/cb", "s"); u != "" {
			t.Errorf("AuthorizeURL(%q) = %q", shop, u)
		}
	}
	if n := len(p.Requests()); n != 0 {
		t.Fatalf("%d requests reached the platform", n)
	}
}

func TestRegisterWebhooks(t *testing.T) {
	p, c := newFake(t)
	ctx := context.Background()
	callback := "https://gw.example/api/ecom/webhook?uid=u1&shop=" + testShop
	n, err := c.RegisterWebhooks(ctx, testShop, testToken, callback)
	if err != nil || n != 5 {
		t.Fatalf("RegisterWebhooks = %d, %v", n, err)
	}
	subs := p.Subscriptions(testShop)
	// The five, then the two checkout topics (best effort, not counted).
	wantTopics := []string{"ORDERS_CREATE", "ORDERS_PAID", "FULFILLMENTS_CREATE", "ORDERS_CANCELLED", "REFUNDS_CREATE", "CHECKOUTS_CREATE", "CHECKOUTS_UPDATE"}
	if len(subs) != len(wantTopics) {
		t.Fatalf("subscriptions %+v", subs)
	}
	for i, s := range subs {
		if s.Topic != wantTopics[i] || s.URI != callback {
			t.Errorf("subscription %d = %+v", i, s)
		}
	}
	for _, r := range p.Requests() {
		var body struct {
			Query     string `json:"query"`
			Variables struct {
				Sub map[string]any `json:"webhookSubscription"`
			} `json:"variables"`
		}
		if err := json.Unmarshal(r.Body, &body); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(body.Query, "webhookSubscriptionCreate(topic: $topic, webhookSubscription: $webhookSubscription)") {
			t.Errorf("query %q", body.Query)
		}
		if len(body.Variables.Sub) != 1 || body.Variables.Sub["uri"] != callback {
			t.Errorf("input %v: want only uri", body.Variables.Sub)
		}
	}

	// Connecting again: every topic "already taken", all counted, nothing duplicated.
	n, err = c.RegisterWebhooks(ctx, testShop, testToken, callback)
	if err != nil || n != 5 || len(p.Subscriptions(testShop)) != 7 {
		t.Fatalf("second registration = %d, %v, %d subscriptions", n, err, len(p.Subscriptions(testShop)))
	}

	if n, err := c.RegisterWebhooks(ctx, testShop, "shpat_bad", callback); n != 0 || !errors.Is(err, domain.ErrStoreTokenRejected) {
		t.Fatalf("bad token = %d, %v", n, err)
	}
	before := len(p.Requests())
	if _, err := c.RegisterWebhooks(ctx, testShop, testToken, "/relative"); err == nil || len(p.Requests()) != before {
		t.Fatalf("relative callback: err %v, requests sent %d", err, len(p.Requests())-before)
	}
}

func TestRegisterWebhooksPartialFailure(t *testing.T) {
	p, c := newFake(t)
	p.FailNext(2, http.StatusInternalServerError)
	n, err := c.RegisterWebhooks(context.Background(), testShop, testToken, "https://gw.example/hook")
	if n != 3 || !errors.Is(err, domain.ErrStorePlatform) {
		t.Fatalf("= %d, %v; want 3 and ErrUpstream", n, err)
	}
	if len(p.Subscriptions(testShop)) != 3+2 { // and the checkout topics
		t.Fatalf("subscriptions %+v", p.Subscriptions(testShop))
	}
}

func TestRegisterWebhooksUserErrors(t *testing.T) {
	// A platform that refuses one topic for a reason other than "taken".
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		switch i {
		case 1:
			_, _ = w.Write([]byte(`{"data":{"webhookSubscriptionCreate":{"webhookSubscription":null,"userErrors":[{"field":["webhookSubscription","uri"],"message":"Address is invalid"}]}}}`))
		case 2:
			_, _ = w.Write([]byte(`{"data":{"webhookSubscriptionCreate":{"webhookSubscription":null,"userErrors":[{"field":null,"message":"Webhook subscription already exists"}]}}}`))
		case 3:
			_, _ = w.Write([]byte(`{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED"}}]}`))
		case 4:
			_, _ = w.Write([]byte(`{"data":{"webhookSubscriptionCreate":{"webhookSubscription":{"id":"gid://shopify/WebhookSubscription/4"},"userErrors":[]}}}`))
		default:
			_, _ = w.Write([]byte(`{"errors":[{"message":"Access denied for webhookSubscriptionCreate field.","extensions":{"code":"ACCESS_DENIED"}}]}`))
		}
	}))
	defer srv.Close()
	c := NewClient(ClientOptions{APIBase: srv.URL})
	n, err := c.RegisterWebhooks(context.Background(), testShop, testToken, "https://gw.example/hook")
	if n != 2 {
		t.Fatalf("registered %d, want 2 (one created, one already existing)", n)
	}
	if !errors.Is(err, domain.ErrStoreTokenRejected) || !strings.Contains(err.Error(), "ACCESS_DENIED") {
		t.Fatalf("err = %v", err)
	}
	if calls.Load() != 5 {
		t.Fatalf("%d calls", calls.Load())
	}
}

func TestExchangeCode(t *testing.T) {
	p, c := newFake(t)
	ctx := context.Background()
	p.SetApp("client-1", "s3cret-value")
	p.AddCode(testShop, "code-1", "shpat_new", "read_orders,read_customers")

	tok, scope, err := c.ExchangeCode(ctx, testShop, "client-1", "s3cret-value", "code-1")
	if err != nil || tok != "shpat_new" || scope != "read_orders,read_customers" {
		t.Fatalf("ExchangeCode = %q %q %v", tok, scope, err)
	}
	r := p.Requests()[0]
	var body map[string]string
	if err := json.Unmarshal(r.Body, &body); err != nil || r.Path != "/admin/oauth/access_token" ||
		body["client_id"] != "client-1" || body["client_secret"] != "s3cret-value" || body["code"] != "code-1" {
		t.Fatalf("request %s %v err %v", r.Path, body, err)
	}
	// The new token works.
	if name, err := c.VerifyToken(ctx, testShop, tok); err != nil || name != "Acme Store" {
		t.Fatalf("new token: %q %v", name, err)
	}
	// A code works once; wrong app credentials are refused; neither error shows the secret.
	for _, args := range [][2]string{{"s3cret-value", "code-1"}, {"wrong-secret", "code-1"}} {
		_, _, err := c.ExchangeCode(ctx, testShop, "client-1", args[0], args[1])
		if !errors.Is(err, domain.ErrStoreTokenRejected) || strings.Contains(err.Error(), "secret-value") || strings.Contains(err.Error(), "wrong-secret") {
			t.Fatalf("ExchangeCode(%v): %v", args, err)
		}
	}
	if _, _, err := c.ExchangeCode(ctx, testShop, "client-1", "", "code"); !errors.Is(err, domain.ErrStoreTokenRejected) {
		t.Fatalf("empty secret: %v", err)
	}
}

func TestAuthorizeURL(t *testing.T) {
	c := NewClient(ClientOptions{})
	got := c.AuthorizeURL("Acme.myshopify.com", "client-1", "read_orders,read_customers", "https://gw.example/api/ecom/callback", "uid___nonce")
	u, err := url.Parse(got)
	if err != nil {
		t.Fatal(err)
	}
	if u.Scheme != "https" || u.Host != "acme.myshopify.com" || u.Path != "/admin/oauth/authorize" {
		t.Fatalf("url %s", got)
	}
	q := u.Query()
	if q.Get("client_id") != "client-1" || q.Get("scope") != "read_orders,read_customers" ||
		q.Get("redirect_uri") != "https://gw.example/api/ecom/callback" || q.Get("state") != "uid___nonce" {
		t.Fatalf("query %v", q)
	}
	fake := NewClient(ClientOptions{APIBase: "http://127.0.0.1:9/{shop}/"})
	if got := fake.AuthorizeURL("acme.myshopify.com", "c", "s", "r", "x"); !strings.HasPrefix(got, "http://127.0.0.1:9/acme.myshopify.com/admin/oauth/authorize?") {
		t.Fatalf("fake base: %s", got)
	}
}

const graphQLOrder = `{
  "legacyResourceId": "450789469",
  "name": "#1001",
  "phone": null,
  "statusPageUrl": "https://acme.example/orders/abc",
  "paymentGatewayNames": ["bogus"],
  "totalPriceSet": {"shopMoney": {"amount": "598.94", "currencyCode": "USD"}},
  "customer": {"firstName": "Bob", "defaultPhoneNumber": {"phoneNumber": "+13125551212"}},
  "shippingAddress": {"firstName": "Bob", "address1": "Chestnut Street 92", "city": "Louisville", "phone": "555-625-1199", "countryCodeV2": "US"},
  "billingAddress": null,
  "lineItems": {"nodes": [{"title": "IPod Nano - 8gb", "quantity": 3}]},
  "fulfillments": [{"trackingInfo": [{"number": "1Z2345", "url": "https://ups.example/1Z2345", "company": "UPS"}]}]
}`

func TestFetchOrderAndMerge(t *testing.T) {
	p, c := newFake(t)
	ctx := context.Background()
	p.AddOrder(testShop, 450789469, graphQLOrder)

	ev, err := ParseShopify(TopicOrderFulfilled, fixture(t, "shopify/fulfillment.json"))
	if err != nil || !ev.NeedsOrder {
		t.Fatalf("parse: %+v %v", ev, err)
	}
	order, err := c.FetchOrder(ctx, testShop, testToken, ev.OrderID)
	if err != nil {
		t.Fatal(err)
	}
	var body struct {
		Query     string            `json:"query"`
		Variables map[string]string `json:"variables"`
	}
	if err := json.Unmarshal(p.Requests()[0].Body, &body); err != nil || body.Variables["id"] != "gid://shopify/Order/450789469" {
		t.Fatalf("order query variables %v err %v", body.Variables, err)
	}
	if err := MergeOrder(&ev, order); err != nil {
		t.Fatal(err)
	}
	if ev.NeedsOrder || ev.OrderName != "#1001" || ev.CustomerName != "Bob" || ev.Phone != "13125551212" ||
		ev.Total != "598.94" || ev.Currency != "USD" || ev.PaymentMethod != "bogus" || ev.ShippingCity != "Louisville" ||
		ev.OrderStatusURL != "https://acme.example/orders/abc" {
		t.Fatalf("merged %+v", ev)
	}
	// The webhook's own tracking and shipped items stay.
	if ev.TrackingNumber != "123456789" || len(ev.Items) != 3 {
		t.Fatalf("fulfillment fields %+v", ev)
	}
	msg := Render(DefaultTemplate(ev.Topic), ev, "Acme Store")
	if !strings.Contains(msg, "Bob") || !strings.Contains(msg, "#1001") || !strings.Contains(msg, "123456789") {
		t.Fatalf("message %q", msg)
	}

	// The fetched order alone, as an orders/* event: tracking from the order's fulfillment.
	alone, err := ParseShopify(TopicOrderPaid, order)
	if err != nil || alone.TrackingNumber != "1Z2345" || alone.Items[0] != (Item{"IPod Nano - 8gb", 3}) {
		t.Fatalf("fetched order parsed alone: %+v %v", alone, err)
	}

	if _, err := c.FetchOrder(ctx, testShop, testToken, 42); !errors.Is(err, ErrNotFound) {
		t.Fatalf("unknown order: %v", err)
	}
	if _, err := c.FetchOrder(ctx, testShop, "shpat_bad", 450789469); !errors.Is(err, domain.ErrStoreTokenRejected) {
		t.Fatalf("bad token: %v", err)
	}
}

func TestClientTransportFailures(t *testing.T) {
	t.Run("timeout", func(t *testing.T) {
		release := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}))
		defer srv.Close()
		defer close(release)
		c := NewClient(ClientOptions{APIBase: srv.URL, Timeout: 50 * time.Millisecond})
		_, err := c.VerifyToken(context.Background(), testShop, testToken)
		if !errors.Is(err, domain.ErrStorePlatform) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("redirect not followed", func(t *testing.T) {
		var leaked atomic.Bool
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Shopify-Access-Token") != "" {
				leaked.Store(true)
			}
		}))
		defer other.Close()
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, other.URL+"/steal", http.StatusTemporaryRedirect)
		}))
		defer srv.Close()
		c := NewClient(ClientOptions{APIBase: srv.URL, HTTP: &http.Client{}})
		if _, err := c.VerifyToken(context.Background(), testShop, testToken); !errors.Is(err, domain.ErrStorePlatform) {
			t.Fatalf("err = %v", err)
		}
		if leaked.Load() {
			t.Fatal("the token followed a redirect to another host")
		}
	})
	t.Run("garbage answer", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("<html>maintenance</html>"))
		}))
		defer srv.Close()
		c := NewClient(ClientOptions{APIBase: srv.URL})
		if _, err := c.VerifyToken(context.Background(), testShop, testToken); !errors.Is(err, domain.ErrStorePlatform) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("token echoed by the platform is redacted", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"errors":"token ` + r.Header.Get("X-Shopify-Access-Token") + ` is invalid"}`))
		}))
		defer srv.Close()
		c := NewClient(ClientOptions{APIBase: srv.URL})
		_, err := c.VerifyToken(context.Background(), testShop, testToken)
		if !errors.Is(err, domain.ErrStoreTokenRejected) || strings.Contains(err.Error(), testToken) {
			t.Fatalf("err = %v", err)
		}
	})
}

// A store domain that does not resolve is named in the error a client reads, but the resolver
// the gateway asked (its own network's address) is not.
func TestErrorLeavesTheResolverOut(t *testing.T) {
	err := &detailError{kind: domain.ErrStorePlatform, detail: "shop query", cause: &url.Error{Op: "Get", URL: "https://nope.example/x",
		Err: &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "no such host", Name: "nope.example", Server: "10.255.255.53:53", IsNotFound: true}}}}
	if msg := err.Error(); strings.Contains(msg, "10.255.255.53") || !strings.Contains(msg, "lookup nope.example: no such host") {
		t.Fatalf("error %q", msg)
	}
}
