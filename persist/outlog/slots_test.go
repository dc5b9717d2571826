package outlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"testing"
)

// payload is slot payload n (SlotPayload bytes, never all zeros).
func payload(n int) []byte {
	b := fmt.Appendf(nil, "slot %d ", n)
	for len(b) < SlotPayload {
		b = append(b, byte('A'+(n+len(b))%26))
	}
	return b
}

// writeSlot writes a slot and waits for its answer.
func writeSlot(l *Log, p Pos, i int, b []byte) error {
	ch := make(chan error, 1)
	l.WriteSlot(p, i, b, func(err error) { ch <- err })
	return <-ch
}

// wantSlots checks the record at p and its slots (nil: empty or torn).
func wantSlots(t *testing.T, l *Log, p Pos, rec []byte, want ...[]byte) {
	t.Helper()
	got, slots, err := l.ReadSlots(p)
	if err != nil || !bytes.Equal(got, rec) {
		t.Fatalf("ReadSlots(%v): %v, record %.30q; want %.30q", p, err, got, rec)
	}
	if len(slots) != len(want) {
		t.Fatalf("ReadSlots(%v): %d slots, want %d", p, len(slots), len(want))
	}
	for i := range want {
		if !bytes.Equal(slots[i], want[i]) {
			t.Fatalf("slot %d of %v = %q, want %q", i, p, slots[i], want[i])
		}
	}
}

func queueSlots(t *testing.T, l *Log, rec []byte, n int) Pos {
	t.Helper()
	tk, err := l.QueueWithSlots(rec, n)
	if err != nil {
		t.Fatal(err)
	}
	if err := tk.Wait(); err != nil {
		t.Fatal(err)
	}
	return tk.Pos
}

