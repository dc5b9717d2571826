//go:build ui

package uitest

// Daily work in the dashboard (DESIGN.md section 15): a campaign from a CSV file with live
// progress, the Messages screen following statuses and incoming messages live, and every screen
// at a phone's width and on a wide screen, in both themes, checked with axe-core.

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
)

// link links uid's session on the sim and returns the session id.
func (g *gw) link(tok, phone string) string {
	g.t.Helper()
	st := g.call("GET", "/api/client/status", tok, nil)
	if st["status"] != "CONNECTED" {
		g.call("GET", "/api/client/qr", tok, nil)
		st = g.call("GET", "/api/client/status", tok, nil)
		g.call("POST", "/api/dev/sim/scan", "", map[string]any{"sessionId": st["id"], "phone": phone})
	}
	for deadline := time.Now().Add(10 * time.Second); g.call("GET", "/api/client/status", tok, nil)["status"] != "CONNECTED"; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			g.t.Fatal("the session did not connect within 10 s of the scan")
		}
	}
	return st["id"].(string)
}

// navigations is how many documents the tab has loaded (1: no reload since it was opened).
func (b *browser) navigations() int {
	var n int
	b.eval(`performance.getEntriesByType('navigation').length`, &n)
	return n
}

func TestCampaignFromCSV(t *testing.T) {
	g := startGateway(t)
	b := newBrowser(t)
	tok := g.token("alice", "client", 3600)
	g.link(tok, "4915112345678")

	// A CSV file with a header row: 20 numbers with names.
	var csv strings.Builder
	csv.WriteString("Name;Phone\r\n")
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&csv, "Customer %d;+49 155 5100 %04d\r\n", i, i)
	}
	file := filepath.Join(t.TempDir(), "customers.csv")
	if err := os.WriteFile(file, []byte(csv.String()), 0o644); err != nil {
		t.Fatal(err)
	}

	b.open(g.url + "/dashboard/#token=" + tok)
	b.waitFor("the session screen", `document.querySelector('#session-status')`)
	b.go_("#/campaigns")
	b.waitFor("the campaign form", `document.querySelector('#campaign-form')`)
	b.waitFor("the empty list", `/No campaign yet/.test(document.querySelector('#campaign-list').textContent)`)
	b.set("#campaign-name", "Spring sale")
	b.set("#campaign-message", "Hi {name}, the spring sale is on!")
	b.set("#campaign-delay", "0.25")
	b.run(chromedp.SetUploadFiles("#campaign-csv", []string{file}, chromedp.ByQuery))
	b.waitFor("the file read", `document.querySelector('#campaign-csv').files.length === 1`)
	// The file is read asynchronously after the change event: check until it is in.
	deadline := time.Now().Add(5 * time.Second)
	for {
		b.click("#campaign-check")
		var good string
		b.eval(`(document.querySelector('#campaign-good')||{}).textContent||''`, &good)
		if good == "20" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the preview counts %q numbers, want 20", good)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if first := b.text("#campaign-first"); first != "Hi Customer 1, the spring sale is on!" {
		t.Fatalf("the preview's first message: %q", first)
	}
	b.shot("campaign-preview")

	// Start it, and watch the progress change in the list without a reload.
	b.click("#campaign-start")
	b.waitFor("the campaign in the list", `document.querySelector('#campaign-list tr[data-campaign]')`)
	b.eval(`(() => { window.__seen = new Set();
		const note = () => document.querySelectorAll('#campaign-list .progress').forEach((p) => window.__seen.add(Number(p.dataset.processed)));
		note(); new MutationObserver(note).observe(document.querySelector('#campaign-list'), {subtree: true, childList: true, attributes: true}); return true })()`, nil)
	b.waitFor("the campaign done", `document.querySelector('#campaign-list tr[data-status=completed] .progress[data-processed="20"]')`, 30*time.Second)
	var seen []int
	b.eval(`[...window.__seen]`, &seen)
	if !slices.ContainsFunc(seen, func(n int) bool { return n > 0 && n < 20 }) {
		t.Errorf("no progress between 0 and 20 was shown (saw %v)", seen)
	}
	if n := b.navigations(); n != 1 {
		t.Errorf("the page loaded %d times", n)
	}
	b.waitFor("the per-number results", `document.querySelectorAll('#campaign-results tbody tr').length === 20 &&
		[...document.querySelectorAll('#campaign-results tbody tr')].every((r) => r.textContent.includes('Sent'))`, 10*time.Second)
	if s := b.text("#campaign-list"); !strings.Contains(s, "Spring sale") || !strings.Contains(s, "Done") {
		t.Errorf("the list says %q", s)
	}
	b.shot("campaign-done")
	got := g.call("GET", "/api/dev/sim/messages?to=4915551000007", "", nil)["messages"].([]any)
	if len(got) != 1 || got[0].(map[string]any)["text"] != "Hi Customer 7, the spring sale is on!" {
		t.Fatalf("customer 7 got %v", got)
	}
}

