package main

// Events out end to end (DESIGN.md section 10): subscriptions through the API, events published
// by the core reaching a loopback receiver signed and in order, each body valid against the
// OpenAPI document's webhooks section, recent deliveries, and incoming messages in the v1 list.

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/goccy/go-json"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/httpapi/openapitest"
)

type received struct {
	header http.Header
	body   []byte
}

type hookSink struct {
	*httptest.Server
	mu  sync.Mutex
	got []received
}

func newHookSink(t *testing.T) *hookSink {
	s := &hookSink{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		s.got = append(s.got, received{header: r.Header.Clone(), body: body})
		s.mu.Unlock()
		w.WriteHeader(200)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *hookSink) all() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got)
}

// eventSchema compiles the webhooks section's body schema of event type typ.
func eventSchema(t *testing.T, typ string) *jsonschema.Schema {
	t.Helper()
	sch, err := openapitest.Schema("webhooks", typ, "post", "requestBody", "content", "application/json", "schema")
	if err != nil {
		t.Fatalf("webhooks/%s: %v", typ, err)
	}
	return sch
}

func TestWebhookURLOnAPrivateAddressIsRefused(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	tok := tg.token("alice", "client")
	r := tg.do("POST", "/api/client/webhooks", bearerAuth(tok), map[string]any{"url": "http://127.0.0.1:9/hook", "events": []string{"message.status"}})
	want(t, r, 400, "webhook_url_blocked")
	r = tg.do("POST", "/api/client/webhooks", bearerAuth(tok), map[string]any{"url": "http://10.0.0.1/hook", "events": []string{"message.status"}})
	want(t, r, 400, "webhook_url_blocked")
}

