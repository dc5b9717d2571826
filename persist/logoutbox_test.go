package persist

import (
	"context"
	"encoding/binary"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist/outlog"
)

// openLogOutbox is a process's LogOutbox on dir and kv, booted (Pending) on clock: it returns
// the ids Pending listed.
func openLogOutbox(t *testing.T, dir string, kv KV, clock *testClock) (*LogOutbox, []string) {
	t.Helper()
	lo, err := OpenLogOutbox(dir, kv, LogOutboxOptions{Sync: outlog.SyncInterval})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lo.log.Close() })
	lo.now = clock.now
	p, err := lo.Pending()
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(p))
	for i, e := range p {
		ids[i] = e.ID
	}
	return lo, ids
}

// crash stops a LogOutbox as a kill would: its log closed, nothing else done.
func crash(t *testing.T, lo *LogOutbox) {
	t.Helper()
	if err := lo.log.Close(); err != nil {
		t.Fatal(err)
	}
}

// logQueued is a new message accepted at at, with no id (Accept mints it) unless id is set.
func logQueued(id string, at time.Time) domain.OutboxEntry {
	e := queued(id, at)
	if id == "" {
		e.Message.ID = ""
	}
	e.UserID = "u1"
	return e
}

func acceptLog(t *testing.T, lo *LogOutbox, n int, at time.Time) []string {
	t.Helper()
	var ids []string
	for range n {
		e := logQueued("", at)
		if err := lo.Accept(context.Background(), &e, ""); err != nil {
			t.Fatal(err)
		}
		if e.ID == "" || e.Message.ID != e.ID {
			t.Fatalf("minted id %q, message id %q", e.ID, e.Message.ID)
		}
		ids = append(ids, e.ID)
	}
	return ids
}

func settleLog(t *testing.T, lo *LogOutbox, id string, st domain.MessageStatus, at time.Time) {
	t.Helper()
	e, err := lo.Get(id)
	if err != nil {
		t.Fatal(err)
	}
	e.SetStatus(st, at)
	e.NetworkID = "net-" + id
	ch := make(chan error, 1)
	lo.Settle(e, func(err error) { ch <- err })
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
}

func receiptLog(t *testing.T, lo *LogOutbox, id string, c domain.StatusChange) {
	t.Helper()
	ch := make(chan error, 1)
	lo.Receipt(id, c, func(err error) { ch <- err })
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
}

func wantStatus(t *testing.T, lo *LogOutbox, id string, st domain.MessageStatus) domain.OutboxEntry {
	t.Helper()
	e, err := lo.Get(id)
	if err != nil || e.ID != id || e.Status != st {
		t.Fatalf("Get(%s) = %s %s, %v; want %s", id, e.ID, e.Status, err, st)
	}
	return e
}

// A message's life on the log: accepted with an id that says where it is, read back pending,
// settled, its receipts laid over it, and all of it read again by the next process.
func TestLogOutboxLife(t *testing.T) {
	dir, kv, clock := t.TempDir(), NewMemory(), &testClock{}
	at := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	clock.set(at)
	lo, pend := openLogOutbox(t, dir, kv, clock)
	if len(pend) != 0 {
		t.Fatalf("pending on a new log: %v", pend)
	}
	ids := acceptLog(t, lo, 3, at)
	e := wantStatus(t, lo, ids[0], domain.MsgQueued)
	if e.Message.To == "" || e.Message.ID != ids[0] || e.UserID != "u1" || len(e.History) != 1 {
		t.Fatalf("read back: %+v", e)
	}
	settleLog(t, lo, ids[0], domain.MsgSent, at.Add(time.Second))
	receiptLog(t, lo, ids[0], domain.StatusChange{Status: domain.MsgRead, At: domain.MillisOf(at.Add(3 * time.Second))})
	receiptLog(t, lo, ids[0], domain.StatusChange{Status: domain.MsgDelivered, At: domain.MillisOf(at.Add(2 * time.Second))})
	settleLog(t, lo, ids[1], domain.MsgFailed, at.Add(time.Second))
	check := func(lo *LogOutbox) {
		t.Helper()
		e := wantStatus(t, lo, ids[0], domain.MsgRead)
		if e.NetworkID != "net-"+ids[0] || len(e.History) != 4 {
			t.Fatalf("settled: %+v", e)
		}
		rs, err := lo.Receipts(ids[0])
		if err != nil || len(rs) != 2 || rs[0].Status != domain.MsgDelivered || rs[1].Status != domain.MsgRead {
			t.Fatalf("receipts %+v, %v", rs, err)
		}
		wantStatus(t, lo, ids[1], domain.MsgFailed)
		wantStatus(t, lo, ids[2], domain.MsgQueued)
	}
	check(lo)
	if got := lo.pendingIDs(); !slices.Equal(got, []string{ids[2]}) {
		t.Fatalf("pending %v, want %v", got, ids[2:])
	}
	crash(t, lo)
	lo, pend = openLogOutbox(t, dir, kv, clock)
	if !slices.Equal(pend, ids[2:]) {
		t.Fatalf("boot found %v pending, want %v", pend, ids[2:])
	}
	check(lo)
	// Requeued: read back with its new session.
	e = wantStatus(t, lo, ids[2], domain.MsgQueued)
	e.SessionID, e.Waiting = "s2", false
	if err := lo.Requeue(context.Background(), e); err != nil {
		t.Fatal(err)
	}
	if e := wantStatus(t, lo, ids[2], domain.MsgQueued); e.SessionID != "s2" {
		t.Fatalf("requeued: session %q", e.SessionID)
	}
	crash(t, lo)
	_, pend = openLogOutbox(t, dir, kv, clock)
	if !slices.Equal(pend, ids[2:]) {
		t.Fatalf("boot found %v pending, want %v", pend, ids[2:])
	}
}

