//go:build ui

package uitest

import (
	"bytes"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"
)

// The store loop in the dashboard (issue 30): a template's confirmation settings saved from the
// editor (with the question in its preview), the store screen showing each order's
// confirmation as the customer answers, and the opt-out list (a customer's STOP on it, a
// number added and removed in the page, the quiet hours saved).

// orderWebhook posts an orders/create webhook of the test shop (unsigned: connected without a
// secret) for order id with the customer's phone.
func (g *gw) orderWebhook(uid, id, phone string) {
	g.t.Helper()
	body := `{"id":` + id + `,"name":"#` + id + `","total_price":"49.90","currency":"USD","gateway":"Cash on Delivery (COD)",` +
		`"customer":{"first_name":"Ana","phone":"+` + phone + `"},"line_items":[{"title":"Tea","quantity":2}]}`
	req, _ := http.NewRequest("POST", g.url+"/api/ecom/webhook?uid="+uid+"&shop="+shop, bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Shopify-Topic", "orders/create")
	req.Header.Set("X-Shopify-Shop-Domain", shop)
	res, err := g.http.Do(req)
	if err != nil || res.StatusCode != 200 {
		g.t.Fatalf("webhook: %v %v", res, err)
	}
	res.Body.Close()
}

func TestConfirmationSettingsAndOrders(t *testing.T) {
	g := startGateway(t)
	b := newBrowser(t)
	tok := g.token("alice", "client", 3600)
	sid := g.link(tok, "4915112345678")
	g.fake.AddShop(shop, "Alice's Shop", shopToken)
	g.call("POST", "/api/ecom/manual-connect", tok, map[string]any{"shop": shop, "accessToken": shopToken})

	b.open(g.url + "/dashboard/#token=" + tok)
	b.go_("#/templates")
	b.waitFor("the template editor", `document.querySelector('#template-text')`)
	b.waitFor("the confirmation settings of orders/create", `!document.querySelector('#confirm-settings').hidden`)
	b.click("#confirm-on")
	b.set("#confirm-question", "Can we ship order {order_number}?")
	b.set("#confirm-follow", "3h")
	b.click("#confirm-cancel")
	b.waitFor("the question in the preview", `/Can we ship order #1001\?[\s\S]*○ Yes, confirm[\s\S]*○ No, cancel[\s\S]*A poll/.test(document.querySelector('#template-preview').textContent)`)
	b.click("#template-save")
	b.waitFor("saved", `[...document.querySelectorAll('.notice.ok')].some(n => n.textContent.startsWith('Saved'))`)
	tpl := g.call("GET", "/api/client/templates", tok, nil)["templates"].([]any)[0].(map[string]any)
	c, _ := tpl["confirm"].(map[string]any)
	if c == nil || c["question"] != "Can we ship order {order_number}?" || c["followUpAfter"] != "3h" || c["cancelOnNo"] != true || c["tagYes"] != "cod-confirmed" {
		t.Fatalf("saved template %v", tpl)
	}
	// The other topics: a checkout's reminder time, no question for a refund.
	b.set("#template-topic", "checkout_abandoned")
	b.waitFor("the checkout's after", `document.querySelector('#template-wait').value === '1h' && document.querySelector('#confirm-settings').hidden`)
	b.shot("templates-confirmation")

	// An order asks; its customer answers; the store screen follows.
	g.orderWebhook("alice", "1001", "4915550001001")
	g.orderWebhook("alice", "1002", "4915550001002")
	deadline := time.Now().Add(15 * time.Second)
	for len(g.call("GET", "/api/dev/sim/messages?to=4915550001002", "", nil)["messages"].([]any)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no question at the customer")
		}
		time.Sleep(50 * time.Millisecond)
	}
	g.call("POST", "/api/dev/sim/inbound", "", map[string]any{"sessionId": sid, "from": "4915550001001", "text": "1"})
	b.go_("#/store")
	b.waitFor("the order confirmed and written back", `(() => { const r = document.querySelector('#store-orders tr[data-order="1001"]');
		return r && r.querySelector('[data-status="confirmed"]') && r.querySelector('[data-writeback="done"]') })()`, 15*time.Second)
	b.waitFor("the other one waiting", `document.querySelector('#store-orders tr[data-order="1002"] [data-status="awaiting"]')`)
	if o, ok := g.fake.Order(shop, 1001); !ok || len(o.Tags) != 1 {
		t.Fatalf("the fake store holds %+v", o)
	}
	b.shot("store-confirmations")
}

func TestOptOutList(t *testing.T) {
	g := startGateway(t)
	b := newBrowser(t)
	tok := g.token("alice", "client", 3600)
	sid := g.link(tok, "4915112345678")
	g.call("POST", "/api/dev/sim/inbound", "", map[string]any{"sessionId": sid, "from": "4915550002001", "text": "STOP"})

	b.open(g.url + "/dashboard/#token=" + tok)
	b.waitFor("signed in", `document.querySelector('#session-status')`)
	b.go_("#/optouts")
	b.waitFor("the customer who wrote STOP", `document.querySelector('#optout-list tr[data-phone="4915550002001"]')`)
	if txt := b.text(`#optout-list tr[data-phone="4915550002001"]`); !strings.Contains(txt, "They replied") || !strings.Contains(txt, "STOP") {
		t.Fatalf("row %q", txt)
	}
	b.set("#optout-phone", "+49 155 5000 2002")
	b.click("#optout-add button[type=submit]")
	b.waitFor("the added number", `document.querySelector('#optout-list tr[data-phone="4915550002002"]')`)
	b.click(`button[data-remove="4915550002001"]`)
	b.click(`[data-confirm="yes"]`)
	b.waitFor("the removed number gone", `!document.querySelector('#optout-list tr[data-phone="4915550002001"]')`)
	list := g.call("GET", "/api/client/optouts", tok, nil)["optouts"].([]any)
	if len(list) != 1 || list[0].(map[string]any)["phone"] != "4915550002002" {
		t.Fatalf("list %v", list)
	}

	// The words and quiet hours.
	b.set("#optout-words", "HALT BASTA")
	b.click("#quiet-on")
	b.set("#quiet-from", "22:00")
	b.set("#quiet-to", "07:30")
	b.set("#quiet-timezone", "Europe/Berlin")
	b.click("#optout-settings-save")
	b.waitFor("saved", `[...document.querySelectorAll('.notice.ok')].some(n => n.textContent === 'Saved.')`)
	st := g.call("GET", "/api/client/me", tok, nil)["settings"].(map[string]any)
	q, _ := st["quietHours"].(map[string]any)
	if st["timezone"] != "Europe/Berlin" || q == nil || q["from"] != "22:00" || q["to"] != "07:30" || len(st["stopWords"].([]any)) != 2 {
		t.Fatalf("settings %v", st)
	}
	// The account's own word opts out too.
	g.call("POST", "/api/dev/sim/inbound", "", map[string]any{"sessionId": sid, "from": "4915550002003", "text": "basta"})
	// The inbound message is handled after the sim's answer: the page lists the opt-outs once
	// when it opens, so it opens once the opt-out is recorded (under load it came after).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		list := g.call("GET", "/api/client/optouts", tok, nil)["optouts"].([]any)
		if slices.ContainsFunc(list, func(o any) bool { return o.(map[string]any)["phone"] == "4915550002003" }) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the account's own word opted nobody out: %v", list)
		}
	}
	b.go_("#/session")
	b.go_("#/optouts")
	b.waitFor("the customer who wrote the account's own word", `document.querySelector('#optout-list tr[data-phone="4915550002003"]')`)
	b.shot("optouts")
}
