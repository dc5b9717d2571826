package main

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"

	"github.com/valyala/fasthttp"
)

// benchCase is one route under load. build makes the run's target from the fleet: every
// body and header value is built before the run, spread over the users, and recipients are
// unique to the run so the sim's deliveries can be counted per run.
type benchCase struct {
	id, name string
	method   string
	path     string
	delivers bool   // each 2xx answer is one message the sim must deliver
	durable  bool   // answered only after a durable commit: also measured against the floor
	async    bool   // delivered after the answer (the webhook's inbox), so the check waits
	unique   bool   // its requests must not repeat (an Idempotency-Key, a webhook id and order)
	needs    string // "stores": the fleet must have stores connected
	build    func(f *fleet, run int) (target, []string)
}

var benchCases = []benchCase{
	{id: "send", name: "v1 send", method: "POST", path: "/api/v1/messages/send", delivers: true, durable: true, build: buildSend(false)},
	{id: "send-idem", name: "v1 send with Idempotency-Key", method: "POST", path: "/api/v1/messages/send", delivers: true, durable: true, unique: true, build: buildSend(true)},
	{id: "validate", name: "validate", method: "POST", path: "/api/admin/apikeys/validate", build: buildValidate},
	{id: "account", name: "v1 account", method: "GET", path: "/api/v1/account", build: buildAccount},
	{id: "webhook", name: "webhook", method: "POST", path: "/api/ecom/webhook", delivers: true, durable: true, async: true, unique: true, needs: "stores", build: buildWebhook},
	// The route alone: webhooks to stores whose owner has no linked session are accepted into
	// the inbox and wait there, so nothing else runs beside the route.
	{id: "webhook-route", name: "webhook route alone", method: "POST", path: "/api/ecom/webhook", durable: true, unique: true, needs: "stores", build: buildWebhookIdle},
	{id: "status", name: "client status", method: "GET", path: "/api/client/status", build: buildStatus},
}

func caseIDs() []string {
	ids := make([]string, len(benchCases))
	for i, c := range benchCases {
		ids[i] = c.id
	}
	return ids
}

func caseByID(id string) *benchCase {
	for i := range benchCases {
		if benchCases[i].id == id {
			return &benchCases[i]
		}
	}
	return nil
}

// pick spreads a worker's requests over n users: each worker walks all of them, from its own
// offset.
func pick(w *worker, n int) int { return int((uint64(w.id) + w.seq) % uint64(n)) }

// sendRecipient is the number key k sends to in run r: unique per (run, key), 12 digits.
func sendRecipient(run, k int) string { return fmt.Sprintf("4915%03d%05d", run%1000, k) }

// message is the v1 send text: the length of a typical order notification.
const message = "Hi Ana, your order #1001 has shipped. Track it at https://example.com/t/1001 - thanks for shopping with us!"

func buildSend(idempotent bool) func(f *fleet, run int) (target, []string) {
	return func(f *fleet, run int) (target, []string) {
		n := len(f.users)
		bodies, keys, recipients := make([][]byte, n), make([]string, n), make([]string, n)
		for k, u := range f.users {
			recipients[k] = sendRecipient(run, k)
			bodies[k] = mustJSON(map[string]string{"phone": "+" + recipients[k], "message": message})
			keys[k] = u.key
		}
		return target{method: "POST", uri: "/api/v1/messages/send", prepare: func(req *fasthttp.Request, w *worker) {
			k := pick(w, n)
			req.Header.Set("x-api-key", keys[k])
			req.Header.SetContentType("application/json")
			if idempotent {
				w.scratch = appendUniqueID(append(w.scratch[:0], "bench-"...), w)
				req.Header.SetBytesV("Idempotency-Key", w.scratch)
			}
			req.SetBodyRaw(bodies[k])
		}}, recipients
	}
}

// appendUniqueID appends run-worker-seq: unique per request within a gateway's life.
func appendUniqueID(b []byte, w *worker) []byte {
	b = strconv.AppendInt(b, int64(w.run), 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, int64(w.id), 10)
	b = append(b, '-')
	return strconv.AppendUint(b, w.seq, 10)
}

func buildValidate(f *fleet, _ int) (target, []string) {
	n := len(f.users)
	bodies := make([][]byte, n)
	for k, u := range f.users {
		bodies[k] = mustJSON(map[string]string{"rawKey": u.key})
	}
	return target{method: "POST", uri: "/api/admin/apikeys/validate", prepare: func(req *fasthttp.Request, w *worker) {
		req.Header.SetContentType("application/json")
		req.SetBodyRaw(bodies[pick(w, n)])
	}}, nil
}

func buildAccount(f *fleet, _ int) (target, []string) {
	n := len(f.users)
	return target{method: "GET", uri: "/api/v1/account", prepare: func(req *fasthttp.Request, w *worker) {
		req.Header.Set("x-api-key", f.users[pick(w, n)].key)
	}}, nil
}

func buildStatus(f *fleet, _ int) (target, []string) {
	n := len(f.users)
	auth := make([]string, n)
	for k, u := range f.users {
		auth[k] = "Bearer " + u.token
	}
	return target{method: "GET", uri: "/api/client/status", prepare: func(req *fasthttp.Request, w *worker) {
		req.Header.Set("Authorization", auth[pick(w, n)])
	}}, nil
}