// Every bit of every id flipped, and every hex digit written in lower case: never another
// message, always not found; and ids of other shapes.
func TestLogOutboxForgedIDs(t *testing.T) {
	dir, kv, clock := t.TempDir(), NewMemory(), &testClock{}
	clock.set(time.Now())
	lo, _ := openLogOutbox(t, dir, kv, clock)
	ids := acceptLog(t, lo, 4, clock.now())
	settleLog(t, lo, ids[1], domain.MsgSent, clock.now())
	known := map[string]bool{}
	for _, id := range ids {
		known[id] = true
	}
	tried := 0
	for _, id := range ids {
		wantStatus(t, lo, id, map[bool]domain.MessageStatus{true: domain.MsgSent, false: domain.MsgQueued}[id == ids[1]])
		raw := []byte(id)
		for i := 4; i < len(raw); i++ {
			for bit := range 4 {
				forged := slices.Clone(raw)
				v, _ := hexDigit(forged[i])
				forged[i] = "0123456789ABCDEF"[v^1<<bit]
				tried++
				if known[string(forged)] {
					continue
				}
				if e, err := lo.Get(string(forged)); !errors.Is(err, domain.ErrRecordNotFound) {
					t.Fatalf("forged %s (from %s) = %s, %v", forged, id, e.ID, err)
				}
				if _, err := lo.IdemOf(string(forged)); !errors.Is(err, domain.ErrRecordNotFound) {
					t.Fatalf("IdemOf(forged %s): %v", forged, err)
				}
			}
			if c := raw[i]; c >= 'A' && c <= 'F' {
				lower := slices.Clone(raw)
				lower[i] = c + 'a' - 'A'
				if _, err := lo.Get(string(lower)); !errors.Is(err, domain.ErrRecordNotFound) {
					t.Fatalf("lower case %s: %v", lower, err)
				}
			}
		}
	}
	if tried != 4*80 {
		t.Fatalf("%d forgeries tried", tried)
	}
	for _, id := range []string{"", "3EB0", ids[0][:23], ids[0] + "0", "4EB0" + ids[0][4:], "3EB0FFFFFFFFFFFFFFFFFFFF", "3EB000000000000000000000"} {
		if _, err := lo.Get(id); !errors.Is(err, domain.ErrRecordNotFound) {
			t.Fatalf("Get(%q): %v", id, err)
		}
	}
}

