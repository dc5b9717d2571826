package main

// The Cloud-API-shaped front on the sim, end to end (issue 31, DESIGN.md section 20): every
// kind a linked session carries, sent in the Cloud API's bodies and answered in Meta's shape;
// uploads, their records and downloads; the number's record; Meta's error shape for bad input,
// a kind the session's network cannot carry, bad keys and missing scopes; the v1 path's
// Idempotency-Key; and a webhook subscription of format meta receiving Meta's payloads signed
// X-Hub-Signature-256. One gateway for every case.

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-json"

	"github.com/gateway/gateway/cloudapi"
	"github.com/gateway/gateway/httpapi/openapitest"
	"github.com/gateway/gateway/network/cloud/fakegraph"
)

// frontGW is the gateway and one user's linked session with a key.
type frontGW struct {
	tg *testGW
	s  sender
}

func (f frontGW) path(rest string) string { return "/cloud/v27.0/" + rest }

// send posts a Cloud API message body through the session and returns the answer.
func (f frontGW) send(t *testing.T, body map[string]any) resp {
	t.Helper()
	body["messaging_product"] = "whatsapp"
	return f.tg.do("POST", f.path(f.s.session+"/messages"), bearerAuth(f.s.key), body)
}

// sent sends and returns the message's id, checking Meta's answer.
func (f frontGW) sent(t *testing.T, body map[string]any) string {
	t.Helper()
	r := f.send(t, body)
	if r.status != 200 {
		t.Fatalf("send %v: %d %s", body, r.status, r.raw)
	}
	var a cloudapi.SendResponse
	if err := json.Unmarshal(r.raw, &a); err != nil {
		t.Fatal(err)
	}
	if a.MessagingProduct != "whatsapp" || len(a.Contacts) != 1 || len(a.Messages) != 1 || a.Messages[0].ID == "" ||
		a.Contacts[0].WaID != strings.TrimPrefix(a.Contacts[0].Input, "+") {
		t.Fatalf("answer %s, want Meta's {messaging_product, contacts: [{input, wa_id}], messages: [{id}]}", r.raw)
	}
	return a.Messages[0].ID
}

// onPhone waits for the message id to reach phone and returns what the phone shows.
func (f frontGW) onPhone(t *testing.T, phone, id string) map[string]any {
	t.Helper()
	var got map[string]any
	eventually(t, 10*time.Second, "message "+id+" on the phone", func() bool {
		for _, d := range f.tg.simMessages(phone) {
			if d["id"] == id {
				got = d
				return true
			}
		}
		return false
	})
	return got
}

// upload posts a multipart upload as Cloud API clients do; the answer is checked against the
// API document like every other.
func (f frontGW) upload(t *testing.T, key, name, typ string, data []byte) resp {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	_ = w.WriteField("messaging_product", "whatsapp")
	_ = w.WriteField("type", typ)
	fw, _ := w.CreateFormFile("file", name)
	_, _ = fw.Write(data)
	_ = w.Close()
	path := f.path(f.s.session + "/media")
	req, _ := http.NewRequest("POST", f.tg.url+path, &b)
	req.Header.Set("Content-Type", w.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+key)
	res, err := f.tg.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	raw, _ := io.ReadAll(res.Body)
	openapitest.Check(t, "POST", path, res.StatusCode, res.Header.Get("Content-Type"), raw)
	return resp{status: res.StatusCode, header: res.Header, raw: raw}
}

