package persist

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

// The messages a cloud session has to send again are kept per session until Resent, and read
// back after a reopen (a restart).
func TestSendLogResends(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	due := time.Date(2026, 11, 28, 18, 0, 0, 0, time.UTC)
	b := openTestBadger(t, dir, FsyncBatch)
	l := NewSendLog(b)
	for _, r := range []struct{ sid, id string }{{"s1", "m1"}, {"s1", "m2"}, {"s10", "m3"}} {
		if err := l.ResendLater(ctx, r.sid, r.id, domain.CloudResend{Due: due, Failed: "wamid." + r.id}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Resent(ctx, "s1", "m2"); err != nil {
		t.Fatal(err)
	}
	b.Close()
	l = NewSendLog(openTestBadger(t, dir, FsyncBatch))
	got := map[string]domain.CloudResend{}
	if err := l.Resends("s1", func(id string, r domain.CloudResend) error { got[id] = r; return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || !got["m1"].Due.Equal(due) || got["m1"].Failed != "wamid.m1" {
		t.Fatalf("s1's resends: %v", got)
	}
}

// A waiting message released to the session its contact wrote to (Requeue) is its one accept
// record written again at the same key: its history entry says the new session and way, its
// Idempotency-Key's hash stays, a boot finds it once as it is now (marked or not), and its
// outcome keeps the Cloud API's pricing beside where its body is.
func TestOutboxRequeueRewritesTheAcceptRecord(t *testing.T) {
	for _, impl := range kvImpls() {
		t.Run(impl.name, func(t *testing.T) {
			kv := impl.open(t)
			clock := &testClock{}
			t0 := time.Now().Truncate(time.Millisecond)
			clock.set(t0)
			o, _ := bootOutbox(t, kv, clock)
			ctx := context.Background()
			const hash = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
			var ids []string
			for i, marked := range []bool{false, true} {
				e := queued(fmt.Sprintf("w%d", i), t0)
				e.SessionID, e.From, e.Via, e.ViaReason, e.Waiting = "cloud1", "15550000001", domain.ViaCloud, domain.ViaCold, true
				if err := o.Accept(ctx, &e, hash); err != nil {
					t.Fatal(err)
				}
				if marked {
					clock.add(markAfter + time.Second)
					if err := o.Checkpoint(); err != nil {
						t.Fatal(err)
					}
				}
				e.SessionID, e.From, e.Via, e.ViaReason, e.Waiting = "linked1", "4915100000001", domain.ViaLinked, domain.ViaWarm, false
				e.CreatedAt = domain.MillisOf(clock.now().Add(time.Hour)) // the outbox keys it where it was accepted
				if err := o.Requeue(ctx, e); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, e.ID)
			}
			check := func(o *Outbox, when string) {
				t.Helper()
				for _, id := range ids {
					got, err := o.Get(id)
					if err != nil {
						t.Fatalf("%s: %s: %v", when, id, err)
					}
					if got.SessionID != "linked1" || got.From != "4915100000001" || got.Via != domain.ViaLinked ||
						got.ViaReason != domain.ViaWarm || got.Waiting || got.CreatedAt != domain.MillisOf(t0) || got.Status != domain.MsgQueued {
						t.Errorf("%s: %s reads as %+v", when, id, got)
					}
					if rec, err := o.IdemOf(id); err != nil || rec.BodyHash != hash {
						t.Errorf("%s: %s's Idempotency-Key record %+v, %v", when, id, rec, err)
					}
				}
				n := 0
				_ = kv.Scan([]byte(messageLogTable+"/"), func([]byte, []byte) error { n++; return nil })
				if n != len(ids) {
					t.Errorf("%s: %d history records, want %d (one per message)", when, n, len(ids))
				}
			}
			check(o, "requeued")
			o, p := bootOutbox(t, kv, clock)
			if !slices.Equal(p, ids) {
				t.Fatalf("after a crash, pending %v, want %v", p, ids)
			}
			check(o, "after a crash")
			for _, id := range ids {
				e, _ := o.Get(id)
				e.NetworkID, e.Pricing = "wamid."+id, "utility"
				e.SetStatus(domain.MsgSent, clock.now())
				o.Settle(e, func(error) {})
			}
			o.Flush()
			for _, id := range ids {
				got, err := o.Get(id)
				if err != nil || got.Status != domain.MsgSent || got.Pricing != "utility" || got.Via != domain.ViaLinked {
					t.Errorf("settled: %s reads as %+v, %v", id, got, err)
				}
			}
			if _, p = bootOutbox(t, kv, clock); len(p) != 0 {
				t.Fatalf("after every outcome, pending %v", p)
			}
		})
	}
}
