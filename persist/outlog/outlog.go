// Package outlog is an append-only log of records in numbered segment files, group-committed:
// the outbox's store of its own (bench/README.md, "Tenth pass: a log of the outbox's own").
// Each record is framed with its length and a CRC-32C that also covers where it lies, so a
// torn tail is found and cut at Open, and a read at a position that holds no record fails.
// An append answers with the record's position (segment and offset), which a reader reads back
// with one pread and no index. Whole segments are dropped for retention. It imports no package
// of the gateway.
//
// Concurrency: Append, AppendAsync, Read, Scan, Segments and Drop may be called from any
// goroutine. One writer goroutine owns the segment being written: it takes every record
// queued since its last write, writes them with one write(2) and (SyncBatch) one fdatasync,
// then answers their callers. The lock order is mu, then readMu.
package outlog

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"
)

// Errors.
var (
	// ErrNotFound: no record lies at the position (a dropped segment, a position past the end,
	// or one in no segment of this log).
	ErrNotFound = errors.New("outlog: no record at this position")
	// ErrCorrupt: the bytes at the position are not a whole record written there (a position
	// inside another record, or a record damaged on disk).
	ErrCorrupt = errors.New("outlog: corrupt record")
	// ErrClosed: the log was closed.
	ErrClosed = errors.New("outlog: closed")
	// ErrTooLarge: a record over MaxRecord bytes, or an empty one.
	ErrTooLarge = errors.New("outlog: record empty or over MaxRecord bytes")
	// ErrCut wraps the error a record's write is answered with when the write failed and the
	// log cut it off and went on (a full disk: rewind): the record lies nowhere, and its
	// position is the next record's. Any other write error leaves the record in doubt.
	ErrCut = errors.New("outlog: write cut off")
)

// MaxRecord is the largest record (16 MiB less one byte): a larger length in a frame is damage.
const MaxRecord = 1<<24 - 1

// Sync is when appended records reach the disk.
type Sync string

const (
	// SyncBatch: each group of appends is written and fdatasync'd before any of its callers is
	// answered (survives a power cut).
	SyncBatch Sync = "batch"
	// SyncInterval: each group is written (to the page cache) before its callers are answered,
	// and the segment is fdatasync'd every Options.Interval (survives a process kill; a power
	// cut loses at most the last interval).
	SyncInterval Sync = "interval"
)

// Options configure Open.
type Options struct {
	Sync     Sync          // "" means SyncBatch
	Interval time.Duration // SyncInterval's period; 0 means 100 ms (persist's --fsync interval)
	// SegmentSize: a segment is closed before a record would take it past this (a record
	// larger than it gets a segment of its own); 0 means 64 MiB, at most 1 GiB (offsets are 32
	// bits, and a record up to MaxRecord may follow the last).
	SegmentSize int64
}

// Pos is where a record lies: its segment's number in the high 32 bits and its offset in that
// segment in the low 32. No record lies at Pos 0 (offset 0 is the segment's header), so 0 can
// mean "none" (the end of a chain of records).
type Pos uint64

// At is the position of offset off in segment seg.
func At(seg uint32, off uint32) Pos { return Pos(uint64(seg)<<32 | uint64(off)) }

// Seg is the position's segment number.
func (p Pos) Seg() uint32 { return uint32(p >> 32) }

// Off is the position's offset in its segment.
func (p Pos) Off() uint32 { return uint32(p) }

func (p Pos) String() string { return fmt.Sprintf("%d:%d", p.Seg(), p.Off()) }

// Recovery is what Open found and repaired.
type Recovery struct {
	Segments int   // segment files found
	Cut      int64 // bytes cut from the last segment's torn tail (0: it ended on a whole record)
	Records  int   // whole records in the last segment
	End      Pos   // where the next record goes
}

