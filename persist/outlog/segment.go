package outlog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

// A segment file starts with a header: segMagic, its number (uint32, little-endian) and the
// CRC-32C of those 12 bytes. Records follow, each framed as its length (uint32), its CRC-32C
// and its bytes. The CRC covers the record's position, its length and its bytes, so a frame
// copied elsewhere, or a read at an offset inside another record, does not check.
const (
	segMagic    = "OUTLOG\x00\x01"
	segHeader   = 16
	frameHeader = 8
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// datasync makes a segment's written bytes durable. The tests that open a log once for each
// byte of a record swap it for a no-op: they check what recovery finds, not the disk.
var datasync = fdatasync

// pwrite writes a group (a test makes it fail as a full disk does).
var pwrite = (*os.File).WriteAt

// newTicker is SyncInterval's tick every d, and its stop (a test ticks by hand).
var newTicker = func(d time.Duration) (<-chan time.Time, func()) {
	t := time.NewTicker(d)
	return t.C, t.Stop
}

// frameCRC is the CRC of the record rec at pos, whose frame's length word is word (its length,
// and its number of status slots in the high byte).
func frameCRC(pos Pos, word uint32, rec []byte) uint32 {
	return crc32.Update(crcLE(crcLE(0, uint64(pos), 8), uint64(word), 4), castagnoli, rec)
}

// crcLE continues the CRC-32C crc over the n low bytes of v, little-endian: crc32.Update over
// those bytes, without a slice of them (a slice of a local array passed to crc32.Update escapes
// to the heap: an allocation a record and a slot). A few bytes by the table.
func crcLE(crc uint32, v uint64, n int) uint32 {
	crc = ^crc
	for i := range n {
		crc = castagnoli[byte(crc)^byte(v>>(8*i))] ^ crc>>8
	}
	return ^crc
}

// appendFrame appends the frame at pos of a record of size bytes (rec's, or filled in place by
// fill when rec is nil), with room for slots status slots after it (zeros: no slot written).
func appendFrame(b []byte, pos Pos, rec []byte, size, slots int, fill func(Pos, []byte)) []byte {
	word := uint32(size) | uint32(slots)<<24
	h := len(b)
	b = append(b, make([]byte, frameHeader)...)
	if rec != nil {
		b = append(b, rec...)
	} else {
		b = append(b, make([]byte, size)...)
		fill(pos, b[h+frameHeader:])
	}
	framed := b[h+frameHeader:] // not rec: reusing it would let rec escape with b
	binary.LittleEndian.PutUint32(b[h:], word)
	binary.LittleEndian.PutUint32(b[h+4:], frameCRC(pos, word, framed))
	return append(b, make([]byte, slots*SlotSize)...)
}

// frameWord splits a frame's length word: the record's length and its number of slots.
func frameWord(w uint32) (ln, slots int64) { return int64(w & MaxRecord), int64(w >> 24) }

// frameSize is the bytes a frame takes: its header, record and slots.
func frameSize(ln, slots int64) int64 { return frameHeader + ln + slots*SlotSize }

func header(seg uint32) []byte {
	b := binary.LittleEndian.AppendUint32([]byte(segMagic), seg)
	return binary.LittleEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
}

// segments lists the log's segment numbers, oldest first.
func listSegments(dir string) ([]uint32, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var segs []uint32
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".seg")
		if !ok || e.IsDir() {
			continue
		}
		n, err := strconv.ParseUint(name, 10, 32)
		if err != nil || segName(uint32(n)) != e.Name() {
			continue
		}
		segs = append(segs, uint32(n))
	}
	slices.Sort(segs)
	return segs, nil
}

