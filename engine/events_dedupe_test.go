package engine_test

import (
	"context"
	"testing"

	"github.com/gateway/gateway/actors/webhook"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
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