func TestWebhooksEndToEnd(t *testing.T) {
	sideBySide(t)
	tg := startGW(t, "--webhook-allow-private")
	sink := newHookSink(t)
	tok := tg.token("alice", "client")
	admin := tg.token("root", "admin")

	want(t, tg.do("POST", "/api/client/webhooks", bearerAuth(tok), map[string]any{"url": sink.URL}), 400, "validation_failed")
	want(t, tg.do("POST", "/api/client/webhooks", bearerAuth(tok), map[string]any{"url": sink.URL, "events": []string{"nope"}}), 400, "validation_failed")
	want(t, tg.do("POST", "/api/client/webhooks", bearerAuth(tok), map[string]any{"url": "ftp://x", "events": []string{"store.event"}}), 400, "invalid_webhook_url")
	want(t, tg.do("POST", "/api/client/webhooks", nil, map[string]any{"url": sink.URL, "events": []string{"store.event"}}), 401, "missing_credentials")

	var types []string
	for _, et := range domain.EventTypes() {
		types = append(types, string(et))
	}
	created := tg.do("POST", "/api/client/webhooks", bearerAuth(tok), map[string]any{"url": sink.URL + "/hook", "events": types})
	want(t, created, 201, "")
	id, secret := created.str("id"), created.str("secret")

	list := tg.do("GET", "/api/client/webhooks", bearerAuth(tok), nil)
	want(t, list, 200, "")
	if strings.Contains(string(list.raw), secret) {
		t.Fatal("the list shows the secret")
	}

	// The core publishes: one message's lifecycle, an incoming message, and one event of every
	// other type.
	ctx := context.Background()
	ev := tg.g.Events()
	for _, st := range []string{"queued", "sent", "delivered", "read"} {
		if err := ev.Publish(ctx, "alice", domain.Event{Type: domain.EventMessageStatus, Data: domain.MessageStatusData{
			MessageID: "m1", To: "15550001111", SessionID: "s1", Status: st, At: time.Now()}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := ev.ReceiveMessage(ctx, domain.InboundMessage{ID: "in1", UserID: "alice", SessionID: "s1", From: "15550002222", Type: "text", Text: "hello there"}); err != nil {
		t.Fatal(err)
	}
	others := []domain.Event{
		{Type: domain.EventSessionStatus, Data: domain.SessionStatusData{SessionID: "s1", Status: "DISCONNECTED", Reason: "the link dropped"}},
		{Type: domain.EventSessionStatus, Data: domain.SessionStatusData{SessionID: "s1", Status: "CONNECTED", Phone: "15550001111"}},
		{Type: domain.EventCampaignProgress, Data: domain.CampaignEventData{CampaignID: "c1", Status: "running", TotalRequested: 3, TotalProcessed: 1, Successful: 1}},
		{Type: domain.EventCampaignCompleted, Data: domain.CampaignEventData{CampaignID: "c1", Status: "completed", TotalRequested: 3, TotalProcessed: 3, Successful: 3}},
		{Type: domain.EventStoreEvent, Data: domain.StoreEventData{Shop: "demo.myshopify.com", Topic: "orders/create", OrderID: 1001, Outcome: "skipped", Reason: "no phone"}},
		{Type: domain.EventSessionWarning, Data: domain.SessionWarningData{SessionID: "s1", Reason: domain.WarnBanEnded, Until: time.Now().Add(24 * time.Hour)}},
	}
	for _, e := range others {
		if err := ev.Publish(ctx, "alice", e); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "eleven events", func() bool { return len(sink.all()) == 11 })

	schemas := map[string]*jsonschema.Schema{}
	var order []string
	for _, r := range sink.all() {
		if !signed(r, secret) {
			t.Fatalf("bad signature on %s", r.body)
		}
		var env struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		if err := json.Unmarshal(r.body, &env); err != nil {
			t.Fatal(err)
		}
		if schemas[env.Type] == nil {
			schemas[env.Type] = eventSchema(t, env.Type)
		}
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		if err := schemas[env.Type].Validate(inst); err != nil {
			t.Errorf("%s body does not match the webhooks section: %v\n%s", env.Type, err, r.body)
		}
		label := env.Type
		if s, ok := env.Data["status"].(string); ok {
			label += ":" + s
		}
		order = append(order, label)
	}
	wantOrder := []string{"message.status:queued", "message.status:sent", "message.status:delivered", "message.status:read",
		"message.received", "session.status:DISCONNECTED", "session.status:CONNECTED", "campaign.progress:running",
		"campaign.completed:completed", "store.event", "session.warning"}
	if !slices.Equal(order, wantOrder) {
		t.Fatalf("order:\n got %v\nwant %v", order, wantOrder)
	}

	eventually(t, 5*time.Second, "eleven attempts recorded", func() bool {
		r := tg.do("GET", "/api/client/webhooks/deliveries?id="+id, bearerAuth(tok), nil)
		d, _ := r.obj()["deliveries"].([]any)
		return r.status == 200 && len(d) == 11
	})
	want(t, tg.do("GET", "/api/client/webhooks/deliveries?id="+id, bearerAuth(tg.token("bob", "client")), nil), 404, "webhook_not_found")
	want(t, tg.do("GET", "/api/client/webhooks/deliveries", bearerAuth(tok), nil), 400, "validation_failed")

	// The incoming message in the v1 list (scope read_messages, which new keys get by default).
	raw := tg.newKey(admin, "alice", nil).str("rawKey")
	in := tg.do("GET", "/api/v1/messages?direction=in&since="+time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), keyAuth(raw), nil)
	want(t, in, 200, "")
	msgs, _ := in.obj()["messages"].([]any)
	if len(msgs) != 1 || msgs[0].(map[string]any)["text"] != "hello there" {
		t.Fatalf("incoming messages: %s", in.raw)
	}
	want(t, tg.do("GET", "/api/v1/messages?direction=sideways", keyAuth(raw), nil), 400, "validation_failed")
	narrow := tg.newKey(admin, "alice", map[string]any{"scopes": []string{"send_text"}}).str("rawKey")
	want(t, tg.do("GET", "/api/v1/messages?direction=in", keyAuth(narrow), nil), 403, "insufficient_scope")

	metrics := tg.do("GET", "/metrics", nil, nil)
	for _, m := range []string{"gateway_webhook_events_queued_total 11", "gateway_webhook_deliveries_total 11", "gateway_webhook_pending 0",
		"gateway_webhook_attempts_failed_total 0", "gateway_webhook_delivery_lag_seconds_count 11"} {
		if !strings.Contains(string(metrics.raw), m+"\n") {
			t.Errorf("/metrics lacks %q", m)
		}
	}

	want(t, tg.do("DELETE", "/api/client/webhooks?id="+id, bearerAuth(tg.token("bob", "client")), nil), 404, "webhook_not_found")
	want(t, tg.do("DELETE", "/api/client/webhooks?id="+id, bearerAuth(tok), nil), 200, "")
	want(t, tg.do("DELETE", "/api/client/webhooks?id="+id, bearerAuth(tok), nil), 404, "webhook_not_found")
}
