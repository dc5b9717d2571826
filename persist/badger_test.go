package persist

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/gateway/gateway/domain"
)

func TestBadgerReopenKeepsData(t *testing.T) {
	for _, fsync := range []Fsync{FsyncBatch, FsyncInterval} {
		t.Run(string(fsync), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			b := openTestBadger(t, dir, fsync)
			mustCommit(t, b, put("k/1", "one"), put("k/2", "two"), put("k/3", "three"))
			mustCommit(t, b, del("k/2"))
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			b = openTestBadger(t, dir, fsync)
			wantValue(t, b, "k/1", "one")
			wantAbsent(t, b, "k/2")
			wantValue(t, b, "k/3", "three")
		})
	}
}

// Every Commit that returned nil before or while Close ran is on disk after a reopen:
// Close drains the writer's queue.
func TestBadgerCloseKeepsAcknowledgedCommits(t *testing.T) {
	for _, fsync := range []Fsync{FsyncBatch, FsyncInterval} {
		t.Run(string(fsync), func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			b := openTestBadger(t, dir, fsync)
			var (
				mu    sync.Mutex
				acked []string
				wg    sync.WaitGroup
			)
			for w := range 16 {
				wg.Go(func() {
					for i := 0; ; i++ {
						k := fmt.Sprintf("w%02d/%05d", w, i)
						err := b.Commit(context.Background(), put(k, k))
						if err != nil {
							if !errors.Is(err, ErrClosed) {
								t.Errorf("Commit: %v", err)
							}
							return
						}
						mu.Lock()
						acked = append(acked, k)
						mu.Unlock()
					}
				})
			}
			waitFor(t, 10*time.Second, "200 acknowledged commits", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(acked) >= 200
			})
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			wg.Wait()

			b = openTestBadger(t, dir, fsync)
			for _, k := range acked {
				wantValue(t, b, k, k)
			}
		})
	}
}

