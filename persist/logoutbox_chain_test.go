package persist

import (
	"bufio"
	"context"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist/outlog"
)

// openChainOutbox is openLogOutbox with segments of seg bytes (rolls in a small test).
func openChainOutbox(t *testing.T, dir string, kv KV, clock *testClock, sync outlog.Sync, seg int64) *LogOutbox {
	t.Helper()
	lo, err := OpenLogOutbox(dir, kv, LogOutboxOptions{Sync: sync, segmentSize: seg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lo.log.Close() })
	if clock != nil {
		lo.now = clock.now
	}
	if _, err := lo.Pending(); err != nil {
		t.Fatal(err)
	}
	return lo
}

// chainWant is what a user's history must list: each entry's key (logPos) and "dir:id".
type chainWant map[string]string

// accept accepts a message of uid at at (kind, id "" to mint one) and records what the
// history must list; it returns the entry as accepted.
func (w chainWant) accept(t *testing.T, lo *LogOutbox, uid string, at time.Time, id string, kind domain.Kind) domain.OutboxEntry {
	t.Helper()
	e := logQueued(id, at)
	e.UserID, e.Message.Kind = uid, kind
	if err := lo.Accept(context.Background(), &e, ""); err != nil {
		t.Fatal(err)
	}
	if w != nil && listedKind(kind) {
		w[logPos(e.CreatedAt.Time(), domain.DirOut, e.ID)] = domain.DirOut + ":" + e.ID
	}
	return e
}

// inbound keeps an incoming message of uid in the history index (Badger), as SaveInbound does.
func (w chainWant) inbound(t *testing.T, kv KV, uid, id string, at time.Time) {
	t.Helper()
	ops, err := NewMessageLog(kv).InOps(domain.InboundMessage{ID: id, UserID: uid, SessionID: "s1", From: "15550001", Timestamp: at, Text: "in"})
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Commit(context.Background(), ops...); err != nil {
		t.Fatal(err)
	}
	w[logPos(at, domain.DirIn, id)+"/"+url.PathEscape("s1")] = domain.DirIn + ":" + id
}

// order is w's entries newest first, or oldest first from since.
func (w chainWant) order(since time.Time) []string {
	var keys []string
	for k := range w {
		if since.IsZero() || k >= fmt.Sprintf("%013d", since.UnixMilli()) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	if since.IsZero() {
		slices.Reverse(keys)
	}
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = w[k]
	}
	return out
}

