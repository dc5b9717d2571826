package engine_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/actors/webhook"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/media"
	"github.com/gateway/gateway/persist"
)

func TestEventsToALoopbackReceiver(t *testing.T) {
	ctx := context.Background()
	rcv := newTestReceiver(t)

	// A private address is refused unless --webhook-allow-private.
	strict := newEvents(t, persist.NewMemory(), false, webhook.Policy{})
	if _, err := strict.ev.Subscribe(ctx, "u1", rcv.URL+"/hook", domain.EventTypes()); !errors.Is(err, domain.ErrWebhookBlocked) {
		t.Fatalf("Subscribe(loopback) without allow-private = %v, want ErrWebhookBlocked", err)
	}
	strict.stop()

	// Quick retries: on a loaded machine an attempt may fail (and be sent again under the same
	// webhook-id, as Standard Webhooks allows); the default 1 s doubling backoff could outlast
	// the wait below.
	kv := persist.NewMemory()
	h := newEvents(t, kv, true, webhook.Policy{BaseBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	defer h.stop()
	for _, bad := range []struct {
		url    string
		events []domain.EventType
		want   error
	}{
		{"ftp://example.com/", domain.EventTypes(), domain.ErrWebhookURL},
		{rcv.URL, nil, domain.ErrValidation},
		{rcv.URL, []domain.EventType{"message.nope"}, domain.ErrValidation},
	} {
		if _, err := h.ev.Subscribe(ctx, "u1", bad.url, bad.events); !errors.Is(err, bad.want) {
			t.Errorf("Subscribe(%q, %v) = %v, want %v", bad.url, bad.events, err, bad.want)
		}
	}
	sub, err := h.ev.Subscribe(ctx, "u1", rcv.URL+"/hook", domain.EventTypes())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sub.Secret, "whsec_") {
		t.Fatalf("secret %q", sub.Secret)
	}
	if key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(sub.Secret, "whsec_")); len(key) != 32 {
		t.Fatalf("secret of %d bytes", len(key))
	}
	// Another user's subscription that wants only sessions: it gets none of u1's events.
	other, err := h.ev.Subscribe(ctx, "u2", rcv.URL+"/other", []domain.EventType{domain.EventSessionStatus})
	if err != nil {
		t.Fatal(err)
	}

	// One message's lifecycle, published as the core does: one status after the other.
	for _, st := range []string{"queued", "sent", "delivered", "read"} {
		if err := h.ev.Publish(ctx, "u1", domain.Event{Type: domain.EventMessageStatus, Data: domain.MessageStatusData{
			MessageID: "m1", To: "15550001111", SessionID: "s1", Status: st, At: time.Now()}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.ev.ReceiveMessage(ctx, domain.InboundMessage{ID: "in1", UserID: "u1", SessionID: "s1", From: "15550002222", Type: "text", Text: "hello"}); err != nil {
		t.Fatal(err)
	}
	if err := h.ev.Publish(ctx, "u1", domain.Event{Type: domain.EventSessionStatus, Data: domain.SessionStatusData{SessionID: "s1", Status: "DISCONNECTED", Reason: "link dropped"}}); err != nil {
		t.Fatal(err)
	}
	// A redelivery (an attempt whose answer was lost) repeats the webhook-id with the same
	// body: receivers dedupe on it. Each event counts once.
	unique := func() []hook {
		var out []hook
		first := map[string][]byte{}
		for _, hk := range rcv.got() {
			if b, seen := first[hk.ID]; seen {
				if !bytes.Equal(b, hk.Body) {
					t.Fatalf("webhook-id %s redelivered with another body", hk.ID)
				}
				continue
			}
			first[hk.ID] = hk.Body
			out = append(out, hk)
		}
		return out
	}
	for deadline := time.Now().Add(30 * time.Second); len(unique()) != 6; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			as, _ := h.ev.Deliveries("u1", sub.ID)
			t.Fatalf("timed out waiting for six events: got %d (%d posts); attempts %+v", len(unique()), len(rcv.got()), as)
		}
	}
	hooks := unique()
	var statuses []string
	for _, hk := range hooks[:4] {
		if hk.Type != "message.status" {
			t.Fatalf("type %q", hk.Type)
		}
		statuses = append(statuses, hk.Data["status"].(string))
	}
	if !slices.Equal(statuses, []string{"queued", "sent", "delivered", "read"}) {
		t.Fatalf("statuses in order %v", statuses)
	}
	if hooks[4].Type != "message.received" || hooks[4].Data["text"] != "hello" || hooks[4].Data["from"] != "15550002222" {
		t.Fatalf("message.received: %+v", hooks[4])
	}
	if hooks[5].Type != "session.status" || hooks[5].Data["reason"] != "link dropped" {
		t.Fatalf("session.status: %+v", hooks[5])
	}
	ids := map[string]bool{}
	for _, hk := range hooks {
		if err := verifyFromSpec(sub.Secret, hk); err != nil {
			t.Fatalf("delivery %s: %v", hk.ID, err)
		}
		if ids[hk.ID] {
			t.Fatalf("webhook-id %s twice", hk.ID)
		}
		ids[hk.ID] = true
	}
	verifyWithNode(t, sub.Secret, hooks)

	// The incoming message is listed; the attempts are recorded; the list hides the secret.
	var in []domain.LogEntry
	err = persist.NewMessageLog(kv).ScanLog("u1", domain.LogScan{}, func(_ string, e domain.LogEntry) (bool, error) {
		in = append(in, e)
		return true, nil
	})
	if err != nil || len(in) != 1 || in[0].Dir != domain.DirIn || in[0].In.Text != "hello" {
		t.Fatalf("history = %+v, %v", in, err)
	}
	waitUntil(t, 5*time.Second, "six delivered attempts recorded", func() bool {
		as, _ := h.ev.Deliveries("u1", sub.ID)
		n := 0
		for _, a := range as {
			if a.Delivered {
				n++
			}
		}
		return n == 6
	})
	if _, err := h.ev.Deliveries("u2", sub.ID); !errors.Is(err, domain.ErrWebhookNotFound) {
		t.Fatalf("another user's deliveries: %v", err)
	}
	list := h.ev.List("u1")
	if len(list) != 1 || list[0].Secret != "" || list[0].ID != sub.ID {
		t.Fatalf("List = %+v", list)
	}

	// After Delete nothing more arrives.
	if err := h.ev.Delete(ctx, "u2", sub.ID); !errors.Is(err, domain.ErrWebhookNotFound) {
		t.Fatalf("Delete by another user = %v", err)
	}
	if err := h.ev.Delete(ctx, "u1", sub.ID); err != nil {
		t.Fatal(err)
	}
	if err := h.ev.Publish(ctx, "u1", domain.Event{Type: domain.EventMessageStatus, Data: domain.MessageStatusData{MessageID: "m2"}}); err != nil {
		t.Fatal(err)
	}
	if err := h.ev.Publish(ctx, "u2", domain.Event{Type: domain.EventSessionStatus, Data: domain.SessionStatusData{SessionID: "s9", Status: "CONNECTED"}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "u2's event", func() bool { return len(rcv.got()) == 7 })
	if last := rcv.got()[6]; last.Type != "session.status" {
		t.Fatalf("after delete got %+v", last)
	}
	_ = other
}

// The crash test: a child process commits events while the receiver is down, and is killed with
// SIGKILL; a new "process" on the same data delivers every one of them, in order, a repeat only
// under the same webhook-id.

const crashChildEnv = "GATEWAY_EVENTS_CRASH_CHILD"

func TestEventsSurviveKill9(t *testing.T) {
	if os.Getenv(crashChildEnv) != "" {
		crashChild()
		return
	}
	if testing.Short() {
		t.Skip("process test")
	}
	dir := t.TempDir()
	rcv := newTestReceiver(t)
	const n = 300

	// Set up the subscription, then hand the data to the child.
	{
		kv, err := persist.OpenBadger(filepath.Join(dir, "db"), persist.BadgerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		h := newEvents(t, kv, true, webhook.Policy{})
		sub, err := h.ev.Subscribe(context.Background(), "u1", rcv.URL+"/hook", domain.EventTypes())
		if err != nil {
			t.Fatal(err)
		}
		h.stop()
		if err := kv.Close(); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "secret"), []byte(sub.Secret), 0o600)
	}

	// The receiver accepts the first deliveries, then goes down (500, then refusing), and the
	// child is killed while it retries.
	var accepted int
	cmd := exec.Command(os.Args[0], "-test.run=^TestEventsSurviveKill9$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+dir, "GATEWAY_EVENTS_CRASH_URL="+rcv.URL, "GATEWAY_EVENTS_CRASH_N="+strconv.Itoa(n))
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	var seen bytes.Buffer
	for !strings.Contains(seen.String(), "committed 100\n") {
		k, err := out.Read(buf)
		if err != nil {
			t.Fatalf("child: %v (%s)", err, seen.String())
		}
		seen.Write(buf[:k])
	}
	rcv.setDown(true, false) // 500s
	for !strings.Contains(seen.String(), "committed "+strconv.Itoa(n)+"\n") {
		k, err := out.Read(buf)
		if err != nil {
			t.Fatalf("child: %v", err)
		}
		seen.Write(buf[:k])
	}
	rcv.setDown(true, true) // connections dropped
	time.Sleep(200 * time.Millisecond)
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	accepted = len(rcv.got())
	if accepted == n {
		t.Fatalf("the receiver took all %d before the kill: the test proves nothing", n)
	}

	// Restart on the same data with the receiver back.
	rcv.setDown(false, false)
	kv, err := persist.OpenBadger(filepath.Join(dir, "db"), persist.BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer kv.Close()
	h := newEvents(t, kv, true, webhook.Policy{})
	defer h.stop()
	waitUntil(t, 20*time.Second, "every event", func() bool {
		g := rcv.got()
		return len(g) > 0 && g[len(g)-1].Data["messageId"] == fmt.Sprintf("m%04d", n-1)
	})
	secret, _ := os.ReadFile(filepath.Join(dir, "secret"))
	idOf := map[string]string{}
	next := 0
	for _, hk := range rcv.got() {
		if err := verifyFromSpec(string(secret), hk); err != nil {
			t.Fatal(err)
		}
		m := hk.Data["messageId"].(string)
		if prev, ok := idOf[m]; ok {
			if prev != hk.ID {
				t.Fatalf("%s delivered again under another webhook-id (%s, then %s)", m, prev, hk.ID)
			}
			continue
		}
		if want := fmt.Sprintf("m%04d", next); m != want {
			t.Fatalf("out of order: got %s, want %s", m, want)
		}
		idOf[m] = hk.ID
		next++
	}
	if next != n {
		t.Fatalf("%d of %d events arrived", next, n)
	}
	t.Logf("%d accepted before the kill; all %d arrived after the restart (%d requests in all)", accepted, n, len(rcv.got()))
}

// crashChild publishes N events (printing each commit) with a fast retry policy, then waits to
// be killed.
func crashChild() {
	dir := os.Getenv(crashChildEnv)
	n, _ := strconv.Atoi(os.Getenv("GATEWAY_EVENTS_CRASH_N"))
	kv, err := persist.OpenBadger(filepath.Join(dir, "db"), persist.BadgerOptions{})
	if err != nil {
		panic(err)
	}
	hw, _ := actor.NewEngine(actor.NewEngineConfig())
	guard := media.Guard{AllowPrivate: true}
	ev, err := engine.NewEvents(engine.EventsConfig{
		Store: persist.NewWebhooks(kv), Actors: hw, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Poster: webhook.NewHTTPPoster(guard.Dialer(time.Second), 0, 0), Guard: guard,
		Policy: webhook.Policy{BaseBackoff: 20 * time.Millisecond, MaxBackoff: 100 * time.Millisecond},
	})
	if err != nil {
		panic(err)
	}
	if err := ev.Boot(context.Background()); err != nil {
		panic(err)
	}
	for i := range n {
		if err := ev.Publish(context.Background(), "u1", domain.Event{Type: domain.EventMessageStatus,
			Data: domain.MessageStatusData{MessageID: fmt.Sprintf("m%04d", i), Status: "sent"}}); err != nil {
			panic(err)
		}
		fmt.Printf("committed %d\n", i+1)
		if i == 99 {
			time.Sleep(300 * time.Millisecond) // let the receiver take some
		}
	}
	select {}
}

func TestPreparedEventGoesOutOnlyOnceCommitted(t *testing.T) {
	ctx := context.Background()
	rcv := newTestReceiver(t)
	kv := persist.NewMemory()
	h := newEvents(t, kv, true, webhook.Policy{})
	defer h.stop()
	if _, err := h.ev.Subscribe(ctx, "u1", rcv.URL, []domain.EventType{domain.EventMessageStatus}); err != nil {
		t.Fatal(err)
	}
	p, err := h.ev.Prepare("u1", domain.Event{Type: domain.EventMessageStatus, Data: domain.MessageStatusData{MessageID: "m1", Status: "sent"}})
	if err != nil || p.Len() != 1 {
		t.Fatalf("Prepare = %d deliveries, %v", p.Len(), err)
	}
	if err := h.ev.Commit(ctx, []engine.PreparedEvent{p}); err != nil {
		t.Fatal(err)
	}
	h.ev.Committed(p)
	waitUntil(t, 5*time.Second, "the event", func() bool { return len(rcv.got()) == 1 })
	if none, err := h.ev.Prepare("u2", domain.Event{Type: domain.EventMessageStatus}); err != nil || none.Len() != 0 {
		t.Fatalf("a user without subscriptions: %d deliveries, %v", none.Len(), err)
	}
}

func TestSecretsAreSealedAtRest(t *testing.T) {
	ctx := context.Background()
	rcv := newTestReceiver(t)
	kv := persist.NewMemory()
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	guard := media.Guard{AllowPrivate: true}
	store := persist.NewWebhooks(kv)
	ev, err := engine.NewEvents(engine.EventsConfig{
		Store: store, Actors: hw, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Poster: webhook.NewHTTPPoster(nil, 0, 0), Guard: guard, Secrets: engine.NewSecretBox(persist.NewSealer(nil, "")),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ev.Stop(ctx)
	sub, err := ev.Subscribe(ctx, "u1", rcv.URL, []domain.EventType{domain.EventSessionStatus})
	if err != nil {
		t.Fatal(err)
	}
	stored, err := store.GetSubscription(sub.ID)
	if err != nil || stored.Secret == "" || strings.Contains(stored.Secret, strings.TrimPrefix(sub.Secret, "whsec_")) {
		t.Fatalf("stored secret %q (%v): not sealed", stored.Secret, err)
	}
	if got := ev.List("u1"); len(got) != 1 || got[0].Secret != "" {
		t.Fatalf("List shows a secret: %+v", got)
	}
	if err := ev.Publish(ctx, "u1", domain.Event{Type: domain.EventSessionStatus, Data: domain.SessionStatusData{SessionID: "s1", Status: "CONNECTED"}}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the event", func() bool { return len(rcv.got()) == 1 })
	if err := verifyFromSpec(sub.Secret, rcv.got()[0]); err != nil {
		t.Fatal(err)
	}
}
