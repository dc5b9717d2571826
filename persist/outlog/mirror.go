package outlog

import (
	"encoding/binary"
	"slices"
)

// The writer keeps a copy of the last bytes it wrote to the segment being written (tail), so
// that a slot write for a record there needs no read (its frame's slot count is checked in
// the copy) and the slot writes of a round are gathered: sorted by offset, and those less than
// mergeGap apart written with one pwrite of the span between them, the bytes between the slots
// taken from the copy (the same bytes the file holds: only the writer writes a segment, and
// every write goes through the copy). A record's outcome and receipts, and the slots of the
// messages accepted one after another, lie close: a round's slots become a few writes instead
// of a read and a write each. (NATS's file store keeps a message block's last bytes in a cache
// the same way, and Badger's value log writes a batch as one buffer; neither writes in place.)
// A slot outside the copy (an older record, or one in an older segment) is read and written on
// its own, as before.
const (
	tailKeep = 2 << 20 // the bytes kept once the copy is trimmed
	tailMax  = 4 << 20 // the copy's length that trims it
	mergeGap = 4 << 10 // slots this close are written together with the bytes between them
)

// tail is the copy of segment seg's bytes [off, off+len(b)), which end where the writer's last
// write ended.
type tail struct {
	seg uint32
	off int64
	b   []byte
}

// reset empties the copy: the next write in seg at off starts it again.
func (t *tail) reset(seg uint32, off int64) {
	t.seg, t.off, t.b = seg, off, t.b[:0]
}

// wrote records the write of buf at off in segment seg.
func (t *tail) wrote(seg uint32, off int64, buf []byte) {
	if seg != t.seg || off != t.off+int64(len(t.b)) {
		t.reset(seg, off)
	}
	if len(t.b)+len(buf) > tailMax {
		if len(buf) >= tailKeep {
			t.reset(seg, off)
		} else {
			drop := len(t.b) + len(buf) - tailKeep
			n := copy(t.b, t.b[drop:])
			t.b = t.b[:n]
			t.off += int64(drop)
		}
	}
	t.b = append(t.b, buf...)
}

// cut forgets the bytes from off on (the segment was truncated there).
func (t *tail) cut(seg uint32, off int64) {
	if seg != t.seg || off < t.off {
		t.reset(seg, off)
		return
	}
	if end := t.off + int64(len(t.b)); off < end {
		t.b = t.b[:off-t.off]
	}
}

// slot applies slot write w to the copy when its record lies there: the offset of the slot's
// bytes in the file, and ok. ok is false when the record is not in the copy (the caller writes
// it the slow way); err is ErrBadSlot when it is, but has no slot w.i.
func (t *tail) slot(w *slotWrite) (at int64, ok bool, err error) {
	off := int64(w.pos.Off())
	if w.pos.Seg() != t.seg || off < t.off || off+frameHeader > t.off+int64(len(t.b)) {
		return 0, false, nil
	}
	ln, ns := frameWord(binary.LittleEndian.Uint32(t.b[off-t.off:]))
	if ln == 0 || int64(w.i) >= ns {
		return 0, true, ErrBadSlot
	}
	at = off + frameHeader + ln + int64(w.i)*SlotSize
	if at+SlotSize > t.off+int64(len(t.b)) {
		return 0, true, ErrBadSlot // past what was written: not a record with that slot
	}
	copy(t.b[at-t.off:], w.b[:])
	return at, true, nil
}

// spans gathers the slots' offsets (each SlotSize bytes) into the spans to write: sorted, and
// merged where less than mergeGap apart. Each span is [from, to).
func spans(at []int64) [][2]int64 {
	slices.Sort(at)
	var out [][2]int64
	for _, a := range at {
		if k := len(out); k > 0 && a <= out[k-1][1]+mergeGap {
			out[k-1][1] = max(out[k-1][1], a+SlotSize)
			continue
		}
		out = append(out, [2]int64{a, a + SlotSize})
	}
	return out
}

// bytes is the copy's bytes of span s (within it).
func (t *tail) bytes(s [2]int64) []byte { return t.b[s[0]-t.off : s[1]-t.off] }