// Log is an open log. Its methods are safe for concurrent use.
type Log struct {
	dir      string
	sync     Sync
	interval time.Duration
	segSize  int64

	mu     sync.Mutex
	seg    uint32 // the segment appends go to
	end    int64  // the offset after the last record queued in seg
	cur    *group // the group being filled; nil when none is
	queue  []*group
	busy   bool  // the writer has work or is doing it
	err    error // the first write or sync failure: appends fail from then on
	closed bool
	free   [][]byte     // group buffers the writer gave back
	syncs  []chan error // Sync's callers, answered after the writer's next sync
	slotq  []slotWrite  // WriteSlot's writes, written after the groups queued with them
	// freeCalls are group callback lists the writer gave back, emptied: a round's list grew
	// from nothing by appends under mu (and, for an accept, under the outbox's lock too).
	freeCalls [][]asyncCall

	wake    chan struct{}
	synced  atomic.Uint64 // the writer's syncs of a written group (tests watch it)
	stats   struct{ rounds, carried, wakes atomic.Uint64 }
	stopped chan struct{} // closed when the writer returns

	written struct { // what readers may read: every record before (seg, end) is written
		sync.RWMutex
		seg uint32
		end int64
	}
	// durable: every record before this position is on disk (synced); Durable.
	durable atomic.Uint64
	// onRewind is told, under mu, where a rewind cut the log (SetOnRewind).
	onRewind func(Pos)

	readMu  sync.Mutex
	readers map[uint32]*os.File // segments opened for reading (the writer's own file apart)
	first   uint32              // the oldest segment not dropped
}

// group is the records queued between two writes, all in one segment.
type group struct {
	seg   uint32
	off   int64 // where its first record goes
	buf   []byte
	done  chan struct{} // closed once the group is written (and, SyncBatch, synced)
	err   error         // set before done is closed
	calls []asyncCall   // AppendAsync's callbacks
	n     int           // its records
}

type asyncCall struct {
	pos  Pos
	done func(Pos, error)
}

// Open opens (or creates) the log in dir, cuts a torn tail off its last segment, and starts
// its writer.
func Open(dir string, o Options) (*Log, Recovery, error) {
	switch o.Sync {
	case "":
		o.Sync = SyncBatch
	case SyncBatch, SyncInterval:
	default:
		return nil, Recovery{}, fmt.Errorf("outlog: sync mode %q (want %q or %q)", o.Sync, SyncBatch, SyncInterval)
	}
	if o.Interval <= 0 {
		o.Interval = 100 * time.Millisecond
	}
	if o.SegmentSize <= 0 {
		o.SegmentSize = 64 << 20
	}
	if o.SegmentSize < segHeader+frameHeader+1 || o.SegmentSize > 1<<30 {
		return nil, Recovery{}, fmt.Errorf("outlog: segment size %d out of range", o.SegmentSize)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, Recovery{}, err
	}
	l := &Log{dir: dir, sync: o.Sync, interval: o.Interval, segSize: o.SegmentSize,
		wake: make(chan struct{}, 1), stopped: make(chan struct{}), readers: map[uint32]*os.File{}}
	f, rec, err := l.recover()
	if err != nil {
		return nil, Recovery{}, err
	}
	l.written.seg, l.written.end = l.seg, l.end
	// What a killed process left in the page cache is made durable once, so that Durable
	// holds from the start (the last segment's; those before were synced at their roll).
	if err := datasync(f); err != nil {
		_ = f.Close()
		return nil, Recovery{}, err
	}
	l.durable.Store(uint64(At(l.seg, uint32(l.end))))
	go l.writer(f, l.seg)
	return l, rec, nil
}

// Append appends rec and returns its position once it is written (SyncBatch: and synced).
// rec is copied before Append returns; the caller may reuse it.
func (l *Log) Append(rec []byte) (Pos, error) {
	t, err := l.Queue(rec)
	if err != nil {
		return 0, err
	}
	return t.Pos, t.Wait()
}

// Ticket is a queued record: where it will lie, and the wait for its write.
type Ticket struct {
	Pos Pos
	g   *group
}

