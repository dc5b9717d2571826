package outlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"
)

// record is the test's record n: its number and filler, size bytes in all (at least 12).
func record(n, size int) []byte {
	b := fmt.Appendf(nil, "rec %07d ", n)
	for len(b) < size {
		b = append(b, byte('a'+(n+len(b))%26))
	}
	return b
}

func open(t testing.TB, dir string, o Options) (*Log, Recovery) {
	t.Helper()
	l, rec, err := Open(dir, o)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return l, rec
}

func mustRead(t *testing.T, l *Log, p Pos, want []byte) {
	t.Helper()
	got, err := l.Read(p)
	if err != nil {
		t.Fatalf("Read(%v): %v", p, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("Read(%v) = %.40q..., want %.40q...", p, got, want)
	}
}

// scanAll is every record of the log, in order, with its position.
func scanAll(t *testing.T, l *Log) ([]Pos, [][]byte) {
	t.Helper()
	var ps []Pos
	var rs [][]byte
	if err := l.Scan(0, func(p Pos, rec []byte) error {
		ps, rs = append(ps, p), append(rs, slices.Clone(rec))
		return nil
	}); err != nil {
		t.Fatalf("Scan: %v", err)
	}
	return ps, rs
}

func TestAppendReadReopen(t *testing.T) {
	dir := t.TempDir()
	l, rec := open(t, dir, Options{})
	if rec.Segments != 1 || rec.End != At(1, segHeader) || rec.Cut != 0 {
		t.Fatalf("a new log's recovery = %+v", rec)
	}
	// Sizes on both sides of Read's one-pread guess (1 KiB with the frame).
	sizes := []int{1, 300, 800, 1016, 1017, 5000, 70000}
	var ps []Pos
	var rs [][]byte
	for i, size := range sizes {
		r := record(i, size)
		if size < 12 {
			r = []byte("x")
		}
		p, err := l.Append(r)
		if err != nil {
			t.Fatal(err)
		}
		ps, rs = append(ps, p), append(rs, r)
		mustRead(t, l, p, r)
	}
	if end := l.End(); end.Seg() != 1 || int64(end.Off()) != segHeader+int64(len(sizes)*frameHeader)+int64(sumLen(rs)) {
		t.Fatalf("End = %v", end)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append([]byte("late")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Append after Close: %v, want ErrClosed", err)
	}
	l2, rec := open(t, dir, Options{})
	if rec.Records != len(sizes) || rec.Cut != 0 || rec.End != l2.End() {
		t.Fatalf("reopened: %+v", rec)
	}
	for i, p := range ps {
		mustRead(t, l2, p, rs[i])
	}
	gotP, gotR := scanAll(t, l2)
	if !slices.Equal(gotP, ps) || len(gotR) != len(rs) {
		t.Fatalf("Scan: %v, want %v", gotP, ps)
	}
	for i := range rs {
		if !bytes.Equal(gotR[i], rs[i]) {
			t.Fatalf("Scan's record %d differs", i)
		}
	}
	// Scan from a position: that record and the ones after it.
	var from []Pos
	if err := l2.Scan(ps[3], func(p Pos, _ []byte) error { from = append(from, p); return nil }); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(from, ps[3:]) {
		t.Fatalf("Scan(%v) = %v, want %v", ps[3], from, ps[3:])
	}
	// An error from fn ends the scan with it.
	stop := errors.New("stop")
	if err := l2.Scan(0, func(Pos, []byte) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("Scan's fn error: %v", err)
	}
}

func sumLen(rs [][]byte) int {
	n := 0
	for _, r := range rs {
		n += len(r)
	}
	return n
}

func TestRefusedRecordsAndOptions(t *testing.T) {
	l, _ := open(t, t.TempDir(), Options{})
	if _, err := l.Append(nil); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("empty record: %v", err)
	}
	if _, err := l.Append(make([]byte, MaxRecord+1)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("record over MaxRecord: %v", err)
	}
	var got error
	l.AppendAsync(nil, func(_ Pos, err error) { got = err })
	if !errors.Is(got, ErrTooLarge) {
		t.Fatalf("AppendAsync of an empty record: %v", got)
	}
	if _, _, err := Open(t.TempDir(), Options{Sync: "sometimes"}); err == nil {
		t.Fatal("Open took an unknown sync mode")
	}
	if _, _, err := Open(t.TempDir(), Options{SegmentSize: 20}); err == nil {
		t.Fatal("Open took a segment that holds no record")
	}
	if _, _, err := Open(t.TempDir(), Options{SegmentSize: 2 << 30}); err == nil {
		t.Fatal("Open took a segment past 32-bit offsets' reach")
	}
}

// A write that fails stops every append after it (fail-stop: the caller answers 503), and the
// log reopens whole once the cause is gone.
func TestFailedWriteStopsAppends(t *testing.T) {
	dir := t.TempDir()
	l, _, err := Open(dir, Options{SegmentSize: 1 << 10})
	if err != nil {
		t.Fatal(err)
	}
	first, err := l.Append(record(1, 600))
	if err != nil {
		t.Fatal(err)
	}
	// The next segment's name taken by a directory: the roll's create fails.
	blocker := filepath.Join(dir, segName(2))
	if err := os.Mkdir(blocker, 0o750); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(record(2, 600)); err == nil {
		t.Fatal("an append whose segment could not be made succeeded")
	}
	if _, err := l.Append(record(3, 10)); err == nil {
		t.Fatal("an append after a failed write succeeded")
	}
	if err := l.Sync(); err == nil {
		t.Fatal("Sync after a failed write succeeded")
	}
	mustRead(t, l, first, record(1, 600))
	if err := l.Close(); err == nil {
		t.Fatal("Close hid the failed write")
	}
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	l2, rec := open(t, dir, Options{SegmentSize: 1 << 10})
	if rec.Records != 1 || rec.Cut != 0 {
		t.Fatalf("reopened: %+v", rec)
	}
	mustRead(t, l2, first, record(1, 600))
	if p, err := l2.Append(record(2, 600)); err != nil || p != At(2, segHeader) {
		t.Fatalf("append after reopening: %v at %v", err, p)
	}
}

func TestReadAtNoRecord(t *testing.T) {
	l, _ := open(t, t.TempDir(), Options{})
	a, err := l.Append(record(1, 600))
	if err != nil {
		t.Fatal(err)
	}
	b, err := l.Append(record(2, 600))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		p    Pos
		want error
	}{
		{"zero", 0, ErrNotFound},
		{"in the header", At(1, 4), ErrNotFound},
		{"at the end", l.End(), ErrNotFound},
		{"past the end", l.End() + 100, ErrNotFound},
		{"a later segment", At(2, segHeader), ErrNotFound},
		{"an earlier segment", At(0, segHeader), ErrNotFound},
		{"inside a record", a + 20, ErrCorrupt},
		{"one byte after a record's start", b + 1, ErrCorrupt},
	} {
		if _, err := l.Read(c.p); !errors.Is(err, c.want) {
			t.Errorf("%s (%v): %v, want %v", c.name, c.p, err, c.want)
		}
	}
}