// recover finds the segments, checks the last one record by record and cuts it after its last
// whole record, and returns it open for writing. The segments before it were synced when the
// writer moved past them (roll), so only the last can end torn.
func (l *Log) recover() (*os.File, Recovery, error) {
	segs, err := listSegments(l.dir)
	if err != nil {
		return nil, Recovery{}, err
	}
	rec := Recovery{Segments: len(segs)}
	if len(segs) == 0 {
		f, err := l.create(1)
		if err != nil {
			return nil, rec, err
		}
		l.seg, l.end, l.first = 1, segHeader, 1
		rec.Segments, rec.End = 1, At(1, segHeader)
		return f, rec, nil
	}
	last := segs[len(segs)-1]
	l.first, l.seg = segs[0], last
	f, err := os.OpenFile(l.segPath(last), os.O_RDWR, 0)
	if err != nil {
		return nil, rec, err
	}
	end, n, size, err := checkSegment(f, last)
	if err != nil {
		_ = f.Close()
		return nil, rec, err
	}
	if end < segHeader {
		// Torn while it was being created: lay its header anew.
		if err = f.Truncate(0); err == nil {
			_, err = f.WriteAt(header(last), 0)
		}
		if err == nil {
			err = datasync(f)
		}
		if err != nil {
			_ = f.Close()
			return nil, rec, err
		}
		rec.Cut, end = size, segHeader
	} else if end < size {
		if err := f.Truncate(end); err != nil {
			_ = f.Close()
			return nil, rec, err
		}
		if err := datasync(f); err != nil {
			_ = f.Close()
			return nil, rec, err
		}
		rec.Cut = size - end
	}
	l.end, rec.Records, rec.End = end, n, At(last, uint32(end))
	return f, rec, nil
}

// checkSegment reads segment seg from its start: the offset after its last whole record (0 if
// its header is torn: the file is no longer than a header), how many records it holds, and the
// file's size. A header that is whole but wrong is an error: the file is not this log's.
func checkSegment(f *os.File, seg uint32) (end int64, n int, size int64, err error) {
	st, err := f.Stat()
	if err != nil {
		return 0, 0, 0, err
	}
	size = st.Size()
	r := bufio.NewReaderSize(io.NewSectionReader(f, 0, size), 1<<20)
	var h [segHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil || string(h[:]) != string(header(seg)) {
		if size <= segHeader {
			return 0, 0, size, nil
		}
		return 0, 0, size, fmt.Errorf("outlog: %s: not a segment of this log (header %x)", segName(seg), h)
	}
	end = segHeader
	var buf []byte
	for {
		_, fs, ok := nextFrame(r, At(seg, uint32(end)), &buf)
		if !ok {
			return end, n, size, nil
		}
		end += fs
		n++
	}
}

// nextFrame reads the frame at pos from r, its slots skipped: the record and the frame's size;
// ok is false at the end of the reader or at a frame that is torn (its slots' room included)
// or does not check. The record is read into *buf (grown as needed).
func nextFrame(r *bufio.Reader, pos Pos, buf *[]byte) (rec []byte, size int64, ok bool) {
	var h [frameHeader]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, 0, false
	}
	word := binary.LittleEndian.Uint32(h[:4])
	ln, slots := frameWord(word)
	size = frameSize(ln, slots)
	if ln == 0 || slots > MaxSlots || int64(pos.Off())+size > 1<<32-1 {
		return nil, 0, false
	}
	if cap(*buf) < int(ln) {
		*buf = make([]byte, ln)
	}
	rec = (*buf)[:ln]
	if _, err := io.ReadFull(r, rec); err != nil {
		return nil, 0, false
	}
	if binary.LittleEndian.Uint32(h[4:]) != frameCRC(pos, word, rec) {
		return nil, 0, false
	}
	if _, err := r.Discard(int(slots * SlotSize)); err != nil {
		return nil, 0, false // torn in its slots' room: the frame was never whole
	}
	return rec, size, true
}