// Wait returns once the record is written (SyncBatch: and synced), with the error that stopped
// its write if one did.
func (t Ticket) Wait() error {
	<-t.g.done
	return t.g.err
}

// Queue queues rec and returns at once with where it will lie: a caller that links records
// (each holding the position of the one before it) takes the next position under its own lock
// and waits outside it. rec is copied before Queue returns.
func (l *Log) Queue(rec []byte) (Ticket, error) {
	return l.QueueWithSlots(rec, 0)
}

// QueueWithSlots is Queue, the record followed by room for slots status slots (at most
// MaxSlots), written later in place with WriteSlot and read with ReadSlots.
func (l *Log) QueueWithSlots(rec []byte, slots int) (Ticket, error) {
	if slots < 0 || slots > MaxSlots {
		return Ticket{}, fmt.Errorf("outlog: %d slots (at most %d)", slots, MaxSlots)
	}
	g, pos, err := l.enqueue(rec, len(rec), slots, nil, nil)
	if err != nil {
		return Ticket{}, err
	}
	return Ticket{pos, g}, nil
}

// QueueFunc is QueueWithSlots for a record of n bytes that names its own position (an id made
// from it): fill is called, under the log's lock, with the position and the n bytes to fill
// in place. It must not block or call the log.
func (l *Log) QueueFunc(n, slots int, fill func(p Pos, rec []byte)) (Ticket, error) {
	return l.QueueFuncThen(n, slots, fill, nil)
}

// QueueFuncThen is QueueFunc with done called from the writer's goroutine, with the record's
// position, once the record is written (SyncBatch: and synced) or with the error that stopped
// it: after the ticket's Wait returns. done must not block.
func (l *Log) QueueFuncThen(n, slots int, fill func(p Pos, rec []byte), done func(Pos, error)) (Ticket, error) {
	if slots < 0 || slots > MaxSlots {
		return Ticket{}, fmt.Errorf("outlog: %d slots (at most %d)", slots, MaxSlots)
	}
	g, pos, err := l.enqueue(nil, n, slots, fill, done)
	if err != nil {
		return Ticket{}, err
	}
	return Ticket{pos, g}, nil
}

// AppendAsync queues rec and returns at once with where it will lie; done is called from the
// writer's goroutine with that position once it is written (SyncBatch: and synced), or with
// the error that stopped it (from AppendAsync itself if rec was refused: it then returns 0).
// done must not block. rec is copied before AppendAsync returns.
func (l *Log) AppendAsync(rec []byte, done func(Pos, error)) Pos {
	_, pos, err := l.enqueue(rec, len(rec), 0, nil, done)
	if err != nil {
		done(0, err)
	}
	return pos
}

