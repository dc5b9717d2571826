package natskv_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
)

// oldRelease is the store as the release before pages sees it: no page scanner (its boot and
// reads know outbox_status only).
type oldRelease struct{ persist.KV }

// A minted id whose first outcome is a record (a node with --nats-outcome-records) and whose
// later outcome (a late failure) is paged by a node without it: the read by id answers the
// newer (it preferred the record, whatever its age).
func TestOutcomeNewerOfRecordAndPage(t *testing.T) {
	kv := openPaged(t, "r21a")
	paging := persist.NewOutbox(kv)
	if _, err := paging.Pending(); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	e := acceptNew(t, paging, "u1", at)
	records := persist.NewOutbox(kv)
	records.WriteOutcomeRecords()
	if p, err := records.Pending(); err != nil || len(p) != 1 {
		t.Fatalf("pending %d %v", len(p), err)
	}
	sent(&e, at.Add(time.Second))
	settle(t, records, e)         // outbox_status/<id>: sent
	back := persist.NewOutbox(kv) // the partition back on a node without the flag
	if p, err := back.Pending(); err != nil || len(p) != 0 {
		t.Fatalf("pending %d %v", len(p), err)
	}
	late, err := back.Get(e.ID) // as engine.messages.Failed does
	if err != nil {
		t.Fatal(err)
	}
	late.SetStatus(domain.MsgFailed, at.Add(2*time.Second))
	late.Code, late.Error = "network_error", "late"
	settle(t, back, late)
	if n := keysUnder(t, kv, "outbox_page/"); n != 1 {
		t.Fatalf("%d pages, want the late failure's", n)
	}
	got, err := back.Get(e.ID)
	if err != nil || got.Status != domain.MsgFailed {
		t.Errorf("read by id after a late failure: %s %v, want failed", got.Status, err)
	}
}

// The same message in a record and a page (a rolling upgrade) is counted once by the recount
// (it was counted twice).
func TestRecountCountsAMessageOnce(t *testing.T) {
	kv := openPaged(t, "r21b")
	paging := persist.NewOutbox(kv)
	if _, err := paging.Pending(); err != nil {
		t.Fatal(err)
	}
	a := persist.NewAccounts(kv)
	now := time.Now().UTC().Truncate(time.Millisecond)
	snap := domain.Allowance{UserID: "u1", Period: now.Format("2006-01"), Sent: 5, Mark: 5, At: now.Add(-2 * time.Second).UnixMilli(),
		Since: now.Add(-10 * time.Second).UnixMilli()}
	if err := a.PutAccount(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
	e := acceptNew(t, paging, "u1", now)
	sent(&e, now)
	settle(t, paging, e) // paged: sent
	records := persist.NewOutbox(kv)
	records.WriteOutcomeRecords()
	if _, err := records.Pending(); err != nil {
		t.Fatal(err)
	}
	late := e
	late.Status, late.Code = domain.MsgFailed, "network_error"
	settle(t, records, late) // outbox_status/<id>: failed, its send time kept
	got, err := a.Recount(now.Add(time.Second), 40*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r := got["u1"]; r.Allowance.Sent != 6 {
		t.Errorf("recounted %+v, want 6 sent (one message)", got)
	}
}

// An outbox on the engine's clock (SetClock) a minute ahead of the NATS server: the boot reads
// the pages written since its checkpoint by the server's clock (it asked for pages written in
// the server's future, missed the page, and took a settled message for pending).
func TestBootReadsPagesOnTheStoresClock(t *testing.T) {
	kv := openPaged(t, "r21c")
	clock := func() time.Time { return time.Now().Add(time.Minute) }
	o := persist.NewOutbox(kv)
	o.SetClock(clock)
	if _, err := o.Pending(); err != nil {
		t.Fatal(err)
	}
	e := acceptNew(t, o, "u1", clock().UTC().Truncate(time.Millisecond))
	sent(&e, clock())
	settle(t, o, e)
	next := persist.NewOutbox(kv)
	next.SetClock(clock)
	if p, err := next.Pending(); err != nil || len(p) != 0 {
		t.Errorf("boot after a settled message, clock 1 min ahead: %d pending %v, want none", len(p), err)
	}
}

// The README's rollback from outcome pages: every node restarted with --nats-outcome-records,
// then, 40 s later (a message pending and unmarked at that boot holds the checkpoint back for
// markAfter, 30 s, and the next checkpoint follows within 5 s), the release before: its boot
// finds only the queued message, not a paged one accepted after it (at 15 s it did).
func TestRollbackAfterMarkAfterAndACheckpoint(t *testing.T) {
	kv := openPaged(t, "r21e")
	var mu sync.Mutex
	off := time.Duration(0)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return time.Now().Add(off) }
	move := func(d time.Duration) { mu.Lock(); off += d; mu.Unlock() }
	paging := persist.NewOutbox(kv)
	paging.SetClock(clock)
	if _, err := paging.Pending(); err != nil {
		t.Fatal(err)
	}
	at := clock().UTC().Truncate(time.Millisecond)
	x := acceptNew(t, paging, "u1", at)
	y := acceptNew(t, paging, "u1", at.Add(time.Second))
	sent(&y, at.Add(time.Second))
	settle(t, paging, y)
	flagged := persist.NewOutbox(kv)
	flagged.WriteOutcomeRecords()
	flagged.SetClock(clock)
	if _, err := flagged.Pending(); err != nil {
		t.Fatal(err)
	}
	for range 8 {
		move(5 * time.Second)
		if err := flagged.Checkpoint(); err != nil {
			t.Fatal(err)
		}
	}
	p, err := persist.NewOutbox(oldRelease{kv}).Pending()
	if err != nil || len(p) != 1 || p[0].ID != x.ID {
		t.Errorf("old boot after 40 s: %+v %v, want only %s", p, err, x.ID)
	}
}
