package outlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"sync"
	"testing"
)

// The writer's copy of the segment's last bytes follows its writes, trims its front, and
// forgets what a rewind cut: it always holds exactly the file's bytes before its end.
func TestTailCopy(t *testing.T) {
	var tl tail
	var file []byte // what the segment holds
	write := func(off int64, b []byte) {
		file = append(file[:off], b...)
		tl.wrote(1, off, b)
		if tl.seg != 1 || tl.off+int64(len(tl.b)) != int64(len(file)) {
			t.Fatalf("after a write at %d: the copy holds [%d, %d), the file ends at %d", off, tl.off, tl.off+int64(len(tl.b)), len(file))
		}
		if len(tl.b) > tailMax {
			t.Fatalf("the copy holds %d bytes (at most %d)", len(tl.b), tailMax)
		}
	}
	for i := range 2500 {
		write(int64(len(file)), record(i, 1+i*7%5000))
	}
	if !bytes.Equal(tl.b, file[tl.off:]) {
		t.Fatal("the copy differs from the file")
	}
	if tl.off == 0 {
		t.Fatal("the copy was never trimmed")
	}
	write(int64(len(file)), record(9, tailKeep+10)) // larger than what is kept: the copy starts again
	tl.cut(1, int64(len(file))-5)                   // a rewind cut the last 5 bytes
	file = file[:len(file)-5]
	write(int64(len(file)), record(10, 100))
	tl.cut(1, tl.off-1) // cut before the copy: it starts again empty at the cut
	if len(tl.b) != 0 || tl.off != int64(len(file))-int64(tailKeep+10-5+100)-1 {
		t.Fatalf("after a cut before it the copy holds [%d, +%d)", tl.off, len(tl.b))
	}
	if got := spans([]int64{9000, 100, 100 + SlotSize, 100 + 2*SlotSize + mergeGap, 20000}); len(got) != 3 ||
		got[0] != [2]int64{100, 100 + 3*SlotSize + mergeGap} || got[1] != [2]int64{9000, 9000 + SlotSize} {
		t.Fatalf("spans: %v", got)
	}
}

// Slot writes queued together are written gathered when their records lie in the writer's copy
// and one by one when they lie before it (more than tailMax bytes back): every slot reads back
// in its place, each record still checks (the bytes written between slots are its own), a slot
// a record does not have is refused in both ways, and all of it is there after a reopen.
func TestSlotsGathered(t *testing.T) {
	dir := t.TempDir()
	l, _ := open(t, dir, Options{Sync: SyncInterval})
	const n = 5000 // 5000 frames of about 1 KiB: the first ones lie before the copy
	ps := make([]Pos, n)
	ts := make([]Ticket, n)
	for i := range n {
		var err error
		if ts[i], err = l.QueueWithSlots(record(i, 900+i%50), 3); err != nil {
			t.Fatal(err)
		}
		ps[i] = ts[i].Pos
	}
	for i := range n {
		if err := ts[i].Wait(); err != nil {
			t.Fatal(err)
		}
	}
	bare, err := l.Append(record(n, 50)) // a record without slots, in the copy
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make([]error, n)
	var bad [2]error
	for i := range n {
		wg.Add(1)
		l.WriteSlot(ps[i], i%3, payload(i), func(err error) { errs[i] = err; wg.Done() })
	}
	wg.Add(3)
	l.WriteSlot(ps[n-1], 3, payload(1), func(err error) { bad[0] = err; wg.Done() }) // past its slots, in the copy
	l.WriteSlot(ps[0], 3, payload(1), func(err error) { bad[1] = err; wg.Done() })   // past its slots, before it
	var noSlots error
	l.WriteSlot(bare, 0, payload(1), func(err error) { noSlots = err; wg.Done() })
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("slot of record %d: %v", i, err)
		}
	}
	if !errors.Is(bad[0], ErrBadSlot) || !errors.Is(bad[1], ErrBadSlot) || !errors.Is(noSlots, ErrBadSlot) {
		t.Fatalf("slots not there: %v, %v, %v; want ErrBadSlot", bad[0], bad[1], noSlots)
	}
	check := func(l *Log) {
		for i := range n {
			want := [][]byte{nil, nil, nil}
			want[i%3] = payload(i)
			wantSlots(t, l, ps[i], record(i, 900+i%50), want...)
		}
	}
	check(l)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, rec := open(t, dir, Options{Sync: SyncInterval})
	if rec.Cut != 0 || rec.Records != n+1 {
		t.Fatalf("reopened: %+v; want %d whole records, nothing cut", rec, n+1)
	}
	check(l2)
}

// AppendSlotted writes a record and a slot naming it in one round (one sync under SyncBatch),
// the record first: the slot's payload is made from the record's position, both read back and
// are there after a reopen. A slot the target does not have is refused (the record is still
// written); a target past the end is not found, and a closed log refuses both.
func TestAppendSlotted(t *testing.T) {
	dir := t.TempDir()
	l, _ := open(t, dir, Options{Sync: SyncBatch})
	acc := record(1, 300)
	ap := queueSlots(t, l, acc, 3)
	bare, err := l.Append(record(2, 40))
	if err != nil {
		t.Fatal(err)
	}
	slotted := func(rec []byte, p Pos, i int) (Pos, error) {
		ch := make(chan error, 1)
		var got Pos
		l.AppendSlotted(rec, p, i, func(rp Pos, b []byte) {
			binary.LittleEndian.PutUint64(b, uint64(rp))
			b[8] = 'x'
		}, func(rp Pos, err error) { got = rp; ch <- err })
		return got, <-ch
	}
	syncs := l.synced.Load()
	op, err := slotted(record(3, 90), ap, 1)
	if err != nil || op == 0 {
		t.Fatalf("AppendSlotted: %v, %v", op, err)
	}
	if n := l.synced.Load() - syncs; n != 1 {
		t.Fatalf("a record and its slot took %d syncs, want 1", n)
	}
	want := make([]byte, SlotPayload)
	binary.LittleEndian.PutUint64(want, uint64(op))
	want[8] = 'x'
	wantSlots(t, l, ap, acc, nil, want, nil)
	if got, err := l.Read(op); err != nil || !bytes.Equal(got, record(3, 90)) {
		t.Fatalf("the record: %.20q, %v", got, err)
	}
	if rp, err := slotted(record(4, 50), bare, 0); !errors.Is(err, ErrBadSlot) {
		t.Fatalf("a slot of a record without slots: %v", err)
	} else if got, err := l.Read(rp); err != nil || !bytes.Equal(got, record(4, 50)) {
		t.Fatalf("the record of a refused slot: %.20q, %v", got, err)
	}
	if _, err := slotted(record(5, 50), ap, 3); !errors.Is(err, ErrBadSlot) {
		t.Fatalf("slot 3 of a record with 3: %v", err)
	}
	if _, err := slotted(record(6, 50), At(9, 100), 0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a target past the end: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := slotted(record(7, 50), ap, 0); !errors.Is(err, ErrClosed) {
		t.Fatalf("after Close: %v", err)
	}
	l2, _ := open(t, dir, Options{Sync: SyncBatch})
	wantSlots(t, l2, ap, acc, nil, want, nil)
}
