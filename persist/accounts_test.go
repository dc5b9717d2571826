package persist

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

// Recount counts, per user, the messages the outbox holds sent at or after the snapshot's Since
// less those it counts there (Recent); for a snapshot read before the margin, those sent after
// the margin; for a user without one, those after the margin. Edits and failures do not count.
func TestAccountsRecount(t *testing.T) {
	kv := NewMemory()
	t0 := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	o, a := outboxAt(kv, t0.Add(time.Minute)), NewAccounts(kv)
	ctx := context.Background()
	ms := func(d time.Duration) int64 { return t0.Add(d).UnixMilli() }
	for _, s := range []domain.Allowance{
		{UserID: "u1", Period: "2026-11", Sent: 7, Mark: 20, At: ms(20 * time.Second), Since: ms(10 * time.Second), Recent: 2},
		{UserID: "u2", Period: "2026-11", Sent: 3, Mark: 3, At: ms(-5 * time.Minute), Since: ms(-5*time.Minute - 10*time.Second)},
	} {
		if err := a.PutAccount(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	send := func(uid string, after time.Duration, kind domain.Kind, status domain.MessageStatus) {
		n++
		e := queued(fmt.Sprintf("m%02d", n), t0.Add(-time.Minute))
		e.UserID, e.Message.Kind = uid, kind
		if err := o.Accept(ctx, &e, ""); err != nil {
			t.Fatal(err)
		}
		at := t0.Add(after)
		if status == domain.MsgSent {
			e.SentAt = domain.MillisOf(at)
		}
		e.SetStatus(status, at)
		o.Settle(e, func(error) {})
	}
	send("u1", 5*time.Second, domain.KindText, domain.MsgSent)  // before Since: counted
	send("u1", 12*time.Second, domain.KindText, domain.MsgSent) // the two the snapshot counts
	send("u1", 15*time.Second, domain.KindText, domain.MsgSent)
	send("u1", 21*time.Second, domain.KindText, domain.MsgSent) // left out
	send("u1", 22*time.Second, domain.KindImage, domain.MsgSent)
	send("u1", 23*time.Second, domain.KindEdit, domain.MsgSent) // not charged
	send("u1", 24*time.Second, domain.KindText, domain.MsgFailed)
	send("u2", -time.Minute, domain.KindText, domain.MsgSent) // before the margin: in its snapshot
	send("u2", time.Second, domain.KindText, domain.MsgSent)
	send("u3", 3*time.Second, domain.KindText, domain.MsgSent)
	o.Flush()

	now := t0.Add(30 * time.Second)
	got, err := a.Recount(now, 40*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"u1": 9, "u2": 4, "u3": 1}
	checkRecounted(t, got, want, "2026-11", ms(23*time.Second))
	slices.Sort(got["u1"].Sent)
	if w := []domain.Millis{domain.Millis(ms(12 * time.Second)), domain.Millis(ms(15 * time.Second)), domain.Millis(ms(21 * time.Second)), domain.Millis(ms(22 * time.Second))}; !slices.Equal(got["u1"].Sent, w) || got["u1"].Allowance.Since != ms(10*time.Second) {
		t.Fatalf("u1's window: %v since %d, want %v since %d", got["u1"].Sent, got["u1"].Allowance.Since, w, ms(10*time.Second))
	}

	// A snapshot written from a recount is exact: the next recount adds nothing.
	for _, r := range got {
		if err := a.PutAccount(ctx, r.Allowance); err != nil {
			t.Fatal(err)
		}
	}
	again, err := a.Recount(now.Add(time.Second), 40*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for uid, sent := range want {
		if r := again[uid]; r.Allowance.Sent != sent {
			t.Fatalf("%s recounted again: %+v, want %d sent", uid, r.Allowance, sent)
		}
	}
	// In December none of November's messages counts.
	if dec, err := a.Recount(time.Date(2026, 12, 1, 0, 0, 1, 0, time.UTC), 40*time.Second); err != nil || len(dec) != 0 {
		t.Fatalf("December's recount: %+v %v, want none", dec, err)
	}
}

// A message sent, counted and then failed by its network (a late failure: its outcome record
// rewritten failed, its send time kept) is counted in the snapshot's Recent: the recount finds
// it too, or a message the snapshot left out is not counted.
func TestAccountsRecountCountsASentMessageFailedLate(t *testing.T) {
	kv := NewMemory()
	t0 := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	o, a := outboxAt(kv, t0.Add(time.Minute)), NewAccounts(kv)
	ctx := context.Background()
	ms := func(d time.Duration) int64 { return t0.Add(d).UnixMilli() }
	// The snapshot counts m1 (sent at 12 s, in its window): Recent 1.
	if err := a.PutAccount(ctx, domain.Allowance{UserID: "u1", Period: "2026-11", Sent: 5, Mark: 20, At: ms(20 * time.Second), Since: ms(10 * time.Second), Recent: 1}); err != nil {
		t.Fatal(err)
	}
	for i, after := range []time.Duration{12 * time.Second, 21 * time.Second} {
		e := queued(fmt.Sprintf("m%d", i+1), t0.Add(-time.Minute))
		e.UserID = "u1"
		if err := o.Accept(ctx, &e, ""); err != nil {
			t.Fatal(err)
		}
		at := t0.Add(after)
		e.SentAt = domain.MillisOf(at)
		e.SetStatus(domain.MsgSent, at)
		if i == 0 {
			e.SetStatus(domain.MsgFailed, at.Add(time.Second)) // the network's failure after the send
		}
		o.Settle(e, func(error) {})
	}
	o.Flush()
	got, err := a.Recount(t0.Add(30*time.Second), 40*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r := got["u1"]; r.Allowance.Sent != 6 {
		t.Fatalf("u1 recounted %+v, want 6 sent (m2 left out of the snapshot's 5)", r.Allowance)
	}
}

// A boot that wrote some of its recounted snapshots and then stopped (a write refused) leaves
// the next boot's recount exact: the snapshots it wrote do not move the recount's bound past
// the messages of the users it did not write.
func TestAccountsRecountAfterAPartialWrite(t *testing.T) {
	kv := NewMemory()
	t0 := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	o, a := outboxAt(kv, t0.Add(time.Minute)), NewAccounts(kv)
	ctx := context.Background()
	ms := func(d time.Duration) int64 { return t0.Add(d).UnixMilli() }
	for _, s := range []domain.Allowance{
		{UserID: "u1", Period: "2026-11", Sent: 7, Mark: 20, At: ms(20 * time.Second), Since: ms(10 * time.Second)},
		{UserID: "u2", Period: "2026-11", Sent: 3, Mark: 20, At: ms(15 * time.Second), Since: ms(5 * time.Second)},
	} {
		if err := a.PutAccount(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	for i, uid := range []string{"u1", "u2", "u3"} {
		e := queued(fmt.Sprintf("m%d", i+1), t0.Add(-time.Minute))
		e.UserID = uid
		if err := o.Accept(ctx, &e, ""); err != nil {
			t.Fatal(err)
		}
		at := t0.Add(time.Duration(16+i) * time.Second) // each left out of its user's snapshot
		e.SentAt = domain.MillisOf(at)
		e.SetStatus(domain.MsgSent, at)
		o.Settle(e, func(error) {})
	}
	o.Flush()
	want := map[string]int64{"u1": 8, "u2": 4, "u3": 1}
	// The process was down five minutes; the boot writes u1's snapshot and fails on u2's.
	first, err := a.Recount(t0.Add(5*time.Minute), 40*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for uid, sent := range want {
		if first[uid].Allowance.Sent != sent {
			t.Fatalf("%s: %+v, want %d sent", uid, first[uid].Allowance, sent)
		}
	}
	if err := a.PutAccount(ctx, first["u1"].Allowance); err != nil {
		t.Fatal(err)
	}
	// The next boot, a minute later.
	again, err := a.Recount(t0.Add(6*time.Minute), 40*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for uid, sent := range want {
		if again[uid].Allowance.Sent != sent {
			t.Fatalf("recounted again, %s: %+v, want %d sent", uid, again[uid].Allowance, sent)
		}
	}
}
