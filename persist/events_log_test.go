package persist

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

// plainKV hides a KV's ScanFrom: the typed stores then take the path of a store that cannot
// seek (JetStream).
type plainKV struct{ KV }

func TestEventLog(t *testing.T) {
	impls := append(kvImpls(), kvImpl{"memory-without-seek", func(t *testing.T) KV { return plainKV{NewMemory()} }})
	for _, impl := range impls {
		t.Run(impl.name, func(t *testing.T) { testEventLog(t, impl.open(t)) })
	}
}

func rec(seq uint64, uid string) domain.EventRecord {
	return domain.EventRecord{Seq: seq, ID: fmt.Sprintf("evt_%016x", seq), UserID: uid, Type: domain.EventMessageStatus,
		Body: fmt.Appendf(nil, `{"type":"message.status","data":{"n":%d,"q":"\"x\""}}`, seq)}
}

func seqs(recs []domain.EventRecord) []uint64 {
	var out []uint64
	for _, r := range recs {
		out = append(out, r.Seq)
	}
	return out
}

func testEventLog(t *testing.T, kv KV) {
	ctx := context.Background()
	w := NewWebhooks(kv)
	// u1's events journaled and forwarded, u/x's (a user id with a slash) only journaled, u1x's
	// only forwarded; with a delivery in the same commits.
	var journaled, forwarded []domain.EventRecord
	for seq := uint64(1); seq <= 12; seq++ {
		switch seq % 3 {
		case 0:
			journaled = append(journaled, rec(seq, "u/x"))
		case 1:
			r := rec(seq, "u1")
			journaled, forwarded = append(journaled, r), append(forwarded, r)
		case 2:
			forwarded = append(forwarded, rec(seq, "u1x"))
		}
	}
	ds := []domain.WebhookDelivery{{ID: "m1", SubscriptionID: "s1", Seq: 1, Body: []byte(`{}`)}}
	if err := w.AppendEvents(ctx, ds, journaled, forwarded); err != nil {
		t.Fatal(err)
	}
	if p, err := w.Pending("s1"); err != nil || len(p) != 1 {
		t.Fatalf("the delivery: %v, %v", p, err)
	}
	j, err := w.JournalFrom("u1", 4, 100)
	if err != nil || !slices.Equal(seqs(j), []uint64{4, 7, 10}) {
		t.Fatalf("JournalFrom(u1, 4) = %v, %v", seqs(j), err)
	}
	if w := rec(4, "u1"); j[0].ID != w.ID || j[0].UserID != w.UserID || j[0].Type != w.Type || string(j[0].Body) != string(w.Body) {
		t.Fatalf("record %+v", j[0])
	}
	if j, err := w.JournalFrom("u1", 0, 2); err != nil || !slices.Equal(seqs(j), []uint64{1, 4}) {
		t.Fatalf("JournalFrom(u1, 0, 2) = %v, %v", seqs(j), err)
	}
	if j, err := w.JournalFrom("u/x", 0, 100); err != nil || !slices.Equal(seqs(j), []uint64{3, 6, 9, 12}) {
		t.Fatalf("JournalFrom(u/x) = %v, %v", seqs(j), err)
	}
	if j, err := w.JournalFrom("u1x", 0, 100); err != nil || len(j) != 0 {
		t.Fatalf("JournalFrom(u1x) = %v, %v (forwarded only)", seqs(j), err)
	}
	if n, err := w.OutboxLen(); err != nil || n != 8 {
		t.Fatalf("OutboxLen = %d, %v", n, err)
	}
	out, err := w.OutboxFrom(2, 5)
	if err != nil || !slices.Equal(seqs(out), []uint64{2, 4, 5, 7, 8}) {
		t.Fatalf("OutboxFrom(2) limit 5 = %v, %v", seqs(out), err)
	}
	if err := w.DeleteOutbox(ctx, seqs(out[:3])); err != nil {
		t.Fatal(err)
	}
	if out, err := w.OutboxFrom(0, 100); err != nil || !slices.Equal(seqs(out), []uint64{1, 7, 8, 10, 11}) {
		t.Fatalf("OutboxFrom after the delete = %v, %v", seqs(out), err)
	}
	if out, err := w.OutboxFrom(7, 2); err != nil || !slices.Equal(seqs(out), []uint64{7, 8}) {
		t.Fatalf("OutboxFrom(7) limit 2 = %v, %v", seqs(out), err)
	}

	for want := uint64(1); want <= 3; want++ {
		if got, err := w.NextEventEpoch(ctx); err != nil || got != want {
			t.Fatalf("NextEventEpoch = %d, %v; want %d", got, err, want)
		}
	}

	until := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	for _, uid := range []string{"u1", "u/x"} {
		if err := w.MarkWatched(ctx, uid, until); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.MarkWatched(ctx, "gone", time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	marks, err := w.WatchMarks()
	if err != nil || len(marks) != 2 || !marks["u1"].Equal(until) || !marks["u/x"].Equal(until) {
		t.Fatalf("WatchMarks = %v, %v", marks, err)
	}

	if err := w.AppendEvents(ctx, nil, []domain.EventRecord{{Seq: 1, UserID: "u1"}}, nil); err == nil {
		t.Fatal("a record without id and body was written")
	}
}

// A message's failed or cancelled status is kept in its event's commit (also when the commit
// is split: a large batch), and read back by user and message; an event's broker id (DedupeID)
// is kept with it in the broker outbox.
func TestEventFinalsAndDedupeIDs(t *testing.T) {
	for _, impl := range kvImpls() {
		t.Run(impl.name, func(t *testing.T) {
			ctx := context.Background()
			w := NewWebhooks(impl.open(t))
			at := time.UnixMilli(1_790_000_000_123).UTC()
			ds := make([]domain.WebhookDelivery, maxCommitOps+10)
			for i := range ds {
				ds[i] = domain.WebhookDelivery{ID: fmt.Sprint("d", i), SubscriptionID: "s1", Seq: uint64(i + 1), Body: []byte(`{}`)}
			}
			r := rec(1, "u1")
			r.DedupeID = "sts_abc"
			finals := []domain.FinalStatus{
				{UserID: "u1", MessageID: "m1", Status: domain.MsgFailed, At: at, Code: "network_error", Error: "refused"},
				{UserID: "u/x", MessageID: "m/1", Status: domain.MsgCancelled, At: at},
			}
			if err := w.AppendEvents(ctx, ds, nil, []domain.EventRecord{r}, finals...); err != nil {
				t.Fatal(err)
			}
			got, err := w.FinalStatuses([]domain.OutboxEntry{{ID: "m1", UserID: "u1"}, {ID: "m1", UserID: "u2"}, {ID: "m/1", UserID: "u/x"}, {ID: "m2", UserID: "u1"}})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 2 || got["m1"] != finals[0] || got["m/1"] != finals[1] {
				t.Fatalf("finals %+v", got)
			}
			out, err := w.OutboxFrom(0, 10)
			if err != nil || len(out) != 1 || out[0].DedupeID != "sts_abc" || out[0].ID != r.ID {
				t.Fatalf("outbox %+v, %v", out, err)
			}
			bad := domain.FinalStatus{UserID: "u1", MessageID: "m3", Status: domain.MsgSent, At: at}
			if err := w.AppendEvents(ctx, nil, nil, nil, bad); err == nil {
				t.Fatal("a sent status kept as final")
			}
		})
	}
}

// A message's failed or cancelled status kept with its event (event_final) is deleted by its
// outcome's record, in the record's own commit (no commit more): once the record is there no
// boot reads it, and it stayed for its 7 days. A sent outcome deletes nothing (the hot path
// writes what it wrote).
func TestOutcomeRecordDeletesItsKeptFinalStatus(t *testing.T) {
	for _, impl := range kvImpls() {
		t.Run(impl.name, func(t *testing.T) {
			ctx := context.Background()
			kv := impl.open(t)
			at := time.UnixMilli(1_790_000_000_123).UTC()
			w, o := NewWebhooks(kv), outboxAt(kv, at.Add(time.Minute))
			var es []domain.OutboxEntry
			var finals []domain.FinalStatus
			for i, st := range []domain.MessageStatus{domain.MsgFailed, domain.MsgCancelled, domain.MsgSent} {
				e := queued(fmt.Sprint("m/", i), at)
				e.UserID = "u/x"
				if err := o.Accept(ctx, &e, ""); err != nil {
					t.Fatal(err)
				}
				e.SetStatus(st, at.Add(time.Second))
				es = append(es, e)
				if st != domain.MsgSent {
					finals = append(finals, domain.FinalStatus{UserID: e.UserID, MessageID: e.ID, Status: st, At: at})
				}
			}
			if err := w.AppendEvents(ctx, nil, nil, nil, finals...); err != nil {
				t.Fatal(err)
			}
			// One commit each: the record and the kept status's deletion together.
			kept, parts := o.prepareBatch([]bgWrite{{o: o, id: es[0].ID, entry: settleOf(&es[0])}, {o: o, id: es[2].ID, entry: settleOf(&es[2])}}, true)
			if len(kept) != 2 || len(parts) != 2 {
				t.Fatalf("%d writes in %d commits, want 2 in 2", len(kept), len(parts))
			}
			deletes := func(p bgPart) (n int) {
				for _, op := range p.ops {
					if op.Delete && strings.HasPrefix(string(op.Key), eventFinalTable+"/") {
						n++
					}
				}
				return n
			}
			if deletes(parts[0]) != 1 || deletes(parts[1]) != 0 {
				t.Fatalf("kept statuses deleted: failed's commit %d, sent's %d (want 1, 0)", deletes(parts[0]), deletes(parts[1]))
			}
			done := make(chan error, len(es))
			for _, e := range es {
				o.Settle(e, func(err error) { done <- err })
			}
			for range es {
				if err := <-done; err != nil {
					t.Fatal(err)
				}
			}
			if got, err := w.FinalStatuses(es); err != nil || len(got) != 0 {
				t.Fatalf("kept statuses after their records: %+v %v", got, err)
			}
			for _, e := range es {
				if got, err := o.Get(e.ID); err != nil || got.Status != e.Status {
					t.Fatalf("%s: %+v %v", e.ID, got.Status, err)
				}
			}
		})
	}
}
