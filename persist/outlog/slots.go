package outlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
)

// Status slots: a record queued with QueueWithSlots is followed by room for a few fixed-size
// slots, outside its frame's CRC, that are written later in place (WriteSlot): what became of
// the record, without a record of its own to find. Each slot is its CRC-32C (over the record's
// position, the slot's index and its payload) and its payload; a slot torn by a crash fails
// its CRC and reads as empty, and a slot never written is zeros. The frame's length word
// carries the number of slots in its high byte (records are under 2^24 bytes), so a scan
// steps over them and a record with none is framed as before.
const (
	// SlotSize is a slot's bytes: its CRC (4) and its payload (SlotPayload).
	SlotSize    = 24
	SlotPayload = SlotSize - 4
	// MaxSlots is the most slots a record may have.
	MaxSlots = 8
)

// ErrBadSlot: a slot write names no slot of a record (the index is past the record's slots, or
// the position holds no record with slots), or its payload is all zeros (an empty slot).
var ErrBadSlot = errors.New("outlog: no such slot")

func slotCRC(pos Pos, i int, payload []byte) uint32 {
	return crc32.Update(crcLE(crcLE(0, uint64(pos), 8), uint64(i), 1), castagnoli, payload)
}

// slotWrite is a WriteSlot waiting for the writer.
type slotWrite struct {
	pos  Pos
	i    int
	b    [SlotSize]byte
	done func(error)
	// AppendSlotted's: its record's position and callback, answered in done's place (no
	// closure a write).
	rpos  Pos
	rdone func(Pos, error)
}

// answer tells the slot write's caller how it went.
func (w *slotWrite) answer(err error) {
	if w.rdone != nil {
		w.rdone(w.rpos, err)
		return
	}
	w.done(err)
}

// WriteSlot writes payload (SlotPayload bytes, not all zeros) into slot i of the record at p,
// which must have been queued with more than i slots (the writer checks the frame's slot count
// and answers ErrBadSlot otherwise; it cannot check that p is a record's position, so p must be
// one the caller got from Queue or read back). done is called from the writer's goroutine once
// the slot is written (SyncBatch: and synced), after the record itself; it must not block. A
// slot in a dropped segment answers ErrNotFound.
func (l *Log) WriteSlot(p Pos, i int, payload []byte, done func(error)) {
	if len(payload) != SlotPayload || i < 0 || i >= MaxSlots || p.Off() < segHeader || allZero(payload) {
		done(ErrBadSlot)
		return
	}
	w := slotWrite{pos: p, i: i, done: done}
	binary.LittleEndian.PutUint32(w.b[:4], slotCRC(p, i, payload))
	copy(w.b[4:], payload)
	l.mu.Lock()
	if err := l.refusing(); err != nil {
		l.mu.Unlock()
		done(err)
		return
	}
	if end := At(l.seg, uint32(l.end)); p >= end {
		l.mu.Unlock()
		done(ErrNotFound)
		return
	}
	l.slotq = append(l.slotq, w)
	l.kick()
	l.mu.Unlock()
}