// create makes segment seg with its header, synced, and syncs the directory that names it.
func (l *Log) create(seg uint32) (*os.File, error) {
	f, err := os.OpenFile(l.segPath(seg), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o640)
	if err != nil {
		return nil, err
	}
	if _, err = f.WriteAt(header(seg), 0); err == nil {
		if err = datasync(f); err == nil {
			err = SyncDir(l.dir)
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return f, nil
}

// SyncDir syncs directory dir, so that a file created in it stays listed after a power cut.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// writer writes the queued groups, f being segment fseg, the last at Open. It is the only
// goroutine that writes to a segment.
func (l *Log) writer(f *os.File, fseg uint32) {
	defer close(l.stopped)
	dirty := false // written since the last sync
	var tick <-chan time.Time
	if l.sync == SyncInterval {
		c, stop := newTicker(l.interval)
		defer stop()
		tick = c
	}
	var spare []*group
	carried := 0          // the records, slot writes and syncs of the last round
	others := slotFiles{} // older segments slots were written into
	// A copy of the last bytes written to f (mirror.go), its room taken once (not grown
	// by doubling as the first writes come).
	tl := tail{seg: fseg, b: make([]byte, 0, tailMax)}
	defer func() { _ = syncOthers(others) }()
	for {
		select {
		case <-l.wake:
		case <-tick:
			l.tickSync(f, &dirty, others)
			continue
		}
		for {
			if carried > 1 {
				// Callers come together (counted as the last round's records, slot writes
				// and syncs: a lone outcome, a record and its slot, counts two): the
				// handlers already runnable append first and share this round's writes and
				// wake (issue 32: about one round a message otherwise, two pwrites each). A
				// yield, not a timer: with nothing else to run it returns at once, where a
				// sub-millisecond timer waits a millisecond.
				runtime.Gosched()
			}
			l.mu.Lock()
			l.seal()
			batch, syncs, slots, closing, failed := l.queue, l.syncs, l.slotq, l.closed, l.err
			l.queue, l.syncs, l.slotq, spare = spare[:0], nil, nil, nil
			if len(batch) == 0 && len(syncs) == 0 && len(slots) == 0 {
				l.busy = false
				l.mu.Unlock()
				if closing {
					err := syncOthers(others)
					if dirty {
						if serr := datasync(f); err == nil {
							err = serr
						}
					}
					if err != nil {
						l.fail(err)
					}
					_ = f.Close()
					return
				}
				break
			}
			l.mu.Unlock()
			carried = len(slots) + len(syncs)
			for _, g := range batch {
				carried += g.n
			}
			l.stats.rounds.Add(1)
			l.stats.carried.Add(uint64(carried))
			err := failed
			var wfail *group // the group whose write failed
			for _, g := range batch {
				if err != nil {
					break
				}
				if g.seg != fseg {
					var nf *os.File
					if err = datasync(f); err == nil {
						nf, err = l.create(g.seg)
					}
					if err != nil {
						break
					}
					_ = f.Close()
					f, fseg, dirty = nf, g.seg, false
				}
				if _, err = pwrite(f, g.buf, g.off); err == nil {
					dirty = true
					tl.wrote(g.seg, g.off, g.buf)
				} else {
					wfail = g
				}
			}
			if wfail != nil && failed == nil && l.rewind(f, fseg, batch, slots, syncs, err) {
				l.mu.Lock()
				tl.cut(fseg, l.end)
				l.mu.Unlock()
				spare = nil
				continue
			}
			var slotErrs []error
			if err == nil && len(slots) > 0 {
				// After the groups: a slot's record is written before the slot (it was queued
				// before the slot's write was).
				slotErrs, err = l.writeSlots(slots, f, fseg, others, &dirty, &tl)
			}
			synced := false
			if err == nil && (l.sync == SyncBatch || len(syncs) > 0) {
				if dirty {
					dirty = false
					err = datasync(f)
					l.synced.Add(1)
				}
				if err == nil {
					err = syncOthers(others)
				}
				synced = err == nil
			}
			if err != nil {
				l.fail(err)
			} else if k := len(batch); k > 0 {
				g := batch[k-1]
				l.written.Lock()
				l.written.seg, l.written.end = g.seg, g.off+int64(len(g.buf))
				l.written.Unlock()
			}
			if synced {
				l.durable.Store(uint64(l.Written()))
			}
			for _, g := range batch {
				g.err = err
				close(g.done)
				for _, c := range g.calls {
					c.done(c.pos, err)
				}
			}
			for k, w := range slots {
				switch {
				case err != nil:
					w.answer(err)
				case slotErrs != nil:
					w.answer(slotErrs[k])
				default:
					w.answer(nil)
				}
			}
			for _, ch := range syncs {
				ch <- err
			}
			l.mu.Lock()
			for i, g := range batch {
				if cap(g.buf) <= 4<<20 && len(l.free) < 4 {
					l.free = append(l.free, g.buf[:0])
				}
				if cap(g.calls) <= 1<<14 && len(l.freeCalls) < 4 {
					// Answered above, and read by nothing else: a ticket's Wait reads done
					// and err only.
					clear(g.calls)
					l.freeCalls = append(l.freeCalls, g.calls[:0])
				}
				g.calls = nil
				batch[i] = nil
			}
			spare = batch
			l.mu.Unlock()
			// The interval's sync between two rounds too, not only once a burst ends: under
			// a steady load the queue is never found empty, and a power cut would lose more
			// than the last interval (review17 L3).
			select {
			case <-tick:
				l.tickSync(f, &dirty, others)
			default:
			}
		}
	}
}

// tickSync is SyncInterval's sync at its tick: of segment f when written since the last sync
// (*dirty), and of the other segments slots were written into; Durable then moves to what was
// written before it.
func (l *Log) tickSync(f *os.File, dirty *bool, others slotFiles) {
	if !*dirty && len(others) == 0 {
		return
	}
	w := l.Written() // written by the writer, which calls this: all of it is in f or before
	err := syncOthers(others)
	if *dirty {
		*dirty = false
		if serr := datasync(f); err == nil {
			err = serr
		}
	}
	if err != nil {
		l.fail(err)
	} else {
		l.durable.Store(uint64(w))
	}
	l.synced.Add(1)
}

// fail keeps the first write or sync failure: the records after a failed write may follow
// garbage, and a failed fdatasync may have dropped dirty pages, so the log appends nothing more
// (Open, after a restart, cuts what did not check).
func (l *Log) fail(err error) {
	l.mu.Lock()
	if l.err == nil {
		l.err = fmt.Errorf("outlog: %w", err)
	}
	l.mu.Unlock()
}

// Read returns the record at p, read with one pread when it is under 1 KiB less its frame.
func (l *Log) Read(p Pos) ([]byte, error) {
	rec, _, err := l.read(p, false)
	return rec, err
}

// read reads the frame at p: its record and, with slots, its slots' bytes (nil without).
func (l *Log) read(p Pos, slots bool) ([]byte, []byte, error) {
	seg, off := p.Seg(), int64(p.Off())
	l.written.RLock()
	ws, we := l.written.seg, l.written.end
	l.written.RUnlock()
	if off < segHeader || seg > ws || seg == ws && off+frameHeader > we {
		return nil, nil, ErrNotFound
	}
	f, err := l.reader(seg)
	if err != nil {
		return nil, nil, err
	}
	buf := make([]byte, 1024)
	n, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		if errors.Is(err, os.ErrClosed) {
			return nil, nil, ErrNotFound
		}
		return nil, nil, err
	}
	if n < frameHeader {
		return nil, nil, ErrCorrupt
	}
	word := binary.LittleEndian.Uint32(buf[:4])
	ln, ns := frameWord(word)
	want := frameHeader + ln // what must be read
	if slots {
		want = frameSize(ln, ns)
	}
	if ln == 0 || ns > MaxSlots || seg == ws && off+frameSize(ln, ns) > we {
		return nil, nil, ErrCorrupt
	}
	if want > int64(n) {
		if n < len(buf) {
			return nil, nil, ErrCorrupt // the file ends inside it
		}
		big := make([]byte, want)
		copy(big, buf[:n])
		if _, err := f.ReadAt(big[n:], off+int64(n)); err != nil {
			if errors.Is(err, io.EOF) {
				return nil, nil, ErrCorrupt
			}
			return nil, nil, err
		}
		buf = big
	}
	rec := buf[frameHeader : frameHeader+ln : frameHeader+ln]
	if binary.LittleEndian.Uint32(buf[4:8]) != frameCRC(p, word, rec) {
		return nil, nil, ErrCorrupt
	}
	if !slots {
		return rec, nil, nil
	}
	return rec, buf[frameHeader+ln : want : want], nil
}

// reader is segment seg open for reading.
func (l *Log) reader(seg uint32) (*os.File, error) {
	l.readMu.Lock()
	defer l.readMu.Unlock()
	if f, ok := l.readers[seg]; ok {
		return f, nil
	}
	if seg < l.first {
		return nil, ErrNotFound
	}
	f, err := os.Open(l.segPath(seg))
	if errors.Is(err, os.ErrNotExist) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	l.readers[seg] = f
	return f, nil
}

// Scan calls fn with each record from position from (0: the oldest segment's first) to the
// last written when Scan started, in order. rec is valid only during the call. A record that
// does not check ends the scan with ErrCorrupt (Open has cut the last segment's torn tail, so
// none should). An error from fn ends it with that error.
func (l *Log) Scan(from Pos, fn func(p Pos, rec []byte) error) error {
	l.written.RLock()
	ws, we := l.written.seg, l.written.end
	l.written.RUnlock()
	segs, err := listSegments(l.dir)
	if err != nil {
		return err
	}
	var buf []byte
	for _, seg := range segs {
		if seg < from.Seg() || seg > ws {
			continue
		}
		off := int64(segHeader)
		if seg == from.Seg() && int64(from.Off()) > off {
			off = int64(from.Off())
		}
		limit := int64(-1)
		if seg == ws {
			limit = we
		}
		if err := l.scanSegment(seg, off, limit, &buf, fn); err != nil {
			return err
		}
	}
	return nil
}

// scanSegment scans segment seg from off to limit (-1: to its end).
func (l *Log) scanSegment(seg uint32, off, limit int64, buf *[]byte, fn func(Pos, []byte) error) error {
	f, err := os.Open(l.segPath(seg))
	if errors.Is(err, os.ErrNotExist) {
		return nil // dropped meanwhile
	}
	if err != nil {
		return err
	}
	defer f.Close()
	if limit < 0 {
		st, err := f.Stat()
		if err != nil {
			return err
		}
		limit = st.Size()
	}
	r := bufio.NewReaderSize(io.NewSectionReader(f, off, limit-off), 256<<10)
	for off < limit {
		p := At(seg, uint32(off))
		rec, fs, ok := nextFrame(r, p, buf)
		if !ok {
			return fmt.Errorf("%w at %v", ErrCorrupt, p)
		}
		if err := fn(p, rec); err != nil {
			return err
		}
		off += fs
	}
	return nil
}

// Segment describes one segment file.
type Segment struct {
	Seg      uint32
	Size     int64
	Modified time.Time // its last write
}

// Segments lists the log's segments, oldest first.
func (l *Log) Segments() ([]Segment, error) {
	segs, err := listSegments(l.dir)
	if err != nil {
		return nil, err
	}
	out := make([]Segment, 0, len(segs))
	for _, seg := range segs {
		st, err := os.Stat(l.segPath(seg))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, Segment{seg, st.Size(), st.ModTime()})
	}
	return out, nil
}

