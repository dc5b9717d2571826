package main

// End-to-end tests of the store loop, both ways (issue 30, DESIGN.md section 18), on one
// gateway whose clock the test moves (skewClock): confirmations answered and written back to
// the fake platforms (Shopify type through GraphQL, WooCommerce type through REST), one
// follow-up, delayed messages skipped by their order's cancellation, abandoned checkouts, and
// opt-outs honoured by a 500-number campaign.

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-json"

	"github.com/gateway/gateway/ecom"
	"github.com/gateway/gateway/ecom/ecomtest"
)

const (
	bobShop   = "shop.example.com" // bob's WooCommerce store
	bobKey    = "ck_bob_0123456789"
	bobSecret = "cs_bob_0123456789"
)

// loopGW starts a gateway on a skew clock (args added) with alice's Shopify store (manual
// token) and bob's WooCommerce store (with REST API keys), each linked to a session.
func loopGW(t *testing.T, args ...string) (tg *testGW, fake *ecomtest.Platform, clock *skewClock, alice, bob string) {
	t.Helper()
	fake = ecomtest.New()
	t.Cleanup(fake.Close)
	clock = newSkewClock()
	tg = startGWSkew(t, clock, append([]string{"--ecom-api-base", fake.APIBase(), "--public-url", testPublicURL, "--webhook-allow-private"}, args...)...)
	alice = connectedStore(t, tg, fake)
	fake.AddWooStore(bobShop, bobKey, bobSecret)
	bob = tg.newClient("bob")
	tg.link(bob, "447700900002")
	want(t, tg.do("POST", "/api/client/store/connect", bearerAuth(bob), map[string]any{"platform": "woocommerce", "domain": bobShop,
		"webhookSecret": hookSecret, "consumerKey": bobKey, "consumerSecret": bobSecret}), 200, "")
	if st := tg.store(bob); st["writeBack"] != true {
		t.Fatalf("woo store without write-back: %v", st)
	}
	return tg, fake, clock, alice, bob
}

// inbound is a customer writing text to the session of the user with token tok.
func (tg *testGW) inbound(tok, from, text string) {
	tg.t.Helper()
	sid := tg.status(tok)["id"].(string)
	want(tg.t, tg.do("POST", "/api/dev/sim/inbound", nil, map[string]any{"sessionId": sid, "from": from, "text": text}), 200, "")
}

// shopifyOrder posts an orders/* webhook of alice's shop for order id with this customer phone.
func (tg *testGW) shopifyOrder(topic, hookID string, id int64, phone string, edit func(map[string]any)) {
	tg.t.Helper()
	tg.shopifyOrderOf("alice", aliceShop, topic, hookID, id, phone, edit)
}

// shopifyOrderOf posts an orders/* webhook of user uid's Shopify-type shop.
func (tg *testGW) shopifyOrderOf(uid, shop, topic, hookID string, id int64, phone string, edit func(map[string]any)) {
	tg.t.Helper()
	m := readFixture(tg.t, "shopify/order.json")
	m["id"], m["name"] = id, fmt.Sprintf("#%d", id)
	m["customer"].(map[string]any)["phone"] = phone
	if edit != nil {
		edit(m)
	}
	body := mustJSON(tg.t, m)
	r := tg.webhook("uid="+uid+"&shop="+shop, shopifyHook(topic, shop, hookSecret, hookID, body), body)
	if want(tg.t, r, 200, ""); r.str("status") != "queued" {
		tg.t.Fatalf("%s: %s", topic, r.raw)
	}
}

// wooOrder posts an order.created or order.updated webhook of bob's store: the fixture's order
// (cash on delivery) with this id, status and billing phone.
func (tg *testGW) wooOrder(topic, hookID string, id int64, status, phone string) {
	tg.t.Helper()
	m := readFixture(tg.t, "woocommerce-order.json")
	m["id"], m["number"], m["status"], m["payment_method"], m["payment_method_title"] = id, fmt.Sprint(id), status, "cod", "Cash on delivery"
	m["billing"].(map[string]any)["phone"] = phone
	body := mustJSON(tg.t, m)
	h := map[string]string{"X-WC-Webhook-Topic": topic, "X-WC-Webhook-Source": "https://" + bobShop + "/",
		"X-WC-Webhook-Signature": ecom.SignWebhook(body, hookSecret), "X-WC-Webhook-Delivery-ID": hookID}
	r := tg.webhook("uid=bob&shop="+bobShop, h, body)
	if want(tg.t, r, 200, ""); r.str("status") != "queued" {
		tg.t.Fatalf("%s: %s", topic, r.raw)
	}
}

// order finds an order of the user's store view.
func (tg *testGW) order(tok string, id int64) map[string]any {
	tg.t.Helper()
	for _, o := range tg.store(tok)["orders"].([]any) {
		if m := o.(map[string]any); m["orderId"] == float64(id) {
			return m
		}
	}
	return nil
}

// fakeOrder waits until the fake platform holds an order that satisfies ok, and returns it.
func fakeOrder(t *testing.T, fake *ecomtest.Platform, shop string, id int64, what string, ok func(ecomtest.Order) bool) ecomtest.Order {
	t.Helper()
	var o ecomtest.Order
	eventually(t, 10*time.Second, what, func() bool {
		var found bool
		o, found = fake.Order(shop, id)
		return found && ok(o)
	})
	return o
}

