package httpapi

// Table tests per route, on the harness of api_test.go: each table is a story (a user signs
// in, gets a key, uses it...) whose calls are checked for status, error code, the OpenAPI
// document and, where named, their golden body.

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/ecom"
	"github.com/gateway/gateway/identity"
)

func TestKeysAndUsers(t *testing.T) {
	a := newAPI(t)
	a.run(t, "keys_users", []call{
		// Users.
		{name: "alice signs in", method: "GET", path: "/api/client/apikeys", as: "alice", status: 200},
		{name: "users listed", method: "GET", path: "/api/admin/users", as: "root", status: 200},
		{name: "users by a client", method: "GET", path: "/api/admin/users", as: "alice", status: 403, code: "forbidden"},
		{name: "user created", method: "POST", path: "/api/admin/users", as: "root", body: map[string]any{"id": "carol", "name": "Carol", "plan": "starter"}, status: 201},
		{name: "user created twice", method: "POST", path: "/api/admin/users", as: "root", body: map[string]any{"id": "carol"}, status: 409, code: "already_exists"},
		{name: "user without id", method: "POST", path: "/api/admin/users", as: "root", body: map[string]any{"name": "x"}, status: 400, code: "validation_failed"},
		{name: "user with an unknown plan", method: "POST", path: "/api/admin/users", as: "root", body: map[string]any{"id": "dave", "plan": "gold"}, status: 400, code: "validation_failed"},
		{name: "user promoted", method: "PATCH", path: "/api/admin/users", as: "root", body: map[string]any{"id": "carol", "role": "admin"}, status: 200},
		{name: "user patch without a change", method: "PATCH", path: "/api/admin/users", as: "root", body: map[string]any{"id": "carol"}, status: 400, code: "validation_failed"},
		{name: "unknown user patched", method: "PATCH", path: "/api/admin/users", as: "root", body: map[string]any{"id": "nobody", "plan": "free"}, status: 404, code: "user_not_found"},
		{name: "users body not JSON", method: "POST", path: "/api/admin/users", as: "root", body: "{", status: 400, code: "invalid_json"},

		// Keys.
		{name: "key created", method: "POST", path: "/api/admin/apikeys", as: "root", status: 201,
			body: map[string]any{"userId": "alice", "name": "shop", "scopes": []string{"send_text", "read_messages"}}, keep: map[string]string{"rawKey": "key", "id": "keyID"}},
		{name: "key for an unknown user", method: "POST", path: "/api/admin/apikeys", as: "root", body: map[string]any{"userId": "nobody", "name": "x"}, status: 404, code: "user_not_found"},
		{name: "key with no scopes", method: "POST", path: "/api/admin/apikeys", as: "root", body: map[string]any{"userId": "alice", "name": "x", "scopes": []string{}}, status: 400, code: "validation_failed"},
		{name: "key with an unknown scope", method: "POST", path: "/api/admin/apikeys", as: "root", body: map[string]any{"userId": "alice", "name": "x", "scopes": []string{"send_fax"}}, status: 400, code: "validation_failed"},
		{name: "key already expired", method: "POST", path: "/api/admin/apikeys", as: "root", body: map[string]any{"userId": "alice", "name": "x", "expiresAt": "2001-01-01T00:00:00Z"}, status: 201, keep: map[string]string{"rawKey": "expired"}},
		{name: "expired key refused", method: "GET", path: "/api/v1/account", header: map[string]string{"x-api-key": "{expired}"}, status: 401, code: "key_expired"},
		{name: "key with a bad expiry", method: "POST", path: "/api/admin/apikeys", as: "root", body: map[string]any{"userId": "alice", "name": "x", "expiresAt": "soon"}, status: 400, code: "validation_failed"},
		{name: "key without a name", method: "POST", path: "/api/admin/apikeys", as: "root", body: map[string]any{"userId": "alice"}, status: 400, code: "validation_failed"},
		{name: "keys listed", method: "GET", path: "/api/admin/apikeys", as: "root", status: 200},
		{name: "alice's keys", method: "GET", path: "/api/client/apikeys", as: "alice", status: 200},
		{name: "key valid", method: "POST", path: "/api/admin/apikeys/validate", body: `{"rawKey":"{key}"}`, status: 200},
		{name: "key unknown", method: "POST", path: "/api/admin/apikeys/validate", body: map[string]any{"rawKey": "svc_live_nope"}, status: 401},
		{name: "validate without rawKey", method: "POST", path: "/api/admin/apikeys/validate", body: map[string]any{}, status: 400, code: "validation_failed"},
		{name: "account", method: "GET", path: "/api/v1/account", as: "key", status: 200, check: func(t testing.TB, r res) {
			if r.header.Get("X-RateLimit-Limit") != "1000" || r.header.Get("X-RateLimit-Remaining") != "999" || r.header.Get("X-RateLimit-Reset") == "" {
				t.Fatalf("rate-limit headers: %v", r.header)
			}
		}},
		{name: "account by Bearer", method: "GET", path: "/api/v1/account", as: "bearer-key", status: 200},
		{name: "account without a key", method: "GET", path: "/api/v1/account", status: 401, code: "missing_credentials"},
		{name: "account with a bad key", method: "GET", path: "/api/v1/account", header: map[string]string{"x-api-key": "svc_live_0000"}, status: 401, code: "invalid_api_key"},
		{name: "key renamed", method: "PATCH", path: "/api/admin/apikeys", as: "root", body: `{"id":"{keyID}","name":" till "}`, status: 200},
		{name: "key patch without a change", method: "PATCH", path: "/api/admin/apikeys", as: "root", body: `{"id":"{keyID}"}`, status: 400, code: "validation_failed"},
		{name: "key with a bad status", method: "PATCH", path: "/api/admin/apikeys", as: "root", body: `{"id":"{keyID}","status":"paused"}`, status: 400, code: "validation_failed"},
		{name: "key revoked", method: "PATCH", path: "/api/admin/apikeys", as: "root", body: `{"id":"{keyID}","status":"revoked"}`, status: 200},
		{name: "revoked key refused", method: "GET", path: "/api/v1/account", as: "key", status: 401, code: "key_revoked"},
		{name: "revoked key validated", method: "POST", path: "/api/admin/apikeys/validate", body: `{"rawKey":"{key}"}`, status: 401},
		{name: "unknown key patched", method: "PATCH", path: "/api/admin/apikeys", as: "root", body: map[string]any{"id": "nope", "status": "active"}, status: 404, code: "key_not_found"},
		{name: "key deleted", method: "DELETE", path: "/api/admin/apikeys?id={keyID}", as: "root", status: 200},
		{name: "key deleted twice", method: "DELETE", path: "/api/admin/apikeys?id={keyID}", as: "root", status: 404, code: "key_not_found"},
		{name: "delete without id", method: "DELETE", path: "/api/admin/apikeys", as: "root", status: 400, code: "validation_failed"},
		{name: "admin route by nobody", method: "GET", path: "/api/admin/apikeys", status: 401, code: "missing_credentials"},
		{name: "admin route with a bad token", method: "GET", path: "/api/admin/apikeys", header: map[string]string{"Authorization": "Bearer not.a.token"}, status: 401, code: "invalid_token"},
	})
}

