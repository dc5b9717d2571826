package persist

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

// The receiver splices the webhook body into the entry as it came; it reads back through the
// table like any other record, and the marks are the codec's empty record.
func TestInboxAcceptAndFinish(t *testing.T) {
	for _, impl := range kvImpls() {
		t.Run(impl.name, func(t *testing.T) {
			kv := impl.open(t)
			in, ctx := NewInbox(kv), context.Background()
			at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
			var q domain.InboxSeq
			s1, s2 := q.Next(at), q.Next(at)
			if len(s1) != 20 || s2 <= s1 {
				t.Fatalf("seqs %q, %q: want fixed width, increasing", s1, s2)
			}
			body := []byte("{ \"id\" : 1,\n \"phone\":\"+1 312\" }")
			e := domain.InboxEntry{Seq: s1, Shop: "a.example", UserID: "u1", Topic: "orders/create", MessageID: "m1", ReceivedAt: at, Body: body}
			if err := in.Accept(ctx, e, "d1"); err != nil {
				t.Fatal(err)
			}
			if err := in.Accept(ctx, domain.InboxEntry{Seq: s2, Shop: "a.example", Body: []byte(`{}`)}, ""); err != nil {
				t.Fatal(err)
			}
			got, found, err := in.InboxEntry("a.example", s1)
			if err != nil || !found || string(got.Body) != string(body) || got.MessageID != "m1" || !got.ReceivedAt.Equal(at) {
				t.Fatalf("entry %+v found %v err %v", got, found, err)
			}
			if v, err := kv.Get([]byte("webhook_seen/a.example/d1")); err != nil || string(v) != "\x01{}" {
				t.Fatalf("seen mark %q %v", v, err)
			}
			if !in.Seen("a.example", "d1") || in.Seen("a.example", "d2") || in.Seen("b.example", "d1") {
				t.Fatal("Seen answers wrong")
			}
			if seqs, err := in.PendingInbox("a.example"); err != nil || !slices.Equal(seqs, []string{s1, s2}) {
				t.Fatalf("pending %v %v", seqs, err)
			}

			rec := domain.StoreEvent{N: domain.RecentStoreEvents + 3, Seq: s1, Status: domain.StoreEventSent}
			if err := in.Finish(ctx, "a.example", s1, rec, "order-1"); err != nil {
				t.Fatal(err)
			}
			if _, found, _ := in.InboxEntry("a.example", s1); found {
				t.Fatal("finished entry still in the inbox")
			}
			if !in.AlreadySent("a.example", "order-1") || in.AlreadySent("a.example", "order-2") {
				t.Fatal("AlreadySent answers wrong")
			}
			if _, err := kv.Get([]byte("store_event/a.example/03")); err != nil {
				t.Fatalf("record not in ring slot 03: %v", err)
			}
			if n, err := in.LastEventN("a.example"); err != nil || n != rec.N {
				t.Fatalf("LastEventN = %d, %v", n, err)
			}
			// An entry removed meanwhile (the store was disconnected): nothing is recorded.
			if err := in.Finish(ctx, "a.example", s1, domain.StoreEvent{N: 9}, ""); !errors.Is(err, domain.ErrRecordNotFound) {
				t.Fatalf("finish of a removed entry: %v", err)
			}
			if evs, err := in.RecentEvents("a.example"); err != nil || len(evs) != 1 {
				t.Fatalf("recent events %v %v", evs, err)
			}

			ops, pending, err := in.ShopDataOps("a.example")
			if err != nil || pending != 1 || len(ops) != 2 {
				t.Fatalf("shop data ops %d, pending %d, %v", len(ops), pending, err)
			}
			if err := in.kv.Commit(ctx, ops...); err != nil {
				t.Fatal(err)
			}
			n := 0
			if err := in.Pending(func(string, string) error { n++; return nil }); err != nil || n != 0 {
				t.Fatalf("pending after removal: %d %v", n, err)
			}
		})
	}
}

func TestInboxSeqObserveAndContinue(t *testing.T) {
	at := time.Unix(0, 1000)
	var a, b domain.InboxSeq
	a.Observe("00000000000000005000")
	a.Observe("not a number")
	a.Observe("00000000000000004000") // lower: ignored
	if got := a.Next(at); got != "00000000000000005001" {
		t.Fatalf("after Observe: %s", got)
	}
	b.Continue(&a)
	if got := b.Next(at); got != "00000000000000005002" {
		t.Fatalf("after Continue: %s", got)
	}
}
