package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/ecom"
)

func testFleet(n int) *fleet {
	f := &fleet{adminToken: "admin-token", stores: true}
	for i := range n {
		f.users = append(f.users, benchUser{id: userID(i), token: "tok-" + userID(i), key: "svc_live_key" + strconv.Itoa(i), shop: shopDomain(i), phone: senderPhone(i)})
	}
	return f
}

// requests prepares n requests of a target over two workers, as the generator does, and
// hands each to check before the next is prepared (a worker reuses its body buffer).
func requests(t target, run, n int, check func(req *fasthttp.Request)) {
	ws := []*worker{{id: 0, run: run}, {id: 1, run: run}}
	reqs := []*fasthttp.Request{{}, {}}
	for i := range reqs {
		initRequest(reqs[i], "127.0.0.1:1", t)
	}
	for i := range n {
		w := ws[i%2]
		t.prepare(reqs[i%2], w)
		w.seq++
		check(reqs[i%2])
	}
}

func TestWebhookRequestsAreSignedAndUnique(t *testing.T) {
	f := testFleet(3)
	tgt, recipients := buildWebhook(f, 7)
	webhookIDs, orderIDs := map[string]bool{}, map[float64]bool{}
	requests(tgt, 7, 40, func(req *fasthttp.Request) {
		body := req.Body()
		mac := hmac.New(sha256.New, []byte(webhookSecret))
		mac.Write(body)
		if got, want := string(req.Header.Peek("X-Shopify-Hmac-Sha256")), base64.StdEncoding.EncodeToString(mac.Sum(nil)); got != want {
			t.Fatalf("signature %q, want %q", got, want)
		}
		var order struct {
			ID       float64 `json:"id"`
			Customer struct {
				Phone string `json:"phone"`
			} `json:"customer"`
		}
		if err := json.Unmarshal(body, &order); err != nil {
			t.Fatalf("body is not JSON: %v: %s", err, body)
		}
		id := string(req.Header.Peek("X-Shopify-Webhook-Id"))
		if webhookIDs[id] || orderIDs[order.ID] {
			t.Fatalf("webhook id %q or order id %.0f repeated", id, order.ID)
		}
		webhookIDs[id], orderIDs[order.ID] = true, true

		shop := string(req.Header.Peek("X-Shopify-Shop-Domain"))
		u := strings.Index(shop, ".")
		idx, _ := strconv.Atoi(strings.TrimPrefix(shop[:u], "bench-u"))
		q := req.URI().QueryArgs()
		if string(q.Peek("shop")) != shop || string(q.Peek("uid")) != userID(idx) || string(req.URI().Path()) != "/api/ecom/webhook" {
			t.Fatalf("uri %s does not name the store %s", req.URI(), shop)
		}
		if string(req.Header.Peek("X-Shopify-Topic")) != "orders/create" {
			t.Fatalf("topic %q", req.Header.Peek("X-Shopify-Topic"))
		}
		// The gateway reads the shopper's number with libphonenumber: it must land on the
		// recipient the delivery check counts.
		if got, ok := ecom.NormalizePhone(order.Customer.Phone, "US"); !ok || got != recipients[idx] {
			t.Fatalf("customer phone %q reads as %q (%v), want %s", order.Customer.Phone, got, ok, recipients[idx])
		}
	})
}

func TestSendRequestsPairKeysWithTheirRecipients(t *testing.T) {
	f := testFleet(5)
	for _, idem := range []bool{false, true} {
		tgt, recipients := buildSend(idem)(f, 3)
		keys := map[string]bool{}
		requests(tgt, 3, 20, func(req *fasthttp.Request) {
			var body struct{ Phone, Message string }
			if err := json.Unmarshal(req.Body(), &body); err != nil || body.Message == "" {
				t.Fatalf("body %s: %v", req.Body(), err)
			}
			key := string(req.Header.Peek("x-api-key"))
			k, _ := strconv.Atoi(strings.TrimPrefix(key, "svc_live_key"))
			if body.Phone != "+"+recipients[k] {
				t.Fatalf("key %d sends to %s, want its own recipient %s", k, body.Phone, recipients[k])
			}
			ik := string(req.Header.Peek("Idempotency-Key"))
			if idem != (ik != "") || (idem && keys[ik]) {
				t.Fatalf("idempotent %v: Idempotency-Key %q (seen %v)", idem, ik, keys[ik])
			}
			keys[ik] = true
		})
		if len(recipients) != 5 || recipients[0] == recipients[1] {
			t.Fatalf("recipients %v", recipients)
		}
		other, _ := buildSend(idem)(f, 4)
		requests(other, 4, 1, func(r2 *fasthttp.Request) {
			if strings.Contains(string(r2.Body()), recipients[0]) {
				t.Fatal("two runs share a recipient: their deliveries could not be told apart")
			}
		})
	}
}

func TestReadOnlyCasesSpreadCredentials(t *testing.T) {
	f := testFleet(4)
	for _, tc := range []struct {
		id  string
		got func(*fasthttp.Request) string
	}{
		{"validate", func(r *fasthttp.Request) string { return string(r.Body()) }},
		{"account", func(r *fasthttp.Request) string { return string(r.Header.Peek("x-api-key")) }},
		{"status", func(r *fasthttp.Request) string { return string(r.Header.Peek("Authorization")) }},
	} {
		t.Run(tc.id, func(t *testing.T) {
			c := caseByID(tc.id)
			tgt, recipients := c.build(f, 1)
			if recipients != nil || c.delivers {
				t.Fatal("a read-only case has recipients")
			}
			seen := map[string]bool{}
			requests(tgt, 1, 8, func(req *fasthttp.Request) {
				if string(req.Header.Method()) != c.method || string(req.URI().Path()) != c.path {
					t.Fatalf("%s %s, want %s %s", req.Header.Method(), req.URI().Path(), c.method, c.path)
				}
				seen[tc.got(req)] = true
			})
			if len(seen) != 4 {
				t.Fatalf("%d distinct credentials over 8 requests for 4 users", len(seen))
			}
		})
	}
}

func TestOrderIDsAreFixedWidth(t *testing.T) {
	dst := make([]byte, orderIDDigits)
	seen := map[string]bool{}
	for _, w := range []worker{{run: 99, id: 989, seq: 9_999_999_999}, {run: 0, id: 0, seq: 0}, {run: 1, id: 0, seq: 0}, {run: 0, id: 1, seq: 0}, {run: 0, id: 0, seq: 1}} {
		putOrderID(dst, &w)
		if dst[0] != '1' || seen[string(dst)] {
			t.Fatalf("order id %s for %+v", dst, w)
		}
		seen[string(dst)] = true
	}
}

// The cases that answer only after a durable commit are the ones measured against the floor.
func TestDurableCasesAreTheWritingOnes(t *testing.T) {
	var durable []string
	for _, c := range benchCases {
		if c.durable {
			durable = append(durable, c.id)
		}
	}
	if strings.Join(durable, ",") != "send,send-idem,webhook,webhook-route" {
		t.Fatalf("durable cases %v, want send, send-idem, webhook, webhook-route", durable)
	}
}