// listPages lists uid's history a page of limit at a time, each page after the cursor the one
// before handed out, as engine.Messages.History pages it.
func listPages(t *testing.T, lo *LogOutbox, uid string, since time.Time, limit int) []string {
	t.Helper()
	var out []string
	cursor := ""
	for range 10000 {
		var page []string
		var last, next string
		err := lo.ScanLog(uid, domain.LogScan{Cursor: cursor, Since: since}, func(after string, e domain.LogEntry) (bool, error) {
			if len(page) == limit {
				next = last
				return false, nil
			}
			if e.Dir == domain.DirOut && (e.SessionID != "s1" || e.Peer != "491511234567") {
				t.Fatalf("outgoing entry %+v", e)
			}
			page, last = append(page, e.Dir+":"+e.ID), after
			return true, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page...)
		if next == "" {
			return out
		}
		cursor = next
	}
	t.Fatal("no last page")
	return nil
}

// checkListing lists uid's history newest first and oldest first from since (and from before
// all), in pages of 1, 7 and 1,000, against w.
func checkListing(t *testing.T, lo *LogOutbox, uid string, w chainWant, since time.Time) {
	t.Helper()
	for _, limit := range []int{1, 7, 1000} {
		if got, want := listPages(t, lo, uid, time.Time{}, limit), w.order(time.Time{}); !slices.Equal(got, want) {
			t.Fatalf("newest first by %d: %d entries %v...\nwant %d %v...", limit, len(got), head(got), len(want), head(want))
		}
		for _, s := range []time.Time{since, time.Unix(1, 0)} {
			if got, want := listPages(t, lo, uid, s, limit), w.order(s); !slices.Equal(got, want) {
				t.Fatalf("oldest first from %v by %d: %d entries %v...\nwant %d %v...", s, limit, len(got), head(got), len(want), head(want))
			}
		}
	}
}

func head(s []string) []string { return s[:min(len(s), 6)] }

func base64URL(key string) string { return cursor(key) }

// A user's history on the chain, merged with incoming messages, listed in the index's order
// with its cursors both ways: across segment rolls and hours (the skip positions), ties of a
// millisecond (by id), a clock stepped back (the accept takes its user's last time), kinds not
// listed and another user's accepts interleaved; the same after a reopen, after a crash
// (heads rebuilt from the checkpoint's scan), and after the oldest segments are dropped (the
// chain ends there). No Badger record is written for an accept (with an id of its own, its
// outlog_pos by the checkpoint).
func TestChainListing(t *testing.T) {
	dir, kv, clock := t.TempDir(), NewMemory(), &testClock{}
	t0 := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	clock.set(t0)
	lo := openChainOutbox(t, dir, kv, clock, outlog.SyncBatch, 16<<10)
	w, other := chainWant{}, chainWant{}
	keys := func() int {
		n := 0
		_ = kv.Scan(nil, func(_, _ []byte) error { n++; return nil })
		return n
	}
	before := keys()
	at := t0
	var last domain.Millis // u1's last accept's time
	for i := range 240 {
		if n := len(w); n > 0 {
			for k, v := range w {
				if strings.HasPrefix(v, "out:") {
					last = max(last, domain.Millis(keyMs(k)))
				}
			}
		}
		at = at.Add(time.Duration(37+i%5*400) * time.Second / 10)
		switch {
		case i%40 == 7: // four accepts of one millisecond, ids of the callers' out of order
			for _, id := range []string{"zz-" + strconv.Itoa(i), "", "aa-" + strconv.Itoa(i), ""} {
				w.accept(t, lo, "u1", at, id, domain.KindText)
			}
		case i%50 == 13: // the clock stepped back: the accept takes its user's last time
			e := w.accept(t, lo, "u1", at.Add(-time.Hour), "", domain.KindText)
			if e.CreatedAt != last {
				t.Fatalf("an accept behind its user's last (%v) kept its time %v", last.Time(), e.CreatedAt.Time())
			}
		case i%9 == 4:
			w.accept(t, lo, "u1", at, "", domain.KindReaction) // not listed
		case i%3 == 1:
			other.accept(t, lo, "u2", at, "", domain.KindText)
		case i%4 == 2:
			w.inbound(t, kv, "u1", "in-"+strconv.Itoa(i), at)
		default:
			w.accept(t, lo, "u1", at, "", domain.KindText)
		}
	}
	caller := 0
	for _, v := range w {
		if strings.HasPrefix(v, "out:zz-") || strings.HasPrefix(v, "out:aa-") {
			caller++
		}
	}
	inbound := 0
	for _, v := range w {
		if strings.HasPrefix(v, "in:") {
			inbound++
		}
	}
	if got := keys() - before; got != 2*inbound {
		t.Fatalf("%d Badger records for %d accepts (%d with ids of their own, their outlog_pos left to the checkpoint) and %d incoming (2 each)", got, len(w)-inbound, caller, inbound)
	}
	if err := lo.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	positions := 0
	_ = kv.Scan([]byte(logPosTable+"/"), func(_, _ []byte) error { positions++; return nil })
	if positions != caller {
		t.Fatalf("the checkpoint wrote %d outlog_pos records for %d accepts with ids of their own", positions, caller)
	}
	if segs, _ := lo.log.Segments(); len(segs) < 5 {
		t.Fatalf("%d segments: the test wants rolls", len(segs))
	}
	mid := t0.Add(at.Sub(t0) / 2)
	checkListing(t, lo, "u1", w, mid)
	// Newest first, a page goes on where the one before stopped (its cursor says where).
	lo.chainReads.Store(0)
	got := listPages(t, lo, "u1", time.Time{}, 7)
	outs := 0
	for _, v := range got {
		if strings.HasPrefix(v, "out:") {
			outs++
		}
	}
	if n := lo.chainReads.Load(); n > int64(outs+6*(len(got)/7+1)) {
		t.Fatalf("%d pages newest first read %d records for %d outgoing entries", len(got)/7+1, n, outs)
	}
	// A page's cost: the skip positions lead to its hour, and the walk reads that hour (and
	// the ones the page spans) only, whichever way it goes.
	lastHour := at.Add(-time.Hour).Truncate(time.Hour)
	recent := len(w.order(lastHour.Add(-time.Hour)))
	for _, since := range []time.Time{{}, lastHour} {
		want := w.order(since)
		cursor := ""
		if since.IsZero() { // a cursor an hour back: start there
			k := slices.IndexFunc(want, func(v string) bool { return v == w.order(lastHour)[0] })
			for key, v := range w {
				if v == want[k] {
					cursor = base64URL(key)
				}
			}
		}
		lo.chainReads.Store(0)
		if err := lo.ScanLog("u1", domain.LogScan{Since: since, Cursor: cursor}, func(string, domain.LogEntry) (bool, error) { return false, nil }); err != nil {
			t.Fatal(err)
		}
		if n := lo.chainReads.Load(); n == 0 || n > int64(recent)+12 {
			t.Fatalf("a page from %v (cursor %q) read %d records; the last two hours hold %d", since, cursor, n, recent)
		}
	}
	checkListing(t, lo, "u2", other, mid)
	if got := listPages(t, lo, "u3", time.Time{}, 10); len(got) != 0 {
		t.Fatalf("a user with no messages: %v", got)
	}

	// Reopened (heads from the checkpoint Pending wrote), then more, then a crash.
	if err := lo.Close(); err != nil {
		t.Fatal(err)
	}
	lo = openChainOutbox(t, dir, kv, clock, outlog.SyncBatch, 16<<10)
	checkListing(t, lo, "u1", w, mid)
	if err := lo.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	for range 30 {
		at = at.Add(3 * time.Minute)
		w.accept(t, lo, "u1", at, "", domain.KindText)
	}
	crash(t, lo)
	lo = openChainOutbox(t, dir, kv, clock, outlog.SyncBatch, 16<<10)
	checkListing(t, lo, "u1", w, mid)
	// A message accepted after the boot links to the chain the boot rebuilt.
	at = at.Add(time.Minute)
	w.accept(t, lo, "u1", at, "", domain.KindText)
	checkListing(t, lo, "u1", w, mid)

	// The oldest segments dropped: the chain ends where they were.
	segs, err := lo.log.Segments()
	if err != nil {
		t.Fatal(err)
	}
	through := segs[len(segs)/2].Seg
	if _, err := lo.log.Drop(through); err != nil {
		t.Fatal(err)
	}
	for k, v := range w {
		if id, ok := strings.CutPrefix(v, "out:"); ok {
			if p, _, ok := parseLogID(id, lo.log.End().Seg()); ok && p.Seg() <= through {
				delete(w, k)
			} else if !ok {
				delete(w, k) // a caller's id: found through Badger; its segment may be gone
				if f, err := lo.resolve(id); err == nil && f.pos.Seg() > through {
					w[k] = v
				}
			}
		}
	}
	checkListing(t, lo, "u1", w, mid)
}

// A head forgets the accepts a failed write cut (outlog's rewind), not those queued after the
// cut or before it; the log tells of the cut before anything is queued at it.
func TestChainRewindRepair(t *testing.T) {
	var c chains
	c.init()
	h := &chainHead{base: chainLink{pos: outlog.At(1, 100), ms: 1}}
	for _, off := range []uint32{200, 300, 400} {
		h.links = append(h.links, chainLink{pos: outlog.At(1, off), ms: int64(off)})
	}
	c.rewound(outlog.At(1, 300))                                                  // 300 and 400 were cut
	h.links = append(h.links, chainLink{pos: outlog.At(1, 300), ms: 500, gen: 1}) // queued after: stays
	c.repair(h)
	// The link queued after the cut stands on its own; the cut ones before it are gone only
	// when they are the newest (a head is repaired before each link: see link).
	if top := h.top(); top.pos != outlog.At(1, 300) || top.ms != 500 {
		t.Fatalf("top %+v", top)
	}
	h2 := &chainHead{base: chainLink{pos: outlog.At(1, 100)}}
	h2.links = []chainLink{{pos: outlog.At(1, 200)}, {pos: outlog.At(1, 300)}, {pos: outlog.At(1, 400)}}
	c.repair(h2)
	if top := h2.top(); top.pos != outlog.At(1, 200) || len(h2.links) != 1 {
		t.Fatalf("after the cut at 300: top %v, %d links", top.pos, len(h2.links))
	}
	c.rewound(outlog.At(1, 150))
	c.repair(h2)
	if top := h2.top(); top.pos != outlog.At(1, 100) {
		t.Fatalf("after the cut at 150: top %v (the base, on disk, stays)", top.pos)
	}
}

// chainChildEnv names the directory TestChainChild accepts into when TestChainKilled runs it.
const chainChildEnv = "LOGOUTBOX_CHAIN_CHILD_DIR"

// TestChainChild is the process TestChainKilled kills: 6 goroutines accept messages of 3 users
// (a checkpoint every 100 accepts, so heads are written mid-run) and print "uid id ms" once
// each accept returns.
func TestChainChild(t *testing.T) {
	dir := os.Getenv(chainChildEnv)
	if dir == "" {
		return // run only as TestChainKilled's child
	}
	kv, err := OpenBadger(filepath.Join(dir, "kv"), BadgerOptions{Fsync: FsyncBatch})
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(3)
	}
	lo, err := OpenLogOutbox(filepath.Join(dir, "log"), kv, LogOutboxOptions{Sync: outlog.Sync(os.Getenv(chainChildEnv + "_SYNC")), segmentSize: 32 << 10})
	if err == nil {
		_, err = lo.Pending()
	}
	if err != nil {
		fmt.Println("open:", err)
		os.Exit(3)
	}
	out := make(chan string, 64)
	for g := range 6 {
		go func() {
			for i := 0; ; i++ {
				e := logQueued("", time.Now())
				e.UserID = "u" + strconv.Itoa((g+i)%3)
				if err := lo.Accept(context.Background(), &e, ""); err != nil {
					out <- "error " + err.Error()
					continue
				}
				out <- fmt.Sprintf("%s %s %d", e.UserID, e.ID, e.CreatedAt)
				if i%100 == 99 {
					_ = lo.Checkpoint()
				}
			}
		}()
	}
	w := bufio.NewWriter(os.Stdout)
	for s := range out {
		fmt.Fprintln(w, s)
		_ = w.Flush()
	}
}

