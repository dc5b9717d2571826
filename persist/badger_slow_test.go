package persist

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// lockedBuffer is a log sink the store's goroutines may write concurrently.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines are the JSON log lines whose message contains msg.
func (l *lockedBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if s, _ := m["msg"].(string); strings.Contains(s, msg) {
			out = append(out, m)
		}
	}
	return out
}

const slowMsg = "slow commits"

// A run of slow commits is logged once, when a fast commit ends it, with its slowest commit's
// phases and the state read when it was seen; the stalls within slowEvery of a line are counted
// in the next one, unless twice as long as the longest logged; a stall lasting slowEvery is
// logged without waiting for its end; every slow commit is counted.
func TestSlowCommitReportOncePerStallRateLimited(t *testing.T) {
	var buf lockedBuffer
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	now := t0
	states := 0
	r := newSlowReport(100*time.Millisecond, slog.New(slog.NewJSONHandler(&buf, nil)), func(time.Time) slowState {
		states++
		return slowState{l0Tables: 5, l0Stall: 5, memtables: 4, memtablesMax: 4, building: 1, syncing: 80 * time.Millisecond, tableAge: 1500 * time.Millisecond}
	})
	r.now = func() time.Time { return now }
	r.machine = func() []any { return []any{"load1", "1.00"} }
	var gcFrom, gcTo time.Time
	r.gc = func(from, to time.Time) (int, time.Duration, time.Duration) {
		gcFrom, gcTo = from, to
		return 2, 3 * time.Millisecond, 2 * time.Millisecond
	}
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	// commit starts at start, is answered at end, its steps as given.
	commit := func(start, end time.Duration, tm commitTimes) {
		now = at(end)
		r.observe(&tm, at(start))
	}
	ms := time.Millisecond
	// A commit queued 10 ms, written in 20, waiting 30 for its barrier (gather 2), synced in
	// 300, answered 5 ms after: 365 ms.
	commit(0, 365*ms, commitTimes{picked: at(10 * ms), written: at(30 * ms), synced: at(60 * ms), syncTook: 300 * ms, gather: 2 * ms, rotated: true})
	commit(100*ms, 200*ms, commitTimes{}) // slow too, not the slowest
	if got := buf.lines(t, slowMsg); len(got) != 0 {
		t.Fatalf("logged before the stall ended: %v", got)
	}
	commit(370*ms, 371*ms, commitTimes{}) // fast: the stall is over
	lines := buf.lines(t, slowMsg)
	if len(lines) != 1 {
		t.Fatalf("%d lines after one stall, want 1", len(lines))
	}
	want := map[string]any{
		"level": "WARN", "stall_ms": 365.0, "commits": 2.0, "threshold_ms": 100.0, "slowest_ms": 365.0,
		"queued_ms": 10.0, "write_ms": 20.0, "wait_ms": 30.0, "gather_ms": 2.0, "sync_ms": 300.0, "rotated": true, "answer_ms": 5.0,
		"badger_l0_tables": 5.0, "badger_l0_stall": 5.0, "badger_memtables": 4.0, "badger_memtables_max": 4.0, "badger_tables_building": 1.0, "badger_table_age_ms": 1500.0,
		"syncing_ms": 80.0, "writing_ms": 0.0, "gc_pauses": 2.0, "gc_pause_ms": 3.0, "gc_pause_max_ms": 2.0, "stalls_unlogged": 0.0, "load1": "1.00",
	}
	for k, v := range want {
		if lines[0][k] != v {
			t.Errorf("%s = %v, want %v (line %v)", k, lines[0][k], v, lines[0])
		}
	}
	if !gcFrom.Equal(at(0)) || !gcTo.Equal(at(365*ms)) {
		t.Errorf("GC read over %v-%v, want the stall's span", gcFrom.Sub(t0), gcTo.Sub(t0))
	}
	if states != 1 {
		t.Errorf("state read %d times for one stall, want once", states)
	}

	// Two more stalls within 10 s of that line: counted, not logged.
	commit(time.Second, time.Second+150*ms, commitTimes{})
	commit(time.Second+200*ms, time.Second+201*ms, commitTimes{})
	commit(5*time.Second, 5*time.Second+150*ms, commitTimes{})
	commit(5*time.Second+200*ms, 5*time.Second+201*ms, commitTimes{})
	if got := len(buf.lines(t, slowMsg)); got != 1 {
		t.Fatalf("%d lines after two more stalls within 10 s, want still 1", got)
	}
	// One twice as long as the longest logged in those 10 s is logged at once, with the two
	// counted.
	commit(6*time.Second, 6*time.Second+800*ms, commitTimes{})
	commit(6*time.Second+900*ms, 6*time.Second+901*ms, commitTimes{})
	lines = buf.lines(t, slowMsg)
	if len(lines) != 2 || lines[1]["stall_ms"] != 800.0 || lines[1]["stalls_unlogged"] != 2.0 {
		t.Fatalf("after a stall of 800 ms: %d lines, last %v; want 2, the last of 800 ms with stalls_unlogged 2", len(lines), lines[len(lines)-1])
	}
	// Then one of 1 s, in the same 10 s: under twice 800 ms, counted.
	commit(7*time.Second, 8*time.Second, commitTimes{})
	commit(8*time.Second+100*ms, 8*time.Second+101*ms, commitTimes{})
	if got := len(buf.lines(t, slowMsg)); got != 2 {
		t.Fatalf("%d lines after a stall under twice the longest logged, want still 2", got)
	}
	// The next stall after 10 s is logged, whatever its length.
	commit(20*time.Second, 20*time.Second+120*ms, commitTimes{})
	commit(20*time.Second+130*ms, 20*time.Second+131*ms, commitTimes{})
	lines = buf.lines(t, slowMsg)
	if len(lines) != 3 || lines[2]["stalls_unlogged"] != 1.0 || lines[2]["commits"] != 1.0 {
		t.Fatalf("after 10 s: %d lines, last %v; want 3, the last with stalls_unlogged 1 and 1 commit", len(lines), lines[len(lines)-1])
	}
	// A stall that lasts: logged once it has gone on for slowEvery, without a fast commit.
	for i := range 12 {
		s := 40*time.Second + time.Duration(i)*time.Second
		commit(s, s+500*ms, commitTimes{})
	}
	if got := len(buf.lines(t, slowMsg)); got != 4 {
		t.Fatalf("%d lines after a 12 s stall, want 4", got)
	}
	if n := r.slow.Load(); n != 2+2+1+1+1+12 {
		t.Fatalf("%d slow commits counted, want 19", n)
	}
}

