package main

// Daily work from the dashboard (DESIGN.md section 15): the live event stream, campaigns with
// names and {name}, a webhook's test event and redelivery.

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goccy/go-json"
)

// sseEvent is one event read from GET /api/client/events/stream.
type sseEvent struct {
	ID, Type string
	Body     struct {
		Type string         `json:"type"`
		Data map[string]any `json:"data"`
	}
}

// sseStream reads an event stream in the background.
type sseStream struct {
	mu        sync.Mutex
	events    []sseEvent
	connected bool
	ended     chan struct{}
	cancel    context.CancelFunc
}

func openStream(t *testing.T, tg *testGW, path string, header http.Header) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", tg.url+path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if res.StatusCode != 200 || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/event-stream") {
		cancel()
		t.Fatalf("stream: %d %s", res.StatusCode, res.Header.Get("Content-Type"))
	}
	s := &sseStream{ended: make(chan struct{}), cancel: cancel}
	t.Cleanup(cancel)
	go func() {
		defer close(s.ended)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		var ev sseEvent
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == ": connected":
				s.mu.Lock()
				s.connected = true
				s.mu.Unlock()
			case strings.HasPrefix(line, "id: "):
				ev.ID = line[4:]
			case strings.HasPrefix(line, "event: "):
				ev.Type = line[7:]
			case strings.HasPrefix(line, "data: "):
				if err := json.Unmarshal([]byte(line[6:]), &ev.Body); err != nil {
					t.Errorf("data line %q: %v", line, err)
				}
			case line == "" && ev.Type != "":
				s.mu.Lock()
				s.events = append(s.events, ev)
				s.mu.Unlock()
				ev = sseEvent{}
			}
		}
	}()
	eventually(t, 5*time.Second, "the stream's first line", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.connected
	})
	return s
}

func (s *sseStream) labels(keep func(sseEvent) bool) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.events {
		if keep(e) {
			l := e.Type
			if st, ok := e.Body.Data["status"].(string); ok {
				l += ":" + st
			}
			out = append(out, l)
		}
	}
	return out
}

func TestEventStream(t *testing.T) {
	tg := startGW(t)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	bob := tg.newSender(admin, "bob", "447700900002", nil)

	// The dashboard reads the signed-in user's role here (no probe of an admin route).
	if me := tg.do("GET", "/api/client/me", bearerAuth(s.tok), nil); me.status != 200 || me.str("role") != "client" || me.str("id") != "alice" {
		t.Fatalf("me: %d %s", me.status, me.raw)
	}
	if me := tg.do("GET", "/api/client/me", bearerAuth(admin), nil); me.str("role") != "admin" {
		t.Fatalf("admin's me: %s", me.raw)
	}

	// The token in the query (EventSource) or in the header.
	st := openStream(t, tg, "/api/client/events/stream?token="+s.tok, nil)
	hdr := openStream(t, tg, "/api/client/events/stream", http.Header{"Authorization": {"Bearer " + bob.tok}})
	want(t, tg.do("GET", "/api/client/events/stream", nil, nil), 401, "missing_credentials")

	r := tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": "15550100001", "message": "hi"})
	want(t, r, 200, "")
	id := r.str("message_id")
	ofMsg := func(e sseEvent) bool { return e.Type == "message.status" && e.Body.Data["messageId"] == id }
	eventually(t, 10*time.Second, "queued, sent, delivered on the stream", func() bool { return len(st.labels(ofMsg)) >= 3 })
	want(t, tg.do("POST", "/api/dev/sim/read", nil, map[string]any{"messageId": id}), 200, "")
	eventually(t, 10*time.Second, "read on the stream", func() bool { return len(st.labels(ofMsg)) >= 4 })
	if got := st.labels(ofMsg); !slices.Equal(got, []string{"message.status:queued", "message.status:sent", "message.status:delivered", "message.status:read"}) {
		t.Fatalf("message events %v", got)
	}
	want(t, tg.do("POST", "/api/dev/sim/inbound", nil, map[string]any{"sessionId": s.session, "from": "15550109876", "text": "where is my order?"}), 200, "")
	eventually(t, 10*time.Second, "message.received on the stream", func() bool {
		return len(st.labels(func(e sseEvent) bool {
			return e.Type == "message.received" && e.Body.Data["text"] == "where is my order?"
		})) == 1
	})
	// The events carry the webhook body and an id; bob's stream saw none of alice's.
	st.mu.Lock()
	for _, e := range st.events {
		if e.Body.Type != e.Type || !strings.HasPrefix(e.ID, "evt_") {
			t.Errorf("event %+v", e)
		}
	}
	st.mu.Unlock()
	if got := hdr.labels(func(sseEvent) bool { return true }); len(got) != 0 {
		t.Fatalf("bob's stream got %v", got)
	}

	// A shutdown ends the open streams and does not wait for them.
	start := time.Now()
	tg.stop()
	for _, s := range []*sseStream{st, hdr} {
		select {
		case <-s.ended:
		case <-time.After(5 * time.Second):
			t.Fatal("a stream outlived the shutdown")
		}
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the shutdown took %v with streams open", took)
	}
}