func TestSessionsAndSends(t *testing.T) {
	a := newAPI(t)
	a.run(t, "sessions_sends", []call{
		{name: "status before a session", method: "GET", path: "/api/client/status", as: "alice", status: 200},
		{name: "qr", method: "GET", path: "/api/client/qr", as: "alice", status: 200, keep: map[string]string{"sessionId": "sid"}},
		{name: "start again", method: "POST", path: "/api/client/start", as: "alice", status: 200},
		{name: "scan", method: "POST", path: "/api/dev/sim/scan", body: `{"sessionId":"{sid}","phone":"447700900001"}`, status: 200},
		{name: "scan without a phone", method: "POST", path: "/api/dev/sim/scan", body: `{"sessionId":"{sid}"}`, status: 400, code: "validation_failed"},
	})
	eventually(t, 5*time.Second, "alice's session connected", func() bool {
		return a.do(t, "GET", "/api/client/status", "alice", nil, nil).str("status") == "CONNECTED"
	})
	a.run(t, "sessions_sends_2", []call{
		{name: "connected", method: "GET", path: "/api/client/status", as: "alice", status: 200},
		{name: "qr while connected", method: "GET", path: "/api/client/qr", as: "alice", status: 409, code: "already_connected"},
		{name: "pair code while connected", method: "POST", path: "/api/client/pair-code", as: "alice", body: map[string]any{"phone": "447700900001"}, status: 409, code: "already_connected"},
		{name: "sessions listed", method: "GET", path: "/api/admin/sessions", status: 200},
		{name: "session created", method: "POST", path: "/api/admin/sessions/create", body: map[string]any{"sessionName": "spare"}, status: 200,
			check: func(t testing.TB, r res) { a.vars["spare"] = r.obj()["session"].(map[string]any)["id"].(string) }},
		{name: "session without a name", method: "POST", path: "/api/admin/sessions/create", body: map[string]any{}, status: 400, code: "validation_failed"},
		{name: "session assigned to an unknown user", method: "POST", path: "/api/admin/sessions/assign", body: `{"sessionId":"{spare}","userId":"nobody"}`, status: 404, code: "user_not_found"},
		{name: "unknown session assigned", method: "POST", path: "/api/admin/sessions/assign", body: map[string]any{"sessionId": "nope", "userId": "alice"}, status: 404, code: "session_not_found"},
		{name: "session paced", method: "PATCH", path: "/api/admin/sessions", as: "root", body: `{"id":"{sid}","pacing":{"minGapMs":0,"perMinute":600}}`, status: 200},
		{name: "session pacing not an object", method: "PATCH", path: "/api/admin/sessions", as: "root", body: `{"id":"{sid}","pacing":7}`, status: 400},
		{name: "session proxy refused", method: "PATCH", path: "/api/admin/sessions", as: "root", body: `{"id":"{sid}","proxy":"ftp://x"}`, status: 400, code: "validation_failed"},
		{name: "session deleted", method: "DELETE", path: "/api/admin/sessions?id={spare}", as: "root", status: 200},
		{name: "session deleted twice", method: "DELETE", path: "/api/admin/sessions?id={spare}", as: "root", status: 404, code: "session_not_found"},

		// A key and sends.
		{method: "POST", path: "/api/admin/apikeys", as: "root", status: 201, body: map[string]any{"userId": "alice", "name": "app"}, keep: map[string]string{"rawKey": "key"}},
		{name: "send", method: "POST", path: "/api/v1/messages/send", as: "key", body: map[string]any{"phone": "+1 555 010 0001", "message": "hello"}, status: 200,
			keep: map[string]string{"message_id": "msg"}},
		{method: "POST", path: "/api/v1/messages/send?wait=5", as: "key", body: map[string]any{"phone": "15550100001", "message": "hi again"}, status: 200,
			check: func(t testing.TB, r res) {
				if s := r.str("status"); s != "sent" && s != "delivered" {
					t.Fatalf("waited send answered %q", s)
				}
			}},
		{name: "send idempotent", method: "POST", path: "/api/v1/messages/send", as: "key", header: map[string]string{"Idempotency-Key": "k-1"}, body: map[string]any{"phone": "15550100002", "message": "once"}, status: 200, keep: map[string]string{"message_id": "idem"}},
		{method: "POST", path: "/api/v1/messages/send", as: "key", header: map[string]string{"Idempotency-Key": "k-1"}, body: map[string]any{"phone": "15550100002", "message": "once"}, status: 200,
			check: func(t testing.TB, r res) {
				if r.header.Get("Idempotent-Replayed") != "true" || r.str("message_id") != a.vars["idem"] {
					t.Fatalf("replay: %v %s", r.header, r.body)
				}
			}},
		{name: "idempotency key reused", method: "POST", path: "/api/v1/messages/send", as: "key", header: map[string]string{"Idempotency-Key": "k-1"}, body: map[string]any{"phone": "15550100002", "message": "other"}, status: 409, code: "idempotency_key_reused"},
		{name: "send without a phone", method: "POST", path: "/api/v1/messages/send", as: "key", body: map[string]any{"message": "x"}, status: 400, code: "validation_failed"},
		{name: "send to a bad phone", method: "POST", path: "/api/v1/messages/send", as: "key", body: map[string]any{"phone": "12", "message": "x"}, status: 400, code: "invalid_phone"},
		{name: "send not JSON", method: "POST", path: "/api/v1/messages/send", as: "key", body: "[1,", status: 400, code: "invalid_json"},
		{name: "send of an unknown type", method: "POST", path: "/api/v1/messages/send", as: "key", body: map[string]any{"phone": "15550100001", "message": "x", "type": "fax"}, status: 400, code: "validation_failed"},
		{method: "GET", path: "/api/v1/messages/{msg}", as: "key", status: 200, check: func(t testing.TB, r res) {
			if r.str("message_id") != a.vars["msg"] || r.str("to") != "15550100001" {
				t.Fatalf("message: %s", r.body)
			}
		}},
		{name: "unknown message", method: "GET", path: "/api/v1/messages/3EB00000000000000000000", as: "key", status: 404, code: "message_not_found"},
		{name: "send image", method: "POST", path: "/api/v1/messages/send-image", as: "key", status: 200,
			body: map[string]any{"to": "15550100003", "image": "data:image/png;base64," + tinyPNG, "caption": "look"}},
		{name: "send image not an image", method: "POST", path: "/api/v1/messages/send-image", as: "key", status: 415,
			body: map[string]any{"to": "15550100003", "image": "data:image/png;base64,aGVsbG8="}, code: "unsupported_media_type"},
		{name: "send image without to", method: "POST", path: "/api/v1/messages/send-image", as: "key", body: map[string]any{"image": "x"}, status: 400, code: "validation_failed"},
		{method: "POST", path: "/api/client/send", as: "alice", body: map[string]any{"phone": "15550100004", "text": "from the dashboard"}, status: 200, check: sentOrDelivered},
		{method: "POST", path: "/api/client/send", as: "alice", body: map[string]any{"phone": "15550100004", "type": "location", "lat": 51.5, "lng": -0.1, "address": "London"}, status: 200, check: sentOrDelivered},
		{method: "POST", path: "/api/client/send", as: "alice", body: map[string]any{"phone": "15550100004", "type": "contact", "contactName": "Bob", "contactPhone": "15550100009"}, status: 200, check: sentOrDelivered},
		{name: "client send location without lat", method: "POST", path: "/api/client/send", as: "alice", body: map[string]any{"phone": "15550100004", "type": "location", "lng": 1}, status: 400, code: "validation_failed"},
		{name: "client send of an unknown type", method: "POST", path: "/api/client/send", as: "alice", body: map[string]any{"phone": "15550100004", "type": "poll"}, status: 400, code: "validation_failed"},
		{name: "client send by bob without a session", method: "POST", path: "/api/client/send", as: "bob", body: map[string]any{"phone": "15550100004", "text": "x"}, status: 409},

		// Bulk and campaigns.
		{name: "bulk", method: "POST", path: "/api/v1/messages/send-bulk", as: "key", body: map[string]any{"numbers": []string{"15550100011", "12"}, "message": "all", "delay": 0}, status: 200},
		{method: "POST", path: "/api/v1/messages/send-bulk", as: "key", body: map[string]any{"numbers": []string{"15550100012", "15550100013"}, "message": "later", "delay": 5, "async": true}, status: 202,
			keep: map[string]string{"campaign_id": "camp"}, check: func(t testing.TB, r res) {
				if r.str("status_url") != "/api/v1/campaigns/"+r.str("campaign_id") {
					t.Fatalf("async bulk: %s", r.body)
				}
			}},
		{name: "bulk numbers as text", method: "POST", path: "/api/v1/messages/send-bulk", as: "key", body: map[string]any{"numbers": "15550100014\n15550100015", "message": "x", "delay": 0}, status: 400, code: "validation_failed"},
		{name: "bulk without numbers", method: "POST", path: "/api/v1/messages/send-bulk", as: "key", body: map[string]any{"message": "x"}, status: 400, code: "validation_failed"},
		{name: "bulk with a negative delay", method: "POST", path: "/api/v1/messages/send-bulk", as: "key", body: map[string]any{"numbers": []string{"15550100011"}, "message": "x", "delay": -1}, status: 400, code: "validation_failed"},
		// (Progress and delivery race the calls: these check fields, not golden bodies.)
		{method: "GET", path: "/api/v1/campaigns/{camp}", as: "key", status: 200, check: func(t testing.TB, r res) {
			if r.str("status") != "running" || r.obj()["total_requested"] != 2.0 {
				t.Fatalf("campaign: %s", r.body)
			}
		}},
		{method: "GET", path: "/api/client/campaigns", as: "alice", status: 200, check: func(t testing.TB, r res) {
			if n := len(r.obj()["campaigns"].([]any)); n != 2 {
				t.Fatalf("%d campaigns: %s", n, r.body)
			}
		}},
		{name: "campaign cancelled", method: "DELETE", path: "/api/v1/campaigns/{camp}", as: "key", status: 200},
		{name: "unknown campaign", method: "GET", path: "/api/v1/campaigns/nope", as: "key", status: 404, code: "campaign_not_found"},
		{name: "unknown campaign cancelled by the client", method: "DELETE", path: "/api/client/campaigns?id=nope", as: "alice", status: 404, code: "campaign_not_found"},
		{name: "client cancel without id", method: "DELETE", path: "/api/client/campaigns", as: "alice", status: 400, code: "validation_failed"},

		// Usage, the sim's view, logout.
		{method: "GET", path: "/api/client/usage", as: "alice", status: 200, check: func(t testing.TB, r res) {
			if r.str("plan") != "free" || r.obj()["monthlyLimit"] != 1000.0 {
				t.Fatalf("usage: %s", r.body)
			}
		}},
		{name: "sim messages without to", method: "GET", path: "/api/dev/sim/messages", status: 400, code: "validation_failed"},
		{name: "sim latency", method: "POST", path: "/api/dev/sim/latency", body: map[string]any{"ms": 0}, status: 200},
		{name: "sim latency out of range", method: "POST", path: "/api/dev/sim/latency", body: map[string]any{"ms": -1}, status: 400, code: "validation_failed"},
		{name: "sim unregistered", method: "POST", path: "/api/dev/sim/unregistered", body: map[string]any{"numbers": []string{"15550109999"}}, status: 200},
		{name: "sim unregistered without numbers", method: "POST", path: "/api/dev/sim/unregistered", body: map[string]any{}, status: 400, code: "validation_failed"},
		{name: "sim inbound", method: "POST", path: "/api/dev/sim/inbound", body: `{"sessionId":"{sid}","from":"15550100021","text":"hi shop"}`, status: 200},
		{name: "sim read of an unknown message", method: "POST", path: "/api/dev/sim/read", body: map[string]any{"messageId": "nope"}, status: 404},
		{name: "sim pair without a code", method: "POST", path: "/api/dev/sim/pair", body: `{"sessionId":"{sid}"}`, status: 400, code: "validation_failed"},
		{name: "logout", method: "POST", path: "/api/client/logout", as: "alice", status: 200},
	})
	got := a.sim.Messages("15550100001")
	if len(got) < 2 || !strings.Contains(got[0].Text, "hello") {
		t.Fatalf("the sim delivered %+v", got)
	}
}