// customerPhone is the shopper's number on user u's orders in run r, typed as shoppers type
// it; customerDigits is what the gateway should make of it. US numbers, unique per
// (run, user): area code 2RR, then seven digits of the user index.
func customerPhone(run, u int) string {
	d := fmt.Sprintf("%07d", u)
	return fmt.Sprintf("+1 (2%02d) %s-%s", run%100, d[:3], d[3:])
}

func customerDigits(run, u int) string { return fmt.Sprintf("12%02d%07d", run%100, u) }

// orderIDDigits is the fixed width of the order id patched into each webhook body, at
// orderIDOffset (the body starts with {"id":).
const (
	orderIDDigits = 16
	orderIDOffset = len(`{"id":`)
)

// orderBody is an orders/create payload of a typical size (modelled on the platform's Order
// resource) for user u's store in run r; its id is patched per request.
func orderBody(run, u int) []byte {
	return fmt.Appendf(nil, `{"id":%0*d,"name":"#1001","order_number":1001,"email":"ana@example.com",`+
		`"created_at":"2026-05-17T04:14:36-04:00","currency":"USD","total_price":"49.90","subtotal_price":"44.90",`+
		`"total_tax":"5.00","financial_status":"paid","fulfillment_status":null,"gateway":"bogus",`+
		`"payment_gateway_names":["bogus"],"tags":"","note":null,"test":false,`+
		`"customer":{"id":207119551,"first_name":"Ana","last_name":"Lima","email":"ana@example.com","phone":%q},`+
		`"line_items":[{"id":466157049,"title":"IPod Nano - 8gb","quantity":1,"price":"39.90","sku":"IPOD2008GREEN"},`+
		`{"id":518995019,"title":"Gift wrap","quantity":1,"price":"5.00","sku":"WRAP"}],`+
		`"shipping_address":{"first_name":"Ana","last_name":"Lima","address1":"123 Amoebobacterieae St","city":"Ottawa",`+
		`"province":"Ontario","country":"United States","country_code":"US","zip":"K2P0V6","phone":null},`+
		`"billing_address":{"first_name":"Ana","last_name":"Lima","city":"Ottawa","country_code":"US","phone":null}}`,
		orderIDDigits, 0, customerPhone(run, u))
}

// buildWebhook: signed orders/create events spread over the users' stores, each with its
// own webhook id and order id (so neither the delivery dedupe nor an order-keyed message id
// folds two requests into one message).
func buildWebhook(f *fleet, run int) (target, []string) { return webhookTo(f.users, run) }

// buildWebhookIdle sends to the idle stores (no linked session): nothing is delivered.
func buildWebhookIdle(f *fleet, run int) (target, []string) {
	t, _ := webhookTo(f.idle, run)
	return t, nil
}

func webhookTo(users []benchUser, run int) (target, []string) {
	n := len(users)
	bodies, queries, shops, recipients := make([][]byte, n), make([]string, n), make([]string, n), make([]string, n)
	for u, usr := range users {
		bodies[u] = orderBody(run, u)
		queries[u] = "uid=" + usr.id + "&shop=" + usr.shop
		shops[u] = usr.shop
		recipients[u] = customerDigits(run, u)
	}
	return target{method: "POST", uri: "/api/ecom/webhook?" + queries[0], prepare: func(req *fasthttp.Request, w *worker) {
		u := pick(w, n)
		w.body = append(w.body[:0], bodies[u]...)
		putOrderID(w.body[orderIDOffset:orderIDOffset+orderIDDigits], w)
		if w.mac == nil {
			w.mac = hmac.New(sha256.New, []byte(webhookSecret))
		}
		w.mac.Reset()
		w.mac.Write(w.body)
		w.sum = w.mac.Sum(w.sum[:0])
		w.scratch = base64.StdEncoding.AppendEncode(w.scratch[:0], w.sum)
		req.URI().SetQueryString(queries[u])
		req.Header.SetContentType("application/json")
		req.Header.Set("X-Shopify-Topic", "orders/create")
		req.Header.Set("X-Shopify-Shop-Domain", shops[u])
		req.Header.SetBytesV("X-Shopify-Hmac-Sha256", w.scratch)
		w.scratch = appendUniqueID(append(w.scratch[:0], "bench-"...), w)
		req.Header.SetBytesV("X-Shopify-Webhook-Id", w.scratch)
		req.SetBodyRaw(w.body)
	}}, recipients
}

// putOrderID writes 1RRWWWSSSSSSSSSS (run, worker, sequence) into dst: unique per request
// within a gateway's life for up to 10^10 requests per worker.
func putOrderID(dst []byte, w *worker) {
	v := uint64(w.seq % 10_000_000_000)
	v += uint64(w.id%1000) * 10_000_000_000
	v += uint64(w.run%100) * 10_000_000_000_000
	v += 1_000_000_000_000_000
	for i := len(dst) - 1; i >= 0; i-- {
		dst[i] = byte('0' + v%10)
		v /= 10
	}
}
