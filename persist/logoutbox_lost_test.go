package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist/outlog"
)

// TestLogOutboxOutcomeSlotOutlivesItsRecord (review16 F4): under --fsync interval a power cut
// can keep an accept's outcome slot (an older page) and lose the outcome record it names (a
// newer page), whose position the next record then takes. The slot is written only once
// Settle was handed the outcome, after its record: it proves the message was settled so (sent:
// handed to the network). So the boot lists it as pending neither from its mark nor from the
// scan after the checkpoint (a boot would send it again), and Get answers the slot's status,
// not queued (a campaign resumed with the same id would send it again: engine.Send takes a
// message Get answers not final as one to send).
func TestLogOutboxOutcomeSlotOutlivesItsRecord(t *testing.T) {
	for _, tc := range []struct {
		name   string
		marked bool // pending long enough to be marked before its outcome (its accept before the checkpoint)
		st     domain.MessageStatus
	}{
		{"marked sent", true, domain.MsgSent},
		{"since the checkpoint sent", false, domain.MsgSent},
		{"since the checkpoint failed", false, domain.MsgFailed},
		{"marked cancelled", true, domain.MsgCancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, kv, clock := t.TempDir(), NewMemory(), &testClock{}
			at := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
			clock.set(at)
			lo, _ := openLogOutbox(t, dir, kv, clock)
			id := "campaign-7-0" // a campaign's number: an id of the caller's
			e := logQueued(id, at)
			if err := lo.Accept(t.Context(), &e, ""); err != nil {
				t.Fatal(err)
			}
			other := acceptLog(t, lo, 1, at)[0] // pending throughout
			if tc.marked {
				clock.add(markAfter + time.Second)
			}
			if err := lo.Checkpoint(); err != nil {
				t.Fatal(err)
			}
			if _, err := kv.Get(logMarkKey(id)); (err == nil) != tc.marked {
				t.Fatalf("mark: %v (want one: %v)", err, tc.marked)
			}
			lost := lo.log.End() // where the outcome's record goes
			settled := clock.now().Add(time.Second)
			settleLog(t, lo, id, tc.st, settled)
			wantStatus(t, lo, id, tc.st)
			crash(t, lo)
			// The power cut: the outcome's record gone, its slot (in the accept's frame) kept.
			if err := os.Truncate(filepath.Join(dir, segFile(lost)), int64(lost.Off())); err != nil {
				t.Fatal(err)
			}

			lo, pending := openLogOutbox(t, dir, kv, clock)
			if slices.Contains(pending, id) || !slices.Contains(pending, other) {
				t.Fatalf("pending after the boot: %v (want %s and not %s)", pending, other, id)
			}
			got := wantStatus(t, lo, id, tc.st)
			if got.UpdatedAt != domain.MillisOf(settled) {
				t.Fatalf("updated at %v, want the slot's %v", got.UpdatedAt.Time(), settled)
			}
			if _, err := kv.Get(logMarkKey(id)); err == nil {
				t.Fatal("the mark is still there")
			}
			// The next record takes the lost one's position: the slot names a record not its own.
			if next := acceptLog(t, lo, 1, at)[0]; lo.known(next) != lost {
				t.Fatalf("the next record at %v, want %v", lo.known(next), lost)
			}
			wantStatus(t, lo, id, tc.st)
			crash(t, lo)
			lo, pending = openLogOutbox(t, dir, kv, clock)
			if slices.Contains(pending, id) {
				t.Fatalf("pending after the second boot: %v", pending)
			}
			wantStatus(t, lo, id, tc.st)
		})
	}
}

// segFile is the name of the segment file p lies in.
func segFile(p outlog.Pos) string { return fmt.Sprintf("%010d.seg", p.Seg()) }

// Each status a slot carries reads back as itself (a cancellation apart from a failure).
func TestSlotStatusRoundTrip(t *testing.T) {
	for _, st := range []domain.MessageStatus{domain.MsgScheduled, domain.MsgQueued, domain.MsgSent,
		domain.MsgDelivered, domain.MsgRead, domain.MsgFailed, domain.MsgCancelled} {
		s := slotPayload(recOutcome, st, 1234, outlog.At(1, 16))
		if got, at := slotStatus(s); got != st || at != 1234 {
			t.Errorf("%s: read back %s at %d", st, got, at)
		}
	}
}

// TestLogOutboxVoidSlotOutlivesItsRecord (review17 L6): an accept answered as refused is voided
// (a void record, then the accept's outcome slot naming it). A power cut that keeps the slot and
// loses the void record leaves the accept with no record saying it never was: the boot's scan
// after the checkpoint reads the slot and drops it (it was refused: sending it would deliver a
// message its caller was told failed), and it still reads as not found.
func TestLogOutboxVoidSlotOutlivesItsRecord(t *testing.T) {
	dir, kv, clock := t.TempDir(), NewMemory(), &testClock{}
	at := time.Date(2026, 11, 30, 6, 0, 0, 0, time.UTC)
	clock.set(at)
	lo, _ := openLogOutbox(t, dir, kv, clock)
	ids := acceptLog(t, lo, 2, at) // ids[1] pending throughout
	if err := lo.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	lost := lo.log.End() // where the void record goes
	if _, err := lo.void(lo.known(ids[0])); err != nil {
		t.Fatal(err)
	}
	crash(t, lo)
	if err := os.Truncate(filepath.Join(dir, segFile(lost)), int64(lost.Off())); err != nil {
		t.Fatal(err)
	}
	lo, pending := openLogOutbox(t, dir, kv, clock)
	if slices.Contains(pending, ids[0]) || !slices.Contains(pending, ids[1]) {
		t.Fatalf("pending after the boot: %v (want %s and not %s)", pending, ids[1], ids[0])
	}
	if _, err := lo.Get(ids[0]); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Fatalf("Get of the voided accept: %v, want not found", err)
	}
}

// void writes what versions before the checkpoint wrote outlog_pos did for an accept whose
// outlog_pos commit failed, which boot still reads: a void record naming the accept at apos,
// then the accept's outcome slot naming it. The accept reads as not found from then on
// (readAccept), and boot's scan drops it. It returns where the void record lies.
func (lo *LogOutbox) void(apos outlog.Pos) (outlog.Pos, error) {
	type answer struct {
		pos outlog.Pos
		err error
	}
	ch := make(chan answer, 1)
	at := domain.MillisOf(lo.now())
	lo.log.AppendSlotted(binary.LittleEndian.AppendUint64([]byte{recVoid}, uint64(apos)), apos, slotOutcome,
		func(vp outlog.Pos, dst []byte) { fillSlot(dst, recVoid, domain.MsgFailed, at, vp) },
		func(vp outlog.Pos, err error) { ch <- answer{vp, err} })
	a := <-ch
	return a.pos, a.err
}
