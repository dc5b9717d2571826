package persist

import (
	"context"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist/outlog"
)

// A kept pending record is reused with no allocation: newPending took v's address, which moved
// v to the heap at each call (inlined into queueAccept), so the kept records saved nothing and
// every accept allocated one (issue 32: one allocation a message in the send path's profile).
func TestPendingRecordReused(t *testing.T) {
	lo := &LogOutbox{}
	kept := &logPending{}
	lo.freePending = []*logPending{kept}
	var got *logPending
	allocs := testing.AllocsPerRun(200, func() {
		got = lo.newPending(logPending{pos: 7, state: accepting})
		lo.freePending = append(lo.freePending[:0], got)
	})
	if got != kept || got.pos != 7 || got.state != accepting {
		t.Fatalf("newPending = %p %+v, want the kept record %p holding the value", got, *got, kept)
	}
	if allocs != 0 {
		t.Fatalf("newPending with a kept record: %.1f allocations, want 0", allocs)
	}
}

// A lone accept with a minted id is answered once written without the outbox's lock: its
// pending record moves to waiting on the log's writer (accepted). Before, the caller woken by
// its write took mu to move it (finishAccept), and the callers of a round, woken together,
// queued on mu: about a fifth of a contended lock a message, each a park and a wake-up, at 100
// sessions in process. Here mu is held from the moment the accept is queued: the accept
// returns all the same, and its record is waiting once mu is let go.
func TestAcceptAnsweredWithoutTheLock(t *testing.T) {
	dir, kv, clock := t.TempDir(), NewMemory(), &testClock{}
	at := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	clock.set(at)
	lo, _ := openLogOutbox(t, dir, kv, clock)
	first := acceptLog(t, lo, 1, at)[0]
	// The writer moves that accept to waiting after its caller's Wait returned, under mu: held
	// before then, mu stops the writer itself (a flake under load, seen in CI). Wait for it.
	waitState(t, lo, first)

	held := make(chan struct{})
	acceptQueued = func(o *LogOutbox) {
		if o == lo {
			o.mu.Lock()
			close(held)
		}
	}
	t.Cleanup(func() { acceptQueued = nil })
	e := logQueued("", at)
	done := make(chan error, 1)
	go func() { done <- lo.Accept(context.Background(), &e, "") }()
	<-held
	select {
	case err := <-done:
		if err != nil {
			lo.mu.Unlock()
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		lo.mu.Unlock()
		<-done
		t.Fatal("the accept waited for the outbox's lock after its write")
	}
	lo.mu.Unlock()
	waitState(t, lo, e.ID)
	if lo.known(e.ID) == 0 {
		t.Fatal("known: the accepted message's position not known")
	}
	settleLog(t, lo, e.ID, domain.MsgSent, at.Add(time.Second))
	wantStatus(t, lo, e.ID, domain.MsgSent)
}

// A settled message whose id the outbox minted is remembered in its slot of settled, not in
// the generations' map of ids: no string kept, hashed or compared a message (issue 32); its
// receipts find its accept all the same, and an id that differs in its random bits alone is
// not taken for it.
func TestSettledMintedIDsInTheirSlots(t *testing.T) {
	dir, kv, clock := t.TempDir(), NewMemory(), &testClock{}
	at := time.Date(2026, 12, 1, 6, 0, 0, 0, time.UTC)
	clock.set(at)
	lo, _ := openLogOutbox(t, dir, kv, clock)
	ids := acceptLog(t, lo, 3, at)
	ps := make([]outlog.Pos, len(ids))
	for i, id := range ids {
		ps[i] = lo.known(id)
		settleLog(t, lo, id, domain.MsgSent, at.Add(time.Second))
	}
	lo.mu.Lock()
	inMap := len(lo.recent[0]) + len(lo.recent[1])
	lo.mu.Unlock()
	if inMap != 0 {
		t.Fatalf("%d minted ids settled went into the map", inMap)
	}
	for i, id := range ids {
		if got := lo.known(id); got != ps[i] || got == 0 {
			t.Fatalf("%s settled: known %v, want %v", id, got, ps[i])
		}
		v, rnd, _ := idBits(id)
		if other := logID(ps[i], rnd+1); lo.known(other) != 0 || posBits(ps[i]) != v {
			t.Fatalf("%s (another id at %v) is known", other, ps[i])
		}
	}
	receiptLog(t, lo, ids[2], domain.StatusChange{Status: domain.MsgDelivered, At: domain.MillisOf(at.Add(2 * time.Second))})
	wantStatus(t, lo, ids[2], domain.MsgDelivered)
}

// waitState polls until id's pending record is waiting (the writer's answer to its accept).
func waitState(t *testing.T, lo *LogOutbox, id string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		lo.mu.Lock()
		p := lo.pending[id]
		ok := p != nil && p.state == waiting
		lo.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("accept %s never waiting", id)
		}
		time.Sleep(time.Millisecond)
	}
}