// Ids chosen by the caller or derived from an Idempotency-Key: found through outlog_pos, with
// the key's hash; an accept of an id pending already writes nothing more; a crash that kept
// the outlog_pos record from being written is repaired at boot.
func TestLogOutboxCallerIDs(t *testing.T) {
	dir, kv, clock := t.TempDir(), NewMemory(), &testClock{}
	clock.set(time.Now())
	lo, _ := openLogOutbox(t, dir, kv, clock)
	e := logQueued("3EB0AAAAAAAAAAAAAAAAAAAA", clock.now())
	if err := lo.Accept(context.Background(), &e, "hash1"); err != nil {
		t.Fatal(err)
	}
	end := lo.log.End()
	again := logQueued("3EB0AAAAAAAAAAAAAAAAAAAA", clock.now())
	if err := lo.Accept(context.Background(), &again, "hash1"); err != nil || lo.log.End() != end {
		t.Fatalf("second accept: %v, log end %v -> %v", err, end, lo.log.End())
	}
	es := []domain.OutboxEntry{logQueued("campaign-1-a", clock.now()), logQueued("", clock.now())}
	if err := lo.AcceptMany(context.Background(), es); err != nil {
		t.Fatal(err)
	}
	if es[1].ID == "" {
		t.Fatal("AcceptMany minted no id")
	}
	check := func(lo *LogOutbox) {
		t.Helper()
		for _, id := range []string{e.ID, "campaign-1-a", es[1].ID} {
			wantStatus(t, lo, id, domain.MsgQueued)
		}
		rec, err := lo.IdemOf(e.ID)
		if err != nil || rec.BodyHash != "hash1" || rec.MessageID != e.ID {
			t.Fatalf("IdemOf: %+v, %v", rec, err)
		}
		if _, err := lo.IdemOf(es[1].ID); !errors.Is(err, domain.ErrRecordNotFound) {
			t.Fatalf("IdemOf without a key: %v", err)
		}
	}
	check(lo)
	crash(t, lo)
	// The crash came before the outlog_pos records were written.
	if err := kv.Commit(context.Background(), Op{Key: logPosKey(e.ID), Delete: true}, Op{Key: logPosKey("campaign-1-a"), Delete: true}); err != nil {
		t.Fatal(err)
	}
	lo, pend := openLogOutbox(t, dir, kv, clock)
	if len(pend) != 3 {
		t.Fatalf("pending %v", pend)
	}
	check(lo)
}

// Messages pending long are marked so the checkpoint moves past them; boot finds exactly the
// messages not settled, marked or not, and stale marks go.
func TestLogOutboxMarksAndCheckpoint(t *testing.T) {
	dir, kv, clock := t.TempDir(), NewMemory(), &testClock{}
	at := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	clock.set(at)
	lo, _ := openLogOutbox(t, dir, kv, clock)
	old := acceptLog(t, lo, 3, at)
	clock.add(markAfter + time.Second)
	if err := lo.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	newer := acceptLog(t, lo, 2, clock.now())
	settleLog(t, lo, old[0], domain.MsgSent, clock.now())
	settleLog(t, lo, newer[0], domain.MsgSent, clock.now())
	if err := lo.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	marks := 0
	if err := kv.Scan([]byte(logMarkTable+"/"), func(k, _ []byte) error { marks++; return nil }); err != nil {
		t.Fatal(err)
	}
	if marks != 2 {
		t.Fatalf("%d marks, want 2 (old[1], old[2])", marks)
	}
	v, err := kv.Get(logCheckpointKey)
	if err != nil {
		t.Fatal(err)
	}
	if p, _, _ := parseLogID(newer[1], lo.log.End().Seg()); outlog.Pos(leUint64(v)) != p {
		t.Fatalf("checkpoint at %v, want %v (the oldest unmarked pending)", outlog.Pos(leUint64(v)), p)
	}
	// Settled, its mark not yet removed when the process dies: a stale mark.
	settleLog(t, lo, old[1], domain.MsgFailed, clock.now())
	crash(t, lo)
	lo, pend := openLogOutbox(t, dir, kv, clock)
	if want := []string{old[2], newer[1]}; !slices.Equal(pend, want) {
		t.Fatalf("boot found %v, want %v", pend, want)
	}
	marks = 0
	_ = kv.Scan([]byte(logMarkTable+"/"), func(k, _ []byte) error { marks++; return nil })
	if marks != 1 {
		t.Fatalf("%d marks after boot, want 1", marks)
	}
	wantStatus(t, lo, old[1], domain.MsgFailed)
	// Retention keeps the segment of a pending message.
	clock.add(OutboxRetention + time.Hour)
	if n, err := lo.Renew(); err != nil || n != 0 {
		t.Fatalf("Renew: %d, %v", n, err)
	}
	wantStatus(t, lo, old[2], domain.MsgQueued)
}