// Drop deletes every segment numbered through and below, but never the one being written or
// any after it: their records read as ErrNotFound from then on. It returns how many it deleted.
func (l *Log) Drop(through uint32) (int, error) {
	l.mu.Lock()
	active := l.seg
	l.mu.Unlock()
	l.written.RLock()
	active = min(active, l.written.seg)
	l.written.RUnlock()
	if through >= active {
		through = active - 1
	}
	segs, err := listSegments(l.dir)
	if err != nil {
		return 0, err
	}
	l.readMu.Lock()
	if through+1 > l.first {
		l.first = through + 1
	}
	for seg, f := range l.readers {
		if seg <= through {
			_ = f.Close()
			delete(l.readers, seg)
		}
	}
	l.readMu.Unlock()
	n := 0
	for _, seg := range segs {
		if seg > through {
			break
		}
		if err := os.Remove(l.segPath(seg)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return n, err
		}
		n++
	}
	if n > 0 {
		return n, SyncDir(l.dir)
	}
	return 0, nil
}

// DropOlder deletes the oldest segments last written before cutoff, up to the first that was
// not (segments are written in order), never the one being written: retention by age.
func (l *Log) DropOlder(cutoff time.Time) (int, error) {
	segs, err := l.Segments()
	if err != nil {
		return 0, err
	}
	var through uint32
	for _, s := range segs {
		if !s.Modified.Before(cutoff) {
			break
		}
		through = s.Seg
	}
	if through == 0 {
		return 0, nil
	}
	return l.Drop(through)
}