// sentOrDelivered checks a dashboard send's answer: it waits for the network, whose receipt may
// overtake it (so no golden body).
func sentOrDelivered(t testing.TB, r res) {
	if st := r.str("status"); (st != "sent" && st != "delivered") || !strings.HasPrefix(r.str("message_id"), "3EB0") {
		t.Fatalf("dashboard send: %s", r.body)
	}
}

// tinyPNG is a 1×1 PNG.
const tinyPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

func TestStores(t *testing.T) {
	a := newAPI(t)
	const shop = "alice-shop.myshopify.com"
	a.fake.AddShop(shop, "Alice Shop", "shpat_alice0123456789")
	a.fake.AddShop("bob-shop.myshopify.com", "Bob Shop", "shpat_bob0123456789")
	a.fake.SetApp("app-id", "app-secret")
	order := `{"id":1001,"name":"#1001","total_price":"10.00","currency":"EUR","customer":{"first_name":"Ann","phone":"+44 7700 900123"},"line_items":[{"title":"Tea","quantity":2}]}`
	a.run(t, "stores", []call{
		{name: "no store yet", method: "GET", path: "/api/client/store", as: "alice", status: 200},
		{name: "store platform test route", method: "GET", path: "/api/ecom/test", status: 200},
		{name: "verify a token", method: "POST", path: "/api/client/store/verify-shopify", as: "alice", body: map[string]any{"domain": shop, "access_token": "shpat_alice0123456789"}, status: 200},
		{name: "verify a refused token", method: "POST", path: "/api/client/store/verify-shopify", as: "alice", body: map[string]any{"domain": shop, "access_token": "shpat_wrong"}, status: 400, code: "store_token_rejected"},
		{name: "verify a foreign domain", method: "POST", path: "/api/client/store/verify-shopify", as: "alice", body: map[string]any{"domain": "shop.example.com", "access_token": "shpat_x"}, status: 400, code: "invalid_shop"},
		{name: "manual connect", method: "POST", path: "/api/ecom/manual-connect", as: "alice", body: map[string]any{"shop": shop, "accessToken": "shpat_alice0123456789", "webhookSecret": "hook"}, status: 200},
		{name: "manual connect without a token", method: "POST", path: "/api/ecom/manual-connect", as: "alice", body: map[string]any{"shop": shop}, status: 400, code: "validation_failed"},
		{name: "store", method: "GET", path: "/api/client/store", as: "alice", status: 200},
		{name: "templates", method: "GET", path: "/api/client/templates", as: "alice", status: 200},
		{name: "template saved", method: "PUT", path: "/api/client/templates", as: "alice", body: map[string]any{"topic": "orders/create", "text": "Hi {{customer_name}}, order {{order_number}} is in."}, status: 200},
		{name: "template of an unknown topic", method: "PUT", path: "/api/client/templates", as: "alice", body: map[string]any{"topic": "orders/lost", "text": "x"}, status: 400, code: "validation_failed"},
		{name: "template test without a session", method: "POST", path: "/api/client/templates/test", as: "alice", body: map[string]any{"phone": "15550100001", "text": "hi"}, status: 409},
		{name: "template test without a phone", method: "POST", path: "/api/client/templates/test", as: "alice", body: map[string]any{"text": "hi"}, status: 400, code: "validation_failed"},
		{name: "webhook signed", method: "POST", path: "/api/ecom/webhook?uid=alice", body: order, status: 200,
			header: map[string]string{"X-Shopify-Topic": "orders/create", "X-Shopify-Hmac-Sha256": sign(order, "hook"), "X-Shopify-Webhook-Id": "w-1"}},
		{name: "webhook again", method: "POST", path: "/api/ecom/webhook?shop=" + shop, body: order, status: 200,
			header: map[string]string{"X-Shopify-Topic": "orders/create", "X-Shopify-Hmac-Sha256": sign(order, "hook"), "X-Shopify-Webhook-Id": "w-1"}},
		{name: "webhook of a topic that sends nothing", method: "POST", path: "/api/ecom/webhook", body: order, status: 200,
			header: map[string]string{"X-Ecom-Topic": "products/update", "X-Ecom-Shop-Domain": shop, "X-Shopify-Hmac-Sha256": sign(order, "hook")}},
		{name: "webhook badly signed", method: "POST", path: "/api/ecom/webhook?uid=alice", body: order, status: 401, code: "invalid_signature",
			header: map[string]string{"X-Shopify-Topic": "orders/create", "X-Shopify-Hmac-Sha256": sign(order, "other")}},
		{name: "webhook without a topic", method: "POST", path: "/api/ecom/webhook?uid=alice", body: order, status: 400, code: "validation_failed",
			header: map[string]string{"X-Shopify-Hmac-Sha256": sign(order, "hook")}},
		{name: "webhook not JSON", method: "POST", path: "/api/ecom/webhook?uid=alice", body: "[1]", status: 400, code: "invalid_json",
			header: map[string]string{"X-Shopify-Topic": "orders/create", "X-Shopify-Hmac-Sha256": sign("[1]", "hook")}},
		{name: "webhook for nobody", method: "POST", path: "/api/ecom/webhook?uid=nobody", body: order, status: 404, code: "store_not_found"},
		{name: "bob connects alice's shop natively", method: "POST", path: "/api/ecom/native-connect", as: "bob", body: map[string]any{"shop": shop}, status: 409, code: "store_connected_elsewhere"},
		{name: "bob connects his shop natively", method: "POST", path: "/api/ecom/native-connect", as: "bob", body: map[string]any{"shop": "bob-shop.myshopify.com", "webhookSecret": "s"}, status: 200},
		{name: "bob connects a store by token", method: "POST", path: "/api/client/store/connect", as: "bob", body: map[string]any{"platform": "shopify", "domain": "bob-shop.myshopify.com", "access_token": "shpat_bob0123456789"}, status: 200},
		{name: "a store by token without a token", method: "POST", path: "/api/client/store/connect", as: "bob", body: map[string]any{"platform": "shopify", "domain": "bob-shop.myshopify.com"}, status: 400, code: "validation_failed"},
		{name: "a WooCommerce store", method: "POST", path: "/api/client/store/connect", as: "carol", body: map[string]any{"platform": "woocommerce", "domain": "https://Shop.Example.com/"}, status: 200},
		{name: "an unknown platform", method: "POST", path: "/api/client/store/connect", as: "carol", body: map[string]any{"platform": "magento", "domain": "x.example.com"}, status: 400, code: "validation_failed"},
		{name: "oauth init", method: "POST", path: "/api/ecom/oauth-init", as: "dave", body: map[string]any{"shop": "dave-shop.myshopify.com", "clientId": "app-id", "clientSecret": "app-secret"}, status: 200},
		{name: "oauth init of a foreign domain", method: "POST", path: "/api/ecom/oauth-init", as: "dave", body: map[string]any{"shop": "shop.example.com"}, status: 400, code: "invalid_shop"},
		{name: "oauth callback with a bad state", method: "GET", path: "/api/ecom/callback?code=c&shop=" + shop + "&state=dave___nope", status: 302, check: func(t testing.TB, r res) {
			if loc := r.header.Get("Location"); !strings.HasPrefix(loc, "/dashboard/connect-store/error?reason=") {
				t.Fatalf("Location %q", loc)
			}
		}},
		{name: "store deleted", method: "DELETE", path: "/api/client/store", as: "carol", status: 200},
		{name: "store deleted twice", method: "DELETE", path: "/api/client/store", as: "carol", status: 404, code: "store_not_found"},
	})
	eventually(t, 5*time.Second, "the webhook's event recorded", func() bool {
		ev, _ := a.do(t, "GET", "/api/client/store", "alice", nil, nil).obj()["events"].([]any)
		return len(ev) >= 2 && strings.Contains(string(a.do(t, "GET", "/api/client/store", "alice", nil, nil).body), `"webhookId":"w-1"`)
	})
}

