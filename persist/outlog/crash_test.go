package outlog

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// tailLog writes three records to a new log in dir and returns the last segment's bytes and
// the three positions.
func tailLog(t *testing.T, dir string) ([]byte, []Pos, [][]byte) {
	t.Helper()
	l, _, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var ps []Pos
	var rs [][]byte
	for i, size := range []int{500, 320, 700} {
		r := record(i, size)
		p, err := l.Append(r)
		if err != nil {
			t.Fatal(err)
		}
		ps, rs = append(ps, p), append(rs, r)
	}
	return closedSegment(t, l, dir), ps, rs
}

// closedSegment closes l and returns its first segment's bytes.
func closedSegment(t *testing.T, l *Log, dir string) []byte {
	t.Helper()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, segName(1)))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// checkCut opens the log in dir, whose last record was torn or damaged, and checks that Open
// cut exactly that record, kept the two before it, and appends where it lay.
func checkCut(t *testing.T, dir string, ps []Pos, rs [][]byte, size int64) {
	t.Helper()
	l, rec, err := Open(dir, Options{Sync: SyncInterval}) // the append after: no sync to wait for
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer l.Close()
	last := int64(ps[2].Off())
	if rec.Records != 2 || rec.End != ps[2] || rec.Cut != size-last {
		t.Fatalf("recovery %+v; want 2 records, end %v, %d bytes cut", rec, ps[2], size-last)
	}
	if st, err := os.Stat(filepath.Join(dir, segName(1))); err != nil || st.Size() != last {
		t.Fatalf("segment after recovery: %v, %v bytes; want %d", err, st.Size(), last)
	}
	for i := range 2 {
		got, err := l.Read(ps[i])
		if err != nil || !bytes.Equal(got, rs[i]) {
			t.Fatalf("record %d after recovery: %v", i, err)
		}
	}
	if _, err := l.Read(ps[2]); !errors.Is(err, ErrNotFound) {
		t.Fatalf("the cut record reads: %v", err)
	}
	again := record(7, 400)
	p, err := l.Append(again)
	if err != nil || p != ps[2] {
		t.Fatalf("append after recovery at %v, %v; want %v", p, err, ps[2])
	}
}

// noSyncs makes the log's syncs no-ops until the test ends (hundreds of recoveries, each
// syncing the segment it cut, took seconds).
func noSyncs(t *testing.T) {
	datasync = func(*os.File) error { return nil }
	t.Cleanup(func() { datasync = fdatasync })
}

// Every length the last record can be torn at: Open cuts it and keeps the records before.
func TestTornTailAtEveryByte(t *testing.T) {
	data, ps, rs := tailLog(t, t.TempDir())
	noSyncs(t)
	dir := t.TempDir()
	for cut := int64(ps[2].Off()); cut < int64(len(data)); cut++ {
		if err := os.WriteFile(filepath.Join(dir, segName(1)), data[:cut], 0o640); err != nil {
			t.Fatal(err)
		}
		checkCut(t, dir, ps, rs, cut)
		if t.Failed() {
			t.Fatalf("torn at byte %d", cut)
		}
	}
}

// Every byte of the last record's frame damaged (its length, its CRC, its bytes): Open finds it
// does not check and cuts it.
func TestDamagedTailAtEveryByte(t *testing.T) {
	data, ps, rs := tailLog(t, t.TempDir())
	noSyncs(t)
	dir := t.TempDir()
	for i := int(ps[2].Off()); i < len(data); i++ {
		bad := bytes.Clone(data)
		bad[i] ^= 0x5a
		if err := os.WriteFile(filepath.Join(dir, segName(1)), bad, 0o640); err != nil {
			t.Fatal(err)
		}
		checkCut(t, dir, ps, rs, int64(len(data)))
		if t.Failed() {
			t.Fatalf("damaged at byte %d", i)
		}
	}
}

// A tail of zeros (a file grown but not yet written when the power went) is cut too.
func TestZeroTail(t *testing.T) {
	dir := t.TempDir()
	data, ps, rs := tailLog(t, dir)
	padded := append(bytes.Clone(data[:ps[2].Off()]), make([]byte, 4096)...)
	if err := os.WriteFile(filepath.Join(dir, segName(1)), padded, 0o640); err != nil {
		t.Fatal(err)
	}
	checkCut(t, dir, ps, rs, int64(len(padded)))
}

