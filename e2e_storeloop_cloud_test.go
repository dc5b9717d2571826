package main

// The store loop's confirmations on a Cloud API number (issue 30 item 1, DESIGN.md sections 17
// and 18), on TestStoreLoopConfirmations' gateway and the fake Graph API: carol's shop sends
// through her cloud number only. Inside the customer's 24-hour window the question goes as
// reply buttons (its follow-up too), a tap (Meta's button reply, whose context names the
// buttons' wamid) answers it and is written back; outside the window it goes as text in the
// cold template, and a typed "2" answers it.

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gateway/gateway/cloudapi"
	"github.com/gateway/gateway/ecom/ecomtest"
	"github.com/gateway/gateway/network/cloud/fakegraph"
)

const (
	carolShop  = "carol-shop.myshopify.com"
	carolToken = "shpat_carol0123456789"
)

// carolEvents are carol's order.confirmed and order.cancelled events once cloudConfirmations
// ran: "type order phone answer via".
var carolEvents = []string{"order.confirmed #2101 15550783901 yes button", "order.cancelled #2102 15550783902 no button",
	"order.cancelled #2103 15550783903 no text", "order.confirmed #2104 15550783904 yes text"}

// carolNumber is carol's Cloud API number on the fake Graph API.
func carolNumber() *cloudNumber {
	return &cloudNumber{id: "106540352242944", waba: "102290129340444", display: "+1 555-078-3900", token: "EAAJB-carol-token", secret: "carol-app-secret"}
}

// cloudStore connects carol's cloud number (her only session) and her Shopify-type store,
// with a confirmation on orders/create (a follow-up after 2 h, cancelOnNo) and the cold
// template for contacts outside their window.
func cloudStore(t *testing.T, tg *testGW, fake *ecomtest.Platform, graph *fakegraph.Server, num *cloudNumber) (carol string) {
	t.Helper()
	fake.AddShop(carolShop, "Carol Shop", carolToken)
	carol = tg.newClient("carol")
	tg.connectCloud(graph, carol, num)
	want(t, tg.do("POST", "/api/ecom/manual-connect", bearerAuth(carol), map[string]any{"shop": carolShop, "accessToken": carolToken, "webhookSecret": hookSecret}), 200, "")
	want(t, tg.do("PATCH", "/api/client/routing", bearerAuth(carol), map[string]any{"coldTemplate": map[string]any{"name": "cold_notice", "language": "en_US"}}), 200, "")
	tg.setConfirm(carol, "orders/create", map[string]any{"followUpAfter": "2h", "cancelOnNo": true})
	return carol
}

// graphSent waits until Meta holds n messages for phone and returns them.
func graphSent(t *testing.T, graph *fakegraph.Server, phone string, n int) []fakegraph.Sent {
	t.Helper()
	var s []fakegraph.Sent
	eventually(t, 10*time.Second, fmt.Sprintf("%d messages at Meta for %s", n, phone), func() bool {
		s = graph.Sent(phone)
		return len(s) >= n
	})
	return s
}

// cloudWrote is a customer writing to the cloud number: their window opens once the gateway
// kept the message (it records the window first).
func (tg *testGW) cloudWrote(graph *fakegraph.Server, num *cloudNumber, tok, phone, text string) {
	tg.t.Helper()
	if _, err := graph.Write(num.id, fakegraph.Inbound{From: phone, Name: "Sheena", Text: text}); err != nil {
		tg.t.Fatal(err)
	}
	eventually(tg.t, 10*time.Second, "the customer's message kept", func() bool {
		r := tg.do("GET", "/api/client/messages?direction=in&from="+phone, bearerAuth(tok), nil)
		items, _ := r.obj()["messages"].([]any)
		return len(items) > 0
	})
}

// delivered waits until the message's status is delivered: the gateway knows its wamid then
// (a tap names it by that).
func (tg *testGW) delivered(tok, phone, id string) {
	tg.t.Helper()
	eventually(tg.t, 10*time.Second, "message "+id+" delivered", func() bool {
		r := tg.do("GET", "/api/client/messages?direction=out&to="+phone, bearerAuth(tok), nil)
		items, _ := r.obj()["messages"].([]any)
		for _, it := range items {
			if m := it.(map[string]any); m["id"] == id {
				return m["status"] == "delivered"
			}
		}
		return false
	})
}

// tap is the customer tapping a reply button of the buttons message q: Meta's button reply,
// its context q's wamid.
func tap(t *testing.T, graph *fakegraph.Server, num *cloudNumber, phone string, q fakegraph.Sent, button string) {
	t.Helper()
	title := ""
	for _, b := range q.Request.Interactive.Action.Buttons {
		if b.Reply.ID == button {
			title = b.Reply.Title
		}
	}
	if _, err := graph.Write(num.id, fakegraph.Inbound{From: phone, Button: button, Text: title, ReplyTo: q.ID}); err != nil {
		t.Fatal(err)
	}
}