func TestWebhookSubscriptions(t *testing.T) {
	// The subscription's address is a public IP literal (the guard refuses private ones and no
	// name resolves here); nothing happens that would deliver to it.
	a := newAPI(t)
	a.run(t, "webhooks", []call{
		{name: "none", method: "GET", path: "/api/client/webhooks", as: "alice", status: 200},
		{name: "a private address", method: "POST", path: "/api/client/webhooks", as: "alice", body: map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"message.status"}}, status: 400, code: "webhook_url_blocked"},
		{name: "no events", method: "POST", path: "/api/client/webhooks", as: "alice", body: map[string]any{"url": "https://hooks.example.com/in"}, status: 400, code: "validation_failed"},
		{name: "an unknown event", method: "POST", path: "/api/client/webhooks", as: "alice", body: map[string]any{"url": "https://hooks.example.com/in", "events": []string{"order.lost"}}, status: 400, code: "validation_failed"},
		{name: "not a URL", method: "POST", path: "/api/client/webhooks", as: "alice", body: map[string]any{"url": "ftp://x", "events": []string{"message.status"}}, status: 400, code: "invalid_webhook_url"},
		{name: "created", method: "POST", path: "/api/client/webhooks", as: "alice", body: map[string]any{"url": "https://8.8.8.8/in", "events": []string{"message.status", "session.status"}}, status: 201,
			keep: map[string]string{"id": "hook"}},
		{name: "listed", method: "GET", path: "/api/client/webhooks", as: "alice", status: 200},
		{name: "deliveries", method: "GET", path: "/api/client/webhooks/deliveries?id={hook}", as: "alice", status: 200},
		{name: "deliveries of another user's", method: "GET", path: "/api/client/webhooks/deliveries?id={hook}", as: "bob", status: 404},
		{name: "deliveries without id", method: "GET", path: "/api/client/webhooks/deliveries", as: "alice", status: 400, code: "validation_failed"},
		{name: "deleted", method: "DELETE", path: "/api/client/webhooks?id={hook}", as: "alice", status: 200},
		{name: "deleted twice", method: "DELETE", path: "/api/client/webhooks?id={hook}", as: "alice", status: 404},
		// Incoming messages (API key with read_messages).
		{method: "POST", path: "/api/admin/apikeys", as: "root", status: 201, body: map[string]any{"userId": "alice", "name": "reader"}, keep: map[string]string{"rawKey": "key"}},
		{name: "incoming messages", method: "GET", path: "/api/v1/messages?direction=in&limit=10", as: "key", status: 200},
		{name: "incoming messages since", method: "GET", path: "/api/v1/messages?direction=in&since=2026-01-01T00:00:00Z", as: "key", status: 200},
		{name: "outgoing messages", method: "GET", path: "/api/v1/messages?direction=out", as: "key", status: 200},
		{name: "a bad limit", method: "GET", path: "/api/v1/messages?direction=in&limit=x", as: "key", status: 400, code: "validation_failed"},
		{name: "a bad since", method: "GET", path: "/api/v1/messages?direction=in&since=yesterday", as: "key", status: 400, code: "validation_failed"},
	})
}