func TestTornSegmentHeader(t *testing.T) {
	dir := t.TempDir()
	l, _ := open(t, dir, Options{SegmentSize: 1 << 10})
	var ps []Pos
	for i := range 3 {
		p, err := l.Append(record(i, 600))
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	// The third record's segment, torn in its header: each shorter length.
	path := filepath.Join(dir, segName(ps[2].Seg()))
	whole, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for cut := range segHeader + 1 {
		if err := os.WriteFile(path, whole[:cut], 0o640); err != nil {
			t.Fatal(err)
		}
		l, rec, err := Open(dir, Options{SegmentSize: 1 << 10})
		if err != nil {
			t.Fatalf("header torn at %d: %v", cut, err)
		}
		if rec.End != At(ps[2].Seg(), segHeader) || rec.Records != 0 {
			t.Fatalf("header torn at %d: %+v", cut, rec)
		}
		if _, err := l.Read(ps[1]); err != nil {
			t.Fatalf("header torn at %d: the segment before: %v", cut, err)
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	// A whole header that is not this segment's is refused, not cut.
	if err := os.WriteFile(path, append(header(99), whole[segHeader:]...), 0o640); err != nil {
		t.Fatal(err)
	}
	if _, _, err := Open(dir, Options{SegmentSize: 1 << 10}); err == nil {
		t.Fatal("Open took a segment with another's header")
	}
}

// A record damaged in a segment before the last (synced when the writer left it) is not cut:
// Read and Scan report it.
func TestDamageBeforeTheLastSegment(t *testing.T) {
	dir := t.TempDir()
	l, _ := open(t, dir, Options{SegmentSize: 1 << 10})
	p, err := l.Append(record(0, 600))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(record(1, 600)); err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, segName(p.Seg()))
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[p.Off()+frameHeader+100] ^= 1
	if err := os.WriteFile(path, data, 0o640); err != nil {
		t.Fatal(err)
	}
	l2, rec := open(t, dir, Options{SegmentSize: 1 << 10})
	if rec.Cut != 0 {
		t.Fatalf("recovery cut a segment before the last: %+v", rec)
	}
	if _, err := l2.Read(p); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Read of the damaged record: %v", err)
	}
	if err := l2.Scan(0, func(Pos, []byte) error { return nil }); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Scan over the damaged record: %v", err)
	}
}

// childEnv names the directory TestChildAppends appends to when a parent test runs it.
const childEnv = "OUTLOG_CHILD_DIR"

// TestChildAppends is the process TestKilledMidAppend kills: 8 goroutines append numbered
// records and print "n pos" once each append returns, until killed.
func TestChildAppends(t *testing.T) {
	dir := os.Getenv(childEnv)
	if dir == "" {
		return // run only as TestKilledMidAppend's child
	}
	l, _, err := Open(dir, Options{Sync: Sync(os.Getenv(childEnv + "_SYNC")), SegmentSize: 32 << 10})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(3)
	}
	var mu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	var n int
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for {
				mu.Lock()
				k := n
				n++
				mu.Unlock()
				p, err := l.Append(record(k, 200+k%700))
				mu.Lock()
				if err != nil {
					fmt.Fprintln(out, "error", err)
				} else {
					fmt.Fprintln(out, k, uint64(p))
				}
				_ = out.Flush()
				mu.Unlock()
			}
		})
	}
	wg.Wait()
}

// A process killed (SIGKILL) while 8 goroutines append: every append it answered is in the log
// at its position, and the log opens, scans whole and appends.
func TestKilledMidAppend(t *testing.T) {
	for _, mode := range []Sync{SyncBatch, SyncInterval} {
		t.Run(string(mode), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestChildAppends$", "-test.count=1")
			cmd.Env = append(os.Environ(), childEnv+"="+dir, childEnv+"_SYNC="+string(mode))
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			answered := map[int]Pos{}
			sc := bufio.NewScanner(stdout)
			for sc.Scan() && len(answered) < 400 {
				f := strings.Fields(sc.Text())
				k, err1 := strconv.Atoi(f[0])
				p, err2 := strconv.ParseUint(f[len(f)-1], 10, 64)
				if len(f) != 2 || err1 != nil || err2 != nil {
					t.Fatalf("child: %q", sc.Text())
				}
				answered[k] = Pos(p)
			}
			_ = cmd.Process.Signal(syscall.SIGKILL)
			for sc.Scan() { // what it printed before the signal landed
				if f := strings.Fields(sc.Text()); len(f) == 2 {
					k, _ := strconv.Atoi(f[0])
					p, _ := strconv.ParseUint(f[1], 10, 64)
					answered[k] = Pos(p)
				}
			}
			_ = cmd.Wait()
			if len(answered) < 400 {
				t.Fatalf("the child answered %d appends before it ended", len(answered))
			}
			l, rec := open(t, dir, Options{Sync: mode, SegmentSize: 32 << 10})
			for k, p := range answered {
				got, err := l.Read(p)
				if err != nil || !bytes.Equal(got, record(k, 200+k%700)) {
					t.Fatalf("answered append %d at %v: %v (recovery %+v)", k, p, err, rec)
				}
			}
			seen := map[int]bool{}
			if err := l.Scan(0, func(p Pos, r []byte) error {
				var k int
				if _, err := fmt.Sscanf(string(r), "rec %d ", &k); err != nil || !bytes.Equal(r, record(k, 200+k%700)) || seen[k] {
					return fmt.Errorf("record at %v is not one appended once: %.20q", p, r)
				}
				seen[k] = true
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(seen) < len(answered) {
				t.Fatalf("scan found %d records, %d were answered", len(seen), len(answered))
			}
			if _, err := l.Append(record(1<<20, 300)); err != nil {
				t.Fatal(err)
			}
		})
	}
}
