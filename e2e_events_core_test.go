package main

// Events out driven by the core itself (issue "Events out", must-shows): a v1 send's
// message.status queued, sent, delivered, then read; an incoming message; a dropped link.

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-json"
)

// hookEvent is one received event, its signature checked.
type hookEvent struct {
	Type string         `json:"type"`
	Data map[string]any `json:"data"`
}

func (s *hookSink) events(t *testing.T, secret string) []hookEvent {
	t.Helper()
	var out []hookEvent
	for _, r := range s.all() {
		if !signed(r, secret) {
			t.Fatalf("bad signature on %s", r.body)
		}
		var ev hookEvent
		if err := json.Unmarshal(r.body, &ev); err != nil {
			t.Fatal(err)
		}
		out = append(out, ev)
	}
	return out
}

func labels(evs []hookEvent, keep func(hookEvent) bool) []string {
	var out []string
	for _, e := range evs {
		if keep(e) {
			l := e.Type
			if s, ok := e.Data["status"].(string); ok {
				l += ":" + s
			}
			out = append(out, l)
		}
	}
	return out
}

func TestEventsFromTheCore(t *testing.T) {
	sideBySide(t)
	tg := startGW(t, "--webhook-allow-private")
	sink := newHookSink(t)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	all := []string{"message.status", "message.received", "session.status", "campaign.progress", "campaign.completed", "store.event"}
	sub := tg.do("POST", "/api/client/webhooks", bearerAuth(s.tok), map[string]any{"url": sink.URL + "/hook", "events": all})
	want(t, sub, 201, "")
	secret := sub.str("secret")

	// One v1 send: queued, sent, delivered, in that order; then read.
	r := tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": "15550100001", "message": "hi"})
	want(t, r, 200, "")
	id := r.str("message_id")
	ofMsg := func(e hookEvent) bool { return e.Type == "message.status" && e.Data["messageId"] == id }
	eventually(t, 10*time.Second, "queued, sent, delivered", func() bool { return len(labels(sink.events(t, secret), ofMsg)) >= 3 })
	want(t, tg.do("POST", "/api/dev/sim/read", nil, map[string]any{"messageId": id}), 200, "")
	eventually(t, 10*time.Second, "read", func() bool { return len(labels(sink.events(t, secret), ofMsg)) >= 4 })
	got := labels(sink.events(t, secret), ofMsg)
	if !slices.Equal(got, []string{"message.status:queued", "message.status:sent", "message.status:delivered", "message.status:read"}) {
		t.Fatalf("message events %v", got)
	}

	// A customer writes: message.received with the text, and the message in the v1 list.
	in := tg.do("POST", "/api/dev/sim/inbound", nil, map[string]any{"sessionId": s.session, "from": "15550109876", "text": "where is my order?"})
	want(t, in, 200, "")
	eventually(t, 10*time.Second, "message.received", func() bool {
		for _, e := range sink.events(t, secret) {
			if e.Type == "message.received" && e.Data["text"] == "where is my order?" && e.Data["from"] == "15550109876" {
				return true
			}
		}
		return false
	})
	list := tg.do("GET", "/api/v1/messages?direction=in", keyAuth(s.key), nil)
	want(t, list, 200, "")
	if !strings.Contains(string(list.raw), "where is my order?") {
		t.Fatalf("incoming list: %s", list.raw)
	}

	// The sim drops the link: DISCONNECTED with its reason, then CONNECTED.
	want(t, tg.do("POST", "/api/dev/sim/drop", nil, map[string]any{"sessionId": s.session}), 200, "")
	ofSession := func(e hookEvent) bool { return e.Type == "session.status" }
	eventually(t, 15*time.Second, "DISCONNECTED then CONNECTED", func() bool {
		ls := labels(sink.events(t, secret), ofSession)
		i := slices.Index(ls, "session.status:DISCONNECTED")
		return i >= 0 && slices.Contains(ls[i:], "session.status:CONNECTED")
	})
	for _, e := range sink.events(t, secret) {
		if e.Type == "session.status" && e.Data["status"] == "DISCONNECTED" && e.Data["reason"] == nil {
			t.Fatalf("DISCONNECTED without a reason: %v", e.Data)
		}
	}
}

// signed tells whether a received event carries the Standard Webhooks signature of secret
// (HMAC-SHA256 of "id.timestamp.body", written from the specification).
func signed(r received, secret string) bool {
	key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(r.header.Get("webhook-id") + "." + r.header.Get("webhook-timestamp") + "."))
	mac.Write(r.body)
	return r.header.Get("webhook-signature") == "v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