// wantMeta checks a Meta-shaped error: status, Graph code, and the gateway's code in details.
func wantMeta(t *testing.T, r resp, status, code int, gatewayCode string) {
	t.Helper()
	var e struct {
		Error struct {
			Message      string `json:"message"`
			Type         string `json:"type"`
			Code         int    `json:"code"`
			ErrorSubcode *int   `json:"error_subcode"`
			ErrorData    struct {
				Details string `json:"details"`
			} `json:"error_data"`
			FBTraceID string `json:"fbtrace_id"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.raw, &e); err != nil || r.status != status || e.Error.Code != code || e.Error.Message == "" ||
		e.Error.Type == "" || e.Error.ErrorSubcode == nil || e.Error.FBTraceID == "" || !strings.HasPrefix(e.Error.ErrorData.Details, gatewayCode+": ") {
		t.Fatalf("got %d %s, want %d with Meta's error shape, code %d, details %s: ...", r.status, r.raw, status, code, gatewayCode)
	}
}

func TestCloudFrontEndToEnd(t *testing.T) {
	sideBySide(t)
	png := pngBytes(t)
	files := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(png)
	}))
	t.Cleanup(files.Close)
	tg := startGW(t, "--webhook-allow-private", "--media-allow-private")
	admin := tg.token("root", "admin")
	f := frontGW{tg: tg, s: tg.newSender(admin, "alice", "447700900071", nil)}
	bob := tg.newSender(admin, "bob", "447700900072", nil)
	sink := newHookSink(t)
	sub := tg.do("POST", "/api/client/webhooks", bearerAuth(f.s.tok), map[string]any{"url": sink.URL + "/meta", "format": "meta",
		"events": []string{"message.status", "message.received", "message.reaction", "session.status"}})
	want(t, sub, 201, "")
	if sub.str("format") != "meta" {
		t.Fatalf("subscription %s, want format meta", sub.raw)
	}
	secret := sub.str("secret")
	want(t, tg.do("POST", "/api/client/webhooks", bearerAuth(f.s.tok), map[string]any{"url": sink.URL + "/x", "format": "xml", "events": []string{"message.status"}}), 400, "validation_failed")
	const customer = "15550100301"

	var textID, imageID string
	t.Run("EveryKindALinkedSessionCarries", func(t *testing.T) {
		textID = f.sent(t, map[string]any{"to": "+" + customer, "type": "text", "text": map[string]any{"body": "order 1001 shipped"}})
		if d := f.onPhone(t, customer, textID); d["type"] != "text" || d["text"] != "order 1001 shipped" {
			t.Fatalf("text on the phone: %v", d)
		}
		up := f.upload(t, f.s.key, "box.png", "image/png", png)
		want(t, up, 200, "")
		imageID = f.sent(t, map[string]any{"to": customer, "type": "image", "image": map[string]any{"id": up.str("id"), "caption": "your box"}})
		if d := f.onPhone(t, customer, imageID); d["type"] != "image" || d["caption"] != "your box" || d["mimeType"] != "image/png" || d["bytes"] != float64(len(png)) {
			t.Fatalf("uploaded image on the phone: %v", d)
		}
		link := f.sent(t, map[string]any{"to": customer, "type": "image", "image": map[string]any{"link": files.URL + "/a.png"}})
		if d := f.onPhone(t, customer, link); d["type"] != "image" || d["bytes"] != float64(len(png)) {
			t.Fatalf("image by link on the phone: %v", d)
		}
		doc := f.upload(t, f.s.key, "invoice.pdf", "application/pdf", []byte("%PDF-1.4\n1 0 obj<<>>endobj\ntrailer<<>>\n%%EOF\n"))
		want(t, doc, 200, "")
		docID := f.sent(t, map[string]any{"to": customer, "type": "document", "document": map[string]any{"id": doc.str("id"), "filename": "invoice.pdf", "caption": "invoice"}})
		if d := f.onPhone(t, customer, docID); d["type"] != "document" || d["fileName"] != "invoice.pdf" {
			t.Fatalf("document on the phone: %v", d)
		}
		loc := f.sent(t, map[string]any{"to": customer, "type": "location", "location": map[string]any{"latitude": 52.52, "longitude": 13.405, "name": "Shop", "address": "Alexanderplatz 1"}})
		if d := f.onPhone(t, customer, loc); d["type"] != "location" || d["lat"] != 52.52 || d["locationName"] != "Shop" {
			t.Fatalf("location on the phone: %v", d)
		}
		card := f.sent(t, map[string]any{"to": customer, "type": "contacts", "contacts": []any{map[string]any{
			"name": map[string]any{"formatted_name": "Support"}, "phones": []any{map[string]any{"phone": "+447700900123", "type": "WORK"}}}}})
		if d := f.onPhone(t, customer, card); d["type"] != "contact" || d["contactName"] != "Support" || d["contactPhone"] != "447700900123" {
			t.Fatalf("contact card on the phone: %v", d)
		}
		reply := f.sent(t, map[string]any{"to": customer, "type": "text", "context": map[string]any{"message_id": textID}, "text": map[string]any{"body": "it left the warehouse"}})
		if d := f.onPhone(t, customer, reply); d["replyTo"] != textID || d["quoted"] != "order 1001 shipped" {
			t.Fatalf("reply on the phone: %v, want it quoting %s", d, textID)
		}
		react := f.sent(t, map[string]any{"to": customer, "type": "reaction", "reaction": map[string]any{"message_id": textID, "emoji": "👍"}})
		if d := f.onPhone(t, customer, react); d["type"] != "reaction" || d["messageId"] != textID || d["emoji"] != "👍" {
			t.Fatalf("reaction on the phone: %v", d)
		}
	})

	t.Run("AKindTheNetworkCannotCarryIsAnError", func(t *testing.T) {
		before := len(tg.simMessages(customer))
		r := f.send(t, map[string]any{"to": customer, "type": "interactive", "interactive": map[string]any{"type": "button",
			"body": map[string]any{"text": "Confirm?"}, "action": map[string]any{"buttons": []any{map[string]any{"type": "reply", "reply": map[string]any{"id": "y", "title": "Yes"}}}}}})
		wantMeta(t, r, 400, 131051, "cloud_session_required")
		r = f.send(t, map[string]any{"to": customer, "type": "template", "template": map[string]any{"name": "order", "language": map[string]any{"code": "en_US"}}})
		wantMeta(t, r, 400, 131051, "cloud_session_required")
		r = f.send(t, map[string]any{"to": customer, "type": "interactive", "interactive": map[string]any{"type": "product"}})
		wantMeta(t, r, 400, 131051, "not_supported_on_cloud")
		if after := len(tg.simMessages(customer)); after != before {
			t.Fatalf("%d messages reached the phone after refusals", after-before)
		}
	})

	t.Run("BadInputIsMetasErrorShape", func(t *testing.T) {
		path := f.path(f.s.session + "/messages")
		wantMeta(t, tg.do("POST", path, bearerAuth(f.s.key), "{not json"), 400, 100, "invalid_json")
		wantMeta(t, tg.do("POST", path, bearerAuth(f.s.key), map[string]any{"to": customer, "type": "text", "text": map[string]any{"body": "x"}}), 400, 100, "validation_failed")
		wantMeta(t, f.send(t, map[string]any{"to": customer, "type": "text"}), 400, 100, "validation_failed")
		wantMeta(t, f.send(t, map[string]any{"to": customer, "type": "hologram"}), 400, 100, "validation_failed")
		wantMeta(t, f.send(t, map[string]any{"to": "not a phone", "type": "text", "text": map[string]any{"body": "x"}}), 400, 100, "invalid_phone")
		wantMeta(t, f.send(t, map[string]any{"to": customer, "type": "image", "image": map[string]any{"id": "media_nope"}}), 404, 100, "media_not_found")
		wantMeta(t, tg.do("POST", "/cloud/latest/"+f.s.session+"/messages", bearerAuth(f.s.key), map[string]any{"messaging_product": "whatsapp"}), 400, 100, "validation_failed")
		// Another user's session is not the key's: "no such object", as Graph answers a number
		// the token cannot reach (and as GET /{id} answers here).
		wantMeta(t, tg.do("POST", f.path(bob.session+"/messages"), bearerAuth(f.s.key), map[string]any{"messaging_product": "whatsapp", "to": customer, "type": "text", "text": map[string]any{"body": "x"}}), 404, 100, "session_not_found")
	})

	t.Run("AuthFailures", func(t *testing.T) {
		body := map[string]any{"messaging_product": "whatsapp", "to": customer, "type": "text", "text": map[string]any{"body": "x"}}
		path := f.path(f.s.session + "/messages")
		wantMeta(t, tg.do("POST", path, nil, body), 401, 190, "missing_credentials")
		wantMeta(t, tg.do("POST", path, bearerAuth("svc_live_"+strings.Repeat("0", 48)), body), 401, 190, "invalid_api_key")
		textOnly := tg.newKey(admin, "alice", map[string]any{"scopes": []string{"send_text"}}).str("rawKey")
		wantMeta(t, f.upload(t, textOnly, "box.png", "image/png", png), 403, 10, "insufficient_scope")
		wantMeta(t, tg.do("POST", path, bearerAuth(textOnly), map[string]any{"messaging_product": "whatsapp", "to": customer, "type": "image", "image": map[string]any{"link": files.URL}}), 403, 10, "insufficient_scope")
		// Graph's ?access_token= works as the key (Chatwoot's settings check).
		r := tg.do("GET", f.path(f.s.session+"/message_templates")+"?access_token="+f.s.key, nil, nil)
		want(t, r, 200, "")
		if string(bytes.TrimSpace(r.raw)) != `{"data":[]}` {
			t.Fatalf("a linked session's templates: %s", r.raw)
		}
		wantMeta(t, tg.do("GET", f.path(f.s.session+"/message_templates")+"?access_token=wrong", nil, nil), 401, 190, "invalid_api_key")
	})

	t.Run("UploadRecordDownloadAndNumber", func(t *testing.T) {
		up := f.upload(t, f.s.key, "box.png", "application/octet-stream", png)
		want(t, up, 200, "")
		rec := tg.do("GET", f.path(up.str("id")), bearerAuth(f.s.key), nil)
		want(t, rec, 200, "")
		sum := sha256.Sum256(png)
		if rec.str("mime_type") != "image/png" || rec.str("sha256") != hex.EncodeToString(sum[:]) || rec.obj()["file_size"] != float64(len(png)) {
			t.Fatalf("media record %s", rec.raw)
		}
		u := rec.str("url")
		if !strings.HasPrefix(u, tg.url+"/cloud/v27.0/") {
			t.Fatalf("url %q is not on the gateway", u)
		}
		dl := tg.do("GET", strings.TrimPrefix(u, tg.url), bearerAuth(f.s.key), nil)
		if dl.status != 200 || !bytes.Equal(dl.raw, png) || dl.header.Get("Content-Type") != "image/png" {
			t.Fatalf("download: %d %s, %d bytes", dl.status, dl.header.Get("Content-Type"), len(dl.raw))
		}
		wantMeta(t, tg.do("GET", strings.TrimPrefix(u, tg.url), bearerAuth(bob.key), nil), 404, 100, "media_not_found")
		wantMeta(t, tg.do("GET", f.path(up.str("id")), bearerAuth(bob.key), nil), 404, 100, "media_not_found")
		num := tg.do("GET", f.path(f.s.session), bearerAuth(f.s.key), nil)
		want(t, num, 200, "")
		if num.str("id") != f.s.session || num.str("display_phone_number") != f.s.phone || num.str("platform_type") != "NOT_APPLICABLE" || num.str("status") != "CONNECTED" {
			t.Fatalf("number record %s", num.raw)
		}
		wantMeta(t, tg.do("GET", f.path(bob.session), bearerAuth(f.s.key), nil), 404, 100, "session_not_found")
		// A send through a number that does not exist: the same answer as another user's.
		text := map[string]any{"messaging_product": "whatsapp", "to": customer, "type": "text", "text": map[string]any{"body": "x"}}
		wantMeta(t, tg.do("POST", f.path("00000000-0000-4000-8000-000000000000/messages"), bearerAuth(f.s.key), text), 404, 100, "session_not_found")
	})

	t.Run("IdempotencyKeyNamesOneMessage", func(t *testing.T) {
		body := map[string]any{"messaging_product": "whatsapp", "to": customer, "type": "text", "text": map[string]any{"body": "once"}}
		a := auth{"Authorization": "Bearer " + f.s.key, "Idempotency-Key": "front-1"}
		first := tg.do("POST", f.path(f.s.session+"/messages"), a, body)
		again := tg.do("POST", f.path(f.s.session+"/messages"), a, body)
		want(t, first, 200, "")
		want(t, again, 200, "")
		if string(first.raw) != string(again.raw) || again.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("a retry answered %s, the first %s", again.raw, first.raw)
		}
	})

	t.Run("MetaWebhookPayloadsAndSignature", func(t *testing.T) {
		in := tg.do("POST", "/api/dev/sim/inbound", nil, map[string]any{"sessionId": f.s.session, "from": customer, "text": "where is my order?"})
		want(t, in, 200, "")
		inID := in.str("id")
		react := tg.do("POST", "/api/dev/sim/inbound", nil, map[string]any{"sessionId": f.s.session, "from": customer, "type": "reaction", "messageId": textID, "emoji": "🎉"})
		want(t, react, 200, "")
		var status, message, reaction *cloudapi.Value
		eventually(t, 10*time.Second, "Meta's status and message payloads", func() bool {
			for _, r := range sink.all() {
				var n cloudapi.Notification
				if err := json.Unmarshal(r.body, &n); err != nil || n.Object != "whatsapp_business_account" || len(n.Entry) != 1 || len(n.Entry[0].Changes) != 1 {
					t.Fatalf("a delivery that is not Meta's payload: %s", r.body)
				}
				if sig := r.header.Get("X-Hub-Signature-256"); !cloudapi.VerifySignature(r.body, sig, secret) {
					t.Fatalf("X-Hub-Signature-256 %q does not verify %s with the subscription's secret", sig, r.body)
				}
				c := n.Entry[0].Changes[0]
				if c.Field != "messages" || c.Value.MessagingProduct != "whatsapp" || c.Value.Metadata.PhoneNumberID != f.s.session || c.Value.Metadata.DisplayPhoneNumber != f.s.phone {
					t.Fatalf("change %+v, want field messages for %s (%s)", c, f.s.session, f.s.phone)
				}
				for _, st := range c.Value.Statuses {
					if st.ID == textID && st.RecipientID == customer && (st.Status == "sent" || st.Status == "delivered") {
						status = &c.Value
					}
				}
				for _, m := range c.Value.Messages {
					if m.ID == inID && m.Type == "text" && m.Text != nil && m.Text.Body == "where is my order?" && m.From == customer {
						message = &c.Value
					}
					if m.Type == "reaction" && m.Reaction != nil && m.Reaction.MessageID == textID && m.Reaction.Emoji == "🎉" && m.From == customer {
						reaction = &c.Value
					}
				}
			}
			return status != nil && message != nil && reaction != nil
		})
		// A read mark in the Cloud API's body marks the incoming message read.
		read := f.send(t, map[string]any{"status": "read", "message_id": inID})
		want(t, read, 200, "")
		if read.obj()["success"] != true {
			t.Fatalf("read mark: %s", read.raw)
		}
		wantMeta(t, f.send(t, map[string]any{"status": "read", "message_id": "nope"}), 404, 100, "message_not_found")
		if c := message.Contacts; len(c) != 1 || c[0].WaID != customer {
			t.Fatalf("the message's contacts %+v", c)
		}
		// The subscription also names session.status, which Meta's payloads have no word for:
		// none was sent (every delivery above parsed as Meta's).
		if raw := string(sink.all()[0].body); strings.Contains(raw, `"type":"session.status"`) {
			t.Fatalf("a standard body went to a meta subscription: %s", raw)
		}
	})
}

// Over a Cloud API number (on the fake Graph API) the front carries what a linked session
// cannot: reply buttons, a list and a template; the number's record is the cloud number's, its
// templates are the synced ones, and Meta's payloads name its phone.
func TestCloudFrontOverACloudNumber(t *testing.T) {
	sideBySide(t)
	num := &cloudNumber{id: "106540352242931", waba: "102290129340331", display: "+1 555-078-3931", token: "EAAJB-front-token", secret: "front-app-secret"}
	fake := newFakeGraph(t, num)
	tg := startGW(t, "--cloud-graph-url", fake.URL(), "--webhook-allow-private")
	admin := tg.token("root", "admin")
	tok := tg.newClient("dora")
	f := frontGW{tg: tg, s: sender{tok: tok, key: tg.newKey(admin, "dora", nil).str("rawKey")}}
	f.s.session = tg.connectCloud(fake, tok, num)
	sink := newHookSink(t)
	sub := tg.do("POST", "/api/client/webhooks", bearerAuth(tok), map[string]any{"url": sink.URL + "/meta", "format": "meta", "events": []string{"message.received"}})
	want(t, sub, 201, "")
	const customer = "16505551299"
	// The customer writes first: the service window is open for free-form messages.
	in, err := fake.Write(num.id, fakegraph.Inbound{From: customer, Name: "Sheena", Text: "Which slot is free?"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "Meta's payload of the incoming message", func() bool {
		for _, r := range sink.all() {
			var n cloudapi.Notification
			if json.Unmarshal(r.body, &n) == nil && len(n.Entry) == 1 && len(n.Entry[0].Changes) == 1 {
				v := n.Entry[0].Changes[0].Value
				if len(v.Messages) == 1 && v.Messages[0].ID == in && v.Metadata.DisplayPhoneNumber == num.phone() && v.Metadata.PhoneNumberID == f.s.session &&
					len(v.Contacts) == 1 && v.Contacts[0].Profile != nil && v.Contacts[0].Profile.Name == "Sheena" &&
					cloudapi.VerifySignature(r.body, r.header.Get("X-Hub-Signature-256"), sub.str("secret")) {
					return true
				}
			}
		}
		return false
	})

	buttons := f.sent(t, map[string]any{"to": customer, "type": "interactive", "interactive": map[string]any{"type": "button",
		"body": map[string]any{"text": "Confirm order 1001?"}, "action": map[string]any{"buttons": []any{
			map[string]any{"type": "reply", "reply": map[string]any{"id": "yes", "title": "Confirm"}},
			map[string]any{"type": "reply", "reply": map[string]any{"id": "no", "title": "Cancel"}}}}}})
	list := f.sent(t, map[string]any{"to": customer, "type": "interactive", "interactive": map[string]any{"type": "list",
		"body": map[string]any{"text": "Pick a slot"}, "action": map[string]any{"button": "Slots", "sections": []any{
			map[string]any{"title": "Monday", "rows": []any{map[string]any{"id": "m9", "title": "9:00"}}}}}}})
	tpl := f.sent(t, map[string]any{"to": customer, "type": "template", "template": map[string]any{"name": "order_update",
		"language": map[string]any{"code": "en_US"}, "components": []any{map[string]any{"type": "body", "parameters": []any{
			map[string]any{"type": "text", "text": "1001"}, map[string]any{"type": "text", "text": "shipped"}}}}}})
	eventually(t, 10*time.Second, "the three messages at the fake Graph API", func() bool {
		got := map[string]cloudapi.SendRequest{}
		for _, s := range fake.Sent(customer) {
			got[s.Request.BizOpaqueCallbackData] = s.Request
		}
		b, l, p := got[buttons], got[list], got[tpl]
		return b.Interactive != nil && b.Interactive.Type == "button" && len(b.Interactive.Action.Buttons) == 2 &&
			l.Interactive != nil && l.Interactive.Type == "list" && l.Interactive.Action.Sections[0].Rows[0].ID == "m9" &&
			p.Template != nil && p.Template.Name == "order_update" && p.Template.Components[0].Parameters[1].Text == "shipped"
	})
	// Polls have no Cloud API body: the front has no way to ask for one, and an edit or a
	// revoke is not a send. The number's record and its templates are the cloud number's.
	rec := tg.do("GET", f.path(f.s.session), bearerAuth(f.s.key), nil)
	want(t, rec, 200, "")
	if rec.str("platform_type") != "CLOUD_API" || rec.str("verified_name") != "Lucky Shrub" || rec.str("display_phone_number") != num.display {
		t.Fatalf("cloud number record %s", rec.raw)
	}
	tpls := tg.do("GET", f.path(f.s.session+"/message_templates"), bearerAuth(f.s.key), nil)
	want(t, tpls, 200, "")
	if d, _ := tpls.obj()["data"].([]any); len(d) != 3 {
		t.Fatalf("templates %s", tpls.raw)
	}
	// A tool polling the list is answered from the last sync for a minute: one Graph read for
	// both calls; the dashboard's template screen syncs at once, and the front then shows it.
	reads := fake.TemplateReads()
	want(t, tg.do("GET", f.path(f.s.session+"/message_templates"), bearerAuth(f.s.key), nil), 200, "")
	if got := fake.TemplateReads(); got != reads {
		t.Fatalf("a second template list within a minute read Meta again (%d reads, %d before)", got, reads)
	}
	fake.AddTemplate(num.waba, cloudapi.MessageTemplate{Name: "pickup_ready", Language: "en_US", Status: "APPROVED", Category: "UTILITY",
		Components: []cloudapi.TemplateComponent{{Type: "BODY", Text: "Order {{1}} is ready"}}})
	want(t, tg.do("GET", "/api/client/cloud/templates", bearerAuth(tok), nil), 200, "")
	tpls = tg.do("GET", f.path(f.s.session+"/message_templates"), bearerAuth(f.s.key), nil)
	if d, _ := tpls.obj()["data"].([]any); len(d) != 4 {
		t.Fatalf("templates after the dashboard's sync %s", tpls.raw)
	}
}