// Through the store: a commit held by its sync is reported with the sync as its cause, and
// counted.
func TestBadgerReportsASlowCommitsSync(t *testing.T) {
	var buf lockedBuffer
	b, err := OpenBadger(t.TempDir(), BadgerOptions{Fsync: FsyncBatch, SlowCommit: 20 * time.Millisecond,
		Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	first := true
	b.sync.beforeBarrier = func() {
		if first {
			first = false
			time.Sleep(50 * time.Millisecond) // the disk's slow sync, as the report should tell
		}
	}
	if err := b.Commit(context.Background(), put("a", "1")); err != nil {
		t.Fatal(err)
	}
	if n := b.SlowCommits(); n != 1 {
		t.Fatalf("SlowCommits = %d, want 1", n)
	}
	if err := b.Close(); err != nil { // closes the open stall: logged
		t.Fatal(err)
	}
	lines := buf.lines(t, slowMsg)
	if len(lines) != 1 {
		t.Fatalf("%d slow-commit lines, want 1", len(lines))
	}
	l := lines[0]
	if s, _ := l["sync_ms"].(float64); s < 50 {
		t.Errorf("sync_ms = %v, want at least the 50 ms the barrier was held (line %v)", l["sync_ms"], l)
	}
	if l["badger_l0_stall"] != 5.0 || l["badger_memtables_max"] != 4.0 || l["component"] != "badger" {
		t.Errorf("the store's state missing: %v", l)
	}
	if m, _ := l["badger_memtables"].(float64); m < 1 {
		t.Errorf("badger_memtables = %v, want the live memtable's log counted", l["badger_memtables"])
	}
	if strings.Contains(buf.b.String(), `"1"`) {
		t.Errorf("a value reached the log: %s", buf.b.String())
	}
}