// setConfirm saves a template with a confirmation question.
func (tg *testGW) setConfirm(tok, topic string, confirm map[string]any) {
	tg.t.Helper()
	r := tg.do("PUT", "/api/client/templates", bearerAuth(tok), map[string]any{"topic": topic, "confirm": confirm})
	if want(tg.t, r, 200, ""); r.obj()["template"].(map[string]any)["confirm"] == nil {
		tg.t.Fatalf("confirm not saved: %s", r.raw)
	}
}

func TestStoreLoopConfirmations(t *testing.T) {
	num := carolNumber()
	graph := newFakeGraph(t, num)
	tg, fake, clock, alice, bob := loopGW(t, "--cloud-graph-url", graph.URL())
	carol := cloudStore(t, tg, fake, graph, num)
	tg.setConfirm(alice, "orders/create", map[string]any{"followUpAfter": "2h", "cancelOnNo": true})
	tg.setConfirm(bob, "orders/create", map[string]any{"question": "Shall we ship order {order_number}?", "cancelOnNo": true, "followUpAfter": "0"})
	tpl := tg.do("GET", "/api/client/templates", bearerAuth(alice), nil).obj()["templates"].([]any)
	c := tpl[0].(map[string]any)["confirm"].(map[string]any)
	if len(tpl) != 6 || c["yes"] != "Yes, confirm" || c["no"] != "No, cancel" || c["tagYes"] != "cod-confirmed" || c["tagNo"] != "cod-cancelled" ||
		c["followUpAfter"] != "2h" || c["question"] != "Please confirm your order {order_number}" {
		t.Fatalf("templates: %v", tpl)
	}
	// Each user's order.confirmed and order.cancelled events, checked at the end.
	type subscriber struct {
		sink   *hookSink
		secret string
	}
	subs := map[string]subscriber{}
	for who, tok := range map[string]string{"alice": alice, "bob": bob, "carol": carol} {
		sink := newHookSink(t)
		sub := tg.do("POST", "/api/client/webhooks", bearerAuth(tok), map[string]any{"url": sink.URL + "/hook", "events": []string{"order.confirmed", "order.cancelled"}})
		want(t, sub, 201, "")
		subs[who] = subscriber{sink, sub.str("secret")}
	}
	// First, while the clock is Meta's own: a customer's service window is 24 hours of it.
	cloudConfirmations(t, tg, fake, graph, num, clock, carol)

	t.Run("shopify yes: tagsAdd with tagYes and the note", func(t *testing.T) {
		tg := tg.with(t)
		const phone = "13125550201"
		tg.shopifyOrder("orders/create", "c-yes", 2001, "+1 312-555-0201", nil)
		msgs := tg.simDelivered(phone, 1)
		q := msgs[0]
		// A linked session asks with a poll: the order message and the question, two answers.
		if q["type"] != "poll" || !strings.Contains(questionText(q), "Please confirm your order #2001") || !strings.Contains(questionText(q), "Yes, confirm") ||
			!strings.Contains(questionText(q), "Hi John, thank you for your order #2001") {
			t.Fatalf("the question: %v", q)
		}
		answered := time.Now()
		tg.answerYes(alice, phone, q)
		o := fakeOrder(t, fake, aliceShop, 2001, "the order tagged and noted", func(o ecomtest.Order) bool {
			return len(o.Tags) == 1 && o.Note != ""
		})
		if o.Tags[0] != "cod-confirmed" || !strings.Contains(o.Note, "confirmed the order") || o.Cancelled {
			t.Fatalf("order %+v", o)
		}
		var last time.Time
		for _, w := range fake.WriteBacks() {
			if w.OrderID == 2001 {
				last = w.At
			}
		}
		if took := last.Sub(answered); took > 10*time.Second {
			t.Fatalf("written back %v after the answer", took)
		}
		eventually(t, 10*time.Second, "the store screen says confirmed and written", func() bool {
			cf, _ := tg.order(alice, 2001)["confirmation"].(map[string]any)
			return cf != nil && cf["state"] == "confirmed" && cf["writeBack"] == "done" && cf["answer"] == "yes" && cf["answeredBy"] == "vote" && cf["via"] == "poll"
		})
	})

	t.Run("shopify: a typed 2 with cancelOnNo cancels the order", func(t *testing.T) {
		tg := tg.with(t)
		const phone = "13125550202"
		tg.shopifyOrder("orders/create", "c-no", 2002, "+1 312-555-0202", nil)
		tg.simDelivered(phone, 1)
		tg.inbound(alice, phone, "2")
		o := fakeOrder(t, fake, aliceShop, 2002, "the order cancelled", func(o ecomtest.Order) bool { return o.Cancelled })
		if len(o.Tags) != 1 || o.Tags[0] != "cod-cancelled" || o.CancelReason != "CUSTOMER" || !o.Restock || !strings.Contains(o.StaffNote, "declined") {
			t.Fatalf("order %+v", o)
		}
		eventually(t, 10*time.Second, "the store screen says cancelled", func() bool {
			cf, _ := tg.order(alice, 2002)["confirmation"].(map[string]any)
			return cf != nil && cf["state"] == "cancelled" && cf["answeredBy"] == "text" && cf["writeBack"] == "done"
		})
		// A second answer changes nothing: the first one counts.
		n := len(fake.WriteBacks())
		tg.inbound(alice, phone, "1")
		tg.inbound(alice, phone, "STOP") // an opt-out, answered once
		tg.simDelivered(phone, 2)
		if o, _ := fake.Order(aliceShop, 2002); len(o.Tags) != 1 || len(fake.WriteBacks()) != n {
			t.Fatalf("a second answer wrote back: %+v", o)
		}
	})

	t.Run("no answer: one follow-up after followUpAfter, never two", func(t *testing.T) {
		tg := tg.with(t)
		const phone = "13125550203"
		tg.shopifyOrder("orders/create", "c-follow", 2003, "+1 312-555-0203", nil)
		tg.simDelivered(phone, 1)
		cf := tg.order(alice, 2003)["confirmation"].(map[string]any)
		if cf["state"] != "awaiting" || cf["followUpAt"] == nil {
			t.Fatalf("confirmation %v", cf)
		}
		clock.Advance(time.Hour)
		if n := len(tg.simMessages(phone)); n != 1 {
			t.Fatalf("%d messages an hour later", n)
		}
		clock.Advance(time.Hour + time.Minute)
		msgs := tg.simDelivered(phone, 2)
		if !strings.HasPrefix(questionText(msgs[1]), "Reminder: Please confirm your order #2003") {
			t.Fatalf("follow-up %v", msgs[1])
		}
		// A message sent after the follow-up's time reaches the phone after it would have.
		if msgs := tg.afterProbe(clock, 3*time.Hour, alice, phone); len(msgs) != 3 {
			t.Fatalf("%d messages, want the question, one follow-up and the probe: %v", len(msgs), msgs)
		}
		tg.inbound(alice, phone, "Yes")
		fakeOrder(t, fake, aliceShop, 2003, "the late answer written back", func(o ecomtest.Order) bool { return len(o.Tags) == 1 })
	})

	t.Run("an answer before the follow-up skips it", func(t *testing.T) {
		tg := tg.with(t)
		const phone = "13125550204"
		tg.shopifyOrder("orders/create", "c-answered", 2004, "+1 312-555-0204", nil)
		tg.simDelivered(phone, 1)
		tg.inbound(alice, phone, "1")
		fakeOrder(t, fake, aliceShop, 2004, "written back", func(o ecomtest.Order) bool { return len(o.Tags) == 1 })
		var follow string
		eventually(t, 10*time.Second, "the follow-up skipped", func() bool {
			for _, m := range tg.order(alice, 2004)["messages"].([]any) {
				if mm := m.(map[string]any); mm["skipped"] == "answered" {
					follow = mm["messageId"].(string)
				}
			}
			return follow != ""
		})
		if n := len(tg.afterProbe(clock, 3*time.Hour, alice, phone)); n != 2 {
			t.Fatalf("%d messages, want the question and the probe", n)
		}
	})

	t.Run("two orders of one phone: a reply quoting a question answers its own order", func(t *testing.T) {
		tg := tg.with(t)
		const phone = "13125550205"
		tg.shopifyOrder("orders/create", "c-two-1", 2005, "+1 312-555-0205", nil)
		tg.simDelivered(phone, 1)
		tg.shopifyOrder("orders/create", "c-two-2", 2006, "+1 312-555-0205", nil)
		msgs := tg.simDelivered(phone, 2)
		// "2" quoting the first order's question: the first order, though the second was asked later.
		sid := tg.status(alice)["id"].(string)
		want(t, tg.do("POST", "/api/dev/sim/inbound", nil, map[string]any{"sessionId": sid, "from": phone, "text": "2", "replyTo": msgs[0]["id"]}), 200, "")
		fakeOrder(t, fake, aliceShop, 2005, "the first order cancelled", func(o ecomtest.Order) bool { return o.Cancelled })
		if o, _ := fake.Order(aliceShop, 2006); len(o.Tags) != 0 || o.Cancelled {
			t.Fatalf("the second order changed: %+v", o)
		}
		// A "1" quoting nothing answers the phone's latest question: the second order's.
		tg.inbound(alice, phone, "1")
		o := fakeOrder(t, fake, aliceShop, 2006, "the second order confirmed", func(o ecomtest.Order) bool { return len(o.Tags) == 1 })
		if o.Tags[0] != "cod-confirmed" || o.Cancelled {
			t.Fatalf("the second order %+v", o)
		}
		if o, _ := fake.Order(aliceShop, 2005); len(o.Tags) != 1 || o.Tags[0] != "cod-cancelled" {
			t.Fatalf("the first order %+v", o)
		}
	})

	t.Run("woocommerce: yes sets processing with a note, no cancels", func(t *testing.T) {
		tg := tg.with(t)
		const yesPhone, noPhone = "15555550301", "15555550302"
		tg.wooOrder("order.created", "w-yes", 801, "processing", "(555) 555-0301")
		q := tg.simDelivered(yesPhone, 1)[0]
		if !strings.Contains(questionText(q), "Shall we ship order #801?") {
			t.Fatalf("woo question %v", q)
		}
		tg.answerYes(bob, yesPhone, q)
		o := fakeOrder(t, fake, bobShop, 801, "status processing and a note", func(o ecomtest.Order) bool { return o.Status == "processing" && len(o.Notes) == 1 })
		if !strings.Contains(o.Notes[0], "confirmed the order") {
			t.Fatalf("woo order %+v", o)
		}
		tg.wooOrder("order.created", "w-no", 802, "processing", "(555) 555-0302")
		tg.simDelivered(noPhone, 1)
		tg.inbound(bob, noPhone, "no, CANCEL")
		o = fakeOrder(t, fake, bobShop, 802, "status cancelled", func(o ecomtest.Order) bool { return o.Status == "cancelled" })
		if len(o.Notes) != 1 || !strings.Contains(o.Notes[0], "declined") {
			t.Fatalf("woo order %+v", o)
		}
		// A "no" voted on the poll cancels too.
		const votePhone = "15555550303"
		tg.wooOrder("order.created", "w-no-vote", 803, "processing", "(555) 555-0303")
		tg.answerVote(bob, votePhone, tg.simDelivered(votePhone, 1)[0], 1)
		if o := fakeOrder(t, fake, bobShop, 803, "status cancelled by the vote", func(o ecomtest.Order) bool { return o.Status == "cancelled" }); len(o.Notes) != 1 {
			t.Fatalf("woo order %+v", o)
		}
		// The cash-on-delivery order's processing (what the write-back set) is no payment.
		tg.wooOrder("order.updated", "w-yes-2", 801, "processing", "(555) 555-0301")
		if ev := tg.waitEvent(bob, "w-yes-2"); ev["status"] != "skipped" || !strings.Contains(ev["reason"].(string), "cash-on-delivery") {
			t.Fatalf("processing update: %v", ev)
		}
	})

	t.Run("order.confirmed and order.cancelled: one event per answer", func(t *testing.T) {
		for who, want := range map[string][]string{
			"alice": {"order.confirmed #2001 13125550201 yes vote", "order.cancelled #2002 13125550202 no text", "order.confirmed #2003 13125550203 yes text",
				"order.confirmed #2004 13125550204 yes text", "order.cancelled #2005 13125550205 no text", "order.confirmed #2006 13125550205 yes text"},
			"bob":   {"order.confirmed #801 15555550301 yes vote", "order.cancelled #802 15555550302 no text", "order.cancelled #803 15555550303 no vote"},
			"carol": carolEvents,
		} {
			shop := map[string]string{"alice": aliceShop, "bob": bobShop, "carol": carolShop}[who]
			var got []string
			eventually(t, 10*time.Second, fmt.Sprintf("%d events of %s", len(want), who), func() bool {
				got = got[:0]
				for _, e := range subs[who].sink.events(t, subs[who].secret) {
					d := e.Data
					if d["store"] != shop || d["messageId"] == "" || d["at"] == nil || d["orderId"] == nil {
						t.Fatalf("%s event %v", who, e)
					}
					got = append(got, fmt.Sprint(e.Type, " ", d["order"], " ", d["phone"], " ", d["answer"], " ", d["via"]))
				}
				slices.Sort(got)
				return len(got) >= len(want)
			})
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("%s's events:\n%s\nwant\n%s", who, strings.Join(got, "\n"), strings.Join(want, "\n"))
			}
			for _, r := range subs[who].sink.all() {
				var env struct {
					Type string `json:"type"`
				}
				if err := json.Unmarshal(r.body, &env); err != nil {
					t.Fatal(err)
				}
				if err := eventSchema(t, env.Type).Validate(decodeAny(t, r.body)); err != nil {
					t.Errorf("%s does not match the webhooks section: %#v\n%s", env.Type, err, r.body)
				}
			}
		}
	})
}