// rewind answers a round whose write failed (a full disk: the log goes on once there is room)
// instead of stopping the log: the round's groups in segment fseg, and every group queued
// since, are answered err and cut off (the segment is truncated to where the first of them
// began, and appends go on from there); its groups in earlier segments were synced when the
// writer left them and are answered nil; its slot writes and syncs, and the slot writes queued
// since that name a cut record or whose record is cut (AppendSlotted), are answered err. It
// returns false, having done nothing, when the segment cannot be truncated (the log then
// stops, as for any other failure).
func (l *Log) rewind(f *os.File, fseg uint32, batch []*group, slots []slotWrite, syncs []chan error, err error) bool {
	cut := int64(-1)
	for _, g := range batch {
		if g.seg == fseg && (cut < 0 || g.off < cut) {
			cut = g.off
		}
	}
	if cut < 0 || f.Truncate(cut) != nil {
		return false
	}
	at := At(fseg, uint32(cut))
	l.mu.Lock()
	l.seal()
	later := l.queue
	l.queue = nil
	// The slot writes queued since whose records are cut: an AppendSlotted's record, or the
	// record a slot is written into (review17 L4: written next round, the slot would name a
	// record never written, and its caller be told it was).
	var cutSlots []slotWrite
	kept := l.slotq[:0]
	for _, w := range l.slotq {
		if w.pos >= at || w.rdone != nil && w.rpos >= at {
			cutSlots = append(cutSlots, w)
		} else {
			kept = append(kept, w)
		}
	}
	clear(l.slotq[len(kept):])
	l.slotq = kept
	l.seg, l.end = fseg, cut
	if l.onRewind != nil {
		l.onRewind(at)
	}
	l.mu.Unlock()
	l.written.Lock()
	l.written.seg, l.written.end = fseg, cut
	l.written.Unlock()
	cutErr := fmt.Errorf("%w: %w", ErrCut, err)
	for _, g := range append(batch, later...) {
		gerr := cutErr
		if g.seg < fseg {
			gerr = nil
		}
		g.err = gerr
		close(g.done)
		for _, c := range g.calls {
			c.done(c.pos, gerr)
		}
	}
	for _, w := range slots {
		w.answer(err)
	}
	for _, w := range cutSlots {
		w.answer(err)
	}
	for _, ch := range syncs {
		ch <- err
	}
	return true
}
