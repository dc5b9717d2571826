package persist

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

// Free space under the floor refuses commits with ErrStorageUnavailable (reads go on), and
// commits are accepted again once space returns; nothing acknowledged is lost. Free space is
// injected, so no mount is needed.
func TestBadgerFreeSpaceFloor(t *testing.T) {
	dir := t.TempDir()
	floor := uint64(MinFreeDiskFor(0))
	var free atomic.Uint64
	free.Store(1 << 30)
	opts := BadgerOptions{MinFreeDisk: int64(floor), freeSpace: func(string) (uint64, error) { return free.Load(), nil }}
	b, err := OpenBadger(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	mustCommit(t, b, put("k/before", "1"))

	free.Store(floor - 1)
	waitFor(t, 2*time.Second, "commits refused", func() bool {
		return errors.Is(b.Commit(ctx, put("k/probe", "x")), domain.ErrStorageUnavailable)
	})
	if err := b.Health(); !errors.Is(err, domain.ErrStorageUnavailable) {
		t.Fatalf("Health = %v, want domain.ErrStorageUnavailable", err)
	}
	wantValue(t, b, "k/before", "1")

	// Just over the floor is not enough (hysteresis); well over it is.
	free.Store(floor + 1)
	time.Sleep(3 * diskCheckEvery)
	if err := b.Health(); err == nil {
		t.Fatal("available again one byte over the floor")
	}
	free.Store(1 << 30)
	waitFor(t, 2*time.Second, "commits accepted again", func() bool { return b.Health() == nil })
	mustCommit(t, b, put("k/after", "2"))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b, err = OpenBadger(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	wantValue(t, b, "k/before", "1")
	wantValue(t, b, "k/after", "2")
}

func TestBadgerOpenRefusesUnderFloor(t *testing.T) {
	_, err := OpenBadger(t.TempDir(), BadgerOptions{MinFreeDisk: MinFreeDiskFor(0), freeSpace: func(string) (uint64, error) { return 1 << 10, nil }})
	if !errors.Is(err, domain.ErrStorageUnavailable) {
		t.Fatalf("OpenBadger = %v, want domain.ErrStorageUnavailable", err)
	}
}

// A floor that could not hold what Badger writes after commits stop is refused at start, with
// the least one that can; smaller memtables make it smaller.
func TestBadgerRefusesAFloorTooSmallForItsShape(t *testing.T) {
	least := MinFreeDiskFor(0)
	_, err := OpenBadger(t.TempDir(), BadgerOptions{MinFreeDisk: least - 1})
	if !errors.Is(err, domain.ErrRecordInvalid) || !strings.Contains(err.Error(), mib(uint64(least))) {
		t.Fatalf("OpenBadger with a floor of %d = %v", least-1, err)
	}
	if small := MinFreeDiskFor(4 << 20); small >= least || small < 16<<20 {
		t.Fatalf("floor with 4 MiB memtables: %d (32 MiB: %d)", small, least)
	}
	b, err := OpenBadger(t.TempDir(), BadgerOptions{MinFreeDisk: least})
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
}

// A write that finds the disk full (ENOSPC) makes the storage unavailable; the watcher makes
// it available again once free space is back over the floor.
func TestBadgerNoSpaceErrorIsUnavailable(t *testing.T) {
	var free atomic.Uint64
	free.Store(1 << 30)
	b, err := OpenBadger(t.TempDir(), BadgerOptions{freeSpace: func(string) (uint64, error) { return free.Load(), nil }})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	free.Store(0) // stays "low" until space returns
	err = b.commitErr(fmt.Errorf("write: %w", syscall.ENOSPC))
	if !errors.Is(err, domain.ErrStorageUnavailable) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("commitErr = %v", err)
	}
	if !errors.Is(b.Commit(context.Background(), put("k", "v")), domain.ErrStorageUnavailable) {
		t.Fatal("commit accepted after ENOSPC")
	}
	free.Store(1 << 30)
	waitFor(t, 2*time.Second, "available again", func() bool { return b.Health() == nil })
	mustCommit(t, b, put("k", "v"))
	if err := b.commitErr(errors.New("other")); errors.Is(err, domain.ErrStorageUnavailable) {
		t.Fatalf("a non-space error made storage unavailable: %v", err)
	}
}

// The mapped files are allocated ahead of Badger's writes, by allocateLead, not whole.
func TestBadgerAllocatesMappedFiles(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("fallocate is Linux only")
	}
	dir := t.TempDir()
	b, err := OpenBadger(dir, BadgerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	allocated := func() (int64, int64) {
		mems, _ := filepath.Glob(filepath.Join(dir, "*.mem"))
		if len(mems) != 1 {
			t.Fatalf("memtable files: %v", mems)
		}
		info, err := os.Stat(mems[0])
		if err != nil {
			t.Fatal(err)
		}
		return info.Sys().(*syscall.Stat_t).Blocks * 512, info.Size()
	}
	time.Sleep(3 * diskCheckEvery) // idle: the allocation does not creep
	if got, size := allocated(); got < allocateLead || got > allocateLead+64<<10 || got >= size {
		t.Fatalf("idle memtable file: %d bytes allocated of %d, want about %d", got, size, allocateLead)
	}
	value := make([]byte, 64<<10)
	for i := range 128 { // 8 MiB
		mustCommit(t, b, Op{Key: []byte(fmt.Sprintf("k/%03d", i)), Value: value})
	}
	waitFor(t, 2*time.Second, "allocation ahead of 8 MiB of writes", func() bool {
		got, _ := allocated()
		return got >= 8<<20+allocateLead
	})
}

// On a real, small file system (tmpfs, which needs root to mount) filled by the writes and
// then by another program down to its last MiB: commits fail with ErrStorageUnavailable, the
// process does not fault, and once the other file is removed commits succeed and every
// acknowledged write is there.
func TestBadgerFullTmpfs(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: fills a tmpfs to the last byte")
	}
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("needs root on Linux to mount a tmpfs")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=640m", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	// Space someone else holds and gives back at the end. It is more than Badger's background
	// work can take after its writes are refused (a flush and its compactions, about 20 MiB
	// here): with 32 MiB held, Badger's own files alone had left the disk under its floor in 4
	// runs of 20, and commits then rightly stayed refused once the other files were gone.
	held := filepath.Join(dir, "held")
	if err := os.WriteFile(held, make([]byte, 128<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	db := filepath.Join(dir, "db")
	// Small memtables (many flushes and compactions in a short test) and the least floor they
	// allow (159 MiB): room for the flushes and compactions under way when writes stop.
	opts := BadgerOptions{MinFreeDisk: MinFreeDiskFor(8 << 20), MemTableSize: 8 << 20}
	b, err := OpenBadger(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// One value in nine goes to the value log (over the threshold); the rest fill the tree,
	// so memtables flush and levels compact while the disk fills.
	big, small := make([]byte, 4096), make([]byte, 100)
	var (
		mu    sync.Mutex
		acked []string
		wg    sync.WaitGroup
	)
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				k := fmt.Sprintf("w%d/%07d/%x", w, i, i*0x9E3779B1) // spread over the key space
				value := small
				if i%9 == 0 {
					value = big
				}
				err := b.Commit(ctx, Op{Key: []byte(k), Value: value})
				if errors.Is(err, domain.ErrStorageUnavailable) {
					return
				}
				if err != nil {
					t.Errorf("Commit: %v", err)
					return
				}
				mu.Lock()
				acked = append(acked, k)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	// Badger's background work (a memtable flush, a compaction) writes new tables through
	// memory maps: a program that takes the disk's last bytes while one runs makes Badger fault
	// (README, "Operations", says so). Wait until that work is done: one write-ahead file left
	// (the live memtable's) and the same tables over a quiet half second.
	waitFor(t, time.Minute, "Badger's flushes and compactions done", func() bool { return badgerIdle(t, b, db) })
	// Another program takes the space that is left, but for 1 MiB.
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	chunk := make([]byte, 1<<20)
	for {
		free, err := freeBytes(dir)
		if err != nil || free <= 2<<20 {
			break
		}
		if _, err := f.Write(chunk); err != nil {
			break
		}
	}
	f.Close()
	for range 20 { // still refused, still alive
		if err := b.Commit(ctx, put("k/late", "x")); !errors.Is(err, domain.ErrStorageUnavailable) {
			t.Fatalf("commit on a full disk: %v", err)
		}
	}
	for _, name := range []string{filler, held} {
		if err := os.Remove(name); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 30*time.Second, "storage available again", func() bool { return b.Health() == nil })
	mustCommit(t, b, put("k/after", "ok"))
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b, err = OpenBadger(db, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, k := range acked {
		if _, err := b.Get([]byte(k)); err != nil {
			t.Fatalf("acknowledged %s: %v", k, err)
		}
	}
	wantValue(t, b, "k/after", "ok")
	tables := b.db.Tables()
	levels := map[int]int{}
	for _, ti := range tables {
		levels[ti.Level]++
	}
	t.Logf("%d writes acknowledged before the disk reached the floor; tables by level after: %v", len(acked), levels)
}

// badgerIdle tells whether b has no memtable waiting for its flush and its tables did not
// change over half a second.
func badgerIdle(t *testing.T, b *Badger, dir string) bool {
	mems, err := filepath.Glob(filepath.Join(dir, "*.mem"))
	if err != nil {
		t.Fatal(err)
	}
	if len(mems) > 1 {
		return false
	}
	ids := func() []uint64 {
		var out []uint64
		for _, ti := range b.db.Tables() {
			out = append(out, ti.ID)
		}
		slices.Sort(out)
		return out
	}
	// A table being written (a flush, a compaction) is a file before Badger lists it.
	onDisk := func() []uint64 {
		files, err := filepath.Glob(filepath.Join(dir, "*.sst"))
		if err != nil {
			t.Fatal(err)
		}
		var out []uint64
		for _, f := range files {
			if id, err := strconv.ParseUint(strings.TrimSuffix(filepath.Base(f), ".sst"), 10, 64); err == nil {
				out = append(out, id)
			}
		}
		slices.Sort(out)
		return out
	}
	// No level Badger would pick to compact next (a running compaction lowers its level's
	// score; the files above show it).
	wants := func() bool {
		levels := b.db.Levels()
		for _, l := range levels[:max(len(levels)-1, 0)] {
			if l.Score >= 1 {
				return true
			}
		}
		return false
	}
	before := ids()
	if wants() || !slices.Equal(before, onDisk()) {
		return false
	}
	time.Sleep(500 * time.Millisecond) // a quiet period is what idle means here
	after := ids()
	return slices.Equal(before, after) && slices.Equal(after, onDisk()) && !wants()
}