// questionText is what a confirmation question reads at the phone: a text's text, or a poll's
// question with its options.
func questionText(m map[string]any) string {
	if q, ok := m["question"].(string); ok && q != "" {
		var opts []string
		for _, o := range m["options"].([]any) {
			opts = append(opts, o.(string))
		}
		return q + "\n" + strings.Join(opts, "\n")
	}
	s, _ := m["text"].(string)
	return s
}

// answerYes answers a question yes as its customer would: a vote on a poll, else "1".
func (tg *testGW) answerYes(tok, phone string, q map[string]any) { tg.answerVote(tok, phone, q, 0) }

// answerVote answers a question with its option i (0 yes, 1 no) as its customer would: a vote
// on a poll, else "1" or "2".
func (tg *testGW) answerVote(tok, phone string, q map[string]any, i int) {
	tg.t.Helper()
	if q["type"] == "poll" {
		sid := tg.status(tok)["id"].(string)
		want(tg.t, tg.do("POST", "/api/dev/sim/inbound", nil, map[string]any{"sessionId": sid, "from": phone, "type": "poll_vote",
			"messageId": q["id"], "options": []string{q["options"].([]any)[i].(string)}}), 200, "")
		return
	}
	tg.inbound(tok, phone, fmt.Sprint(i+1))
}

