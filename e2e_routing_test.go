package main

// Routing per message between a linked session on the sim and a cloud number on the fake Graph
// API (issue 29, DESIGN.md section 17): auto sends a warm contact's message over the linked
// phone, a cold one's as the cold template over the cloud number, one inside the contact's
// service window as it is; a timelock sends first messages over the cloud number while
// replies still go linked; with no cold template a cold message waits for its contact and goes
// once they write (through the session they wrote to), or fails after 72 hours. One gateway.

import (
	"strings"
	"testing"
	"time"

	"github.com/gateway/gateway/cloudapi"
	"github.com/gateway/gateway/network/cloud/fakegraph"
)

// routedUser is a user with a linked session on the sim, a cloud number and a key.
type routedUser struct {
	conversation
	num  *cloudNumber
	fake *fakegraph.Server
}

// sendWay sends body and returns the message as it stands once it left the queue (or, with
// waiting, while it waits).
func (u routedUser) message(t *testing.T, id string) resp {
	t.Helper()
	r := u.tg.do("GET", "/api/v1/messages/"+id, keyAuth(u.s.key), nil)
	want(t, r, 200, "")
	return r
}

// way checks a message's via and reason.
func way(t *testing.T, m resp, via, reason string) {
	t.Helper()
	if m.str("via") != via || m.str("viaReason") != reason {
		t.Fatalf("the message went via %q (%q), want %q (%q): %s", m.str("via"), m.str("viaReason"), via, reason, m.raw)
	}
}

// simCount is how many messages with id reached the sim's phone to.
func (u routedUser) simCount(to, id string) int {
	n := 0
	for _, m := range u.tg.simMessages(to) {
		if m["id"] == id {
			n++
		}
	}
	return n
}

// cloudCount is how many times the fake took message id for to.
func (u routedUser) cloudCount(to, id string) int {
	n := 0
	for _, got := range sentIDs(u.fake, to) {
		if got == id {
			n++
		}
	}
	return n
}

