package persist

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

func TestWebhooks(t *testing.T) {
	for _, impl := range kvImpls() {
		t.Run(impl.name, func(t *testing.T) { testWebhooks(t, impl.open(t)) })
	}
}

func testWebhooks(t *testing.T, kv KV) {
	ctx := context.Background()
	w := NewWebhooks(kv)
	now := time.Now().UTC()
	subs := []domain.WebhookSubscription{
		{ID: "s1", UserID: "u1", URL: "http://a", Events: []domain.EventType{domain.EventMessageStatus}, CreatedAt: now},
		{ID: "s2", UserID: "u1", URL: "http://b", CreatedAt: now.Add(time.Second)},
		{ID: "s3", UserID: "u1x", URL: "http://c", CreatedAt: now},
	}
	for _, s := range subs {
		if err := w.PutSubscription(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	got, err := w.ListSubscriptionsByOwner("u1")
	if err != nil || len(got) != 2 || got[0].ID != "s1" || got[1].ID != "s2" {
		t.Fatalf("ListSubscriptionsByOwner(u1) = %v, %v", got, err)
	}

	// One event fanned out to two subscriptions in one commit, then more for s1.
	ds := []domain.WebhookDelivery{
		{ID: "m1", SubscriptionID: "s1", Seq: 5, Body: []byte(`{"a":1}`)},
		{ID: "m2", SubscriptionID: "s2", Seq: 6, Body: []byte(`{"a":1}`)},
	}
	if err := w.Enqueue(ctx, ds); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{300, 17} {
		if err := w.Enqueue(ctx, []domain.WebhookDelivery{{ID: "x", SubscriptionID: "s1", Seq: seq}}); err != nil {
			t.Fatal(err)
		}
	}
	if seqs, err := w.Pending("s1"); err != nil || !slices.Equal(seqs, []uint64{5, 17, 300}) {
		t.Fatalf("Pending(s1) = %v, %v", seqs, err)
	}
	heads, maxSeq, err := w.QueueHeads()
	if err != nil || heads["s1"] != 3 || heads["s2"] != 1 || maxSeq != 300 {
		t.Fatalf("QueueHeads = %v %d %v", heads, maxSeq, err)
	}
	d, found, err := w.Delivery("s1", 5)
	if err != nil || !found || d.ID != "m1" || string(d.Body) != `{"a":1}` {
		t.Fatalf("Delivery = %+v %v %v", d, found, err)
	}

	// Attempts: a failure keeps the entry, a success removes it; the ring keeps the last 50.
	if err := w.RecordAttempt(ctx, "s1", 5, false, domain.WebhookAttempt{N: 1, ID: "m1", Status: 500}); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := w.Delivery("s1", 5); !found {
		t.Fatal("a failed attempt removed the delivery")
	}
	if err := w.RecordAttempt(ctx, "s1", 5, true, domain.WebhookAttempt{N: 2, ID: "m1", Status: 200, Delivered: true}); err != nil {
		t.Fatal(err)
	}
	if _, found, _ := w.Delivery("s1", 5); found {
		t.Fatal("a delivered entry is still queued")
	}
	for n := int64(3); n <= 60; n++ {
		if err := w.RecordAttempt(ctx, "s1", 0, false, domain.WebhookAttempt{N: n}); err != nil {
			t.Fatal(err)
		}
	}
	as, err := w.Attempts("s1")
	if err != nil || len(as) != RecentWebhookAttempts || as[0].N != 60 || as[len(as)-1].N != 11 {
		t.Fatalf("Attempts = %d records, first %v, %v", len(as), as[0].N, err)
	}
	if n, err := w.LastAttemptN("s1"); err != nil || n != 60 {
		t.Fatalf("LastAttemptN = %d, %v", n, err)
	}

	// Delete removes the record, the index, the attempts and the queue, and nothing of s2.
	if err := w.DeleteSubscription(ctx, "s1"); err != nil {
		t.Fatal(err)
	}
	if _, err := w.GetSubscription("s1"); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Fatalf("GetSubscription after delete: %v", err)
	}
	if seqs, _ := w.Pending("s1"); len(seqs) != 0 {
		t.Fatalf("queue after delete: %v", seqs)
	}
	if as, _ := w.Attempts("s1"); len(as) != 0 {
		t.Fatalf("attempts after delete: %d", len(as))
	}
	if seqs, _ := w.Pending("s2"); !slices.Equal(seqs, []uint64{6}) {
		t.Fatalf("s2's queue: %v", seqs)
	}
	if got, _ := w.ListSubscriptionsByOwner("u1"); len(got) != 1 {
		t.Fatalf("owner index after delete: %v", got)
	}

}

func TestDeliveriesFrom(t *testing.T) {
	for _, impl := range kvImpls() {
		t.Run(impl.name, func(t *testing.T) {
			w := NewWebhooks(impl.open(t))
			ctx := context.Background()
			var ds []domain.WebhookDelivery
			for seq := uint64(1); seq <= 10; seq++ {
				ds = append(ds, domain.WebhookDelivery{ID: "m", SubscriptionID: "s1", Seq: seq * 16})
			}
			if err := w.Enqueue(ctx, append(ds, domain.WebhookDelivery{ID: "x", SubscriptionID: "s10", Seq: 1})); err != nil {
				t.Fatal(err)
			}
			if err := w.SaveProgress(ctx, "s1", domain.WebhookProgress{Delivered: []uint64{16, 32}}); err != nil {
				t.Fatal(err)
			}
			got, err := w.DeliveriesFrom("s1", 33, 3)
			if err != nil || len(got) != 3 || got[0].Seq != 48 || got[2].Seq != 80 {
				t.Fatalf("DeliveriesFrom(33, 3) = %+v, %v", got, err)
			}
			got, _ = w.DeliveriesFrom("s1", 0, 100)
			if len(got) != 8 || got[0].Seq != 48 || got[7].Seq != 160 {
				t.Fatalf("DeliveriesFrom(0) = %d entries from %d", len(got), got[0].Seq)
			}
		})
	}
}
