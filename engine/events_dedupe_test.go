package engine_test

import (
	"cmp"
	"context"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/actors/webhook"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/media"
	"github.com/gateway/gateway/persist"
)

// A message's outcome or receipt is recorded only once its event is committed: a kill -9
// between the two has the boot send the message again and publish the same status again. Its
// delivery then carries the webhook-id it had (a receiver dedupes it); a queued event (which
// may come again for another reason: routed again, waiting for a contact) and another
// subscription's delivery do not share it.
func TestStatusEventPublishedAgainKeepsItsWebhookID(t *testing.T) {
	ctx := context.Background()
	h := newEvents(t, persist.NewMemory(), true, webhook.Policy{})
	defer h.stop()
	var subs []string
	for _, url := range []string{"http://127.0.0.1:9/a", "http://127.0.0.1:9/b"} {
		s, err := h.ev.Subscribe(ctx, "u1", url, []domain.EventType{domain.EventMessageStatus})
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s.ID)
	}
	publish := func(msg string, st domain.MessageStatus) {
		t.Helper()
		p, err := h.ev.Prepare("u1", domain.Event{Type: domain.EventMessageStatus, Data: domain.MessageStatusData{MessageID: msg, Status: st}})
		if err != nil || p.Len() != 2 {
			t.Fatalf("Prepare = %d deliveries, %v", p.Len(), err)
		}
		if err := h.ev.Commit(ctx, []engine.PreparedEvent{p}); err != nil {
			t.Fatal(err)
		}
	}
	for _, st := range []domain.MessageStatus{domain.MsgQueued, domain.MsgSent, domain.MsgDelivered, domain.MsgRead, domain.MsgFailed} {
		publish("m1", st)
		publish("m1", st) // again, after a kill -9 lost its record
	}
	publish("m2", domain.MsgSent)
	ids := map[string]string{} // webhook-id → subscription/status/message (the first to use it)
	for _, sub := range subs {
		ds, err := h.store.DeliveriesFrom(sub, 0, 100)
		if err != nil || len(ds) != 11 {
			t.Fatalf("%d deliveries, %v", len(ds), err)
		}
		for i, d := range ds {
			var what string
			switch {
			case i == 10:
				what = sub + "/sent/m2"
			case i < 2:
				what = sub + "/queued/" + d.ID // its own
			default:
				what = sub + "/" + []string{"sent", "delivered", "read", "failed"}[i/2-1] + "/m1"
			}
			if other, ok := ids[d.ID]; ok && other != what {
				t.Fatalf("webhook-id %s: %s and %s", d.ID, other, what)
			}
			ids[d.ID] = what
		}
	}
	// Each of the four statuses twice under one id per subscription, queued twice under two.
	if len(ids) != 2*(2+4+1) {
		t.Fatalf("%d webhook-ids: %v", len(ids), ids)
	}
}

// forwardRecorder is a broker that takes every event (EventForwarder).
type forwardRecorder struct {
	mu  sync.Mutex
	got []domain.EventRecord
}

func (f *forwardRecorder) Forward(_ context.Context, evs []domain.EventRecord) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, evs...)
	return len(evs), nil
}