func TestMessagesLive(t *testing.T) {
	g := startGateway(t, "--sim-latency", "700ms")
	b := newBrowser(t)
	tok := g.token("alice", "client", 3600)
	sid := g.link(tok, "4915112345678")

	px := newCutProxy(t, g.url) // the browser's connections, to drop them
	b.open(px.url + "/dashboard/#token=" + tok)
	b.waitFor("the session screen", `document.querySelector('#session-status')`)
	b.go_("#/messages")
	b.waitFor("the empty history", `document.querySelector('#msg-empty')`)
	b.waitFor("the live stream", `document.querySelector('#live').dataset.state === 'live'`)
	// Every status a message shows, in order, from the first time it is on screen.
	b.eval(`(() => { window.__statuses = {};
		const note = (li) => { const l = (window.__statuses[li.dataset.id] ||= []); if (l[l.length - 1] !== li.dataset.status) l.push(li.dataset.status); };
		new MutationObserver((recs) => { for (const r of recs) {
			if (r.type === 'childList') r.addedNodes.forEach((n) => n.matches && n.matches('li.msg') && note(n));
			else if (r.target.matches('li.msg')) note(r.target);
		} }).observe(document.querySelector('#msg-list'), {subtree: true, childList: true, attributes: true, attributeFilter: ['data-status']}); return true })()`, nil)

	// A message sent from elsewhere: queued → sent → delivered, then the recipient reads it.
	r := g.call("POST", "/api/client/send", tok, map[string]any{"phone": "4915550003333", "text": "your order is on its way"})
	id, _ := r["message_id"].(string)
	if id == "" {
		t.Fatalf("send answered %v", r)
	}
	b.waitFor("delivered on screen", fmt.Sprintf(`(document.querySelector('li.msg[data-id=%q]')||{dataset:{}}).dataset.status === 'delivered'`, id), 10*time.Second)
	b.waitFor("its text", fmt.Sprintf(`document.querySelector('li.msg[data-id=%q]').textContent.includes('your order is on its way')`, id))
	g.call("POST", "/api/dev/sim/read", "", map[string]any{"messageId": id})
	b.waitFor("read on screen", fmt.Sprintf(`document.querySelector('li.msg[data-id=%q]').dataset.status === 'read'`, id), 10*time.Second)
	var statuses []string
	b.eval(fmt.Sprintf(`window.__statuses[%q]`, id), &statuses)
	if !slices.Equal(statuses, []string{"queued", "sent", "delivered", "read"}) {
		t.Errorf("the message showed %v, want queued, sent, delivered, read", statuses)
	}
	if s := b.text(fmt.Sprintf(`li.msg[data-id=%q] .badge`, id)); s != "Read" {
		t.Errorf("the read message's badge says %q", s)
	}

	// A customer writes: the message appears by itself; the reply goes out to them.
	g.call("POST", "/api/dev/sim/inbound", "", map[string]any{"sessionId": sid, "from": "4915550004444", "text": "is it in stock?"})
	b.waitFor("the incoming message", `[...document.querySelectorAll('li.msg[data-direction=in]')].some((li) => li.textContent.includes('is it in stock?'))`, 10*time.Second)
	b.shot("messages")
	b.click(`li.msg[data-direction=in] button[data-reply]`)
	b.set(`li.msg[data-direction=in] .reply textarea`, "yes, 3 left")
	b.click(`li.msg[data-direction=in] .reply button[type=submit]`)
	b.waitFor("the reply in the list", `[...document.querySelectorAll('li.msg[data-direction=out]')].some((li) => li.textContent.includes('yes, 3 left'))`, 15*time.Second)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		got := g.call("GET", "/api/dev/sim/messages?to=4915550004444", "", nil)["messages"].([]any)
		if len(got) == 1 && got[0].(map[string]any)["text"] == "yes, 3 left" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the customer got %v", got)
		}
	}
	// The connection drops; a message goes out meanwhile. The stream resumes with Last-Event-ID:
	// its statuses arrive as events, and the screen does not reload the list to catch up.
	lists := func() int {
		var n int
		b.eval(`performance.getEntriesByType('resource').filter((e) => new URL(e.name).pathname === '/api/client/messages').length`, &n)
		return n
	}
	// Counted from here, in a buffer that cannot fill (a full one records nothing more).
	b.eval(`(() => { performance.clearResourceTimings(); performance.setResourceTimingBufferSize(100000); return true })()`, nil)
	b.eval(`(() => { window.__states = []; return true })()`, nil)
	b.eval(`(() => { new MutationObserver(() => window.__states.push(document.querySelector('#live').dataset.state)).observe(document.querySelector('#live'), {attributes: true, attributeFilter: ['data-state']}); return true })()`, nil)
	px.cut()
	b.waitFor("the stream reconnecting", `window.__states.includes('reconnecting')`, 10*time.Second)
	r = g.call("POST", "/api/client/send", tok, map[string]any{"phone": "4915550005555", "text": "sent while away"})
	away, _ := r["message_id"].(string)
	b.waitFor("the message sent while away, delivered", fmt.Sprintf(`(document.querySelector('li.msg[data-id=%q]')||{dataset:{}}).dataset.status === 'delivered'`, away), 15*time.Second)
	b.waitFor("the stream live again", `document.querySelector('#live').dataset.state === 'live'`)
	if n := lists(); n != 0 {
		t.Errorf("the list was loaded %d times after the reconnect: the stream did not resume", n)
	}
	if px.conns() == 0 {
		t.Error("the browser did not connect through the proxy")
	}

	// Filters: only what was received.
	b.set("#msg-direction", "in")
	b.waitFor("only received", `document.querySelectorAll('li.msg').length === 1 && document.querySelector('li.msg').dataset.direction === 'in'`)
	if n := b.navigations(); n != 1 {
		t.Errorf("the page loaded %d times", n)
	}
}