// confirmButtons checks that Meta took a confirmation's reply buttons: yes and no, titled with
// carol's answers, the body containing every part of want.
func confirmButtons(t *testing.T, s fakegraph.Sent, want ...string) {
	t.Helper()
	in := s.Request.Interactive
	if s.Request.Type != cloudapi.TypeInteractive || in == nil || in.Type != cloudapi.InteractiveButton || in.Body == nil {
		t.Fatalf("not reply buttons: %+v", s.Request)
	}
	var got []string
	for _, b := range in.Action.Buttons {
		got = append(got, b.Reply.ID+"="+b.Reply.Title)
	}
	if !slices.Equal(got, []string{"yes=Yes, confirm", "no=No, cancel"}) {
		t.Fatalf("buttons %v", got)
	}
	for _, w := range want {
		if !strings.Contains(in.Body.Text, w) {
			t.Fatalf("the body %q has no %q", in.Body.Text, w)
		}
	}
}

func cloudConfirmations(t *testing.T, tg *testGW, fake *ecomtest.Platform, graph *fakegraph.Server, num *cloudNumber, clock *skewClock, carol string) {
	t.Run("cloud: reply buttons, a yes tap → tagsAdd with tagYes and the note", func(t *testing.T) {
		tg := tg.with(t)
		const phone = "15550783901"
		tg.cloudWrote(graph, num, carol, phone, "Hi! Do you deliver to Lyon?")
		tg.shopifyOrderOf("carol", carolShop, "orders/create", "b-yes", 2101, "+1 555-078-3901", nil)
		q := graphSent(t, graph, phone, 1)[0]
		confirmButtons(t, q, "Hi John, thank you for your order #2101", "Please confirm your order #2101")
		tg.delivered(carol, phone, q.Request.BizOpaqueCallbackData)
		answered := time.Now()
		tap(t, graph, num, phone, q, "yes")
		o := fakeOrder(t, fake, carolShop, 2101, "the order tagged and noted", func(o ecomtest.Order) bool { return len(o.Tags) == 1 && o.Note != "" })
		if o.Tags[0] != "cod-confirmed" || !strings.Contains(o.Note, "confirmed the order (pressed") || o.Cancelled {
			t.Fatalf("order %+v", o)
		}
		for _, w := range fake.WriteBacks() {
			if w.OrderID == 2101 && w.At.Sub(answered) > 10*time.Second {
				t.Fatalf("written back %v after the tap", w.At.Sub(answered))
			}
		}
		eventually(t, 10*time.Second, "the store screen says confirmed by button", func() bool {
			cf, _ := tg.order(carol, 2101)["confirmation"].(map[string]any)
			return cf != nil && cf["state"] == "confirmed" && cf["answeredBy"] == "button" && cf["via"] == "buttons" && cf["writeBack"] == "done" &&
				cf["answerText"] == "Yes, confirm"
		})
	})

	t.Run("cloud: one follow-up as buttons, a no tap on it with cancelOnNo → orderCancel", func(t *testing.T) {
		tg := tg.with(t)
		const phone = "15550783902"
		tg.cloudWrote(graph, num, carol, phone, "is the blue one in stock?")
		tg.shopifyOrderOf("carol", carolShop, "orders/create", "b-no", 2102, "+1 555-078-3902", nil)
		confirmButtons(t, graphSent(t, graph, phone, 1)[0], "Please confirm your order #2102")
		clock.Advance(2*time.Hour + time.Minute)
		f := graphSent(t, graph, phone, 2)[1]
		confirmButtons(t, f, "Reminder: Please confirm your order #2102")
		tg.delivered(carol, phone, f.Request.BizOpaqueCallbackData)
		tap(t, graph, num, phone, f, "no")
		o := fakeOrder(t, fake, carolShop, 2102, "the order cancelled", func(o ecomtest.Order) bool { return o.Cancelled })
		if len(o.Tags) != 1 || o.Tags[0] != "cod-cancelled" || o.CancelReason != "CUSTOMER" || !strings.Contains(o.StaffNote, "declined") {
			t.Fatalf("order %+v", o)
		}
		// Never a second follow-up: a text sent hours later reaches Meta right after the one.
		clock.Advance(3 * time.Hour)
		want(t, tg.do("POST", "/api/client/send", bearerAuth(carol), map[string]any{"phone": phone, "text": "probe", "transactional": true}), 200, "")
		if s := graphSent(t, graph, phone, 3); len(s) != 3 || s[2].Request.Text == nil || s[2].Request.Text.Body != "probe" {
			t.Fatalf("Meta holds %d messages for %s, want the question, one follow-up and the probe", len(s), phone)
		}
		eventually(t, 10*time.Second, "the store screen says cancelled by button", func() bool {
			cf, _ := tg.order(carol, 2102)["confirmation"].(map[string]any)
			return cf != nil && cf["state"] == "cancelled" && cf["answeredBy"] == "button" && cf["writeBack"] == "done"
		})
	})

	t.Run("cloud: outside the window, text in the cold template; a typed 2 counts", func(t *testing.T) {
		tg := tg.with(t)
		const phone = "15550783903"
		tg.shopifyOrderOf("carol", carolShop, "orders/create", "b-cold", 2103, "+1 555-078-3903", nil)
		q := graphSent(t, graph, phone, 1)[0]
		tpl := q.Request.Template
		if q.Request.Type != cloudapi.TypeTemplate || tpl == nil || tpl.Name != "cold_notice" || len(tpl.Components) != 1 ||
			!strings.Contains(tpl.Components[0].Parameters[0].Text, "Please confirm your order #2103 1. Yes, confirm 2. No, cancel Reply 1 or 2.") {
			t.Fatalf("Meta got %+v", q.Request)
		}
		tg.delivered(carol, phone, q.Request.BizOpaqueCallbackData) // Meta took the one-line parameter
		if _, err := graph.Write(num.id, fakegraph.Inbound{From: phone, Text: "2"}); err != nil {
			t.Fatal(err)
		}
		o := fakeOrder(t, fake, carolShop, 2103, "the order cancelled", func(o ecomtest.Order) bool { return o.Cancelled })
		if len(o.Tags) != 1 || o.Tags[0] != "cod-cancelled" {
			t.Fatalf("order %+v", o)
		}
		cf, _ := tg.order(carol, 2103)["confirmation"].(map[string]any)
		if cf == nil || cf["via"] != "text" || cf["answeredBy"] != "text" {
			t.Fatalf("confirmation %v", cf)
		}
	})

	t.Run("cloud: no cold template, a follow-up waits for the customer; their answer cancels it, never sent", func(t *testing.T) {
		tg := tg.with(t)
		const phone = "15550783904"
		want(t, tg.do("PATCH", "/api/client/routing", bearerAuth(carol), map[string]any{"coldTemplate": nil}), 200, "")
		t.Cleanup(func() {
			tg.do("PATCH", "/api/client/routing", bearerAuth(carol), map[string]any{"coldTemplate": map[string]any{"name": "cold_notice", "language": "en_US"}})
		})
		tg.cloudWrote(graph, num, carol, phone, "can I pay on delivery?")
		// Meta's timestamps are real time: the question goes 22 h into the customer's window (the
		// earlier subtests moved the clock already), its follow-up 2 h later, after the window.
		clock.Advance(22*time.Hour - time.Until(clock.Now()))
		tg.shopifyOrderOf("carol", carolShop, "orders/create", "b-wait", 2104, "+1 555-078-3904", nil)
		confirmButtons(t, graphSent(t, graph, phone, 1)[0], "Please confirm your order #2104")
		clock.Advance(2*time.Hour + time.Minute)
		var followUp string
		eventually(t, 10*time.Second, "the follow-up waits for the customer", func() bool {
			followUp = orderMessage(tg.order(carol, 2104), "sendAt")["messageId"].(string)
			m := tg.outMessage(carol, phone, followUp)
			return m != nil && m["status"] == "queued" && m["code"] == "waiting_for_contact"
		})
		// The answer and a second message right behind it: the answer is read first (each
		// contact's messages in order), so the second does not release the follow-up.
		for _, text := range []string{"1", "thanks!"} {
			if _, err := graph.Write(num.id, fakegraph.Inbound{From: phone, Text: text}); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, 10*time.Second, "the order confirmed and its follow-up cancelled", func() bool {
			o := tg.order(carol, 2104)
			cf, _ := o["confirmation"].(map[string]any)
			m := tg.outMessage(carol, phone, followUp)
			return cf["state"] == "confirmed" && m != nil && m["status"] == "cancelled" && orderMessage(o, "sendAt")["skipped"] == "answered"
		})
		// Meta never got it: a template (it goes whatever the window) sent now reaches Meta right
		// after the question.
		want(t, tg.do("POST", "/api/client/send", bearerAuth(carol), map[string]any{"phone": phone, "type": "template", "transactional": true,
			"template": map[string]any{"name": "cold_notice", "language": "en_US", "parameters": []string{"probe"}}}), 200, "")
		if s := graphSent(t, graph, phone, 2); len(s) != 2 || s[1].Request.Template == nil {
			t.Fatalf("Meta holds %d messages for %s, want the question and the probe (never the follow-up)", len(s), phone)
		}
	})
}

// outMessage is carol's outgoing message id to phone as the history lists it (nil: not listed).
func (tg *testGW) outMessage(tok, phone, id string) map[string]any {
	tg.t.Helper()
	r := tg.do("GET", "/api/client/messages?direction=out&to="+phone, bearerAuth(tok), nil)
	items, _ := r.obj()["messages"].([]any)
	for _, it := range items {
		if m := it.(map[string]any); id != "" && m["id"] == id {
			return m
		}
	}
	return nil
}

// orderMessage is the first of an order's messages (the store screen's) that has field.
func orderMessage(o map[string]any, field string) map[string]any {
	ms, _ := o["messages"].([]any)
	for _, m := range ms {
		if m := m.(map[string]any); m[field] != nil {
			return m
		}
	}
	return map[string]any{"messageId": ""}
}