// A message's status published again (the boot's resend after a kill -9 between its event and
// its record) goes to the broker under the Nats-Msg-Id of the first (DedupeID), which
// JetStream's duplicate window drops; another
// user's message of the same id, another status, and a queued event do not share it. A failed
// or cancelled status is kept beside its event (FinalStatuses: the boot settles the message so).
func TestStatusEventPublishedAgainKeepsItsBrokerID(t *testing.T) {
	ctx := context.Background()
	kv := persist.NewMemory()
	store := persist.NewWebhooks(kv)
	fwd := &forwardRecorder{}
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	guard := media.Guard{}
	ev, err := engine.NewEvents(engine.EventsConfig{Store: store, Actors: hw, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Forward: fwd,
		Poster: webhook.NewHTTPPoster(guard.Dialer(5*time.Second), 0, 0), Guard: guard})
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Boot(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		c, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		ev.Stop(c)
	}()
	at := time.UnixMilli(1_790_000_000_000).UTC()
	publish := func(uid, msg string, st domain.MessageStatus) {
		t.Helper()
		d := domain.MessageStatusData{MessageID: msg, Status: st, At: at}
		if st == domain.MsgFailed {
			d.Code, d.Error = "network_error", "refused"
		}
		if err := ev.Publish(ctx, uid, domain.Event{Type: domain.EventMessageStatus, Data: d}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 { // again, after a kill -9 lost the record
		publish("u1", "m1", domain.MsgQueued)
		publish("u1", "m1", domain.MsgSent)
		publish("u1", "m2", domain.MsgFailed)
	}
	publish("u2", "m1", domain.MsgSent)
	publish("u1", "m1", domain.MsgDelivered)
	waitUntil(t, 5*time.Second, "the events forwarded", func() bool {
		fwd.mu.Lock()
		defer fwd.mu.Unlock()
		return len(fwd.got) == 8
	})
	fwd.mu.Lock()
	got := slices.Clone(fwd.got)
	fwd.mu.Unlock()
	// (The broker outbox keeps DedupeID for a forward after a restart: persist's
	// TestEventFinalsAndDedupeIDs; here the forwarder removes them as they are taken.)
	for i, set := range [][]domain.EventRecord{got} {
		if len(set) != 8 {
			t.Fatalf("set %d: %d events", i, len(set))
		}
		msgID := func(r domain.EventRecord) string { return cmp.Or(r.DedupeID, r.ID) }
		ids := map[string]bool{}
		for _, r := range set {
			ids[msgID(r)] = true
		}
		// queued twice under two ids; sent and failed each under one; u2's sent, delivered.
		if len(ids) != 6 || msgID(set[1]) != msgID(set[4]) || msgID(set[2]) != msgID(set[5]) || set[0].DedupeID != "" || msgID(set[6]) == msgID(set[1]) {
			t.Fatalf("set %d: Nats-Msg-Ids %v", i, set)
		}
		if set[1].ID == set[4].ID {
			t.Fatalf("set %d: the journal's ids are the same: %s", i, set[1].ID)
		}
	}
	finals, err := store.FinalStatuses([]domain.OutboxEntry{{ID: "m1", UserID: "u1"}, {ID: "m2", UserID: "u1"}, {ID: "m2", UserID: "u2"}})
	if err != nil {
		t.Fatal(err)
	}
	want := domain.FinalStatus{UserID: "u1", MessageID: "m2", Status: domain.MsgFailed, At: at, Code: "network_error", Error: "refused"}
	if len(finals) != 1 || finals["m2"] != want {
		t.Fatalf("final statuses %+v", finals)
	}
}

// A caller may choose a message's id and use it again once the old message's record is gone
// (7 days): the new message's statuses are not the old one's, so their deliveries and broker
// messages get ids of their own (a receiver deduping by webhook-id, JetStream by Nats-Msg-Id,
// would drop them), while the same message's status published again keeps its ids. The
// acceptance time tells the two apart (MessageStatusData.Accepted, read back from the outbox
// by a boot's resend).
func TestStatusOfAMessageIDUsedAgainGetsIDsOfItsOwn(t *testing.T) {
	ctx := context.Background()
	store := persist.NewWebhooks(persist.NewMemory())
	fwd := &forwardRecorder{}
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	guard := media.Guard{AllowPrivate: true}
	ev, err := engine.NewEvents(engine.EventsConfig{Store: store, Actors: hw, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Forward: fwd,
		Poster: webhook.NewHTTPPoster(guard.Dialer(5*time.Second), 0, 0), Guard: guard})
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Boot(ctx); err != nil {
		t.Fatal(err)
	}
	defer func() {
		c, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		ev.Stop(c)
	}()
	sub, err := ev.Subscribe(ctx, "u1", "http://127.0.0.1:9/a", []domain.EventType{domain.EventMessageStatus})
	if err != nil {
		t.Fatal(err)
	}
	first := domain.Millis(1_790_000_000_000)
	again := first + domain.Millis(8*24*time.Hour/time.Millisecond) // the id used again, 8 days on
	for _, accepted := range []domain.Millis{first, first, again} {
		d := domain.MessageStatusData{MessageID: "m1", Status: domain.MsgSent, Accepted: accepted, At: accepted.Time()}
		if err := ev.Publish(ctx, "u1", domain.Event{Type: domain.EventMessageStatus, Data: d}); err != nil {
			t.Fatal(err)
		}
	}
	ds, err := store.DeliveriesFrom(sub.ID, 0, 10) // refused by its receiver: all still queued
	if err != nil || len(ds) != 3 {
		t.Fatalf("%d deliveries, %v", len(ds), err)
	}
	if ds[0].ID != ds[1].ID || ds[2].ID == ds[0].ID {
		t.Fatalf("webhook-ids: the message's sent twice %s, %s; the new message's %s", ds[0].ID, ds[1].ID, ds[2].ID)
	}
	waitUntil(t, 5*time.Second, "the events forwarded", func() bool {
		fwd.mu.Lock()
		defer fwd.mu.Unlock()
		return len(fwd.got) == 3
	})
	fwd.mu.Lock()
	got := slices.Clone(fwd.got)
	fwd.mu.Unlock()
	if got[0].DedupeID == "" || got[0].DedupeID != got[1].DedupeID || got[2].DedupeID == got[0].DedupeID {
		t.Fatalf("Nats-Msg-Ids: the message's sent twice %s, %s; the new message's %s", got[0].DedupeID, got[1].DedupeID, got[2].DedupeID)
	}
}