func TestCloudRouting(t *testing.T) {
	sideBySide(t)
	clock := newSkewClock()
	num := &cloudNumber{id: "106540352200001", waba: "102290129300001", display: "+1 555-010-0999", token: "EAAJB-routing", secret: "routing-secret"}
	fake := newFakeGraph(t, num)
	tg := startGWSkew(t, clock, "--cloud-graph-url", fake.URL(), "--webhook-allow-private")
	admin := tg.token("root", "admin")
	u := routedUser{conversation: conversation{tg: tg, s: tg.newSender(admin, "dave", "447700900077", nil), sink: newHookSink(t)}, num: num, fake: fake}
	sub := tg.do("POST", "/api/client/webhooks", bearerAuth(u.s.tok), map[string]any{"url": u.sink.URL + "/hook", "events": []string{"message.status"}})
	want(t, sub, 201, "")
	u.secret = sub.str("secret")
	cloudSession := tg.connectCloud(fake, u.s.tok, num)
	r := tg.do("PATCH", "/api/client/routing", bearerAuth(u.s.tok), map[string]any{"mode": "auto", "coldTemplate": map[string]any{"name": "cold_notice", "language": "en_US"}})
	want(t, r, 200, "")
	if r.str("mode") != "auto" {
		t.Fatalf("routing: %s", r.raw)
	}
	// A cold template must be an APPROVED one of the number's.
	want(t, tg.do("PATCH", "/api/client/routing", bearerAuth(u.s.tok), map[string]any{"coldTemplate": map[string]any{"name": "promo", "language": "en_US"}}), 400, "template_not_approved")
	const warm, cold, windowed, timelocked = "15550300001", "15550300002", "15550300003", "15550300004"

	t.Run("WarmGoesLinked", func(t *testing.T) {
		u.act(t, map[string]any{"from": warm, "text": "hi, is my order ready?"})
		eventually(t, 10*time.Second, "the contact's message kept", func() bool {
			// The session records the contact as warm before the message is kept: until then
			// it is cold (seen once under load on NATS).
			items, _ := tg.historyPage(t, "/api/v1/messages?direction=in&from="+warm, keyAuth(u.s.key))
			return len(items) == 1
		})
		id := u.send(t, map[string]any{"phone": warm, "message": "yes, come by"})
		m := u.settled(t, id)
		way(t, m, "linked", "warm")
		if m.str("session") != u.s.session || u.simCount(warm, id) != 1 || len(fake.Sent(warm)) != 0 {
			t.Fatalf("a warm contact's message: %s", m.raw)
		}
		ev := u.event(t, "message.status", func(d map[string]any) bool { return d["messageId"] == id && d["status"] == "sent" })
		if ev["via"] != "linked" || ev["viaReason"] != "warm" {
			t.Fatalf("message.status %v", ev)
		}
	})

	t.Run("ColdGoesAsTheColdTemplate", func(t *testing.T) {
		id := u.send(t, map[string]any{"phone": cold, "message": "your order #1001 is confirmed"})
		m := u.settled(t, id)
		way(t, m, "cloud", "cold")
		sent := fake.Sent(cold)
		if m.str("session") != cloudSession || len(sent) != 1 || sent[0].Request.Template == nil || sent[0].Request.Template.Name != "cold_notice" ||
			sent[0].Request.Template.Components[0].Parameters[0].Text != "your order #1001 is confirmed" || u.simCount(cold, id) != 0 {
			t.Fatalf("a cold contact's message: %s, the fake got %+v", m.raw, sent)
		}
		items, _ := tg.historyPage(t, "/api/v1/messages?direction=out&limit=1", keyAuth(u.s.key))
		if len(items) != 1 || items[0]["id"] != id || items[0]["via"] != "cloud" || items[0]["viaReason"] != "cold" {
			t.Fatalf("history: %v", items)
		}
	})

	t.Run("InsideTheWindowAsItIs", func(t *testing.T) {
		if _, err := fake.Write(num.id, fakegraph.Inbound{From: windowed, Text: "saw your ad"}); err != nil {
			t.Fatal(err)
		}
		var id string
		eventually(t, 10*time.Second, "the window open", func() bool {
			// The contact's message reaches the gateway through Meta's webhook; until then the
			// contact is cold (a template would go): wait for it.
			items, _ := tg.historyPage(t, "/api/v1/messages?direction=in&from="+windowed, keyAuth(u.s.key))
			return len(items) == 1
		})
		id = u.send(t, map[string]any{"phone": windowed, "message": "here is the link"})
		m := u.settled(t, id)
		way(t, m, "cloud", "window")
		if s := fake.Sent(windowed); len(s) != 1 || s[0].Request.Text == nil || s[0].Request.Text.Body != "here is the link" {
			t.Fatalf("the fake got %+v", s)
		}
		// A message for after the window's end is routed by the window then: the cold template.
		later := u.send(t, map[string]any{"phone": windowed, "message": "your order ships tomorrow", "sendAt": clock.Now().Add(25 * time.Hour).UTC().Format(time.RFC3339)})
		lm := u.message(t, later)
		if tpl, _ := lm.obj()["template"].(map[string]any); lm.str("status") != "scheduled" || tpl == nil || tpl["name"] != "cold_notice" {
			t.Fatalf("a message for after the window: %s", lm.raw)
		}
		way(t, lm, "cloud", "cold")
		want(t, tg.do("DELETE", "/api/v1/messages/"+later, keyAuth(u.s.key), nil), 200, "")
	})

	t.Run("TimelockSendsFirstMessagesOverCloudRepliesLinked", func(t *testing.T) {
		until := clock.Now().Add(time.Hour).UTC().Format(time.RFC3339)
		want(t, tg.do("POST", "/api/dev/sim/timelock", nil, map[string]any{"sessionId": u.s.session, "until": until}), 200, "")
		eventually(t, 10*time.Second, "the timelock on the session", func() bool {
			return tg.do("GET", "/api/client/status", bearerAuth(u.s.tok), nil).obj()["restrictedUntil"] != nil
		})
		first := u.send(t, map[string]any{"phone": timelocked, "message": "welcome!"})
		reply := u.send(t, map[string]any{"phone": warm, "message": "see you soon"})
		way(t, u.settled(t, first), "cloud", "timelock")
		way(t, u.settled(t, reply), "linked", "warm")
		if u.cloudCount(timelocked, first) != 1 || u.simCount(warm, reply) != 1 || u.simCount(timelocked, first) != 0 {
			t.Fatal("the timelock's messages went the wrong way")
		}
		want(t, tg.do("POST", "/api/dev/sim/timelock", nil, map[string]any{"sessionId": u.s.session, "until": ""}), 200, "")
		eventually(t, 10*time.Second, "the timelock lifted", func() bool {
			return tg.do("GET", "/api/client/status", bearerAuth(u.s.tok), nil).obj()["restrictedUntil"] == nil
		})
	})

	t.Run("NoColdTemplateWaitsForTheContact", func(t *testing.T) {
		want(t, tg.do("PATCH", "/api/client/routing", bearerAuth(u.s.tok), map[string]any{"coldTemplate": nil}), 200, "")
		const z1, z2, z3, z4 = "15550300011", "15550300012", "15550300013", "15550300014"
		a := u.tg.do("POST", "/api/v1/messages/send", keyAuth(u.s.key), map[string]any{"phone": z1, "message": "your parcel is out"})
		want(t, a, 200, "")
		if a.str("status") != "queued" || a.str("code") != "waiting_for_contact" || a.str("via") != "cloud" || a.str("viaReason") != "cold" {
			t.Fatalf("a cold message without a cold template: %s", a.raw)
		}
		waitID := a.str("message_id")
		ev := u.event(t, "message.status", func(d map[string]any) bool { return d["messageId"] == waitID && d["status"] == "queued" })
		if ev["code"] != "waiting_for_contact" {
			t.Fatalf("message.status queued: %v", ev)
		}
		b := u.send(t, map[string]any{"phone": z2, "message": "your parcel is out too"})
		c := u.send(t, map[string]any{"phone": z3, "message": "nobody reads this"})
		d := u.send(t, map[string]any{"phone": z4, "message": "cancel me"})
		if m := u.message(t, waitID); m.str("status") != "queued" || m.str("code") != "waiting_for_contact" || len(fake.Sent(z1)) != 0 {
			t.Fatalf("before the contact writes: %s", m.raw)
		}
		// z1 writes to the cloud number: the message goes there, as it is, once.
		if _, err := fake.Write(num.id, fakegraph.Inbound{From: z1, Text: "where is it?"}); err != nil {
			t.Fatal(err)
		}
		m := u.settled(t, waitID)
		way(t, m, "cloud", "window")
		if u.cloudCount(z1, waitID) != 1 || fake.Sent(z1)[0].Request.Text.Body != "your parcel is out" || m.str("code") != "" {
			t.Fatalf("released over cloud: %s, %+v", m.raw, fake.Sent(z1))
		}
		// z2 writes to the linked phone: the message goes there.
		u.act(t, map[string]any{"from": z2, "text": "hello?"})
		m = u.settled(t, b)
		way(t, m, "linked", "warm")
		if u.simCount(z2, b) != 1 || len(fake.Sent(z2)) != 0 || m.str("session") != u.s.session {
			t.Fatalf("released over the linked phone: %s", m.raw)
		}
		// A waiting message taken back is cancelled.
		del := u.tg.do("DELETE", "/api/v1/messages/"+d, keyAuth(u.s.key), nil)
		want(t, del, 200, "")
		if del.str("status") != "cancelled" {
			t.Fatalf("DELETE of a waiting message: %s", del.raw)
		}
		// z3 never writes: failed after 72 hours.
		clock.Advance(73 * time.Hour)
		ev = u.event(t, "message.status", func(d map[string]any) bool { return d["messageId"] == c && d["status"] == "failed" })
		if ev["code"] != "contact_did_not_write" {
			t.Fatalf("after 72 hours: %v", ev)
		}
		if len(fake.Sent(z3)) != 0 || u.simCount(z3, c) != 0 {
			t.Fatal("an expired message was sent")
		}
	})

	t.Run("ModeLinkedAndTemplates", func(t *testing.T) {
		want(t, tg.do("PATCH", "/api/client/routing", bearerAuth(u.s.tok), map[string]any{"mode": "linked"}), 200, "")
		const other = "15550300021"
		id := u.send(t, map[string]any{"phone": other, "message": "over the phone"})
		way(t, u.settled(t, id), "linked", "")
		// A template goes over the cloud number whatever the mode.
		tpl := u.send(t, map[string]any{"phone": other, "type": "template", "template": map[string]any{"name": "order_update", "language": "en_US", "parameters": []string{"#7", "ready"}}})
		way(t, u.settled(t, tpl), "cloud", "cold")
		if u.cloudCount(other, tpl) != 1 || u.simCount(other, id) != 1 {
			t.Fatal("mode linked: the wrong way")
		}
	})
}