func leUint64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// Ids decode back to the position they were made from, across the segment numbers' wrap.
func TestLogIDRoundTrip(t *testing.T) {
	for _, c := range []struct {
		p   outlog.Pos
		cur uint32
	}{
		{outlog.At(1, 16), 1}, {outlog.At(5, 1<<26-1), 9}, {outlog.At(1<<22-1, 100), 1<<22 + 3},
		{outlog.At(1<<22+7, 64), 1<<22 + 7}, {outlog.At(3<<22+1, 99), 3<<22 + 2},
	} {
		id := logID(c.p, 0xDEADBEEF)
		p, rnd, ok := parseLogID(id, c.cur)
		if !ok || p != c.p || rnd != 0xDEADBEEF {
			t.Fatalf("%v at %d: %s -> %v %x %v", c.p, c.cur, id, p, rnd, ok)
		}
	}
	if _, _, ok := parseLogID(logID(outlog.At(9, 16), 1), 3); ok {
		t.Fatal("an id of a segment not yet made decodes")
	}
	if logID(0, 0) != idPlaceholder {
		t.Fatalf("placeholder %s, want %s", idPlaceholder, logID(0, 0))
	}
}

// A receipt for a message this process settled lately takes its accept's position from memory
// (no read); one for a message it never knew (after a restart) or settled too long ago (two
// generations of recentMax ids later) reads its accept back, and both are laid over the
// message alike. An accept whose write is not answered is not known.
func TestLogOutboxReceiptsKnown(t *testing.T) {
	dir, kv, clock := t.TempDir(), NewMemory(), &testClock{}
	at := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	clock.set(at)
	lo, _ := openLogOutbox(t, dir, kv, clock)
	ids := acceptLog(t, lo, 3, at)
	for _, id := range ids[:2] {
		settleLog(t, lo, id, domain.MsgSent, at.Add(time.Second))
	}
	for _, id := range ids {
		if lo.known(id) == 0 {
			t.Fatalf("%s (pending or settled here) is not known", id)
		}
	}
	receiptLog(t, lo, ids[0], domain.StatusChange{Status: domain.MsgDelivered, At: domain.MillisOf(at.Add(2 * time.Second))})
	wantStatus(t, lo, ids[0], domain.MsgDelivered)
	p2 := lo.known(ids[2])
	lo.mu.Lock()
	lo.pending["x"] = &logPending{pos: lo.log.End(), state: accepting} // queued, not yet written
	// Written, its writer's callback (accepted) not yet run: its caller may be back already.
	lo.pending["y"] = &logPending{pos: p2, state: accepting}
	lo.mu.Unlock()
	if lo.known("x") != 0 {
		t.Fatal("an accept being written is known")
	}
	if got := lo.known("y"); got != p2 {
		t.Fatalf("an accept written, its callback to come: known %v, want %v", got, p2)
	}
	// A newer accept that takes ids[1]'s slot forgets it, and it is read back for its receipt.
	p1 := lo.known(ids[1])
	lo.mu.Lock()
	delete(lo.pending, "x")
	delete(lo.pending, "y")
	newer := outlog.At(p1.Seg()+1, 16)
	for settledSlot(posBits(newer)) != settledSlot(posBits(p1)) {
		newer = outlog.At(newer.Seg(), newer.Off()+1)
	}
	lo.remember(logID(newer, 7), newer)
	lo.mu.Unlock()
	if lo.known(ids[1]) != 0 {
		t.Fatalf("%s still known after %v took its slot", ids[1], newer)
	}
	if lo.known(logID(newer, 7)) != newer || lo.known(logID(newer, 8)) != 0 {
		t.Fatalf("the newer accept at %v not known by its id alone", newer)
	}
	// A caller's id is kept two generations of recentMax ids.
	lo.mu.Lock()
	lo.remember("caller-1", p1)
	lo.mu.Unlock()
	if lo.known("caller-1") != p1 {
		t.Fatal("a caller's id settled here is not known")
	}
	lo.mu.Lock()
	for i := range 2 * recentMax {
		lo.remember("caller-"+strconv.Itoa(i+2), p1)
	}
	lo.mu.Unlock()
	if lo.known("caller-1") != 0 {
		t.Fatalf("a caller's id still known after %d more", 2*recentMax)
	}
	receiptLog(t, lo, ids[1], domain.StatusChange{Status: domain.MsgRead, At: domain.MillisOf(at.Add(3 * time.Second))})
	wantStatus(t, lo, ids[1], domain.MsgRead)
	crash(t, lo)
	lo, _ = openLogOutbox(t, dir, kv, clock)
	if lo.known(ids[0]) != 0 {
		t.Fatal("a settled message known after a restart")
	}
	receiptLog(t, lo, ids[0], domain.StatusChange{Status: domain.MsgRead, At: domain.MillisOf(at.Add(4 * time.Second))})
	wantStatus(t, lo, ids[0], domain.MsgRead)
	wantStatus(t, lo, ids[1], domain.MsgRead)
}