// afterProbe moves the clock by d, then probes (sendProbe) and returns what the phone holds:
// whatever was due by then reached it before the probe.
func (tg *testGW) afterProbe(clock *skewClock, d time.Duration, tok, phone string) []map[string]any {
	tg.t.Helper()
	clock.Advance(d)
	tg.sendProbe(tok, phone)
	return tg.simMessages(phone)
}

// sendProbe sends a dashboard text to phone and waits for it at the phone: everything the
// gateway sent before it was sent by then.
func (tg *testGW) sendProbe(tok, phone string) {
	tg.t.Helper()
	n := len(tg.simMessages(phone))
	r := tg.do("POST", "/api/client/send", bearerAuth(tok), map[string]any{"phone": phone, "text": "probe", "transactional": true})
	want(tg.t, r, 200, "")
	tg.simDelivered(phone, n+1)
}

func TestStoreLoopDelaysAndCheckouts(t *testing.T) {
	tg, fake, clock, alice, _ := loopGW(t)
	_ = fake
	want(t, tg.do("PUT", "/api/client/templates", bearerAuth(alice), map[string]any{"topic": "orders/paid", "delay": "10m"}), 200, "")

	t.Run("a delayed message whose order is cancelled meanwhile is skipped", func(t *testing.T) {
		tg := tg.with(t)
		const phone = "13125550401"
		tg.shopifyOrder("orders/paid", "d-paid", 3001, "+1 312-555-0401", nil)
		ev := tg.waitEvent(alice, "d-paid")
		if ev["status"] != "sent" || ev["sendAt"] == nil {
			t.Fatalf("delayed event %v", ev)
		}
		id := ev["messageId"].(string)
		clock.Advance(5 * time.Minute)
		tg.shopifyOrder("orders/cancelled", "d-cancel", 3001, "+1 312-555-0401", nil)
		eventually(t, 10*time.Second, "the delayed message skipped", func() bool {
			ev := tg.storeEvent(alice, "d-paid")
			return ev["status"] == "skipped" && strings.HasPrefix(ev["reason"].(string), "order_cancelled")
		})
		if ev := tg.waitEvent(alice, "d-cancel"); ev["status"] != "skipped" || !strings.HasPrefix(ev["reason"].(string), "order_cancelled") {
			t.Fatalf("the cancellation of an order never told: %v", ev)
		}
		m := tg.do("GET", "/api/client/messages?direction=out&to="+phone, bearerAuth(alice), nil)
		want(t, m, 200, "")
		items := m.obj()["messages"].([]any)
		if len(items) != 1 || items[0].(map[string]any)["id"] != id || items[0].(map[string]any)["status"] != "cancelled" ||
			items[0].(map[string]any)["code"] != "order_cancelled" {
			t.Fatalf("history %v", items)
		}
		if msgs := tg.afterProbe(clock, 10*time.Minute, alice, phone); len(msgs) != 1 {
			t.Fatalf("the customer got %v", msgs)
		}
		if o := tg.order(alice, 3001); o["cancelled"] != true {
			t.Fatalf("order %v", o)
		}
	})

	t.Run("a delayed message goes at its time", func(t *testing.T) {
		tg := tg.with(t)
		const phone = "13125550402"
		tg.shopifyOrder("orders/paid", "d-paid-2", 3002, "+1 312-555-0402", nil)
		tg.waitEvent(alice, "d-paid-2")
		if n := len(tg.simMessages(phone)); n != 0 {
			t.Fatalf("%d messages before the delay", n)
		}
		clock.Advance(10*time.Minute + time.Second)
		if msgs := tg.simDelivered(phone, 1); !strings.Contains(msgs[0]["text"].(string), "#3002") {
			t.Fatalf("delayed message %v", msgs)
		}
	})

	t.Run("quiet hours hold a store message until they end", func(t *testing.T) {
		tg := tg.with(t)
		const phone = "13125550403"
		now := clock.Now().UTC()
		want(t, tg.do("PATCH", "/api/client/me", bearerAuth(alice), map[string]any{"quietHours": map[string]any{
			"from": now.Add(-time.Hour).Format("15:04"), "to": now.Add(time.Hour).Format("15:04")}}), 200, "")
		defer func() {
			want(t, tg.do("PATCH", "/api/client/me", bearerAuth(alice), map[string]any{"quietHours": nil}), 200, "")
		}()
		tg.shopifyOrder("orders/create", "q-create", 3003, "+1 312-555-0403", nil)
		ev := tg.waitEvent(alice, "q-create")
		sendAt, _ := time.Parse(time.RFC3339, fmt.Sprint(ev["sendAt"]))
		if ev["status"] != "sent" || sendAt.Sub(now) < 50*time.Minute || sendAt.Sub(now) > 61*time.Minute {
			t.Fatalf("store event in quiet hours %v (now %v)", ev, now)
		}
		clock.Advance(30 * time.Minute)
		if n := len(tg.simMessages(phone)); n != 0 {
			t.Fatal("sent in quiet hours")
		}
		clock.Advance(31 * time.Minute)
		tg.simDelivered(phone, 1)
	})

	checkout := func(topic, hookID, token, phone string, completed bool) {
		t.Helper()
		m := readFixture(t, "shopify/checkout.json")
		m["token"] = token
		m["billing_address"].(map[string]any)["phone"] = phone
		m["shipping_address"].(map[string]any)["phone"] = phone
		m["customer"].(map[string]any)["default_address"].(map[string]any)["phone"] = phone
		if completed {
			m["completed_at"] = "2026-03-01T10:00:00-05:00"
		}
		body := mustJSON(t, m)
		r := tg.webhook("uid=alice&shop="+aliceShop, shopifyHook(topic, aliceShop, hookSecret, hookID, body), body)
		if want(t, r, 200, ""); r.str("status") != "queued" {
			t.Fatalf("%s: %s", topic, r.raw)
		}
	}

	t.Run("an abandoned checkout followed by its order sends no reminder", func(t *testing.T) {
		tg := tg.with(t)
		const phone = "15556250501"
		checkout("checkouts/create", "k-1", "tok-ordered", "555-625-0501", false)
		if ev := tg.waitEvent(alice, "k-1"); ev["status"] != "sent" || ev["sendAt"] == nil || ev["topic"] != "checkout_abandoned" {
			t.Fatalf("checkout event %v", ev)
		}
		tg.shopifyOrder("orders/create", "k-order", 5001, "+1 555-625-0501", func(m map[string]any) { m["checkout_token"] = "tok-ordered" })
		eventually(t, 10*time.Second, "the reminder skipped", func() bool {
			ev := tg.storeEvent(alice, "k-1")
			return ev["status"] == "skipped" && strings.HasPrefix(ev["reason"].(string), "order_placed")
		})
		for _, m := range tg.afterProbe(clock, 2*time.Hour, alice, phone) {
			if strings.Contains(m["text"].(string), "checkout.local") {
				t.Fatalf("a reminder went: %v", m)
			}
		}
	})

	t.Run("an abandoned checkout without an order gets one reminder", func(t *testing.T) {
		tg := tg.with(t)
		const phone = "15556250502"
		checkout("checkouts/create", "k-2", "tok-left", "555-625-0502", false)
		tg.waitEvent(alice, "k-2")
		checkout("checkouts/update", "k-3", "tok-left", "555-625-0502", false)
		if ev := tg.waitEvent(alice, "k-3"); ev["status"] != "skipped" {
			t.Fatalf("the update sent again: %v", ev)
		}
		clock.Advance(59 * time.Minute)
		if n := len(tg.simMessages(phone)); n != 0 {
			t.Fatalf("%d messages before the hour", n)
		}
		clock.Advance(2 * time.Minute)
		msgs := tg.simDelivered(phone, 1)
		if txt := msgs[0]["text"].(string); !strings.Contains(txt, "https://checkout.local/orders/690933842/2a1ace52255252df566af0faaedfbfa7?recovered=1") ||
			!strings.Contains(txt, "Hi Bob") || !strings.Contains(txt, "IPod Nano - 8GB x 1") {
			t.Fatalf("reminder %q", txt)
		}
		if n := len(tg.afterProbe(clock, 3*time.Hour, alice, phone)); n != 2 {
			t.Fatalf("%d messages, want one reminder and the probe", n)
		}
	})

	t.Run("woocommerce: an abandoned cart from CartFlows' webhook", func(t *testing.T) {
		tg := tg.with(t)
		bob := tg.token("bob", "")
		st := tg.store(bob)
		addr, _ := st["checkoutWebhookUrl"].(string)
		if !strings.Contains(addr, "topic=checkout_abandoned") || !strings.Contains(addr, "key=") {
			t.Fatalf("checkout address %q", addr)
		}
		form, err := os.ReadFile(filepath.Join("ecom", "testdata", "woocommerce-abandoned-cart.form"))
		if err != nil {
			t.Fatal(err)
		}
		path := strings.TrimPrefix(addr, testPublicURL)
		// Without the key the unsigned form is refused (the store has a secret).
		bad := strings.Replace(path, "key=", "key=0", 1)
		refused := tg.do("POST", bad, auth{"Content-Type": "application/x-www-form-urlencoded"}, string(form))
		if want(t, refused, 401, "invalid_signature"); !strings.Contains(refused.str("error"), "key does not match") {
			t.Fatalf("a wrong key answered %s, want the key named as what is wrong", refused.raw)
		}
		r := tg.do("POST", path, auth{"Content-Type": "application/x-www-form-urlencoded"}, string(form))
		if want(t, r, 200, ""); r.str("status") != "queued" {
			t.Fatalf("cart: %s", r.raw)
		}
		clock.Advance(time.Hour + time.Minute)
		msgs := tg.simDelivered("15555555555", 1)
		if txt := msgs[0]["text"].(string); !strings.Contains(txt, "wcf_ac_token=QmJ2Z0V2dTdQbmV4dDI0") || !strings.Contains(txt, "Hi John") {
			t.Fatalf("woo reminder %q", txt)
		}
	})
}

