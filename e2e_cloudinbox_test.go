package main

// The Cloud API's webhook is answered 200 only once what it carries is durable (Meta never sends
// again a notification it got a 200 for): the gateway runs in process on records whose commits
// the test holds or fails, and Meta (the fake Graph API) must not get its 200 while the
// incoming message's or the receipt's commit is held; a failed commit is a 503 with
// Retry-After, and the notification sent again is kept once.

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/cloudapi"
	"github.com/gateway/gateway/network/cloud/fakegraph"
	"github.com/gateway/gateway/persist"
)

// holdKV is the records in memory, whose commits that write under a prefix wait while held,
// or fail.
type holdKV struct {
	*persist.Memory
	mu      sync.Mutex
	prefix  string
	gate    chan struct{} // set: matching commits wait until it is closed
	fail    error         // set: matching commits fail with it
	waiting atomic.Int32
}

func (k *holdKV) Health() error { return nil }

// hold makes the commits writing under prefix wait; the function returned releases them.
func (k *holdKV) hold(prefix string) (release func()) {
	gate := make(chan struct{})
	k.mu.Lock()
	k.prefix, k.gate, k.fail = prefix, gate, nil
	k.mu.Unlock()
	return func() {
		k.mu.Lock()
		k.prefix, k.gate = "", nil
		k.mu.Unlock()
		close(gate)
	}
}

// failing makes the commits writing under prefix fail with err (err nil: no more).
func (k *holdKV) failing(prefix string, err error) {
	k.mu.Lock()
	k.prefix, k.gate, k.fail = prefix, nil, err
	k.mu.Unlock()
}