func TestOpsAndDashboard(t *testing.T) {
	a := newAPI(t, func(c *Config) { c.CORSOrigins = []string{"https://app.example.com"} })
	a.run(t, "ops", []call{
		{name: "healthz", method: "GET", path: "/healthz", status: 200},
		{name: "readyz", method: "GET", path: "/readyz", status: 200},
		{name: "unknown route", method: "GET", path: "/api/nope", status: 404, code: "not_found"},
		{name: "wrong method", method: "PUT", path: "/api/admin/apikeys", status: 405, code: "method_not_allowed"},
		{method: "GET", path: "/metrics", status: 200, check: func(t testing.TB, r res) {
			if !strings.Contains(string(r.body), "gateway_http_requests_total") {
				t.Fatalf("metrics: %.300s", r.body)
			}
		}},
		{method: "GET", path: "/api/openapi.json", status: 200, check: func(t testing.TB, r res) {
			if !strings.HasPrefix(string(r.body), "{") || r.obj()["openapi"] == nil {
				t.Fatalf("openapi: %.100s", r.body)
			}
		}},
		{name: "root", method: "GET", path: "/", status: 302},
		{method: "GET", path: "/dashboard/", status: 200, check: func(t testing.TB, r res) {
			if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self';") || r.header.Get("X-Frame-Options") != "DENY" {
				t.Fatalf("headers: %v", r.header)
			}
		}},
		{method: "GET", path: "/docs", status: 200},
		{name: "dashboard config", method: "GET", path: "/dashboard/config.json", status: 200},
		{name: "an asset that is not there", method: "GET", path: "/dashboard/v/1/nope.js", status: 404, code: "not_found"},
		{name: "a page as an asset", method: "GET", path: "/dashboard/v/1/index.html", status: 404, code: "not_found"},
		{name: "dev token", method: "POST", path: "/api/dev/token", body: map[string]any{"uid": "erin", "role": "admin", "ttlSeconds": 60}, status: 200},
		{name: "dev token of a bad role", method: "POST", path: "/api/dev/token", body: map[string]any{"uid": "erin", "role": "root"}, status: 400, code: "validation_failed"},
		{name: "dev token of a bad ttl", method: "POST", path: "/api/dev/token", body: map[string]any{"uid": "erin", "ttlSeconds": 90000}, status: 400, code: "validation_failed"},
		{name: "dev token of an empty uid", method: "POST", path: "/api/dev/token", body: map[string]any{"uid": " "}, status: 400, code: "validation_failed"},
		{method: "OPTIONS", path: "/api/v1/account", header: map[string]string{"Origin": "https://app.example.com", "Access-Control-Request-Method": "GET"}, status: 204,
			check: func(t testing.TB, r res) {
				if r.header.Get("Access-Control-Allow-Origin") != "https://app.example.com" {
					t.Fatalf("preflight: %v", r.header)
				}
			}},
		{name: "a body over the limit", method: "POST", path: "/api/v1/messages/send-bulk", body: `{"numbers":["15550100001"],"message":"` + strings.Repeat("x", 1<<20) + `"}`, status: 413},
	})
	// An asset of the current version, and the same file under an old version (not cached).
	page := string(a.do(t, "GET", "/dashboard/", "", nil, nil).body)
	i := strings.Index(page, "/dashboard/v/")
	if i < 0 {
		t.Fatalf("the page names no versioned asset: %.300s", page)
	}
	asset := page[i : i+strings.IndexAny(page[i:], `"'`)]
	if r := a.do(t, "GET", asset, "", nil, nil); r.status != 200 || !strings.Contains(r.header.Get("Cache-Control"), "immutable") {
		t.Fatalf("%s: %d %v", asset, r.status, r.header)
	}
}