// axeSource is axe-core's script (npm axe-core, pinned), installed by the test when missing.
func axeSource(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("GATEWAY_NODE_TOOLS")
	if dir == "" {
		home, _ := os.UserHomeDir()
		dir = filepath.Join(home, ".cache", "gateway-node-tools")
	}
	const version = "4.14.1"
	path := filepath.Join(dir, "node_modules", "axe-core", "axe.min.js")
	if !strings.Contains(readFile(filepath.Join(dir, "node_modules", "axe-core", "package.json")), `"version": "`+version+`"`) {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(filepath.Join(dir, "package.json")); err != nil {
			_ = os.WriteFile(filepath.Join(dir, "package.json"), []byte(`{"private":true}`), 0o644)
		}
		cmd := exec.Command("npm", "install", "--no-audit", "--no-fund", "--silent", "axe-core@"+version)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("npm install axe-core: %v\n%s", err, out)
		}
	}
	src := readFile(path)
	if src == "" {
		t.Fatalf("axe-core is not at %s", path)
	}
	return src
}

func readFile(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// axeViolation is one finding of axe-core.
type axeViolation struct {
	ID     string `json:"id"`
	Impact string `json:"impact"`
	Help   string `json:"help"`
	Nodes  []struct {
		Target  []any  `json:"target"`
		Summary string `json:"failureSummary"`
	} `json:"nodes"`
}

// audit runs axe-core on the page and fails on any serious or critical violation; it also
// fails when the page is wider than the window (sideways scroll).
func (b *browser) audit(axe, where string) {
	b.t.Helper()
	var loaded bool
	b.eval(`typeof window.axe === 'object'`, &loaded)
	if !loaded {
		b.eval(axe+"\n;true", nil)
	}
	var vs []axeViolation
	b.run(chromedp.Evaluate(`axe.run(document, {resultTypes: ['violations']}).then((r) => r.violations)`, &vs,
		func(p *runtime.EvaluateParams) *runtime.EvaluateParams { return p.WithAwaitPromise(true) }))
	for _, v := range vs {
		if v.Impact == "serious" || v.Impact == "critical" {
			var where2 []string
			for _, n := range v.Nodes {
				where2 = append(where2, fmt.Sprint(n.Target)+": "+n.Summary)
			}
			b.t.Errorf("%s: axe %s (%s): %s\n  %s", where, v.ID, v.Impact, v.Help, strings.Join(where2, "\n  "))
		}
	}
	var wide struct {
		Page, Window int
		Widest       string
	}
	b.eval(`(() => { const w = window.innerWidth; let widest = '';
		for (const e of document.querySelectorAll('body *')) { const r = e.getBoundingClientRect(); if (r.right > w + 1 && getComputedStyle(e).position !== 'fixed') { widest = e.tagName.toLowerCase() + (e.id ? '#' + e.id : '') + '.' + e.className + ' right=' + Math.round(r.right) + ' in ' + (e.parentElement ? e.parentElement.tagName + '.' + e.parentElement.className : '') + ': ' + (e.textContent || '').slice(0, 60); break; } }
		return {page: document.documentElement.scrollWidth, window: w, widest} })()`, &wide)
	if wide.Page > wide.Window || wide.Widest != "" {
		// What overflows: elements, or text wider than its element.
		var over string
		b.eval(`[...document.querySelectorAll('body *')].filter((e) => e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX === 'visible').map((e) => e.tagName.toLowerCase() + '.' + e.className + ' (' + e.scrollWidth + ' > ' + e.clientWidth + ')').slice(-4).join(', ')`, &over)
		b.t.Errorf("%s: the page is %d px wide in a %d px window (%s; overflowing: %s)", where, wide.Page, wide.Window, wide.Widest, over)
	}
}

func TestEveryScreenPhoneAndDesktop(t *testing.T) {
	axe := axeSource(t)
	cloudFake, cloudApp := newCloudFake(t)
	g := startGateway(t, "--webhook-allow-private", "--cloud-graph-url", cloudFake.URL())
	b := newBrowser(t)
	admin := g.token("root", "admin", 3600)

	// Something on every screen: a linked phone, messages both ways, a campaign, a key, a
	// webhook with deliveries, a connected store.
	sid := g.link(admin, "4915112345678")
	long := g.call("POST", "/api/client/send", admin, map[string]any{"phone": "4915550005555", "text": "a long message that wraps on a phone screen without pushing the page sideways, with a long word: Donaudampfschifffahrtsgesellschaft"})["message_id"].(string)
	in := g.call("POST", "/api/dev/sim/inbound", "", map[string]any{"sessionId": sid, "from": "4915550006666", "text": "hello"})["id"].(string)
	g.call("POST", "/api/client/campaigns", admin, map[string]any{"name": "Autumn newsletter for every customer who bought twice", "message": "Hi {name}", "delay": 0,
		"numbers": []any{map[string]any{"phone": "4915550007777", "name": "Ann"}, "12"}})
	key := g.call("POST", "/api/admin/apikeys", admin, map[string]any{"userId": "root", "name": "Production server of the shop"})["rawKey"].(string)
	// A conversation: a group poll with votes, a reply quoting a message, reactions.
	group := g.call("POST", "/api/v1/groups", key, map[string]any{"name": "Regular customers of the shop in the old town", "participants": []string{"4915550006666", "4915550005555"}})["id"].(string)
	poll := g.call("POST", "/api/client/send", admin, map[string]any{"phone": group, "type": "poll", "question": "Which opening hours on Saturdays suit you best?",
		"options": []string{"9 to 13", "10 to 16, with a longer answer that wraps", "Closed"}})["message_id"].(string)
	g.simGot("the poll", group, func(m map[string]any) bool { return m["question"] != nil })
	g.simGot("the long message", "4915550005555", func(m map[string]any) bool { return m["text"] != nil })
	g.call("POST", "/api/dev/sim/inbound", "", map[string]any{"sessionId": sid, "from": "4915550006666", "type": "poll_vote", "messageId": poll, "options": []string{"Closed"}})
	g.call("POST", "/api/dev/sim/inbound", "", map[string]any{"sessionId": sid, "from": "4915550005555", "type": "reaction", "messageId": long, "emoji": "👍"})
	g.call("POST", "/api/client/send", admin, map[string]any{"phone": "4915550006666", "text": "hello, how can we help?", "replyTo": in})
	g.call("POST", "/api/client/send", admin, map[string]any{"type": "reaction", "messageId": in, "emoji": "❤️"})
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(204) }))
	t.Cleanup(rcv.Close)
	g.call("POST", "/api/client/webhooks", admin, map[string]any{"url": rcv.URL + "/a/rather/long/path/for/the/receiver", "events": []string{"message.status"}})
	g.call("POST", "/api/client/webhooks", admin, map[string]any{"url": rcv.URL + "/webhooks/whatsapp/+4915550001111", "events": []string{"message.status", "message.received"}, "format": "meta"})
	g.fake.AddShop(shop, "Alice's Shop", shopToken)
	g.call("POST", "/api/ecom/manual-connect", admin, map[string]any{"shop": shop, "accessToken": shopToken})
	// A Cloud API number with its templates, and a message whose way shows.
	g.connectCloud(cloudFake, cloudApp, admin)
	g.call("PATCH", "/api/client/routing", admin, map[string]any{"mode": "auto", "coldTemplate": map[string]any{"name": "cold_notice", "language": "en_US"}})
	g.call("POST", "/api/client/send", admin, map[string]any{"phone": "4915550004444", "text": "your order is confirmed"})
	// An order asked to confirm (the store screen's orders), and a customer who opted out.
	g.call("PUT", "/api/client/templates", admin, map[string]any{"topic": "orders/create", "confirm": map[string]any{"cancelOnNo": true}})
	g.orderWebhook("root", "1001", "4915550009999")
	g.call("POST", "/api/dev/sim/inbound", "", map[string]any{"sessionId": sid, "from": "4915550008888", "text": "STOP"})

	screens := []struct{ hash, ready string }{
		{"#/session", `document.querySelector('#session-status')`},
		{"#/cloud", `document.querySelector('#cloud-number') && document.querySelectorAll('tr[data-template]').length === 3 && document.querySelector('#routing-form')`},
		{"#/messages", `document.querySelector('li.msg .poll') && document.querySelector('li.msg blockquote.quote') && document.querySelectorAll('li.msg .reaction').length === 2 && document.querySelector('li.msg .via')`},
		{"#/send", `document.querySelector('#send-form') && document.querySelector('#send-group option[value$="@g.us"]')`},
		{"#/campaigns", `document.querySelector('#campaign-list tr[data-campaign]')`},
		{"#/templates", `document.querySelector('#template-text')`},
		{"#/store", `document.querySelector('#store-shop') && document.querySelector('#store-orders tr[data-order]')`},
		{"#/optouts", `document.querySelector('#optout-settings')`},
		{"#/keys", `document.querySelector('#view table')`},
		{"#/usage", `document.querySelector('#usage-month')`},
		{"#/webhooks", `document.querySelector('#webhook-list table')`},
		{"#/admin/users", `document.querySelector('#screen-admin-users table')`},
		{"#/admin/keys", `document.querySelector('#key-list table')`},
		{"#/admin/sessions", `document.querySelector('#screen-admin-sessions table')`},
	}
	for _, size := range []struct {
		name string
		w, h int64
	}{{"390px", 390, 844}, {"1440px", 1440, 900}} {
		for _, theme := range []string{"light", "dark"} {
			where := size.name + " " + theme
			b.run(chromedp.EmulateViewport(size.w, size.h), emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: theme}}))
			b.open(g.url + "/dashboard/")
			b.eval(`sessionStorage.clear(), true`, nil) // signed out: the sign-in form
			b.open(g.url + "/dashboard/")
			b.waitFor("the sign-in form", `document.querySelector('#dev-signin')`)
			b.audit(axe, where+" sign-in")
			b.open(g.url + "/dashboard/#token=" + admin)
			b.waitFor("the admin screens", `document.querySelector('#key-form')`)
			var bg string
			b.eval(`getComputedStyle(document.body).backgroundColor`, &bg)
			if (theme == "dark") != (bg == "rgb(15, 20, 25)") {
				t.Fatalf("%s: the page's background is %s", where, bg)
			}
			for _, s := range screens {
				b.go_(s.hash)
				b.waitFor(s.hash, s.ready)
				b.waitFor(s.hash+" loaded", `!/Loading…/.test(document.querySelector('#view').textContent)`)
				b.audit(axe, where+" "+s.hash)
				if s.hash == "#/webhooks" {
					b.click("#webhook-list button[data-test-webhook]")
					b.waitFor("the test event's delivery", `document.querySelector('#webhook-deliveries tr[data-type="webhook.test"]')`)
					b.audit(axe, where+" webhook deliveries")
				}
				if s.hash == "#/messages" {
					b.click(`li.msg[data-direction=in] button[data-reply]`)
					b.click(`li.msg[data-kind=poll] button[data-react]`)
					b.waitFor("the reply form and the reaction picker", `document.querySelector('li.msg .reply textarea') && document.querySelector('li.msg .picker')`)
					b.audit(axe, where+" messages' reply and reaction")
				}
				if s.hash == "#/send" {
					b.set("#send-type", "poll")
					b.waitFor("the poll's fields", `document.querySelector('#send-form [name=options]')`)
					b.audit(axe, where+" send a poll")
				}
				if s.hash == "#/campaigns" {
					b.set("#campaign-name", "Test")
					b.set("#campaign-message", "Hi {name}")
					b.set("#campaign-numbers", "4915550008888, Bea\nnot a number")
					b.click("#campaign-check")
					b.waitFor("the preview", `document.querySelector('#campaign-start')`)
					b.audit(axe, where+" campaign preview")
				}
				if (size.w < 800) == (theme == "light") && (s.hash == "#/messages" || s.hash == "#/campaigns" || s.hash == "#/session") {
					b.shot(strings.ReplaceAll(fmt.Sprintf("%s-%s-%s", size.name, theme, strings.Trim(s.hash, "#/")), "/", "-"))
				}
			}
			if size.w < 800 {
				// The menu is a drawer: closed, the links are out of reach; open, they are in it.
				var hidden bool
				b.eval(`getComputedStyle(document.querySelector('#nav')).visibility === 'hidden'`, &hidden)
				if !hidden {
					t.Errorf("%s: the navigation shows without the menu", where)
				}
				b.click("#menu")
				b.waitFor("the open drawer", `document.querySelector('#nav').classList.contains('open') && document.querySelector('#menu').getAttribute('aria-expanded') === 'true'`)
				b.waitFor("the drawer in view", `document.querySelector('#nav').getBoundingClientRect().left >= 0`)
				b.audit(axe, where+" menu drawer")
				if theme == "light" {
					b.shot(size.name + "-" + theme + "-drawer")
				}
				b.click(`#nav a[data-route="messages"]`)
				b.waitFor("the drawer closed on a link", `!document.querySelector('#nav').classList.contains('open') && location.hash === '#/messages'`)
			}
			b.open(g.url + "/docs")
			b.waitFor("the API reference", `document.querySelectorAll('.op').length > 40`)
			b.audit(axe, where+" /docs")
			for _, page := range []string{"/dashboard/connect-store/success?shop=" + shop, "/dashboard/connect-store/error?reason=invalid_state"} {
				b.open(g.url + page)
				b.waitFor("the store landing page", `document.querySelector('#connect-result')`)
				b.audit(axe, where+" "+page)
			}
		}
	}

	// The theme switch overrides the system's preference, and is kept.
	b.run(chromedp.EmulateViewport(1280, 860), emulation.SetEmulatedMedia().WithFeatures([]*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: "light"}}))
	b.open(g.url + "/dashboard/#token=" + admin)
	b.waitFor("the theme switch", `document.querySelector('#theme')`)
	for range 2 { // system → light → dark
		b.click("#theme")
	}
	b.waitFor("dark by the switch", `document.documentElement.dataset.theme === 'dark' && getComputedStyle(document.body).backgroundColor === 'rgb(15, 20, 25)'`)
	b.run(chromedp.Reload())
	b.waitFor("dark after a reload", `document.documentElement.dataset.theme === 'dark'`)
}

// cutProxy passes TCP connections to a gateway; cut drops every open one (a connection lost
// between the browser and the gateway).
type cutProxy struct {
	url string
	mu  sync.Mutex
	all map[net.Conn]struct{}
	n   int
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{url: "http://" + ln.Addr().String(), all: map[net.Conn]struct{}{}}
	t.Cleanup(func() { ln.Close(); p.cut() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", u.Host)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.all[in], p.all[out] = struct{}{}, struct{}{}
			p.n++
			p.mu.Unlock()
			pipe := func(dst, src net.Conn) {
				_, _ = io.Copy(dst, src)
				dst.Close()
				src.Close()
				p.mu.Lock()
				delete(p.all, dst)
				delete(p.all, src)
				p.mu.Unlock()
			}
			go pipe(in, out)
			go pipe(out, in)
		}
	}()
	return p
}

func (p *cutProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.all {
		c.Close()
	}
}

func (p *cutProxy) conns() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}