func TestOptOutsHonouredByCampaigns(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "carol", "447700900003", nil)
	const stopper = "15550300250"
	numbers := make([]string, 500)
	for i := range numbers {
		numbers[i] = fmt.Sprintf("155503%05d", i+1) // 15550300250 is one of them
	}

	sent := func() float64 { return tg.account(s.key)["messagesSent"].(float64) }
	base := sent()

	// The customer writes STOP: on the list, answered once (a second STOP is not answered).
	tg.inbound(s.tok, stopper, "stop")
	reply := tg.simDelivered(stopper, 1)[0]["text"].(string)
	if !strings.Contains(reply, "START") {
		t.Fatalf("stop reply %q", reply)
	}
	tg.inbound(s.tok, stopper, "STOP")
	var list map[string]any
	eventually(t, 10*time.Second, "the phone on the list", func() bool {
		list = tg.do("GET", "/api/v1/optouts", keyAuth(s.key), nil).obj()
		os, _ := list["optouts"].([]any)
		return len(os) == 1
	})
	if o := list["optouts"].([]any)[0].(map[string]any); o["phone"] != stopper || o["source"] != "reply" || o["word"] != "STOP" {
		t.Fatalf("opt-out %v", o)
	}
	// An API send to it is refused unless transactional.
	want(t, tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": stopper, "message": "sale!"}), 409, "opted_out")
	// The reply is a message sent, counted once its outcome's record lands, which can trail its
	// delivery: the campaign's count starts from it.
	before := base + 1
	eventually(t, 10*time.Second, "the stop reply counted", func() bool { return sent() == before })

	// Async: 500 numbers one at a time take longer than a request on a busy machine (NATS, -race).
	r := tg.bulk(s.key, map[string]any{"numbers": numbers, "message": "Our sale starts today", "delay": 0, "async": true})
	want(t, r, 202, "")
	var res map[string]any
	// Read once a second: a campaign's answer lists all 500 details, and reading it every
	// 10 ms slows the campaign it waits for.
	for deadline := time.Now().Add(5 * time.Minute); ; time.Sleep(time.Second) {
		res = tg.do("GET", "/api/v1/campaigns/"+r.str("campaign_id"), keyAuth(s.key), nil).obj()
		if res["status"] == "completed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the 500-number campaign not completed after 5 min: %v of 500 processed", res["total_processed"])
		}
	}
	if res["successful"] != float64(499) || res["failed"] != float64(0) || res["opted_out"] != float64(1) || res["total_processed"] != float64(500) {
		t.Fatalf("campaign result %v", res)
	}
	for _, d := range res["details"].([]any) {
		dm := d.(map[string]any)
		if (dm["number"] == stopper) != (dm["status"] == "opted_out") {
			t.Fatalf("detail %v", dm)
		}
	}
	if n := len(tg.simMessages(stopper)); n != 1 {
		t.Fatalf("the opted-out phone got %d messages", n)
	}
	// The count follows the outcomes' records, which trail the campaign's answer under load.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		n := sent() - before
		if n == 499 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("499 messages not counted in 30 s: %v of them are", n)
		}
	}
	if sent() != before+499 {
		t.Fatal("more than 499 counted")
	}

	// START takes it off (answered); the next campaign reaches it.
	tg.inbound(s.tok, stopper, "Start")
	tg.simDelivered(stopper, 2)
	eventually(t, 10*time.Second, "the phone off the list", func() bool {
		os, _ := tg.do("GET", "/api/v1/optouts", keyAuth(s.key), nil).obj()["optouts"].([]any)
		return len(os) == 0
	})
	r = tg.bulk(s.key, map[string]any{"numbers": []string{stopper, numbers[0]}, "message": "Second wave", "delay": 0})
	if want(t, r, 200, ""); r.obj()["successful"] != float64(2) {
		t.Fatalf("second campaign %s", r.raw)
	}
	if msgs := tg.simDelivered(stopper, 3); msgs[2]["text"] != "Second wave" {
		t.Fatalf("messages %v", msgs)
	}

	// The list through the API: add, transactional still goes, remove.
	add := tg.do("POST", "/api/v1/optouts", keyAuth(s.key), map[string]any{"phones": []string{"+1 555 030 0001", "15550300002"}})
	if want(t, add, 200, ""); len(add.obj()["added"].([]any)) != 2 {
		t.Fatalf("add %s", add.raw)
	}
	tx := tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": "15550300001", "message": "your code is 1234", "transactional": true})
	want(t, tx, 200, "")
	rm := tg.do("DELETE", "/api/v1/optouts?phone=15550300001", keyAuth(s.key), nil)
	if want(t, rm, 200, ""); rm.obj()["removed"] != float64(1) {
		t.Fatalf("remove %s", rm.raw)
	}
	dash := tg.do("GET", "/api/client/optouts", bearerAuth(s.tok), nil)
	if want(t, dash, 200, ""); len(dash.obj()["optouts"].([]any)) != 1 {
		t.Fatalf("dashboard list %s", dash.raw)
	}
	want(t, tg.do("POST", "/api/v1/optouts", keyAuth(s.key), map[string]any{"phones": []string{"12"}}), 400, "invalid_phone")
	var body struct {
		OptOuts []json.RawMessage `json:"optouts"`
	}
	_ = json.Unmarshal(dash.raw, &body)
}