func TestDashboardCampaign(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)

	numbers := []any{map[string]any{"phone": "+49 155 5000 0001", "name": "Anna"}, map[string]any{"phone": "4915550000002", "name": "Ben"}, "4915550000003", "12"}
	r := tg.do("POST", "/api/client/campaigns", bearerAuth(s.tok), map[string]any{"name": "Spring sale", "message": "Hi {name}, the sale is on!", "numbers": numbers, "delay": 0})
	want(t, r, 201, "")
	id := r.str("campaign_id")
	if r.obj()["name"] != "Spring sale" || r.obj()["message"] != "Hi {name}, the sale is on!" {
		t.Fatalf("created: %s", r.raw)
	}
	var done resp
	eventually(t, 20*time.Second, "the campaign completed", func() bool {
		done = tg.do("GET", "/api/client/campaigns/details?id="+id, bearerAuth(s.tok), nil)
		return done.status == 200 && done.obj()["status"] == "completed"
	})
	details := done.obj()["details"].([]any)
	if len(details) != 4 || done.obj()["successful"] != float64(3) || done.obj()["failed"] != float64(1) {
		t.Fatalf("details: %s", done.raw)
	}
	for to, text := range map[string]string{"4915550000001": "Hi Anna, the sale is on!", "4915550000002": "Hi Ben, the sale is on!", "4915550000003": "Hi , the sale is on!"} {
		got := tg.do("GET", "/api/dev/sim/messages?to="+to, nil, nil).obj()["messages"].([]any)
		if len(got) != 1 || got[0].(map[string]any)["text"] != text {
			t.Fatalf("to %s: %v, want %q", to, got, text)
		}
	}
	list := tg.do("GET", "/api/client/campaigns", bearerAuth(s.tok), nil)
	if c := list.obj()["campaigns"].([]any); len(c) != 1 || c[0].(map[string]any)["name"] != "Spring sale" {
		t.Fatalf("list: %s", list.raw)
	}
	want(t, tg.do("GET", "/api/client/campaigns/details?id="+id, bearerAuth(tg.token("bob", "client")), nil), 404, "campaign_not_found")
	want(t, tg.do("GET", "/api/client/campaigns/details", bearerAuth(s.tok), nil), 400, "validation_failed")

	for _, bad := range []map[string]any{
		{"message": "x", "numbers": []string{"4915550000001"}},
		{"name": "n", "numbers": []string{"4915550000001"}},
		{"name": "n", "message": "x"},
		{"name": "n", "message": "x", "numbers": []any{4915550000001}},
		{"name": "n", "message": "x", "numbers": []any{map[string]any{"name": "no phone"}}},
		{"name": strings.Repeat("n", 101), "message": "x", "numbers": []string{"4915550000001"}},
		{"name": "n", "message": "x", "numbers": []string{"4915550000001"}, "delay": -1},
	} {
		want(t, tg.do("POST", "/api/client/campaigns", bearerAuth(s.tok), bad), 400, "validation_failed")
	}
}

func TestWebhookTestAndRedeliver(t *testing.T) {
	sideBySide(t)
	tg := startGW(t, "--webhook-allow-private")
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	sink := newHookSink(t)
	sub := tg.do("POST", "/api/client/webhooks", bearerAuth(s.tok), map[string]any{"url": sink.URL + "/hook", "events": []string{"message.status"}})
	want(t, sub, 201, "")
	subID, secret := sub.str("id"), sub.str("secret")

	test := tg.do("POST", "/api/client/webhooks/test?id="+subID, bearerAuth(s.tok), nil)
	want(t, test, 202, "")
	eventually(t, 10*time.Second, "the test event", func() bool { return len(sink.all()) == 1 })
	got := sink.all()[0]
	if !signed(got, secret) || got.header.Get("webhook-id") != test.str("id") || !strings.Contains(string(got.body), `"type":"webhook.test"`) {
		t.Fatalf("test delivery: %v %s", got.header, got.body)
	}
	if err := eventSchema(t, "webhook.test").Validate(decodeAny(t, got.body)); err != nil {
		t.Fatalf("webhook.test body: %v", err)
	}

	// A message's event, then that event again by its id: the same body and webhook-id.
	want(t, tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": "15550100001", "message": "hi"}), 200, "")
	eventually(t, 10*time.Second, "queued, sent, delivered", func() bool { return len(sink.all()) >= 4 })
	var first map[string]any
	eventually(t, 5*time.Second, "the attempts recorded", func() bool {
		ds := tg.do("GET", "/api/client/webhooks/deliveries?id="+subID, bearerAuth(s.tok), nil).obj()["deliveries"].([]any)
		for _, d := range ds {
			if m := d.(map[string]any); m["type"] == "message.status" {
				first = m
			}
		}
		return len(ds) >= 4
	})
	re := tg.do("POST", "/api/client/webhooks/redeliver", bearerAuth(s.tok), map[string]any{"id": subID, "eventId": first["eventId"]})
	want(t, re, 202, "")
	eventually(t, 10*time.Second, "the redelivery", func() bool { return len(sink.all()) >= 5 })
	var orig, again received
	for _, r := range sink.all() {
		if r.header.Get("webhook-id") == first["id"] {
			if orig.body == nil {
				orig = r
			} else {
				again = r
			}
		}
	}
	if again.body == nil || string(again.body) != string(orig.body) || !signed(again, secret) {
		t.Fatalf("redelivered %q, first %q", again.body, orig.body)
	}

	want(t, tg.do("POST", "/api/client/webhooks/redeliver", bearerAuth(s.tok), map[string]any{"id": subID, "eventId": "evt_nope"}), 404, "event_not_found")
	want(t, tg.do("POST", "/api/client/webhooks/redeliver", bearerAuth(s.tok), map[string]any{"id": subID}), 400, "validation_failed")
	want(t, tg.do("POST", "/api/client/webhooks/test?id=wh_nope", bearerAuth(s.tok), nil), 404, "webhook_not_found")
	want(t, tg.do("POST", "/api/client/webhooks/test", bearerAuth(s.tok), nil), 400, "validation_failed")
	bob := tg.token("bob", "client")
	want(t, tg.do("POST", "/api/client/webhooks/test?id="+subID, bearerAuth(bob), nil), 404, "webhook_not_found")
}

func decodeAny(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