// A frame written into a record's own bytes at a position it does not lie at does not check:
// a forged position cannot make a record of a caller's text.
func TestFrameInsideARecordDoesNotCheck(t *testing.T) {
	l, _ := open(t, t.TempDir(), Options{})
	inner := appendFrame(nil, At(1, 999), []byte("forged record"), 13, 0, nil)
	p, err := l.Append(append([]byte("prefix.."), inner...))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Read(p + frameHeader + 8); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("the inner frame read: %v, want ErrCorrupt", err)
	}
}

func TestConcurrentAppends(t *testing.T) {
	for _, mode := range []Sync{SyncInterval, SyncBatch} {
		t.Run(string(mode), func(t *testing.T) {
			dir := t.TempDir()
			l, _ := open(t, dir, Options{Sync: mode, SegmentSize: 64 << 10})
			const writers, each = 16, 60
			var mu sync.Mutex
			byPos := map[Pos]int{}
			var wg sync.WaitGroup
			for w := range writers {
				wg.Go(func() {
					for i := range each {
						n := w*each + i
						r := record(n, 300+n%500)
						var p Pos
						var err error
						if n%3 == 0 {
							done := make(chan struct{})
							l.AppendAsync(r, func(q Pos, e error) { p, err = q, e; close(done) })
							<-done
						} else {
							p, err = l.Append(r)
						}
						if err != nil {
							t.Error(err)
							return
						}
						got, err := l.Read(p)
						if err != nil || !bytes.Equal(got, r) {
							t.Errorf("Read(%v) after its append: %v", p, err)
							return
						}
						mu.Lock()
						if _, dup := byPos[p]; dup {
							t.Errorf("two records at %v", p)
						}
						byPos[p] = n
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if err := l.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			l2, rec := open(t, dir, Options{Sync: mode, SegmentSize: 64 << 10})
			ps, rs := scanAll(t, l2)
			if len(ps) != writers*each || rec.Cut != 0 || rec.Segments < 2 {
				t.Fatalf("reopened: %d records (want %d), recovery %+v", len(ps), writers*each, rec)
			}
			if !slices.IsSorted(ps) {
				t.Fatal("Scan's positions are not in order")
			}
			for i, p := range ps {
				n, ok := byPos[p]
				if !ok || !bytes.Equal(rs[i], record(n, 300+n%500)) {
					t.Fatalf("record at %v is not the one appended there", p)
				}
			}
		})
	}
}

func TestSegmentsRollAndDrop(t *testing.T) {
	dir := t.TempDir()
	l, _ := open(t, dir, Options{Sync: SyncInterval, SegmentSize: 4 << 10})
	var ps []Pos
	for i := range 61 {
		p, err := l.Append(record(i, 400))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	segs, err := l.Segments()
	if err != nil {
		t.Fatal(err)
	}
	// 10 records of 408 bytes fit behind a 16-byte header in 4 KiB: 61 make 7 segments.
	if len(segs) != 7 || segs[0].Seg != 1 || segs[6].Seg != 7 {
		t.Fatalf("segments: %+v", segs)
	}
	for _, s := range segs {
		if s.Size > 4<<10 {
			t.Fatalf("segment %d is %d bytes, over the 4 KiB asked", s.Seg, s.Size)
		}
	}
	// Retention by age: segments 1-3 last written long ago, 4 not (nor those after it).
	old := time.Now().Add(-8 * 24 * time.Hour)
	for _, seg := range []uint32{1, 2, 3, 5} {
		if err := os.Chtimes(l.segPath(seg), old, old); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := l.DropOlder(time.Now().Add(-7 * 24 * time.Hour)); err != nil || n != 3 {
		t.Fatalf("DropOlder: %d, %v; want 3 (up to the first segment not older)", n, err)
	}
	for i, p := range ps {
		_, err := l.Read(p)
		if p.Seg() <= 3 && !errors.Is(err, ErrNotFound) {
			t.Fatalf("record %d in a dropped segment: %v", i, err)
		}
		if p.Seg() > 3 && err != nil {
			t.Fatalf("record %d kept: %v", i, err)
		}
	}
	// Drop never takes the segment being written.
	if n, err := l.Drop(100); err != nil || n != 3 {
		t.Fatalf("Drop(100): %d, %v; want 3 (4, 5, 6)", n, err)
	}
	if _, err := l.Read(ps[len(ps)-1]); err != nil {
		t.Fatalf("the last record after Drop: %v", err)
	}
	if _, err := l.Append(record(99, 400)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, rec := open(t, dir, Options{Sync: SyncInterval, SegmentSize: 4 << 10})
	if rec.Segments != 1 {
		t.Fatalf("reopened after Drop: %+v", rec)
	}
	if _, err := l2.Read(ps[0]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("a dropped record after reopening: %v", err)
	}
	if ps2, _ := scanAll(t, l2); len(ps2) != rec.Records || ps2[0].Seg() != 7 {
		t.Fatalf("Scan after Drop: %v", ps2)
	}
}

func TestIntervalSyncs(t *testing.T) {
	l, _ := open(t, t.TempDir(), Options{Sync: SyncInterval, Interval: time.Millisecond})
	for i := range 5 {
		if _, err := l.Append(record(i, 300)); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	if d, w := l.Durable(), l.Written(); d != w || w != l.End() {
		t.Fatalf("after Sync: durable %v, written %v, end %v", d, w, l.End())
	}
	if _, err := l.Append(record(9, 300)); err != nil {
		t.Fatal(err)
	}
	// The ticker syncs what was written since, with no Sync asked: Durable follows.
	before := l.synced.Load()
	deadline := time.Now().Add(10 * time.Second)
	for l.synced.Load() == before || l.Durable() != l.Written() {
		if time.Now().After(deadline) {
			t.Fatal("no interval sync in 10 s")
		}
		time.Sleep(time.Millisecond)
	}
	// A reopened log's records are durable from the start (Open syncs its last segment).
	dir := l.Dir()
	end := l.End()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, _ := open(t, dir, Options{Sync: SyncInterval})
	if l2.Durable() != end {
		t.Fatalf("reopened: durable %v, want %v", l2.Durable(), end)
	}
}

// The per-user history as a backward chain: each record holds the position of its user's
// previous one, taken under the user's lock with Queue, and the chain read back from the head
// by position visits every record of the user, newest first.
func TestQueueChains(t *testing.T) {
	l, _ := open(t, t.TempDir(), Options{Sync: SyncInterval, SegmentSize: 8 << 10})
	const users, each = 4, 50
	var mu [users]sync.Mutex
	var head [users]Pos
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range each {
				u := (w + i) % users
				mu[u].Lock()
				rec := binary.LittleEndian.AppendUint64(nil, uint64(head[u]))
				rec = append(rec, record(w*each+i, 300)...)
				tk, err := l.Queue(rec)
				if err != nil {
					mu[u].Unlock()
					t.Error(err)
					return
				}
				head[u] = tk.Pos
				mu[u].Unlock()
				if err := tk.Wait(); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for u := range users {
		prev := Pos(1<<64 - 1)
		for p := head[u]; p != 0; {
			if p >= prev {
				t.Fatalf("user %d's chain goes forward: %v after %v", u, p, prev)
			}
			rec, err := l.Read(p)
			if err != nil {
				t.Fatalf("user %d's chain at %v: %v", u, p, err)
			}
			total++
			prev, p = p, Pos(binary.LittleEndian.Uint64(rec))
		}
	}
	if total != 8*each {
		t.Fatalf("the chains hold %d records, %d were queued", total, 8*each)
	}
}

// A group's write that fails (a full disk: part of it written, then ENOSPC) fails its appends
// and those queued behind it, cuts the segment back, and the log goes on where they began.
func TestFailedWriteRewinds(t *testing.T) {
	dir := t.TempDir()
	l, _ := open(t, dir, Options{})
	first, err := l.Append(record(1, 300))
	if err != nil {
		t.Fatal(err)
	}
	var cut []Pos
	l.SetOnRewind(func(p Pos) { cut = append(cut, p) }) // under the log's lock
	durable := l.Durable()
	failing := true
	pwrite = func(f *os.File, b []byte, off int64) (int, error) {
		if failing {
			failing = false
			n, _ := f.WriteAt(b[:len(b)/2], off)
			return n, syscall.ENOSPC
		}
		return f.WriteAt(b, off)
	}
	t.Cleanup(func() { pwrite = (*os.File).WriteAt })
	lost, err := l.Append(record(2, 500))
	if !errors.Is(err, syscall.ENOSPC) || !errors.Is(err, ErrCut) {
		t.Fatalf("append on a full disk: %v, want ENOSPC and ErrCut (the record lies nowhere)", err)
	}
	if _, err := l.Read(lost); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the failed record reads: %v", err)
	}
	l.mu.Lock()
	told := slices.Clone(cut)
	l.mu.Unlock()
	if !slices.Equal(told, []Pos{lost}) || l.Durable() != durable || durable > lost {
		t.Fatalf("rewinds told %v (want the cut at %v); durable %v, was %v", told, lost, l.Durable(), durable)
	}
	p, err := l.Append(record(3, 200))
	if err != nil || p != lost {
		t.Fatalf("append after the failed write: %v at %v, want %v", err, p, lost)
	}
	mustRead(t, l, first, record(1, 300))
	mustRead(t, l, p, record(3, 200))
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l, rec := open(t, dir, Options{})
	if rec.Records != 2 || rec.Cut != 0 {
		t.Fatalf("reopened: %+v", rec)
	}
	mustRead(t, l, p, record(3, 200))
}