// An accept with an id of its own commits nothing to the records' store before it is answered
// (issue 32): its outlog_pos record is written by the next checkpoint, and until then it is
// found by id (settled too, and forgotten by the recently settled). A checkpoint whose
// outlog_pos commit fails (the disk under the floor) fails and does not move past it, so that
// boot writes it after a crash; the next checkpoint that can write it does.
func TestLogOutboxPositionsAtTheCheckpoint(t *testing.T) {
	dir, mem, clock := t.TempDir(), NewMemory(), &testClock{}
	at := time.Date(2026, 11, 30, 5, 30, 0, 0, time.UTC)
	clock.set(at)
	lo, err := OpenLogOutbox(dir, failingKV{KV: mem, bad: []byte(logPosTable + "/")}, LogOutboxOptions{Sync: outlog.SyncInterval})
	if err != nil {
		t.Fatal(err)
	}
	lo.now = clock.now
	if _, err := lo.Pending(); err != nil {
		t.Fatal(err)
	}
	const id, other = "campaign-7-a", "campaign-7-b"
	for _, x := range []string{id, other} {
		e := logQueued(x, at)
		if err := lo.Accept(context.Background(), &e, ""); err != nil {
			t.Fatalf("accept %s with outlog_pos commits refused: %v", x, err)
		}
	}
	if _, err := mem.Get(logPosKey(id)); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Fatalf("outlog_pos written on the accept's path: %v", err)
	}
	settleLog(t, lo, id, domain.MsgSent, at.Add(time.Second))
	lo.Flush()
	lo.mu.Lock()
	for i := range 2 * recentMax {
		lo.remember("caller-"+strconv.Itoa(i), 1)
	}
	lo.mu.Unlock()
	if lo.known(id) != 0 {
		t.Fatal("the settled id still among the recently settled")
	}
	wantStatus(t, lo, id, domain.MsgSent)
	wantStatus(t, lo, other, domain.MsgQueued)
	if err := lo.Checkpoint(); err == nil {
		t.Fatal("a checkpoint whose outlog_pos commit failed answered ok")
	}
	if v, err := mem.Get(logCheckpointKey); err == nil && outlog.Pos(binary.LittleEndian.Uint64(v)) > lo.unindexed[id] {
		t.Fatalf("the checkpoint %v moved past %s's accept at %v, not indexed", outlog.Pos(binary.LittleEndian.Uint64(v)), id, lo.unindexed[id])
	}
	crash(t, lo)
	lo, pend := openLogOutbox(t, dir, mem, clock)
	if !slices.Equal(pend, []string{other}) {
		t.Fatalf("boot found %v pending, want %s", pend, other)
	}
	for _, x := range []string{id, other} {
		if _, err := mem.Get(logPosKey(x)); err != nil {
			t.Fatalf("boot did not write %s's outlog_pos: %v", x, err)
		}
	}
	wantStatus(t, lo, id, domain.MsgSent)
	// On a store that takes them, the checkpoint writes them and forgets them.
	e := logQueued("campaign-8", at)
	if err := lo.Accept(context.Background(), &e, ""); err != nil {
		t.Fatal(err)
	}
	if err := lo.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	if v, err := mem.Get(logPosKey("campaign-8")); err != nil || len(v) != 8 {
		t.Fatalf("the checkpoint did not write campaign-8's outlog_pos: %v", err)
	}
	lo.mu.Lock()
	left := len(lo.unindexed)
	lo.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d accepts left unindexed after a checkpoint that wrote them", left)
	}
	wantStatus(t, lo, "campaign-8", domain.MsgQueued)
}