// sign is the Shopify-type webhook signature of body.
func sign(body, secret string) string { return ecom.SignWebhook([]byte(body), secret) }

// With OIDC sign-in, the page's configuration and content-security policy come from what the
// identity provider's discovery has answered; before it has, the page says to try again and
// the policy allows the issuer's origin. Nothing here contacts the provider.
func TestDashboardOIDCSignIn(t *testing.T) {
	var known atomic.Bool
	a := newAPI(t, func(c *Config) {
		c.Dashboard.Auth, c.Dashboard.OIDCIssuer, c.Dashboard.ClientID = "oidc", "https://idp.example.com/realms/r", "dashboard"
		c.Dashboard.Endpoints = func() (identity.Endpoints, bool) {
			return identity.Endpoints{Authorization: "https://idp.example.com/auth", Token: "https://token.example.com/token"}, known.Load()
		}
	})
	a.run(t, "dashboard_oidc", []call{
		{name: "before discovery", method: "GET", path: "/dashboard/config.json", status: 200},
		{method: "GET", path: "/dashboard/", status: 200, check: func(t testing.TB, r res) {
			if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self' https://idp.example.com;") {
				t.Fatalf("CSP before discovery: %q", csp)
			}
		}},
	})
	known.Store(true)
	a.run(t, "dashboard_oidc_known", []call{
		{name: "after discovery", method: "GET", path: "/dashboard/config.json", status: 200},
		{method: "GET", path: "/dashboard/", status: 200, check: func(t testing.TB, r res) {
			if csp := r.header.Get("Content-Security-Policy"); !strings.Contains(csp, "connect-src 'self' https://token.example.com;") {
				t.Fatalf("CSP after discovery: %q", csp)
			}
		}},
	})
}

