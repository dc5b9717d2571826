package main

// The official WhatsApp Cloud API as a second network, end to end on the fake Graph API
// (issue 29, DESIGN.md section 17): connecting a number; text, an image by link, a template
// with parameters, a reply, a reaction, buttons; statuses sent → delivered → read through signed
// webhooks; a forged webhook refused without a change; 131047, 130429 and 190 mapped; what the
// Cloud API has not answered with a 4xx. Then routing between a linked session on the sim and
// a cloud number on the fake. One gateway for every case of each test.

import (
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gateway/gateway/cloudapi"
	"github.com/gateway/gateway/network/cloud/fakegraph"
)

// cloudNumber is a number of the fake Graph API with its app.
type cloudNumber struct {
	id, waba, display, token, secret string
	app                              *fakegraph.App
}

// phone is the number's digits (the session's phone).
func (n cloudNumber) phone() string { return strings.Map(keepDigit, n.display) }

func keepDigit(r rune) rune {
	if r >= '0' && r <= '9' {
		return r
	}
	return -1
}

// newFakeGraph starts the fake with numbers and the templates every test uses: order_update
// (two parameters, APPROVED, utility), cold_notice (one, APPROVED), promo (PENDING).
func newFakeGraph(t testing.TB, numbers ...*cloudNumber) *fakegraph.Server {
	t.Helper()
	fake := fakegraph.New()
	t.Cleanup(fake.Close)
	for _, n := range numbers {
		n.app = &fakegraph.App{Secret: n.secret}
		fake.AddNumber(fakegraph.Number{ID: n.id, WABA: n.waba, Display: n.display, Name: "Lucky Shrub", Token: n.token, App: n.app})
		for _, tpl := range []cloudapi.MessageTemplate{
			{Name: "order_update", Language: "en_US", Status: "APPROVED", Category: "UTILITY", Components: []cloudapi.TemplateComponent{{Type: "BODY", Text: "Order {{1}} is {{2}}."}}},
			{Name: "cold_notice", Language: "en_US", Status: "APPROVED", Category: "UTILITY", Components: []cloudapi.TemplateComponent{{Type: "BODY", Text: "Lucky Shrub here: {{1}}"}}},
			{Name: "promo", Language: "en_US", Status: "PENDING", Category: "MARKETING", Components: []cloudapi.TemplateComponent{{Type: "BODY", Text: "Sale!"}}},
		} {
			fake.AddTemplate(n.waba, tpl)
		}
	}
	return fake
}

// connectCloud connects the number for the signed-in user (tok) and subscribes the fake's app
// to the webhook URL the answer shows, with its verify token (on this gateway's address). It
// returns the session id.
func (tg *testGW) connectCloud(fake *fakegraph.Server, tok string, n *cloudNumber) string {
	tg.t.Helper()
	sid, _ := tg.connectCloudVerify(fake, tok, n)
	return sid
}

// connectCloudVerify is connectCloud, answering the verify token too.
func (tg *testGW) connectCloudVerify(fake *fakegraph.Server, tok string, n *cloudNumber) (string, string) {
	tg.t.Helper()
	r := tg.do("POST", "/api/client/cloud/connect", bearerAuth(tok), map[string]any{"phoneNumberId": n.id, "wabaId": n.waba,
		"accessToken": n.token, "appSecret": n.secret})
	want(tg.t, r, 200, "")
	num, _ := r.obj()["number"].(map[string]any)
	verify := r.str("verifyToken")
	if verify == "" || num == nil || strings.Contains(string(r.raw), n.token) || strings.Contains(string(r.raw), n.secret) {
		tg.t.Fatalf("connect answered %s", r.raw)
	}
	hook, err := url.Parse(num["webhookUrl"].(string))
	if err != nil {
		tg.t.Fatal(err)
	}
	if err := fake.Subscribe(n.app, tg.url+hook.Path+"?"+hook.RawQuery, verify); err != nil {
		tg.t.Fatal(err)
	}
	sid := num["sessionId"].(string)
	eventually(tg.t, 10*time.Second, "the cloud session CONNECTED", func() bool {
		c := tg.do("GET", "/api/client/cloud", bearerAuth(tok), nil)
		m, _ := c.obj()["number"].(map[string]any)
		return m != nil && m["status"] == "CONNECTED"
	})
	return sid, verify
}

