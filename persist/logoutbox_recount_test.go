package persist

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist/outlog"
)

// checkRecounted fails t unless the recount got recounted exactly the users of want, each to
// its count in period, read at at, with as many send times as its Recent.
func checkRecounted(t *testing.T, got map[string]domain.AccountRecount, want map[string]int64, period string, at int64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("recounted %d users (%+v), want %d", len(got), got, len(want))
	}
	for uid, sent := range want {
		r := got[uid]
		if r.Allowance.Sent != sent || r.Allowance.Period != period || r.Allowance.Mark < sent || r.Allowance.At != at {
			t.Fatalf("%s: %+v, want %d sent, read at %d", uid, r.Allowance, sent, at)
		}
		if int64(len(r.Sent)) != r.Allowance.Recent {
			t.Fatalf("%s: %d send times, Recent %d", uid, len(r.Sent), r.Allowance.Recent)
		}
	}
}

// recountSend accepts a message of uid's on lo and writes its outcome: status at at (sent:
// with its send time at; failedLate: sent at at, then failed a second later, its send time
// kept, as a second outcome record).
func recountSend(t *testing.T, lo *LogOutbox, uid string, kind domain.Kind, status domain.MessageStatus, at time.Time, failedLate bool) {
	t.Helper()
	e := logQueued("", at) // accepted as it is sent: an accept's time is when it is queued (recountStart)
	e.UserID, e.Message.Kind = uid, kind
	if err := lo.Accept(context.Background(), &e, ""); err != nil {
		t.Fatal(err)
	}
	settle := func(e domain.OutboxEntry) {
		ch := make(chan error, 1)
		lo.Settle(e, func(err error) { ch <- err })
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
	if status == domain.MsgSent {
		e.SentAt = domain.MillisOf(at)
	}
	e.SetStatus(status, at)
	settle(e)
	if failedLate {
		e.SetStatus(domain.MsgFailed, at.Add(time.Second))
		settle(e)
	}
}

// The recount on the log outbox counts what the Badger outbox's does (TestAccountsRecount):
// per user, the charged messages sent from its snapshot's Since on (one sent exactly at Since
// included, one a millisecond before not) less the snapshot's Recent; for a snapshot older
// than the margin, those sent from the newest snapshot's At less the margin; for a user with
// no snapshot, all of those. An edit is not charged, a failure or a cancellation not counted,
// and a message sent then failed late (two outcome records) counted once.
func TestLogRecount(t *testing.T) {
	kv := NewMemory()
	t0 := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	clock := &testClock{}
	clock.set(t0.Add(time.Minute))
	lo, _ := openLogOutbox(t, t.TempDir(), kv, clock)
	a := NewAccounts(kv)
	ms := func(d time.Duration) int64 { return t0.Add(d).UnixMilli() }
	for _, s := range []domain.Allowance{
		{UserID: "u1", Period: "2026-11", Sent: 7, Mark: 20, At: ms(20 * time.Second), Since: ms(10 * time.Second), Recent: 3},
		{UserID: "u2", Period: "2026-11", Sent: 3, Mark: 3, At: ms(-5 * time.Minute), Since: ms(-5*time.Minute - 10*time.Second)},
	} {
		if err := a.PutAccount(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	send := func(uid string, after time.Duration, kind domain.Kind, status domain.MessageStatus) {
		recountSend(t, lo, uid, kind, status, t0.Add(after), false)
	}
	send("u2", -time.Minute, domain.KindText, domain.MsgSent)                    // before the margin: in its snapshot
	send("u1", 5*time.Second, domain.KindText, domain.MsgSent)                   // before Since: in the snapshot
	send("u1", 10*time.Second-time.Millisecond, domain.KindText, domain.MsgSent) // likewise
	send("u1", 10*time.Second, domain.KindText, domain.MsgSent)                  // at Since: one of the three it counts
	send("u1", 12*time.Second, domain.KindText, domain.MsgSent)
	send("u1", 15*time.Second, domain.KindText, domain.MsgSent)
	send("u2", time.Second, domain.KindText, domain.MsgSent)
	send("u3", 3*time.Second, domain.KindText, domain.MsgSent)
	send("u1", 21*time.Second, domain.KindText, domain.MsgSent) // left out
	send("u1", 22*time.Second, domain.KindImage, domain.MsgSent)
	send("u1", 23*time.Second, domain.KindEdit, domain.MsgSent) // not charged
	send("u1", 24*time.Second, domain.KindText, domain.MsgFailed)
	send("u1", 25*time.Second, domain.KindText, domain.MsgCancelled)
	recountSend(t, lo, "u1", domain.KindText, domain.MsgSent, t0.Add(26*time.Second), true) // counted once

	got, err := LogRecount{Accounts: a, Outbox: lo}.Recount(t0.Add(30*time.Second), 40*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// u1: 7 + 6 sent from Since (10, 12, 15, 21, 22, 26 s) - the 3 the snapshot counts.
	checkRecounted(t, got, map[string]int64{"u1": 10, "u2": 4, "u3": 1}, "2026-11", ms(26*time.Second))
	slices.Sort(got["u1"].Sent)
	var w []domain.Millis
	for _, s := range []time.Duration{10, 12, 15, 21, 22, 26} {
		w = append(w, domain.Millis(ms(s*time.Second)))
	}
	if !slices.Equal(got["u1"].Sent, w) || got["u1"].Allowance.Since != ms(10*time.Second) {
		t.Fatalf("u1: send times %v since %d, want %v since %d", got["u1"].Sent, got["u1"].Allowance.Since, w, ms(10*time.Second))
	}
}

// recountLog is a log of 32 KiB segments holding n messages of u1's, sent one every 2 s, and
// the accounts beside it; end is the last one's send time.
func recountLog(t *testing.T, n int) (*LogOutbox, Accounts, time.Time) {
	t.Helper()
	kv := NewMemory()
	t0 := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	clock := &testClock{}
	clock.set(t0)
	lo := openChainOutbox(t, t.TempDir(), kv, clock, outlog.SyncInterval, 32<<10)
	for i := range n {
		recountSend(t, lo, "u1", domain.KindText, domain.MsgSent, t0.Add(time.Duration(2*i)*time.Second), false)
	}
	return lo, NewAccounts(kv), t0.Add(time.Duration(2*(n-1)) * time.Second)
}

// On a log of many segments the recount reads from the segment holding the window's start,
// not from the oldest, and counts the same as a read of the whole log.
func TestLogRecountReadsFromTheWindow(t *testing.T) {
	// An hour of messages, one every 2 s, then the snapshot read at the last one's time.
	n := 1800
	lo, a, end := recountLog(t, n)
	// The snapshot counts every message sent before 20 s before its read, and two after.
	snap := domain.Allowance{UserID: "u1", Period: "2026-11", Sent: int64(n - 8), Mark: int64(n),
		At: end.UnixMilli(), Since: end.Add(-20 * time.Second).UnixMilli(), Recent: 2}
	if err := a.PutAccount(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
	segs, err := lo.log.Segments()
	if err != nil || len(segs) < 10 {
		t.Fatalf("%d segments (%v), want at least 10", len(segs), err)
	}
	w, err := a.recountWindow(40 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	start, err := lo.recountStart(w.from - RecountSkew.Milliseconds())
	if err != nil {
		t.Fatal(err)
	}
	if start.Seg() <= segs[0].Seg || start.Seg() < segs[len(segs)-3].Seg {
		t.Fatalf("the recount reads from segment %d of %d..%d: want one of the last three", start.Seg(), segs[0].Seg, segs[len(segs)-1].Seg)
	}
	got, err := LogRecount{Accounts: a, Outbox: lo}.Recount(end.Add(time.Minute), 40*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// From Since (20 s before the end): 11 messages (every 2 s, both ends), 2 counted.
	if r := got["u1"]; r.Allowance.Sent != int64(n-8)+11-2 || len(r.Sent) != 11 {
		t.Fatalf("recounted %+v (%d send times), want %d sent", r.Allowance, len(r.Sent), n-8+11-2)
	}
}

// review18 R1: the recount's start is bounded by each segment's first accept, not its first
// outcome. An outcome's time can be much older than its write (held behind its events'
// commit, retried): here A's outcome, sent at t0, is written after B's messages and after the
// log rolled to a new segment (C's pending accepts), whose first outcome it is. Bounded by it,
// the recount started at that segment and missed B's messages sent in the window before it.
func TestLogRecountStartsBeforeALateOutcome(t *testing.T) {
	kv := NewMemory()
	t0 := time.Date(2026, 11, 20, 12, 0, 0, 0, time.UTC)
	clock := &testClock{}
	clock.set(t0)
	lo := openChainOutbox(t, t.TempDir(), kv, clock, outlog.SyncInterval, 32<<10)
	a := NewAccounts(kv)
	old := logQueued("", t0)
	old.UserID = "uA"
	if err := lo.Accept(context.Background(), &old, ""); err != nil {
		t.Fatal(err)
	}
	for i := range 40 { // one a second from t0+100 s
		recountSend(t, lo, "uB", domain.KindText, domain.MsgSent, t0.Add(time.Duration(100+i)*time.Second), false)
	}
	seg := lo.log.End().Seg()
	for lo.log.End().Seg() == seg { // C's accepts, pending, until the log rolls
		e := logQueued("", t0.Add(140*time.Second))
		e.UserID = "uC"
		if err := lo.Accept(context.Background(), &e, ""); err != nil {
			t.Fatal(err)
		}
	}
	old.SentAt = domain.MillisOf(t0)
	old.SetStatus(domain.MsgSent, t0)
	ch := make(chan error, 1)
	lo.Settle(old, func(err error) { ch <- err })
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
	// B's snapshot counts the 20 sent before t0+120 s; the 20 from then on are left out.
	ms := func(d time.Duration) int64 { return t0.Add(d).UnixMilli() }
	if err := a.PutAccount(context.Background(), domain.Allowance{UserID: "uB", Period: "2026-11", Sent: 20, Mark: 40,
		At: ms(140 * time.Second), Since: ms(120 * time.Second)}); err != nil {
		t.Fatal(err)
	}
	got, err := LogRecount{Accounts: a, Outbox: lo}.Recount(t0.Add(150*time.Second), 40*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	checkRecounted(t, got, map[string]int64{"uB": 40}, "2026-11", ms(140*time.Second))
}

// review18 R2: a record that does not check in the part of the log only the recount reads (a
// bad sector behind the checkpoint) skips the rest of its segment; it does not fail the recount,
// and with it the boot. What lies after that segment is still counted.
func TestLogRecountSkipsACorruptSegment(t *testing.T) {
	n := 400
	lo, a, end := recountLog(t, n)
	// The snapshot counts none of the last 10 minutes' messages: the recount reads several segments.
	snap := domain.Allowance{UserID: "u1", Period: "2026-11", Sent: int64(n - 300), Mark: int64(n),
		At: end.UnixMilli(), Since: end.Add(-598 * time.Second).UnixMilli()}
	if err := a.PutAccount(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
	w, err := a.recountWindow(15 * time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	start, err := lo.recountStart(w.from - RecountSkew.Milliseconds())
	if err != nil {
		t.Fatal(err)
	}
	segs, _ := lo.log.Segments()
	if start.Seg() == segs[len(segs)-1].Seg {
		t.Fatalf("the recount reads one segment (%d): the test needs several", start.Seg())
	}
	bad := start
	if bad == 0 {
		bad = outlog.At(segs[0].Seg, 0)
	}
	f, err := os.OpenFile(filepath.Join(lo.log.Dir(), segFile(bad)), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var at outlog.Pos // the segment's tenth record
	k := 0
	_ = lo.log.Scan(bad, func(p outlog.Pos, _ []byte) error {
		if k++; k == 10 {
			at = p
			return errStopScan
		}
		return nil
	})
	if at.Seg() != bad.Seg() {
		t.Fatalf("no tenth record in segment %d", bad.Seg())
	}
	if _, err := f.WriteAt([]byte{0xff, 0xff, 0xff, 0xff}, int64(at.Off())+12); err != nil { // in its bytes (its checksum's)
		t.Fatal(err)
	}
	f.Close()
	got, err := LogRecount{Accounts: a, Outbox: lo}.Recount(end.Add(time.Minute), 15*time.Minute)
	if err != nil {
		t.Fatalf("the recount failed on a corrupt record: %v", err)
	}
	if r := got["u1"]; r.Allowance.Sent <= snap.Sent || r.Allowance.Sent > int64(n) {
		t.Fatalf("recounted %+v: want more than the snapshot's %d (the later segments counted), at most %d", r.Allowance, snap.Sent, n)
	}
}