// A process killed (SIGKILL) while it accepts: after the restart every accept it answered is
// listed in its user's history, once, in order, newest first and oldest first (the chain as
// the checkpoint's heads and the boot's scan rebuilt it), and new accepts link to it.
func TestChainKilled(t *testing.T) {
	for _, mode := range []outlog.Sync{outlog.SyncBatch, outlog.SyncInterval} {
		t.Run(string(mode), func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestChainChild$", "-test.count=1")
			cmd.Env = append(os.Environ(), chainChildEnv+"="+dir, chainChildEnv+"_SYNC="+string(mode))
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			answered := map[string]map[string]bool{} // uid -> "out:id"
			n := 0
			sc := bufio.NewScanner(stdout)
			read := func() {
				f := strings.Fields(sc.Text())
				if len(f) != 3 {
					t.Fatalf("child: %q", sc.Text())
				}
				if answered[f[0]] == nil {
					answered[f[0]] = map[string]bool{}
				}
				answered[f[0]]["out:"+f[1]] = true
				n++
			}
			for n < 600 && sc.Scan() {
				read()
			}
			_ = cmd.Process.Signal(syscall.SIGKILL)
			for sc.Scan() {
				if strings.Count(sc.Text(), " ") == 2 {
					read()
				}
			}
			_ = cmd.Wait()
			if n < 600 {
				t.Fatalf("the child answered %d accepts before it ended", n)
			}
			kv, err := OpenBadger(filepath.Join(dir, "kv"), BadgerOptions{Fsync: FsyncBatch})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = kv.Close() })
			lo := openChainOutbox(t, filepath.Join(dir, "log"), kv, nil, mode, 32<<10)
			for uid, ids := range answered {
				newest := listPages(t, lo, uid, time.Time{}, 50)
				seen := map[string]bool{}
				for _, v := range newest {
					if seen[v] {
						t.Fatalf("%s: %s listed twice", uid, v)
					}
					seen[v] = true
				}
				for v := range ids {
					if !seen[v] {
						t.Fatalf("%s: answered accept %s not listed (%d listed, %d answered)", uid, v, len(newest), len(ids))
					}
				}
				oldest := listPages(t, lo, uid, time.Unix(1, 0), 50)
				slices.Reverse(oldest)
				if !slices.Equal(oldest, newest) {
					t.Fatalf("%s: oldest first is not newest first reversed", uid)
				}
				e := logQueued("", time.Now())
				e.UserID = uid
				if err := lo.Accept(context.Background(), &e, ""); err != nil {
					t.Fatal(err)
				}
				if got := listPages(t, lo, uid, time.Time{}, 1000); len(got) != len(newest)+1 || got[0] != "out:"+e.ID {
					t.Fatalf("%s: after a new accept %d listed, first %v", uid, len(got), head(got))
				}
			}
		})
	}
}