func (k *holdKV) Commit(ctx context.Context, ops ...persist.Op) error {
	k.mu.Lock()
	prefix, gate, fail := k.prefix, k.gate, k.fail
	k.mu.Unlock()
	if prefix != "" && writesUnder(ops, prefix) {
		if fail != nil {
			return fail
		}
		if gate != nil {
			k.waiting.Add(1)
			defer k.waiting.Add(-1)
			select {
			case <-gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	return k.Memory.Commit(ctx, ops...)
}

func writesUnder(ops []persist.Op, prefix string) bool {
	for _, op := range ops {
		if !op.IfAbsent && !op.IfPresent && bytes.HasPrefix(op.Key, []byte(prefix)) {
			return true
		}
	}
	return false
}

// startGWKV starts an in-process gateway on kv.
func startGWKV(t testing.TB, kv persist.Durable, args ...string) *testGW {
	t.Helper()
	base := []string{"--data", t.TempDir(), "--addr", "127.0.0.1:0", "--log-level", "warn", "--log-requests=false"}
	args = append(base, args...)
	args = append(args, outboxArgs(args)...)
	tg := &testGW{t: t, gwState: &gwState{args: args, client: &http.Client{Timeout: 30 * time.Second}, kv: kv}}
	tg.start()
	t.Cleanup(tg.stop)
	return tg
}

// stays fails t if cond stops holding within a while (what must not happen while a commit is
// held).
func stays(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for range 30 {
		if !cond() {
			t.Fatal(what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestCloudWebhookAnsweredOnceDurable(t *testing.T) {
	sideBySide(t)
	num := &cloudNumber{id: "106540352200123", waba: "102290129300123", display: "+1 555-010-0123", token: "EAAJB-inbox", secret: "inbox-secret"}
	fake := newFakeGraph(t, num)
	kv := &holdKV{Memory: persist.NewMemory()}
	tg := startGWKV(t, kv, "--cloud-graph-url", fake.URL(), "--webhook-allow-private")
	admin := tg.token("root", "admin")
	tok := tg.newClient("dora")
	key := tg.newKey(admin, "dora", nil).str("rawKey")
	sid := tg.connectCloud(fake, tok, num)
	sink := newHookSink(t)
	sub := tg.do("POST", "/api/client/webhooks", bearerAuth(tok), map[string]any{"url": sink.URL + "/hook", "events": []string{"message.received"}})
	want(t, sub, 201, "")
	received := func(id string) int {
		n := 0
		for _, e := range sink.events(t, sub.str("secret")) {
			if e.Type == "message.received" && e.Data["id"] == id {
				n++
			}
		}
		return n
	}
	const customer = "16505550123"
	kept := func(id string) int {
		items, _ := tg.historyPage(t, "/api/v1/messages?direction=in&limit=100", keyAuth(key))
		n := 0
		for _, it := range items {
			if it["id"] == id {
				n++
			}
		}
		return n
	}

	// The customer writes: Meta gets no 200 while the message's commit is held, and once it
	// has one the message is in the history.
	release := kv.hold("msg_in/")
	before := fake.Delivered()
	in, err := fake.Write(num.id, fakegraph.Inbound{From: customer, Name: "Dora's customer", Text: "is it in stock?"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the incoming message's commit held", func() bool { return kv.waiting.Load() > 0 })
	stays(t, "Meta got its 200 before the incoming message was kept", func() bool { return fake.Delivered() == before })
	release()
	eventually(t, 10*time.Second, "the webhook answered", func() bool { return fake.Delivered() > before })
	if n := kept(in); n != 1 {
		t.Fatalf("answered 200 with the incoming message kept %d times", n)
	}

	// Our answer, then the customer reads it: no 200 while the read receipt's commit is held.
	r := tg.do("POST", "/api/v1/messages/send", keyAuth(key), map[string]any{"phone": customer, "message": "yes, 3 left"})
	want(t, r, 200, "")
	id := r.str("message_id")
	eventually(t, 10*time.Second, "the answer delivered", func() bool {
		return tg.do("GET", "/api/v1/messages/"+id, keyAuth(key), nil).str("status") == "delivered" && fake.Pending() == 0
	})
	var wamid string
	for _, s := range fake.Sent(customer) {
		if s.Request.BizOpaqueCallbackData == id {
			wamid = s.ID
		}
	}
	if os.Getenv("GATEWAY_OUTBOX") != "badger" {
		// On the outbox's log (--outbox log, the default) a receipt is a record and a slot in the log, not a
		// commit the KV can hold: the message reads as read the moment Meta has its 200 (the
		// webhook waits for the slot's write; the read comes from the file).
		before = fake.Delivered()
		if err := fake.Read(wamid); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the webhook answered", func() bool { return fake.Delivered() > before })
		if st := tg.do("GET", "/api/v1/messages/"+id, keyAuth(key), nil).str("status"); st != "read" {
			t.Fatalf("answered 200 with the message %s, the read receipt not recorded", st)
		}
	} else {
		receipt := []byte("outbox_receipt/" + id + "/read")
		release = kv.hold("outbox_receipt/")
		before = fake.Delivered()
		if err := fake.Read(wamid); err != nil {
			t.Fatal(err)
		}
		eventually(t, 10*time.Second, "the read receipt's commit held", func() bool { return kv.waiting.Load() > 0 })
		stays(t, "Meta got its 200 before the read receipt was recorded", func() bool { return fake.Delivered() == before })
		release()
		eventually(t, 10*time.Second, "the webhook answered", func() bool { return fake.Delivered() > before })
		if _, err := kv.Get(receipt); err != nil {
			t.Fatalf("answered 200 without the read receipt recorded: %v", err)
		}
	}

	// A commit that fails is a 503 with Retry-After; Meta sends the notification again (here
	// twice more) and its message and its status are recorded once.
	body := fake.Body(num.id, cloudapi.Value{
		Contacts: []cloudapi.WebhookContact{{Profile: &cloudapi.Profile{Name: "Dora's customer"}, WaID: customer}},
		Messages: []cloudapi.InboundMessage{{From: customer, ID: "wamid.retried-1", Timestamp: cloudapi.Timestamp(time.Now()),
			Type: cloudapi.TypeText, Text: &cloudapi.Text{Body: "and in blue?"}}},
		Statuses: []cloudapi.Status{{ID: wamid, Status: cloudapi.StatusRead, Timestamp: cloudapi.Timestamp(time.Now()),
			RecipientID: customer, BizOpaqueCallbackData: id}},
	})
	post := func() resp {
		return tg.do("POST", "/api/cloud/webhook?session="+sid, auth{cloudapi.SignatureHeader: cloudapi.Sign(body, num.secret)}, body)
	}
	kv.failing("msg_in/", errors.New("disk full"))
	r = post()
	if r.status != 503 || r.header.Get("Retry-After") == "" {
		t.Fatalf("a webhook whose message could not be kept: %d %q %s", r.status, r.header.Get("Retry-After"), r.raw)
	}
	kv.failing("", nil)
	want(t, post(), 200, "")
	want(t, post(), 200, "")
	if n := kept("wamid.retried-1"); n != 1 {
		t.Fatalf("a notification sent three times kept its message %d times", n)
	}
	// Its message.received went once: a later message's event comes after any second one
	// (a subscription's events go in order).
	later, err := fake.Write(num.id, fakegraph.Inbound{From: customer, Text: "thanks"})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the later message's event", func() bool { return received(later) == 1 })
	if n := received("wamid.retried-1"); n != 1 {
		t.Fatalf("a notification sent three times made %d message.received events", n)
	}
	reads := 0
	for _, h := range tg.do("GET", "/api/v1/messages/"+id, keyAuth(key), nil).obj()["history"].([]any) {
		if h.(map[string]any)["status"] == "read" {
			reads++
		}
	}
	if reads != 1 {
		t.Fatalf("the read receipt sent three times is in the message's history %d times", reads)
	}
	// A STOP whose opt-out cannot be saved is not taken either: 503, and once Meta sends it
	// again the customer is on the list (an opt-out lost after a 200 would keep them messaged).
	stop := fake.Body(num.id, cloudapi.Value{
		Contacts: []cloudapi.WebhookContact{{Profile: &cloudapi.Profile{Name: "Dora's customer"}, WaID: customer}},
		Messages: []cloudapi.InboundMessage{{From: customer, ID: "wamid.stop-1", Timestamp: cloudapi.Timestamp(time.Now()),
			Type: cloudapi.TypeText, Text: &cloudapi.Text{Body: "STOP"}}},
	})
	postStop := func() resp {
		return tg.do("POST", "/api/cloud/webhook?session="+sid, auth{cloudapi.SignatureHeader: cloudapi.Sign(stop, num.secret)}, stop)
	}
	optedOut := func() int {
		os, _ := tg.do("GET", "/api/v1/optouts", keyAuth(key), nil).obj()["optouts"].([]any)
		return len(os)
	}
	kv.failing("optout/", errors.New("disk full"))
	if r := postStop(); r.status != 503 {
		t.Fatalf("a STOP whose opt-out could not be saved: %d %s", r.status, r.raw)
	}
	kv.failing("", nil)
	want(t, postStop(), 200, "")
	if n := optedOut(); n != 1 {
		t.Fatalf("STOP sent again after a 503: %d opted out, want 1", n)
	}
	if n := kept("wamid.stop-1"); n != 1 {
		t.Fatalf("the STOP kept %d times", n)
	}

	// A forged notification is still refused first.
	r = tg.do("POST", "/api/cloud/webhook?session="+sid, auth{cloudapi.SignatureHeader: cloudapi.Sign(body, "not-the-secret")}, body)
	want(t, r, 401, "")
}