// sentTo is what the fake took for a contact: the requests' gateway ids, in order.
func sentIDs(fake *fakegraph.Server, to string) []string {
	var ids []string
	for _, s := range fake.Sent(to) {
		ids = append(ids, s.Request.BizOpaqueCallbackData)
	}
	return ids
}

func TestCloudEndToEnd(t *testing.T) {
	sideBySide(t)
	num := &cloudNumber{id: "106540352242922", waba: "102290129340398", display: "+1 555-078-3881", token: "EAAJB-cloud-token", secret: "cloud-app-secret"}
	fake := newFakeGraph(t, num)
	png := pngBytes(t)
	media := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(png)
	}))
	t.Cleanup(media.Close)
	tg := startGW(t, "--cloud-graph-url", fake.URL(), "--webhook-allow-private", "--media-allow-private")
	admin := tg.token("root", "admin")
	tok := tg.newClient("carol")
	key := tg.newKey(admin, "carol", nil).str("rawKey")
	sink := newHookSink(t)
	sub := tg.do("POST", "/api/client/webhooks", bearerAuth(tok), map[string]any{"url": sink.URL + "/hook",
		"events": []string{"message.status", "message.received", "message.reaction", "session.status"}})
	want(t, sub, 201, "")
	c := conversation{tg: tg, s: sender{tok: tok, key: key}, sink: sink, secret: sub.str("secret")}
	const customer = "16505551234"

	t.Run("Connect", func(t *testing.T) {
		tg := tg.with(t)
		// A token Meta refuses is 400, nothing connected.
		bad := tg.do("POST", "/api/client/cloud/connect", bearerAuth(tok), map[string]any{"phoneNumberId": num.id, "wabaId": num.waba,
			"accessToken": "wrong", "appSecret": num.secret})
		want(t, bad, 400, "validation_failed")
		if r := tg.do("GET", "/api/client/cloud", bearerAuth(tok), nil); r.obj()["number"] != nil {
			t.Fatalf("a refused connect left %s", r.raw)
		}
		c.s.session = tg.connectCloud(fake, tok, num)
		// Meta's subscription check with another token is 403.
		q := url.Values{"hub.mode": {"subscribe"}, "hub.verify_token": {"not-it"}, "hub.challenge": {"42"}, "session": {c.s.session}}
		want(t, tg.do("GET", "/api/cloud/webhook?"+q.Encode(), nil, nil), 403, "verify_token_mismatch")
		// The session is listed with its kind; the token is in no answer and no file in the clear.
		r := tg.do("GET", "/api/admin/sessions", bearerAuth(admin), nil)
		if !strings.Contains(string(r.raw), `"kind":"cloud"`) || strings.Contains(string(r.raw), num.token) {
			t.Fatalf("admin list: %s", r.raw)
		}
		st := tg.do("GET", "/api/client/cloud", bearerAuth(tok), nil)
		n := st.obj()["number"].(map[string]any)
		if n["phone"] != num.phone() || n["throughput"] != float64(80) || n["verifiedName"] != "Lucky Shrub" || strings.Contains(string(st.raw), num.secret) {
			t.Fatalf("GET /api/client/cloud: %s", st.raw)
		}
		tpl := tg.do("GET", "/api/client/cloud/templates", bearerAuth(tok), nil)
		want(t, tpl, 200, "")
		if ts := tpl.obj()["templates"].([]any); len(ts) != 3 || ts[0].(map[string]any)["parameters"] != float64(2) {
			t.Fatalf("templates: %s", tpl.raw)
		}
	})

	var in string // the customer's first message
	t.Run("TextAndStatusesThroughSignedWebhooks", func(t *testing.T) {
		in2, err := fake.Write(num.id, fakegraph.Inbound{From: customer, Name: "Sheena", Text: "Do you ship to Lyon? ✈"})
		if err != nil {
			t.Fatal(err)
		}
		in = in2
		got := c.event(t, "message.received", func(d map[string]any) bool { return d["id"] == in })
		if got["from"] != customer || got["text"] != "Do you ship to Lyon? ✈" || got["name"] != "Sheena" || got["session"] != c.s.session {
			t.Fatalf("message.received %v", got)
		}
		id := c.send(t, map[string]any{"phone": customer, "message": "Yes, in 2 days."})
		c.event(t, "message.status", func(d map[string]any) bool { return d["messageId"] == id && d["status"] == "delivered" })
		sent := fake.Sent(customer)
		if len(sent) != 1 || sent[0].Request.Text.Body != "Yes, in 2 days." || sent[0].Request.BizOpaqueCallbackData != id {
			t.Fatalf("the fake got %+v", sent)
		}
		if err := fake.Read(sent[0].ID); err != nil {
			t.Fatal(err)
		}
		ev := c.event(t, "message.status", func(d map[string]any) bool { return d["messageId"] == id && d["status"] == "read" })
		if ev["via"] != "cloud" || ev["viaReason"] != "window" || ev["pricing"] != "service" {
			t.Fatalf("message.status read: %v", ev)
		}
		// A receipt's record may land after its event: the read polls for it.
		var m resp
		var hist []string
		eventually(t, 10*time.Second, "the read receipt in the message's history", func() bool {
			m, hist = c.tg.do("GET", "/api/v1/messages/"+id, keyAuth(key), nil), nil
			for _, h := range m.obj()["history"].([]any) {
				hist = append(hist, h.(map[string]any)["status"].(string))
			}
			return slices.Contains(hist, "read")
		})
		if !slices.Equal(hist, []string{"queued", "sent", "delivered", "read"}) || m.str("via") != "cloud" || m.str("pricing") != "service" {
			t.Fatalf("the message: %s", m.raw)
		}
	})

	t.Run("ImageByLinkAndUploaded", func(t *testing.T) {
		link := media.URL + "/blue.png"
		byLink := c.send(t, map[string]any{"phone": customer, "type": "image", "media": link, "caption": "the blue one"})
		uploaded := c.send(t, map[string]any{"phone": customer, "type": "image", "media": pngDataURI(t, 4)})
		c.settled(t, uploaded)
		c.settled(t, byLink)
		var a, b *fakegraph.Sent
		for _, s := range fake.Sent(customer) {
			switch s.Request.BizOpaqueCallbackData {
			case byLink:
				a = &s
			case uploaded:
				b = &s
			}
		}
		if a == nil || a.Request.Image.Link != link || a.Request.Image.Caption != "the blue one" || a.MediaBytes != len(png) {
			t.Fatalf("by link: %+v", a)
		}
		if b == nil || b.Request.Image.ID == "" || b.Request.Image.Link != "" || b.MediaType != "image/png" {
			t.Fatalf("uploaded: %+v", b)
		}
	})

	t.Run("TemplateWithParameters", func(t *testing.T) {
		id := c.send(t, map[string]any{"phone": "4915112345678", "type": "template",
			"template": map[string]any{"name": "order_update", "language": "en_US", "parameters": []string{"#1001", "shipped"}}})
		c.event(t, "message.status", func(d map[string]any) bool { return d["messageId"] == id && d["status"] == "delivered" })
		s := fake.Sent("4915112345678")
		if len(s) != 1 || s[0].Request.Template.Name != "order_update" || s[0].Request.Template.Components[0].Parameters[1].Text != "shipped" {
			t.Fatalf("the fake got %+v", s)
		}
		m := c.settled(t, id)
		tpl, _ := m.obj()["template"].(map[string]any)
		if m.str("text") != "Order #1001 is shipped." || tpl["name"] != "order_update" || m.str("viaReason") != "cold" {
			t.Fatalf("the message: %s", m.raw)
		}
		eventually(t, 5*time.Second, "utility pricing", func() bool {
			return c.tg.do("GET", "/api/v1/messages/"+id, keyAuth(key), nil).str("pricing") == "utility"
		})
		for _, bad := range []map[string]any{
			{"name": "promo", "language": "en_US", "parameters": []string{}},                  // PENDING
			{"name": "no_such", "language": "en_US", "parameters": []string{"x"}},             // unknown
			{"name": "order_update", "language": "en_US", "parameters": []string{"only one"}}, // wrong count
		} {
			r := c.tg.do("POST", "/api/v1/messages/send", keyAuth(key), map[string]any{"phone": customer, "type": "template", "template": bad})
			if r.status != 400 || (r.str("code") != "template_not_approved" && r.str("code") != "validation_failed") {
				t.Fatalf("%v: %s", bad, r.raw)
			}
		}
		if len(fake.Sent("4915112345678")) != 1 {
			t.Fatal("a refused template reached Meta")
		}
	})

	t.Run("ReplyAndReactions", func(t *testing.T) {
		reply := c.send(t, map[string]any{"phone": customer, "message": "ours ships Monday", "replyTo": in, "typing": true})
		react := c.send(t, map[string]any{"type": "reaction", "messageId": in, "emoji": "👍"})
		c.settled(t, react)
		var gotReply, gotReact bool
		var replyWamid string
		for _, s := range fake.Sent(customer) {
			switch s.Request.BizOpaqueCallbackData {
			case reply:
				gotReply, replyWamid = s.Request.Context != nil && s.Request.Context.MessageID == in, s.ID
			case react:
				gotReact = s.Request.Reaction != nil && s.Request.Reaction.MessageID == in && s.Request.Reaction.Emoji == "👍"
			}
		}
		if !gotReply || !gotReact {
			t.Fatalf("reply %v reaction %v: %+v", gotReply, gotReact, fake.Sent(customer))
		}
		// "typing…" before the reply: Meta's typing indicator, with a read mark of the message
		// it answers.
		if !slices.Contains(fake.Typing(), in) {
			t.Fatalf("no typing indicator before the reply: %v", fake.Typing())
		}
		// The customer reacts to our reply (Meta names it by its id): the event names ours.
		if _, err := fake.Write(num.id, fakegraph.Inbound{From: customer, React: true, ReplyTo: replyWamid, Emoji: "❤️"}); err != nil {
			t.Fatal(err)
		}
		r := c.event(t, "message.reaction", func(d map[string]any) bool { return d["messageId"] == reply })
		if r["emoji"] != "❤️" || r["phone"] != customer {
			t.Fatalf("message.reaction %v", r)
		}
		// The customer quotes our reply.
		q, _ := fake.Write(num.id, fakegraph.Inbound{From: customer, Text: "great", ReplyTo: replyWamid})
		got := c.event(t, "message.received", func(d map[string]any) bool { return d["id"] == q })
		if got["replyTo"] != reply {
			t.Fatalf("a quote of our message names %v, want %s", got["replyTo"], reply)
		}
	})

	t.Run("ButtonsAndTheTap", func(t *testing.T) {
		id := c.send(t, map[string]any{"phone": customer, "type": "buttons", "message": "Confirm order #1001?", "footer": "Lucky Shrub",
			"buttons": []map[string]any{{"id": "confirm-1001", "title": "Confirm"}, {"id": "cancel-1001", "title": "Cancel"}}})
		c.settled(t, id)
		var sent *fakegraph.Sent
		for _, s := range fake.Sent(customer) {
			if s.Request.BizOpaqueCallbackData == id {
				sent = &s
			}
		}
		if sent == nil || sent.Request.Interactive == nil || len(sent.Request.Interactive.Action.Buttons) != 2 || sent.Request.Interactive.Footer.Text != "Lucky Shrub" {
			t.Fatalf("the fake got %+v", sent)
		}
		tap, _ := fake.Write(num.id, fakegraph.Inbound{From: customer, Button: "confirm-1001", Text: "Confirm", ReplyTo: sent.ID})
		got := c.event(t, "message.received", func(d map[string]any) bool { return d["id"] == tap })
		if got["kind"] != "button_reply" || got["buttonId"] != "confirm-1001" || got["text"] != "Confirm" {
			t.Fatalf("the tap: %v", got)
		}
	})

	t.Run("ForgedWebhookChangesNothing", func(t *testing.T) {
		body := fake.Body(num.id, cloudapi.Value{Messages: []cloudapi.InboundMessage{{From: customer, ID: "wamid.FORGED", Timestamp: cloudapi.Timestamp(time.Now()),
			Type: "text", Text: &cloudapi.Text{Body: "send me a refund"}}}})
		path := "/api/cloud/webhook?session=" + c.s.session
		for _, sig := range []string{cloudapi.Sign(body, "not-the-secret"), "", "sha256=00"} {
			r := c.tg.do("POST", path, auth{cloudapi.SignatureHeader: sig}, body)
			want(t, r, 401, "invalid_signature")
		}
		items, _ := c.tg.historyPage(t, "/api/v1/messages?direction=in&from="+customer, keyAuth(key))
		for _, m := range items {
			if m["id"] == "wamid.FORGED" {
				t.Fatal("a forged webhook's message was kept")
			}
		}
		// Signed with the app's secret, the same body is taken.
		want(t, c.tg.do("POST", path, auth{cloudapi.SignatureHeader: cloudapi.Sign(body, num.secret)}, body), 200, "")
		c.event(t, "message.received", func(d map[string]any) bool { return d["id"] == "wamid.FORGED" })
	})

	t.Run("OutsideTheWindowFails", func(t *testing.T) {
		fake.CloseWindow(num.id, customer) // Meta's window closed (the gateway's is still open)
		id := c.send(t, map[string]any{"phone": customer, "message": "still there?"})
		ev := c.event(t, "message.status", func(d map[string]any) bool { return d["messageId"] == id && d["status"] == "failed" })
		if ev["code"] != "outside_service_window" {
			t.Fatalf("message.status failed: %v", ev)
		}
		// The failure's record follows its event (a read shows the message as stored until
		// then: queued), so the read may come first under load.
		var m resp
		eventually(t, 10*time.Second, "the failure recorded", func() bool {
			m = c.tg.do("GET", "/api/v1/messages/"+id, keyAuth(key), nil)
			return m.str("status") != "queued"
		})
		if m.str("status") != "failed" || m.str("code") != "outside_service_window" {
			t.Fatalf("the message: %s", m.raw)
		}
		_, _ = fake.Write(num.id, fakegraph.Inbound{From: customer, Text: "yes"}) // the window opens again
		c.event(t, "message.received", func(d map[string]any) bool { return d["text"] == "yes" })
	})

	t.Run("ThroughputRetriedUntilItGoes", func(t *testing.T) {
		fake.Fail(customer, fakegraph.Failure{Code: cloudapi.CodeThroughput, OnAnswer: true, Times: 2})
		id := c.send(t, map[string]any{"phone": customer, "message": "after the rate limit"})
		var m resp
		eventually(t, 20*time.Second, "the message sent after two 130429s", func() bool {
			m = c.tg.do("GET", "/api/v1/messages/"+id, keyAuth(key), nil)
			return m.str("status") != "queued"
		})
		if m.str("status") == "failed" || m.obj()["attempts"].(float64) < 3 {
			t.Fatalf("130429: %s", m.raw)
		}
		// Meta's failed status for its rate limit: sent again, never failed.
		fake.Fail(customer, fakegraph.Failure{Code: cloudapi.CodePairRate})
		id2 := c.send(t, map[string]any{"phone": customer, "message": "after the pair rate"})
		eventually(t, 20*time.Second, "sent again after Meta's 131056 status", func() bool {
			n := 0
			for _, s := range fake.Sent(customer) {
				if s.Request.BizOpaqueCallbackData == id2 {
					n++
				}
			}
			return n == 2
		})
		c.event(t, "message.status", func(d map[string]any) bool { return d["messageId"] == id2 && d["status"] == "delivered" })
		if m := c.tg.do("GET", "/api/v1/messages/"+id2, keyAuth(key), nil); m.str("status") == "failed" {
			t.Fatalf("failed for Meta's rate limit: %s", m.raw)
		}
	})

	t.Run("RevokedTokenTakesTheSessionDown", func(t *testing.T) {
		fake.SetToken(num.id, "EAAJB-rotated")
		id := c.send(t, map[string]any{"phone": customer, "message": "held while the token is refused"})
		ev := c.event(t, "session.status", func(d map[string]any) bool { return d["session"] == c.s.session && d["reason"] == "token_invalid" })
		if ev["status"] != "DISCONNECTED" {
			t.Fatalf("session.status %v", ev)
		}
		st := c.tg.do("GET", "/api/client/cloud", bearerAuth(tok), nil).obj()["number"].(map[string]any)
		if st["status"] != "DISCONNECTED" || st["statusReason"] != "token_invalid" {
			t.Fatalf("the number: %v", st)
		}
		if m := c.tg.do("GET", "/api/v1/messages/"+id, keyAuth(key), nil); m.str("status") != "queued" {
			t.Fatalf("a message failed for the token: %s", m.raw)
		}
		// Connected again with the new token: the same session, the message goes.
		rotated := *num
		rotated.token = "EAAJB-rotated"
		if sid := c.tg.connectCloud(fake, tok, &rotated); sid != c.s.session {
			t.Fatalf("reconnect made session %s, want %s", sid, c.s.session)
		}
		c.settled(t, id)
	})

	t.Run("WhatTheCloudAPIHasNotIs4xx", func(t *testing.T) {
		k := keyAuth(key)
		for _, body := range []map[string]any{
			{"phone": customer, "type": "poll", "question": "Which?", "options": []string{"a", "b"}},
		} {
			want(t, c.tg.do("POST", "/api/v1/messages/send", k, body), 400, "not_supported_on_cloud")
		}
		want(t, c.tg.do("GET", "/api/v1/groups", k, nil), 400, "not_supported_on_cloud")
		want(t, c.tg.do("POST", "/api/v1/contacts/check", k, map[string]any{"phones": []string{customer}}), 400, "not_supported_on_cloud")
		want(t, c.tg.do("POST", "/api/v1/groups", k, map[string]any{"name": "x", "participants": []string{customer}}), 400, "not_supported_on_cloud")
		sent := c.send(t, map[string]any{"phone": customer, "message": "typo"})
		c.settled(t, sent)
		want(t, c.tg.do("POST", "/api/v1/messages/"+sent+"/edit", k, map[string]any{"message": "fixed"}), 400, "not_supported_on_cloud")
		want(t, c.tg.do("DELETE", "/api/v1/messages/"+sent, k, nil), 400, "not_supported_on_cloud")
		// A read mark is the Cloud API's: it reaches Meta.
		reads := len(fake.Reads())
		want(t, c.tg.do("POST", "/api/v1/messages/"+in+"/read", k, nil), 200, "")
		if got := fake.Reads(); len(got) != reads+1 || got[reads] != in {
			t.Fatalf("read marks at Meta: %v", got)
		}
	})
}

// pngBytes is a small PNG.
func pngBytes(t testing.TB) []byte {
	uri := pngDataURI(t, 6)
	data, err := base64.StdEncoding.DecodeString(uri[strings.Index(uri, ",")+1:])
	if err != nil {
		t.Fatal(err)
	}
	return data
}
