package persist

import (
	"context"
	"encoding/binary"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist/outlog"
)

// failLogWrites makes the writes that grow lo's segment fail, as a full disk does (the log
// rewinds: outlog's rewind), until the returned func is called: the file size limit is set to
// the segment's size (EFBIG; SIGXFSZ ignored meanwhile).
func failLogWrites(t *testing.T, lo *LogOutbox) func() {
	t.Helper()
	fi, err := os.Stat(filepath.Join(lo.log.Dir(), segFile(lo.log.End())))
	if err != nil {
		t.Fatal(err)
	}
	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &was); err != nil {
		t.Fatal(err)
	}
	signal.Ignore(syscall.SIGXFSZ)
	if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &syscall.Rlimit{Cur: uint64(fi.Size()), Max: was.Max}); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			_ = syscall.Setrlimit(syscall.RLIMIT_FSIZE, &was)
			signal.Reset(syscall.SIGXFSZ)
		}
	}
	t.Cleanup(restore)
	return restore
}

// An accept with a caller's id (an Idempotency-Key's derived id) whose write failed (a full
// disk: the log cut it off and goes on from where it began) is in doubt; the client's retry
// with the same key, once the disk has room, must write it again, or fail. It was answered as
// a duplicate (queueAccept: pending here already) with nothing written: an accepted message
// no boot finds, and its outcome written into the slot of the accept that took its place.
func TestRetryOfAFailedAcceptWritesIt(t *testing.T) {
	dir, kv, clock := t.TempDir(), NewMemory(), &testClock{}
	at := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	clock.set(at)
	lo, _ := openLogOutbox(t, dir, kv, clock)
	acceptLog(t, lo, 1, at)

	restore := failLogWrites(t, lo)
	a := logQueued("derived-a", at)
	if err := lo.Accept(context.Background(), &a, ""); err == nil {
		t.Fatal("an accept on a full disk answered nil")
	}
	restore()
	// Another message takes the place of the one cut off.
	b := logQueued("", at)
	if err := lo.Accept(context.Background(), &b, ""); err != nil {
		t.Fatal(err)
	}
	// The client's retry, as the engine makes it: Get first (not found), then Accept.
	if _, err := lo.Get(a.ID); err == nil {
		t.Fatal("the failed accept reads as found")
	}
	a = logQueued("derived-a", at)
	if err := lo.Accept(context.Background(), &a, ""); err != nil {
		return // refused: the client tries again; nothing claimed
	}
	if _, err := lo.Get(a.ID); err != nil {
		t.Errorf("the retried accept answered nil, and Get(%s): %v: an accepted message stored nowhere", a.ID, err)
	}
	settleLog2(t, lo, a, domain.MsgSent, at.Add(time.Second))
	wantStatus(t, lo, b.ID, domain.MsgQueued)
}

// settleLog2 settles e as the engine does (its entry, not one read back: a retried accept's
// message is sent from the caller's entry).
func settleLog2(t *testing.T, lo *LogOutbox, e domain.OutboxEntry, st domain.MessageStatus, at time.Time) {
	t.Helper()
	e.SetStatus(st, at)
	ch := make(chan error, 1)
	lo.Settle(e, func(err error) { ch <- err })
	if err := <-ch; err != nil {
		t.Logf("settle %s: %v", e.ID, err)
	}
}

// A minted accept whose write failed (cut off: no record of it is anywhere) is answered an
// error and its id is known to no one: nothing will settle it. Its pending record must not
// hold the checkpoint (and, through Renew, every segment from its own on) for the rest of the
// process's life once the messages after it are settled.
func TestFailedAcceptHoldsNoCheckpoint(t *testing.T) {
	dir, kv, clock := t.TempDir(), NewMemory(), &testClock{}
	at := time.Date(2026, 11, 30, 2, 0, 0, 0, time.UTC)
	clock.set(at)
	lo, _ := openLogOutbox(t, dir, kv, clock)
	settleLog(t, lo, acceptLog(t, lo, 1, at)[0], domain.MsgSent, at)

	restore := failLogWrites(t, lo)
	a := logQueued("", at)
	if err := lo.Accept(context.Background(), &a, ""); err == nil {
		t.Fatal("an accept on a full disk answered nil")
	}
	restore()
	b := acceptLog(t, lo, 1, at)[0]
	settleLog(t, lo, b, domain.MsgSent, at.Add(time.Second))
	// The writer's answer to the failed accept has run by now (it came a round before b's).
	if err := lo.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	v, err := kv.Get(logCheckpointKey)
	if err != nil {
		t.Fatal(err)
	}
	first := lo.known(b) // b settled: remembered
	if ckpt := outlog.Pos(binary.LittleEndian.Uint64(v)); ckpt <= first {
		t.Fatalf("checkpoint %v, at or before the settled %v: held by %v (pending %v)", ckpt, first, a.ID, lo.pendingIDs())
	}
}