// enqueue frames a record of size bytes into the group being filled (rec's bytes, or those
// fill writes in place when rec is nil), registers done with it, and wakes the writer.
func (l *Log) enqueue(rec []byte, size, slots int, fill func(Pos, []byte), done func(Pos, error)) (*group, Pos, error) {
	if size <= 0 || size > MaxRecord {
		return nil, 0, ErrTooLarge
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.enqueueLocked(rec, size, slots, fill, done)
}

// enqueueLocked is enqueue with mu held.
func (l *Log) enqueueLocked(rec []byte, size, slots int, fill func(Pos, []byte), done func(Pos, error)) (*group, Pos, error) {
	if err := l.refusing(); err != nil {
		return nil, 0, err
	}
	n := frameSize(int64(size), int64(slots))
	if l.end+n > l.segSize && l.end > segHeader {
		l.seal()
		l.seg++
		l.end = segHeader
	}
	if l.cur == nil {
		l.cur = &group{seg: l.seg, off: l.end, done: make(chan struct{})}
		if k := len(l.free); k > 0 {
			l.cur.buf, l.free = l.free[k-1], l.free[:k-1]
		}
		if k := len(l.freeCalls); k > 0 {
			l.cur.calls, l.freeCalls = l.freeCalls[k-1], l.freeCalls[:k-1]
		}
	}
	g := l.cur
	pos := At(l.seg, uint32(l.end))
	g.buf = appendFrame(g.buf, pos, rec, size, slots, fill)
	l.end += n
	g.n++
	if done != nil {
		g.calls = append(g.calls, asyncCall{pos, done})
	}
	l.kick()
	return g, pos, nil
}

// refusing is why appends fail now (nil: they do not). mu held.
func (l *Log) refusing() error {
	if l.closed {
		return ErrClosed
	}
	return l.err
}

// kick wakes the writer unless it is already at work (it looks for more before it rests). mu
// held.
func (l *Log) kick() {
	if !l.busy {
		l.busy = true
		l.stats.wakes.Add(1)
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// seal moves the group being filled to the writer's queue. mu held.
func (l *Log) seal() {
	if l.cur != nil {
		l.queue = append(l.queue, l.cur)
		l.cur = nil
	}
}

// Sync makes every record appended before it durable, whatever the mode (SyncInterval's
// caller that needs one record on disk now; SyncBatch's appends need none).
func (l *Log) Sync() error {
	ch := make(chan error, 1)
	l.mu.Lock()
	if err := l.refusing(); err != nil {
		l.mu.Unlock()
		return err
	}
	l.syncs = append(l.syncs, ch)
	l.kick()
	l.mu.Unlock()
	return <-ch
}

// Stats counts the writer's work since Open: how large its rounds are, and how often a caller
// found it idle and woke it (issue 32: an accept that finds the writer idle is the one a write
// by its caller, leader/follower, would save a wake-up for; bench/README.md, "Twentieth pass").
type Stats struct {
	Rounds  uint64 // the writer's rounds: each one write of what was queued since the last
	Carried uint64 // the records, slot writes and Sync calls those rounds took
	Wakes   uint64 // the appends, slot writes and Sync calls that found the writer idle and woke it
}

// Stats is what the writer did since Open.
func (l *Log) Stats() Stats {
	return Stats{Rounds: l.stats.rounds.Load(), Carried: l.stats.carried.Load(), Wakes: l.stats.wakes.Load()}
}

// Written is the position before which every record is written (readable): a record queued
// at or after it is not yet.
func (l *Log) Written() Pos {
	l.written.RLock()
	defer l.written.RUnlock()
	return At(l.written.seg, uint32(l.written.end))
}

// Durable is the position before which every record is on disk (synced): SyncBatch's records
// once answered, SyncInterval's after the next tick. A rewind never cuts below it.
func (l *Log) Durable() Pos { return Pos(l.durable.Load()) }

// SetOnRewind sets fn to be told where a rewind (a failed write, rewind) cut the log: every
// record queued at or after that position before the cut is gone, and the records queued next
// go there. fn is called with the log's lock held, before any record is queued at the cut: it
// must not block or call the log (a caller linking records forgets the links it cut).
func (l *Log) SetOnRewind(fn func(Pos)) {
	l.mu.Lock()
	l.onRewind = fn
	l.mu.Unlock()
}

// Dir is the log's directory.
func (l *Log) Dir() string { return l.dir }

// End is where the next record will go.
func (l *Log) End() Pos {
	l.mu.Lock()
	defer l.mu.Unlock()
	return At(l.seg, uint32(l.end))
}

// Close writes and syncs what is queued, stops the writer and closes the files. Appends after
// it fail with ErrClosed.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closed = true
	l.busy = true
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	<-l.stopped
	l.readMu.Lock()
	defer l.readMu.Unlock()
	var first error
	for seg, f := range l.readers {
		if err := f.Close(); err != nil && first == nil {
			first = err
		}
		delete(l.readers, seg)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if first == nil && l.err != nil && !errors.Is(l.err, ErrClosed) {
		first = l.err
	}
	return first
}

func segName(seg uint32) string { return fmt.Sprintf("%010d.seg", seg) }

func (l *Log) segPath(seg uint32) string { return filepath.Join(l.dir, segName(seg)) }