// An order message to a first-time buyer goes as its store topic's cloud template, its
// parameters rendered from the order (DESIGN.md section 17: a store topic can name its cloud
// template); a returning customer who wrote to the linked phone gets the usual text there.
func TestCloudStoreTopicTemplate(t *testing.T) {
	sideBySide(t)
	num := &cloudNumber{id: "106540352200002", waba: "102290129300002", display: "+1 555-010-0998", token: "EAAJB-store", secret: "store-secret"}
	graph := newFakeGraph(t, num)
	graph.AddTemplate(num.waba, cloudapi.MessageTemplate{Name: "order_confirmed", Language: "en_US", Status: "APPROVED", Category: "UTILITY",
		Components: []cloudapi.TemplateComponent{{Type: "BODY", Text: "Hi {{1}}, order {{2}} is confirmed."}}})
	tg, platform := storeGW(t, "--cloud-graph-url", graph.URL(), "--webhook-allow-private")
	alice := connectedStore(t, tg, platform)
	tg.connectCloud(graph, alice, num)
	want(t, tg.do("PATCH", "/api/client/routing", bearerAuth(alice), map[string]any{"mode": "auto"}), 200, "")
	// A template taking another number of parameters is refused.
	want(t, tg.do("PUT", "/api/client/templates", bearerAuth(alice), map[string]any{"topic": "orders/create",
		"cloudTemplate": map[string]any{"name": "order_confirmed", "language": "en_US", "parameters": []string{"{customer_name}"}}}), 400, "validation_failed")
	// So is a parameter naming no placeholder: Meta would get "{bogus}" as written.
	want(t, tg.do("PUT", "/api/client/templates", bearerAuth(alice), map[string]any{"topic": "orders/create",
		"cloudTemplate": map[string]any{"name": "order_confirmed", "language": "en_US", "parameters": []string{"{bogus}", "{order_number}"}}}), 400, "validation_failed")
	r := tg.do("PUT", "/api/client/templates", bearerAuth(alice), map[string]any{"topic": "orders/create",
		"cloudTemplate": map[string]any{"name": "order_confirmed", "language": "en_US", "parameters": []string{"{customer_name}", "{order_number}"}}})
	want(t, r, 200, "")
	if ct, _ := r.obj()["template"].(map[string]any)["cloudTemplate"].(map[string]any); ct["name"] != "order_confirmed" {
		t.Fatalf("PUT: %s", r.raw)
	}
	q := "uid=alice&shop=" + aliceShop
	body := orderBody(t, 2001, "#2001", "+1 (312) 555-0102")
	want(t, tg.webhook(q, shopifyHook("orders/create", aliceShop, hookSecret, "w-cold", body), body), 200, "")
	const buyer = "13125550102"
	eventually(t, 15*time.Second, "the order message at Meta", func() bool { return len(graph.Sent(buyer)) == 1 })
	tpl := graph.Sent(buyer)[0].Request.Template
	if tpl == nil || tpl.Name != "order_confirmed" || tpl.Components[0].Parameters[0].Text != "John" || tpl.Components[0].Parameters[1].Text != "#2001" {
		t.Fatalf("the first-time buyer got %+v", graph.Sent(buyer)[0].Request)
	}
	if ev := tg.waitEvent(alice, "w-cold"); ev["status"] != "sent" {
		t.Fatalf("store event: %v", ev)
	}
	// A returning customer (wrote to the linked phone) gets the text there.
	const back = "13125550103"
	sid := tg.status(alice)["id"].(string)
	want(t, tg.do("POST", "/api/dev/sim/inbound", nil, map[string]any{"sessionId": sid, "from": back, "text": "hi again"}), 200, "")
	// The sim answers before the engine has read the message; once it is in the history, the
	// contact's window is open (the engine records that first).
	eventually(t, 15*time.Second, "the customer's message in the history", func() bool {
		items, _ := tg.historyPage(t, "/api/client/messages?direction=in&from="+back, bearerAuth(alice))
		return len(items) == 1
	})
	body = orderBody(t, 2002, "#2002", "+1 (312) 555-0103")
	want(t, tg.webhook(q, shopifyHook("orders/create", aliceShop, hookSecret, "w-warm", body), body), 200, "")
	eventually(t, 15*time.Second, "the order message on the linked phone", func() bool { return len(tg.simMessages(back)) == 1 })
	if len(graph.Sent(back)) != 0 || !strings.Contains(tg.simMessages(back)[0]["text"].(string), "#2002") {
		t.Fatalf("a returning customer: sim %v, cloud %d", tg.simMessages(back), len(graph.Sent(back)))
	}
}