// AppendSlotted appends rec and writes, in the same round of the writer, slot i of the record
// at p with the payload that payload(pos, dst) fills in dst (SlotPayload bytes, zeros), pos
// being where rec lies (an outcome and the slot of its accept that names it): one round and
// one sync instead of two, and rec is written before the slot. payload is called before
// AppendSlotted returns, under the log's lock: it must not block or call the log. done
// is called from the writer's goroutine with rec's position once both are written (SyncBatch:
// and synced), or with the error that stopped either: rec may have been written when the slot
// was not (a slot refused as WriteSlot refuses it answers ErrBadSlot, and rec is still
// written). done must not block. rec is copied before AppendSlotted returns.
func (l *Log) AppendSlotted(rec []byte, p Pos, i int, payload func(pos Pos, dst []byte), done func(Pos, error)) {
	if i < 0 || i >= MaxSlots || p.Off() < segHeader {
		done(0, ErrBadSlot)
		return
	}
	l.mu.Lock()
	if end := At(l.seg, uint32(l.end)); p >= end {
		l.mu.Unlock()
		done(0, ErrNotFound)
		return
	}
	_, pos, err := l.enqueueLocked(rec, len(rec), 0, nil, nil)
	if err != nil {
		l.mu.Unlock()
		done(0, err)
		return
	}
	l.slotq = append(l.slotq, slotWrite{pos: p, i: i, rpos: pos, rdone: done})
	w := &l.slotq[len(l.slotq)-1]
	b := w.b[4:]
	payload(pos, b)
	if allZero(b) {
		w.i = MaxSlots // no record has it: the writer answers ErrBadSlot
	}
	binary.LittleEndian.PutUint32(w.b[:4], slotCRC(p, w.i, b))
	l.mu.Unlock()
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// ReadSlots returns the record at p and its slots' payloads in order, nil for a slot empty or
// torn (its CRC fails). The record and its slots are read with one pread when they fit in 1 KiB.
func (l *Log) ReadSlots(p Pos) ([]byte, [][]byte, error) {
	rec, raw, err := l.read(p, true)
	if err != nil {
		return nil, nil, err
	}
	slots := make([][]byte, len(raw)/SlotSize)
	for i := range slots {
		s := raw[i*SlotSize : (i+1)*SlotSize : (i+1)*SlotSize]
		if binary.LittleEndian.Uint32(s[:4]) == slotCRC(p, i, s[4:]) && !allZero(s[4:]) {
			slots[i] = s[4:]
		}
	}
	return rec, slots, nil
}

// slotFiles are the segments other than the one being written that the writer wrote slots
// into, open for writing, and whether each was written since its last sync.
type slotFiles map[uint32]*slotFile

type slotFile struct {
	f     *os.File
	dirty bool
}

// writeSlots writes the slot writes ws, f being segment fseg (the one being written) and tl
// the copy of its last bytes: each after checking that its record has the slot. Those whose
// records lie in the copy are checked there and written gathered (mirror.go); the others are
// read and written one by one. It returns the error of each write (nil: written) and, as
// fatal, a write failure that stops the log.
func (l *Log) writeSlots(ws []slotWrite, f *os.File, fseg uint32, others slotFiles, dirty *bool, tl *tail) (errs []error, fatal error) {
	errs = make([]error, len(ws))
	var ats []int64 // the offsets of the slots written into the copy
	done := make([]bool, len(ws))
	for k := range ws {
		if tl.seg != fseg {
			break
		}
		at, ok, err := tl.slot(&ws[k])
		if !ok {
			continue
		}
		if err != nil {
			errs[k] = err
		} else {
			ats = append(ats, at)
		}
		done[k] = true // settled here: the loop below passes it by
	}
	for _, s := range spans(ats) {
		if _, err := f.WriteAt(tl.bytes(s), s[0]); err != nil {
			return errs, fmt.Errorf("slots at %v: %w", At(fseg, uint32(s[0])), err)
		}
		*dirty = true
	}
	for k, w := range ws {
		if done[k] {
			continue
		}
		file := f
		if w.pos.Seg() != fseg {
			sf := others[w.pos.Seg()]
			if sf == nil {
				l.readMu.Lock()
				gone := w.pos.Seg() < l.first
				l.readMu.Unlock()
				var of *os.File
				var err error
				if !gone {
					of, err = os.OpenFile(l.segPath(w.pos.Seg()), os.O_RDWR, 0)
				}
				if gone || errors.Is(err, os.ErrNotExist) {
					errs[k] = ErrNotFound
					continue
				}
				if err != nil {
					errs[k] = err
					continue
				}
				sf = &slotFile{f: of}
				others[w.pos.Seg()] = sf
			}
			file = sf.f
		}
		var h [4]byte
		if _, err := file.ReadAt(h[:], int64(w.pos.Off())); err != nil {
			if errors.Is(err, io.EOF) {
				err = ErrBadSlot
			}
			errs[k] = err
			continue
		}
		ln, ns := frameWord(binary.LittleEndian.Uint32(h[:]))
		if ln == 0 || int64(w.i) >= ns {
			errs[k] = ErrBadSlot
			continue
		}
		if _, err := file.WriteAt(w.b[:], int64(w.pos.Off())+frameHeader+ln+int64(w.i)*SlotSize); err != nil {
			return errs, fmt.Errorf("slot at %v: %w", w.pos, err)
		}
		if file == f {
			*dirty = true
		} else {
			others[w.pos.Seg()].dirty = true
		}
	}
	return errs, nil
}

// syncOthers syncs the other segments written into and closes them.
func syncOthers(others slotFiles) error {
	var first error
	for seg, sf := range others {
		if sf.dirty {
			if err := datasync(sf.f); err != nil && first == nil {
				first = err
			}
		}
		_ = sf.f.Close()
		delete(others, seg)
	}
	return first
}
