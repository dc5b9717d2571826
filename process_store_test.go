package main

import (
	"testing"
	"time"
)

// Store webhooks accepted just before a kill -9 are delivered after the restart, exactly once:
// one whose message was in flight (in the outbox), and one still waiting in the store's inbox
// behind it.
func TestKill9AcceptedWebhooksDeliveredOnce(t *testing.T) {
	data := t.TempDir()
	p := startProc(t, data)
	tg := p.gw(t, data)
	alice := tg.newClient("alice")
	tg.link(alice, "447700900001")
	want(t, tg.do("POST", "/api/ecom/native-connect", bearerAuth(alice), map[string]any{"shop": aliceShop, "webhookSecret": hookSecret}), 200, "")
	// Deliveries hang from now on: the first message stays in flight until the kill.
	want(t, tg.do("POST", "/api/dev/sim/latency", nil, map[string]any{"ms": 60000}), 200, "")

	q := "uid=alice&shop=" + aliceShop
	inFlight := orderBody(t, 5001, "#5001", "+1 312 555 0105")
	waiting := orderBody(t, 5002, "#5002", "+1 312 555 0106")
	for _, w := range []struct {
		id   string
		body []byte
	}{{"w-in-flight", inFlight}, {"w-waiting", waiting}} {
		r := tg.webhook(q, shopifyHook("orders/create", aliceShop, hookSecret, w.id, w.body), w.body)
		if want(t, r, 200, ""); r.str("status") != "queued" {
			t.Fatalf("%s: %s", w.id, r.raw)
		}
	}
	// Both events become messages accepted into the outbox (accept, then deliver): both are
	// queued behind the hanging delivery when the gateway dies.
	eventually(t, 10*time.Second, "both messages in the outbox", func() bool {
		return tg.metric("gateway_outbox_pending") == 2 && tg.metric("gateway_store_events_pending") == 0
	})
	p.kill9(t)

	p = startProc(t, data)
	tg = p.gw(t, data)
	eventually(t, 30*time.Second, "both messages delivered", func() bool {
		return len(tg.simMessages("13125550105")) == 1 && len(tg.simMessages("13125550106")) == 1 &&
			tg.metric("gateway_store_events_pending") == 0
	})
	for id, to := range map[string]string{"w-in-flight": "13125550105", "w-waiting": "13125550106"} {
		// Sent under the id chosen when the webhook was accepted: the in-flight one was re-sent,
		// not sent anew.
		if ev := tg.waitEvent(alice, id); ev["status"] != "sent" || ev["messageId"] != tg.simMessages(to)[0]["id"] {
			t.Fatalf("%s after the restart: %v", id, ev)
		}
	}
	// The platform retrying a delivery it never saw answered (same id) is a duplicate.
	r := tg.webhook(q, shopifyHook("orders/create", aliceShop, hookSecret, "w-waiting", waiting), waiting)
	if want(t, r, 200, ""); r.str("status") != "duplicate" {
		t.Fatalf("redelivery after the restart: %s", r.raw)
	}

	// And after another kill -9, nothing is sent twice.
	p.kill9(t)
	p = startProc(t, data)
	tg = p.gw(t, data)
	tg.waitStatus(alice, "CONNECTED")
	for _, to := range []string{"13125550105", "13125550106"} {
		if n := len(tg.simMessages(to)); n != 1 {
			t.Fatalf("%s received %d messages after a second restart", to, n)
		}
	}
}