// Slots are written in place after their record, read with it, kept across a reopen and a roll
// to the next segment, stepped over by scans and by the appends that follow; a slot that is
// not there is refused.
func TestSlots(t *testing.T) {
	dir := t.TempDir()
	l, _ := open(t, dir, Options{Sync: SyncInterval, SegmentSize: 4096})
	r1, r2, r3 := record(1, 300), record(2, 40), record(3, 900)
	p1 := queueSlots(t, l, r1, 4)
	p2, err := l.Append(r2) // no slots
	if err != nil {
		t.Fatal(err)
	}
	p3 := queueSlots(t, l, r3, 2)
	wantSlots(t, l, p1, r1, nil, nil, nil, nil)
	// A slot written right after its record was queued lands after it (the writer writes the
	// groups first).
	tk, err := l.QueueWithSlots(record(4, 50), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := writeSlot(l, tk.Pos, 0, payload(40)); err != nil {
		t.Fatal(err)
	}
	wantSlots(t, l, tk.Pos, record(4, 50), payload(40))
	for i, w := range []struct {
		p Pos
		i int
	}{{p1, 0}, {p1, 3}, {p3, 1}} {
		if err := writeSlot(l, w.p, w.i, payload(i)); err != nil {
			t.Fatalf("slot %d of %v: %v", w.i, w.p, err)
		}
	}
	if err := writeSlot(l, p1, 3, payload(9)); err != nil { // overwritten in place
		t.Fatal(err)
	}
	wantSlots(t, l, p1, r1, payload(0), nil, nil, payload(9))
	wantSlots(t, l, p3, r3, nil, payload(2))
	wantSlots(t, l, p2, r2)
	mustRead(t, l, p1, r1)
	for _, bad := range []struct {
		p    Pos
		i    int
		b    []byte
		want error
	}{
		{p1, 4, payload(1), ErrBadSlot},                // past the record's slots
		{p2, 0, payload(1), ErrBadSlot},                // a record without slots
		{p1, 0, make([]byte, SlotPayload), ErrBadSlot}, // all zeros: an empty slot
		{p1, 0, payload(1)[:10], ErrBadSlot},           // short
		{At(1, 3), 0, payload(1), ErrBadSlot},          // inside the header
		{At(9, 100), 0, payload(1), ErrNotFound},       // past the end
	} {
		if err := writeSlot(l, bad.p, bad.i, bad.b); !errors.Is(err, bad.want) {
			t.Fatalf("WriteSlot(%v, %d, %q) = %v, want %v", bad.p, bad.i, bad.b, err, bad.want)
		}
	}
	wantSlots(t, l, p1, r1, payload(0), nil, nil, payload(9))
	// Roll to later segments, then write a slot into the first.
	var last Pos
	for i := range 12 {
		if last, err = l.Append(record(10+i, 700)); err != nil {
			t.Fatal(err)
		}
	}
	if last.Seg() == p1.Seg() {
		t.Fatalf("no roll: %v", last)
	}
	if err := writeSlot(l, p1, 1, payload(5)); err != nil {
		t.Fatal(err)
	}
	wantSlots(t, l, p1, r1, payload(0), payload(5), nil, payload(9))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, rec := open(t, dir, Options{})
	if rec.Cut != 0 {
		t.Fatalf("recovery cut %d bytes", rec.Cut)
	}
	wantSlots(t, l, p1, r1, payload(0), payload(5), nil, payload(9))
	wantSlots(t, l, p3, r3, nil, payload(2))
	ps, rs := scanAll(t, l)
	if len(ps) != 16 || ps[0] != p1 || ps[1] != p2 || ps[2] != p3 || !bytes.Equal(rs[2], r3) {
		t.Fatalf("scan: %d records, %v", len(ps), ps[:3])
	}
	// A dropped segment's slots answer ErrNotFound (the log goes on).
	if _, err := l.Drop(p1.Seg()); err != nil {
		t.Fatal(err)
	}
	if err := writeSlot(l, p1, 2, payload(6)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("slot in a dropped segment: %v", err)
	}
	if _, err := l.Append(record(99, 20)); err != nil {
		t.Fatalf("append after a refused slot: %v", err)
	}
	if _, err := l.QueueWithSlots(r1, MaxSlots+1); err == nil {
		t.Fatal("too many slots queued")
	}
}

// slotLog writes two records and a last one with 4 slots, slot 1 and 2 written, and returns
// the segment's bytes, the last record's position and records.
func slotLog(t *testing.T, dir string) ([]byte, []Pos, [][]byte) {
	t.Helper()
	l, _, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ps []Pos
	var rs [][]byte
	for i, size := range []int{500, 320, 300} {
		r := record(i, size)
		p := queueSlots(t, l, r, 4*(i/2))
		ps, rs = append(ps, p), append(rs, r)
	}
	for _, i := range []int{1, 2} {
		if err := writeSlot(l, ps[2], i, payload(i)); err != nil {
			t.Fatal(err)
		}
	}
	return closedSegment(t, l, dir), ps, rs
}

// Every byte of every slot damaged, and slot 1 torn at every length while a new payload
// overwrote it: the record reads whole and is not cut, the damaged or torn slot reads empty,
// the others as written.
func TestDamagedOrTornSlotAtEveryByte(t *testing.T) {
	data, ps, rs := slotLog(t, t.TempDir())
	noSyncs(t)
	dir := t.TempDir()
	seg := filepath.Join(dir, segName(1))
	slots0 := int(ps[2].Off()) + frameHeader + len(rs[2])
	if slots0+4*SlotSize != len(data) {
		t.Fatalf("slots end at %d, segment at %d", slots0+4*SlotSize, len(data))
	}
	check := func(what string, want ...[]byte) {
		t.Helper()
		l, rec, err := Open(dir, Options{Sync: SyncInterval})
		if err != nil {
			t.Fatalf("%s: Open: %v", what, err)
		}
		defer l.Close()
		if rec.Cut != 0 || rec.Records != 3 {
			t.Fatalf("%s: recovery %+v", what, rec)
		}
		wantSlots(t, l, ps[2], rs[2], want...)
		mustRead(t, l, ps[1], rs[1])
	}
	for i := slots0; i < len(data); i++ {
		bad := bytes.Clone(data)
		bad[i] ^= 0x5a
		if err := os.WriteFile(seg, bad, 0o640); err != nil {
			t.Fatal(err)
		}
		want := [][]byte{nil, payload(1), payload(2), nil}
		want[(i-slots0)/SlotSize] = nil // a damaged empty slot stays empty: its CRC fails
		check(fmt.Sprintf("damaged byte %d", i), want...)
	}
	// Slot 1 rewritten with payload(7), torn after each of its first 23 bytes.
	whole := slotBytes(ps[2], 1, payload(7))
	for n := 1; n < SlotSize; n++ {
		torn := bytes.Clone(data)
		copy(torn[slots0+SlotSize:], whole[:n])
		if err := os.WriteFile(seg, torn, 0o640); err != nil {
			t.Fatal(err)
		}
		check(fmt.Sprintf("slot torn after %d bytes", n), nil, nil, payload(2), nil)
	}
	torn := bytes.Clone(data)
	copy(torn[slots0+SlotSize:], whole)
	if err := os.WriteFile(seg, torn, 0o640); err != nil {
		t.Fatal(err)
	}
	check("slot whole", nil, payload(7), payload(2), nil)
	// A slot copied to another index or record does not check there.
	moved := bytes.Clone(data)
	copy(moved[slots0+3*SlotSize:], data[slots0+SlotSize:slots0+2*SlotSize])
	if err := os.WriteFile(seg, moved, 0o640); err != nil {
		t.Fatal(err)
	}
	check("slot copied to index 3", nil, payload(1), payload(2), nil)
}

// slotBytes is a slot as WriteSlot lays it.
func slotBytes(p Pos, i int, b []byte) []byte {
	var w [SlotSize]byte
	c := slotCRC(p, i, b)
	w[0], w[1], w[2], w[3] = byte(c), byte(c>>8), byte(c>>16), byte(c>>24)
	copy(w[4:], b)
	return w[:]
}

// A frame torn inside its slots' room (its group's write torn) was never whole: Open cuts it.
func TestTornInSlotRoom(t *testing.T) {
	data, ps, rs := slotLog(t, t.TempDir())
	noSyncs(t)
	dir := t.TempDir()
	slots0 := int64(ps[2].Off()) + frameHeader + int64(len(rs[2]))
	for cut := slots0; cut < int64(len(data)); cut++ {
		if err := os.WriteFile(filepath.Join(dir, segName(1)), data[:cut], 0o640); err != nil {
			t.Fatal(err)
		}
		checkCut(t, dir, ps, rs, cut)
		if t.Failed() {
			t.Fatalf("torn at byte %d", cut)
		}
	}
}

// crcLE is crc32.Update over the bytes it stands for: a frame's and a slot's CRC as before it.
func TestCRCLEMatchesUpdate(t *testing.T) {
	for _, c := range []struct {
		pos  Pos
		word uint64
		n    int
	}{{At(1, 16), 700 | 5<<24, 4}, {At(7, 1<<25), 3, 1}, {Pos(1<<63 | 12345), 1<<32 - 1, 4}, {At(2, 99), 8, 1}} {
		var h [12]byte
		binary.LittleEndian.PutUint64(h[:8], uint64(c.pos))
		binary.LittleEndian.PutUint32(h[8:], uint32(c.word))
		rec := []byte("a record's bytes")
		want := crc32.Update(crc32.Update(0, castagnoli, h[:8+c.n]), castagnoli, rec)
		if got := crc32.Update(crcLE(crcLE(0, uint64(c.pos), 8), c.word, c.n), castagnoli, rec); got != want {
			t.Errorf("%v %x/%d: %08x, want %08x", c.pos, c.word, c.n, got, want)
		}
	}
	if got, want := frameCRC(At(3, 40), 17, []byte("x")), crc32.Update(crc32.Update(0, castagnoli, []byte{40, 0, 0, 0, 3, 0, 0, 0, 17, 0, 0, 0}), castagnoli, []byte("x")); got != want {
		t.Errorf("frameCRC %08x, want %08x", got, want)
	}
}