// A receipt's record written by hand is the one Encode writes, byte for byte, escapes and
// empty fields included (Encode's HTML escapes apart: < > & are written plain), and reads back
// the same.
func TestAppendReceipt(t *testing.T) {
	for _, c := range []domain.StatusChange{
		{Status: domain.MsgDelivered, At: 1764480000123},
		{Status: domain.MsgRead, At: 0},
		{Status: domain.MsgFailed, At: -5, Code: "131026", Error: "undeliverable \"x\"\n\\ \u2028 \x01 é"},
		{Status: domain.MsgDelivered, At: 17, Category: "marketing"},
		{Status: "odd\tstatus", At: 1 << 62, Category: "c", Code: "c", Error: "\xff"},
		{Status: domain.MsgFailed, At: 3, Category: "<&>", Error: "a<b"},
	} {
		want, err := Encode(1, c)
		if err != nil {
			t.Fatal(err)
		}
		got := appendReceipt([]byte("x"), &c)
		if string(got[1:]) != string(want) && c.Category != "<&>" {
			t.Fatalf("appendReceipt(%+v) = %s\nEncode: %s", c, got[1:], want)
		}
		var back domain.StatusChange
		if _, err := Decode(got[1:], 1, &back); err != nil || back != c && c.Error != "\xff" {
			t.Fatalf("read back %+v, %v; want %+v", back, err, c)
		}
	}
}

// A slot written before the record it names is readable (AppendSlotted's record and slot go in
// one round, and readers are let past the record at the round's end) reads as empty: the
// message is as it was, not an error or not found.
// writeSlotsNaming writes apos's outcome, read and requeue slots, each naming the record at p.
func writeSlotsNaming(t *testing.T, lo *LogOutbox, apos, p outlog.Pos, at time.Time) {
	t.Helper()
	for _, w := range []struct {
		slot int
		kind byte
		st   domain.MessageStatus
	}{{slotOutcome, recOutcome, domain.MsgSent}, {slotRead, recReceipt, domain.MsgRead}, {slotRequeue, recRequeue, domain.MsgQueued}} {
		ch := make(chan error, 1)
		lo.log.WriteSlot(apos, w.slot, slotPayload(w.kind, w.st, domain.MillisOf(at), p), func(err error) { ch <- err })
		if err := <-ch; err != nil {
			t.Fatal(err)
		}
	}
}

func TestLogOutboxSlotBeforeItsRecord(t *testing.T) {
	dir, kv, clock := t.TempDir(), NewMemory(), &testClock{}
	at := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	clock.set(at)
	lo, _ := openLogOutbox(t, dir, kv, clock)
	id := acceptLog(t, lo, 1, at)[0]
	apos := lo.known(id)
	ahead := outlog.At(apos.Seg(), apos.Off()+1<<20) // past what is written
	writeSlotsNaming(t, lo, apos, ahead, at)
	e := wantStatus(t, lo, id, domain.MsgSent) // the outcome slot's own status: its record is being written
	if e.SessionID != "s1" {
		t.Fatalf("body: %+v", e)
	}
	if rs, err := lo.Receipts(id); err != nil || len(rs) != 0 {
		t.Fatalf("receipts %v, %v", rs, err)
	}
}

// TestLogOutboxSlotNamesAnotherRecord: under --fsync interval a power cut can keep a slot (an
// older page) and lose the record it names (a newer page); the next record after the cut then
// takes that position. The slot names a record that is not its own: it reads as empty, like a
// record not readable, and neither a read nor the next boot fails on it. An outcome slot's
// own status stands (TestLogOutboxOutcomeSlotOutlivesItsRecord).
func TestLogOutboxSlotNamesAnotherRecord(t *testing.T) {
	dir, kv, clock := t.TempDir(), NewMemory(), &testClock{}
	at := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	clock.set(at)
	lo, _ := openLogOutbox(t, dir, kv, clock)
	ids := acceptLog(t, lo, 2, at)
	apos, other := lo.known(ids[0]), lo.known(ids[1]) // other: an accept, not this one's record
	writeSlotsNaming(t, lo, apos, other, at)
	if e := wantStatus(t, lo, ids[0], domain.MsgSent); e.SessionID != "s1" {
		t.Fatalf("body: %+v", e)
	}
	if rs, err := lo.Receipts(ids[0]); err != nil || len(rs) != 0 {
		t.Fatalf("receipts %v, %v", rs, err)
	}
	crash(t, lo)
	lo, pending := openLogOutbox(t, dir, kv, clock) // the boot reads the requeue slot
	if !slices.Contains(pending, ids[1]) || slices.Contains(pending, ids[0]) {
		t.Fatalf("pending after the boot: %v", pending)
	}
	wantStatus(t, lo, ids[0], domain.MsgSent)
}