// Commits waiting while the writer is busy all go into the next transaction.
func TestBadgerGroupsWaitingCommits(t *testing.T) {
	b, err := OpenBadger(t.TempDir(), BadgerOptions{Fsync: FsyncBatch, Writers: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	holding, release := make(chan struct{}), make(chan struct{})
	var sizes []int // written by the writer goroutine only, read after the commits returned
	b.beforeGroup = func(group []*commitReq) {
		if len(sizes) == 0 {
			close(holding)
			<-release
		}
		sizes = append(sizes, len(group))
	}

	first := make(chan error, 1)
	go func() { first <- b.Commit(context.Background(), put("first", "1")) }()
	<-holding // the writer has taken the first commit and waits before writing it

	const waiting = 50
	var wg sync.WaitGroup
	for i := range waiting {
		wg.Go(func() {
			if err := b.Commit(context.Background(), put(fmt.Sprintf("g/%02d", i), "v")); err != nil {
				t.Errorf("Commit: %v", err)
			}
		})
	}
	waitFor(t, 5*time.Second, "50 queued commits", func() bool { return len(b.reqs) == waiting })
	close(release)
	wg.Wait()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if got := b.txns.Load(); got != 2 {
		t.Fatalf("%d transactions for 51 commits, want 2 (groups %v)", got, sizes)
	}
	if len(sizes) != 2 || sizes[0] != 1 || sizes[1] != waiting {
		t.Fatalf("group sizes %v, want [1 %d]", sizes, waiting)
	}
	if n := len(scanKeys(t, b, "g/")); n != waiting {
		t.Fatalf("%d keys written, want %d", n, waiting)
	}
}

// A group larger than one Badger transaction is split; a request too big even alone, or
// refused by Badger, fails by itself while its neighbours are written.
func TestBadgerCommitGroupSplits(t *testing.T) {
	// Values kept in the tree (a 1 MiB threshold, Badger's default), so they count in full.
	b, err := OpenBadger(t.TempDir(), BadgerOptions{Fsync: FsyncBatch, MemTableSize: 16 << 20,
		tune: func(o badger.Options) badger.Options { return o.WithValueThreshold(1 << 20) }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	value := bytes.Repeat([]byte("v"), 200<<10) // under the value threshold: counts in full
	req := func(name string, n int) *commitReq {
		ops := make([]Op, n)
		for i := range ops {
			ops[i] = Op{Key: fmt.Appendf(nil, "%s/%02d", name, i), Value: value}
		}
		r := &commitReq{done: make(chan error, 1)}
		r.load(ops)
		return r
	}
	// Badger's limit is 15 % of the 16 MiB memtable, about 2.4 MiB.
	a, bb, tooBig, small := req("a", 8), req("b", 8), req("big", 14), req("small", 1)
	refused := &commitReq{done: make(chan error, 1)}
	refused.load([]Op{put("ok-before-refusal", "x"), {Key: nil, Value: []byte("x")}}) // bypasses validateOps

	group := []*commitReq{a, bb, tooBig, refused, small}
	b.commitGroup(group)
	b.answer(group)

	for name, r := range map[string]*commitReq{"a": a, "b": bb, "small": small} {
		if err := <-r.done; err != nil {
			t.Fatalf("request %s: %v", name, err)
		}
	}
	if err := <-tooBig.done; !errors.Is(err, badger.ErrTxnTooBig) {
		t.Fatalf("oversized request: %v, want ErrTxnTooBig", err)
	}
	if err := <-refused.done; !errors.Is(err, badger.ErrEmptyKey) {
		t.Fatalf("refused request: %v, want ErrEmptyKey", err)
	}
	for prefix, want := range map[string]int{"a/": 8, "b/": 8, "small/": 1, "big/": 0, "ok-before-refusal": 0} {
		if n := len(scanKeys(t, b, prefix)); n != want {
			t.Fatalf("%d keys under %q, want %d", n, prefix, want)
		}
	}
	if got := b.txns.Load(); got != 3 {
		t.Fatalf("%d transactions, want 3 (a, b, small)", got)
	}
}

// A group whose commit fails answers every request with the commit's error, a request whose
// condition failed included: it may have failed on a write staged before it in the same
// transaction (two copies of one webhook's message, each kept if absent), which did not land.
// Answered "exists", the second copy would be taken as kept and nothing would be.
func TestBadgerFailedCommitAnswersConditionsWithItsError(t *testing.T) {
	b := openTestBadger(t, t.TempDir(), FsyncInterval)
	ifAbsent := func() *commitReq {
		r := &commitReq{done: make(chan error, 1)}
		r.load([]Op{{Key: []byte("msg_in/u1/wamid.1"), IfAbsent: true}, put("msg_in/u1/wamid.1", "kept")})
		return r
	}
	first, second := ifAbsent(), ifAbsent()
	// The disk refuses the group's commit.
	b.commitFault = func() error { return syscall.EIO }
	group := []*commitReq{first, second}
	b.commitGroup(group)
	b.commitFault = nil
	b.answer(group)
	for name, r := range map[string]*commitReq{"first": first, "second": second} {
		err := <-r.done
		if err == nil || errors.Is(err, domain.ErrRecordExists) {
			t.Fatalf("%s copy answered %v after its group's commit failed, want the commit's error", name, err)
		}
	}
}

func TestBadgerRejectsUnknownFsync(t *testing.T) {
	if _, err := OpenBadger(t.TempDir(), BadgerOptions{Fsync: "sometimes"}); !errors.Is(err, domain.ErrRecordInvalid) {
		t.Fatalf("OpenBadger with bad fsync = %v, want ErrInvalid", err)
	}
}

func TestBadgerInMemory(t *testing.T) {
	b, err := OpenBadger("", BadgerOptions{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	mustCommit(t, b, put("a", "1"))
	wantValue(t, b, "a", "1")
	if err := b.Commit(context.Background(), Op{Key: []byte("big"), Value: make([]byte, 1<<20)}); !errors.Is(err, domain.ErrRecordInvalid) {
		t.Fatalf("1 MiB value in memory mode = %v, want ErrInvalid", err)
	}
}

// Badger's logs reach the injected slog logger at warn and above only.
func TestBadgerLoggerLevels(t *testing.T) {
	var buf bytes.Buffer
	l := badgerLogger{slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	l.Debugf("debug %d\n", 1)
	l.Infof("info %d\n", 2)
	l.Warningf("warn %d\n", 3)
	l.Errorf("error %d\n", 4)
	out := buf.String()
	for _, want := range []string{`level=WARN msg="warn 3"`, `level=ERROR msg="error 4"`} {
		if !strings.Contains(out, want) {
			t.Errorf("log output lacks %s:\n%s", want, out)
		}
	}
	for _, unwanted := range []string{"debug 1", "info 2"} {
		if strings.Contains(out, unwanted) {
			t.Errorf("log output has %q:\n%s", unwanted, out)
		}
	}
}

func TestExpiresAtRoundsUp(t *testing.T) {
	now := time.Unix(100, 0)
	for _, c := range []struct {
		ttl  time.Duration
		want uint64
	}{{time.Nanosecond, 101}, {500 * time.Millisecond, 101}, {time.Second, 101}, {1500 * time.Millisecond, 102}} {
		if got := expiresAt(now, c.ttl); got != c.want {
			t.Errorf("expiresAt(100s, %v) = %d, want %d", c.ttl, got, c.want)
		}
	}
}

// A process killed between Badger's creation of a memtable or value-log file and its first
// write leaves the file at 0 bytes; badger v4.9.6 then refuses to open the directory ("while
// opening memtables ... Create a new file", dgraph-io/badger#2207). The gateway's open removes
// such files: nothing is lost and the store opens.
func TestBadgerOpensAfterACrashLeftEmptyLogFiles(t *testing.T) {
	for _, ext := range []string{".mem", ".vlog"} {
		t.Run(ext, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			b := openTestBadger(t, dir, FsyncBatch)
			mustCommit(t, b, put("k/1", "one"))
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			// The next file Badger would have made: memtables are named %05d.mem, value logs
			// %06d.vlog.
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			next := 1
			for _, e := range entries {
				if id, ok := strings.CutSuffix(e.Name(), ext); ok {
					if v, err := strconv.Atoi(id); err == nil && v >= next {
						next = v + 1
					}
				}
			}
			name := fmt.Sprintf("%05d%s", next, ext)
			if ext == ".vlog" {
				name = fmt.Sprintf("%06d%s", next, ext)
			}
			if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
				t.Fatal(err)
			}
			b = openTestBadger(t, dir, FsyncBatch)
			wantValue(t, b, "k/1", "one")
			mustCommit(t, b, put("k/2", "two"))
			if err := b.Close(); err != nil {
				t.Fatal(err)
			}
			b = openTestBadger(t, dir, FsyncBatch)
			wantValue(t, b, "k/1", "one")
			wantValue(t, b, "k/2", "two")
		})
	}
}