// A signed-in caller's profile is kept with their cached ID token (Server.user) and given again
// only while the user directory is unchanged: a rename, a promotion and a demotion by an admin
// show on the very next call with the same token.
func TestSignedInProfileFollowsTheDirectory(t *testing.T) {
	a := newAPI(t)
	tok := map[string]string{"Authorization": "Bearer " + a.token("alice")}
	me := func() res {
		t.Helper()
		r := a.do(t, "GET", "/api/client/me", "", tok, nil)
		if r.status != 200 {
			t.Fatalf("me: %d %s", r.status, r.body)
		}
		return r
	}
	for range 3 { // the first verifies the token, the next ones are from the cache and its Memo
		if r := me(); r.str("name") != "Alice" || r.str("role") != "client" {
			t.Fatalf("me = %s", r.body)
		}
	}
	if r := a.do(t, "GET", "/api/admin/users", "", tok, nil); r.status != 403 {
		t.Fatalf("a client listed users: %d", r.status)
	}
	patch := func(body map[string]any) {
		t.Helper()
		if r := a.do(t, "PATCH", "/api/admin/users", "root", nil, body); r.status != 200 {
			t.Fatalf("patch %v: %d %s", body, r.status, r.body)
		}
	}
	patch(map[string]any{"id": "alice", "name": "Ada", "role": "admin"})
	if r := me(); r.str("name") != "Ada" || r.str("role") != "admin" {
		t.Fatalf("after the admin's change, me = %s", r.body)
	}
	if r := a.do(t, "GET", "/api/admin/users", "", tok, nil); r.status != 200 {
		t.Fatalf("a promoted user could not list users: %d %s", r.status, r.body)
	}
	patch(map[string]any{"id": "alice", "role": "client"})
	if r := a.do(t, "GET", "/api/admin/users", "", tok, nil); r.status != 403 {
		t.Fatalf("a demoted user still listed users: %d", r.status)
	}
}