func TestSendLaterAndQuietHours(t *testing.T) {
	sideBySide(t)
	clock := newSkewClock()
	tg := startGWSkew(t, clock)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "dave", "447700900004", nil)
	at := func(d time.Duration) string { return clock.Now().Add(d).UTC().Format(time.RFC3339) }
	send := func(to string, body map[string]any) resp {
		t.Helper()
		body["phone"] = to
		if body["message"] == nil {
			body["message"] = "later " + to
		}
		return tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), body)
	}
	remaining := func() float64 { return tg.account(s.key)["remaining_month"].(float64) }

	// Scheduled: accepted, its allowance reserved; cancelled through DELETE, it gives it back.
	before := remaining()
	r := send("15550700001", map[string]any{"sendAt": at(10 * time.Minute)})
	if want(t, r, 200, ""); r.str("status") != "scheduled" {
		t.Fatalf("scheduled: %s", r.raw)
	}
	id := r.str("message_id")
	// The history lists it by its status (the OpenAPI's MessageStatus has scheduled).
	eventually(t, 5*time.Second, "the scheduled message listed as scheduled", func() bool {
		items, _ := tg.historyPage(t, "/api/v1/messages?status=scheduled", keyAuth(s.key))
		return len(items) == 1 && items[0]["id"] == id
	})
	// Not sent yet: not editable, and the answer says why.
	edit := tg.do("POST", "/api/v1/messages/"+id+"/edit", keyAuth(s.key), map[string]any{"message": "new text"})
	if want(t, edit, 409, "not_editable"); !strings.Contains(edit.str("error"), "not sent yet") {
		t.Fatalf("edit of a scheduled message: %s", edit.raw)
	}
	if remaining() != before-1 {
		t.Fatal("no allowance reserved")
	}
	m := tg.do("GET", "/api/v1/messages/"+id, keyAuth(s.key), nil).obj()
	if m["status"] != "scheduled" || m["sendAt"] == nil {
		t.Fatalf("message %v", m)
	}
	d := tg.do("DELETE", "/api/v1/messages/"+id, keyAuth(s.key), nil)
	if want(t, d, 200, ""); d.str("status") != "cancelled" {
		t.Fatalf("delete: %s", d.raw)
	}
	if m := tg.do("GET", "/api/v1/messages/"+id, keyAuth(s.key), nil).obj(); m["status"] != "cancelled" || m["code"] != "cancelled" {
		t.Fatalf("cancelled message %v", m)
	}
	eventually(t, 10*time.Second, "the allowance back", func() bool { return remaining() == before })

	// Another goes at its time, and no earlier.
	r = send("15550700002", map[string]any{"sendAt": at(10 * time.Minute)})
	want(t, r, 200, "")
	id2 := r.str("message_id")
	clock.Advance(9 * time.Minute)
	if n := len(tg.simMessages("15550700002")); n != 0 {
		t.Fatalf("%d messages before their time", n)
	}
	clock.Advance(time.Minute + time.Second)
	tg.simDelivered("15550700002", 1)
	eventually(t, 10*time.Second, "sent", func() bool {
		st := tg.do("GET", "/api/v1/messages/"+id2, keyAuth(s.key), nil).str("status")
		return st == "sent" || st == "delivered"
	})
	want(t, tg.do("DELETE", "/api/v1/messages/"+id2, keyAuth(s.key), nil), 200, "") // a revoke now: it was sent

	// Bad times.
	want(t, send("15550700003", map[string]any{"sendAt": at(-2 * time.Hour)}), 400, "validation_failed")
	want(t, send("15550700003", map[string]any{"sendAt": at(91 * 24 * time.Hour)}), 400, "validation_failed")
	want(t, send("15550700003", map[string]any{"sendAt": "tomorrow"}), 400, "validation_failed")
	// A time a little past is now.
	if r := send("15550700003", map[string]any{"sendAt": at(-time.Minute)}); r.str("status") != "queued" {
		t.Fatalf("a past sendAt: %s", r.raw)
	}

	// A campaign for later: accepted at once (202 scheduled), its numbers go then.
	c := tg.bulk(s.key, map[string]any{"numbers": []string{"15550700011", "15550700012"}, "message": "sale", "delay": 0, "sendAt": at(time.Hour)})
	if want(t, c, 202, ""); c.str("status") != "scheduled" || c.obj()["sendAt"] == nil {
		t.Fatalf("campaign for later: %s", c.raw)
	}
	cid := c.str("campaign_id")
	clock.Advance(59 * time.Minute)
	if n := len(tg.simMessages("15550700011")); n != 0 {
		t.Fatalf("campaign went early")
	}
	clock.Advance(2 * time.Minute)
	eventually(t, 10*time.Second, "the campaign done", func() bool {
		return tg.do("GET", "/api/v1/campaigns/"+cid, keyAuth(s.key), nil).str("status") == "completed"
	})

	// Quiet hours around now: a campaign waits until they end; an API send does not.
	now := clock.Now().UTC()
	from, to := now.Add(-time.Hour).Format("15:04"), now.Add(2*time.Hour).Format("15:04")
	p := tg.do("PATCH", "/api/client/me", bearerAuth(s.tok), map[string]any{"timezone": "UTC", "quietHours": map[string]any{"from": from, "to": to}})
	if want(t, p, 200, ""); p.obj()["settings"].(map[string]any)["quietHours"] == nil {
		t.Fatalf("settings: %s", p.raw)
	}
	want(t, tg.do("PATCH", "/api/client/me", bearerAuth(s.tok), map[string]any{"timezone": "Mars/Olympus"}), 400, "validation_failed")
	want(t, tg.do("PATCH", "/api/client/me", bearerAuth(s.tok), map[string]any{"quietHours": map[string]any{"from": "25:00", "to": "08:00"}}), 400, "validation_failed")
	c = tg.bulk(s.key, map[string]any{"numbers": []string{"15550700021"}, "message": "at night?", "delay": 0, "async": true})
	want(t, c, 202, "")
	if r := send("15550700022", map[string]any{"message": "your code"}); r.str("status") != "queued" {
		t.Fatalf("API send in quiet hours: %s", r.raw)
	}
	tg.simDelivered("15550700022", 1)
	if n := len(tg.simMessages("15550700021")); n != 0 {
		t.Fatal("the campaign sent in quiet hours")
	}
	clock.Advance(2*time.Hour + time.Minute)
	tg.simDelivered("15550700021", 1)
	want(t, tg.do("PATCH", "/api/client/me", bearerAuth(s.tok), map[string]any{"quietHours": nil}), 200, "")
}
