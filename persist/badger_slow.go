package persist

import (
	"log/slog"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gateway/gateway/internal/slowlog"
)

// The slow-commit report (issue 32: the accept's stalls). A commit that waits longer than
// BadgerOptions.SlowCommit opens a stall; the commits slow with it join it, and the first
// commit under the threshold after them (or the stall lasting slowEvery) closes it. A closed
// stall is logged once, at warn, with what its slowest commit waited on and what the store and
// the process were doing: one line every slowEvery at most, unless a stall lasted twice as long
// as the longest logged in that time (so a long stall is never hidden behind a short one, and
// each extra line in slowEvery doubles: a handful at most); the stalls not logged are counted
// in the next line (slow commits are counted on /metrics: gateway_storage_slow_commits_total).
// No key, value or message content is logged.
//
// What a commit waits on, in order (the phases, each in ms):
//   - queued: handed to the writer until the writer took its group (the groups before it
//     being written);
//   - write: its group's Badger write (stage and txn.Commit: the memtable insert, and when
//     Badger has no room for the write, its wait for a memtable flush, itself held when level
//     0 is at NumLevelZeroTablesStall);
//   - wait: written until the sync that covers it started (the sync before it, then the
//     syncer's gather, given apart as gather);
//   - sync: that barrier (Badger's DB.Sync: the msync of the memtable's log; fdatasyncs of
//     rotated logs: rotated);
//   - answer: the barrier's end until the committing goroutine ran again (a long answer is a
//     process waiting for a core).
//
// What the store and the process were doing, read once when the stall was seen (state) and
// over the stall's span (GC):
//   - badger_l0_tables against badger_l0_stall (NumLevelZeroTablesStall: at it, flushes wait);
//     badger_memtables (.mem files: the live one and those waiting for their flush) against
//     badger_memtables_max (NumMemtables: at it, writes wait); badger_tables_building (.sst
//     files not yet in the tree: a flush or a compaction writing); badger_table_age_ms: how
//     long before the newest table file was last written (a flush's or a compaction's write,
//     which the logs' syncs then queue behind on the disk);
//   - syncing_ms / writing_ms: how long the barrier and the writer's group then in flight
//     had been running (0: none);
//   - gc_pauses, gc_pause_ms, gc_pause_max_ms: Go's stop-the-world pauses that ended during
//     the stall;
//   - load1, cpu_some10, io_some10, io_full10: the machine's load and its CPU and I/O
//     pressure (PSI, the last 10 s' share of time some or all tasks waited) where Linux has
//     them: a stall with the machine waiting on I/O or on a core is not the store's alone.

// slowEvery is the least time between two slow-commit reports (slowlog.Gate); a stall lasting
// this long is logged without waiting for its end.
const slowEvery = slowlog.Every

// DefaultSlowCommit is BadgerOptions.SlowCommit's default.
const DefaultSlowCommit = 100 * time.Millisecond

// commitTimes is when a commit went through each step (set by the writer and the syncer).
type commitTimes struct {
	picked, written, synced time.Time     // the writer took its group, wrote it; its barrier started
	syncTook, gather        time.Duration // its barrier, and the gather just before it
	rotated                 bool          // its barrier synced rotated logs too
}

// slowPhases is one commit's phases, in ms.
type slowPhases struct {
	total, queued, write, wait, gather, sync, answer float64
	rotated                                          bool
}

// phasesOf splits a commit that started at start and was answered at end.
func phasesOf(t *commitTimes, start, end time.Time) slowPhases {
	p := slowPhases{total: ms(end.Sub(start))}
	if t.picked.IsZero() {
		return p
	}
	p.queued, p.write = ms(t.picked.Sub(start)), ms(t.written.Sub(t.picked))
	if t.synced.IsZero() {
		p.answer = ms(end.Sub(t.written))
		return p
	}
	p.wait, p.gather, p.sync = ms(t.synced.Sub(t.written)), ms(t.gather), ms(t.syncTook)
	p.answer = ms(end.Sub(t.synced.Add(t.syncTook)))
	p.rotated = t.rotated
	return p
}

// ms is d in milliseconds, to a tenth.
func ms(d time.Duration) float64 { return slowlog.Ms(d) }

// slowState is what the store was doing when a stall was seen.
type slowState struct {
	l0Tables, l0Stall, memtables, memtablesMax, building int
	syncing, writing, tableAge                           time.Duration
}

// slowReport gathers slow commits into stalls and logs them.
type slowReport struct {
	threshold time.Duration
	log       *slog.Logger
	now       func() time.Time
	state     func(now time.Time) slowState // the store's, read when a stall is seen
	machine   func() []any                  // load and pressure fields (nil: none)
	gc        func(from, to time.Time) (n int, total, longest time.Duration)

	slow     atomic.Uint64 // commits over the threshold since open
	stalling atomic.Bool   // cur != nil: a fast commit must close it

	mu   sync.Mutex
	cur  *stall
	gate slowlog.Gate // which closed stalls are logged
}

// stall is one run of slow commits.
type stall struct {
	first, seen, last time.Time // the first slow commit's start; when it was seen; the last's end
	commits           int
	worst             slowPhases
	state             slowState
}

func newSlowReport(threshold time.Duration, log *slog.Logger, state func(time.Time) slowState) *slowReport {
	return &slowReport{threshold: threshold, log: log, now: time.Now, state: state, machine: slowlog.Machine, gc: slowlog.GCPauses}
}

// observe takes a commit that started at start, with its steps' times; cheap when the commit
// was fast and no stall is open.
func (r *slowReport) observe(t *commitTimes, start time.Time) {
	end := r.now()
	d := end.Sub(start)
	if d < r.threshold {
		if r.stalling.Load() {
			r.mu.Lock()
			if r.cur != nil {
				r.close(end)
			}
			r.mu.Unlock()
		}
		return
	}
	r.slow.Add(1)
	p := phasesOf(t, start, end)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur == nil {
		r.cur = &stall{first: start, seen: end, state: r.state(end)}
		r.stalling.Store(true)
	}
	s := r.cur
	s.commits++
	s.first = minTime(s.first, start)
	if end.After(s.last) {
		s.last = end
	}
	if p.total > s.worst.total {
		s.worst = p
	}
	if end.Sub(s.seen) >= slowEvery {
		r.close(end)
	}
}

// flush closes an open stall (Close).
func (r *slowReport) flush() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cur != nil {
		r.close(r.now())
	}
}

// close ends the open stall and logs it unless a line was logged less than slowEvery ago
// for a stall at least half as long. r.mu is held.
func (r *slowReport) close(now time.Time) {
	s := r.cur
	r.cur = nil
	r.stalling.Store(false)
	d := s.last.Sub(s.first)
	ok, unlogged := r.gate.Allow(now, d)
	if !ok {
		return
	}
	n, total, longest := r.gc(s.first, s.last)
	w, st := s.worst, s.state
	args := []any{
		"stall_ms", ms(d), "commits", s.commits, "threshold_ms", ms(r.threshold),
		"slowest_ms", w.total, "queued_ms", w.queued, "write_ms", w.write, "wait_ms", w.wait,
		"gather_ms", w.gather, "sync_ms", w.sync, "rotated", w.rotated, "answer_ms", w.answer,
		"badger_l0_tables", st.l0Tables, "badger_l0_stall", st.l0Stall,
		"badger_memtables", st.memtables, "badger_memtables_max", st.memtablesMax,
		"badger_tables_building", st.building, "badger_table_age_ms", ms(st.tableAge),
		"syncing_ms", ms(st.syncing), "writing_ms", ms(st.writing),
		"gc_pauses", n, "gc_pause_ms", ms(total), "gc_pause_max_ms", ms(longest),
		"stalls_unlogged", unlogged,
	}
	if r.machine != nil {
		args = append(args, r.machine()...)
	}
	r.log.Warn("slow commits: a stall of the store's commit path", args...)
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// slowState reads the store's state for a stall's report.
func (b *Badger) slowState(now time.Time) slowState {
	opts := b.db.Opts()
	st := slowState{l0Stall: opts.NumLevelZeroTablesStall, memtablesMax: opts.NumMemtables}
	if lv := b.db.Levels(); len(lv) > 0 {
		st.l0Tables = lv[0].NumTables
	}
	if b.sync != nil {
		st.syncing = since(now, b.sync.barrierAt.Load())
	}
	st.writing = since(now, b.writingAt.Load())
	if b.inMemory {
		return st
	}
	entries, err := os.ReadDir(opts.Dir)
	if err != nil {
		return st
	}
	ssts := 0
	var newest time.Time
	for _, e := range entries {
		switch name := e.Name(); {
		case strings.HasSuffix(name, ".mem"):
			st.memtables++
		case strings.HasSuffix(name, ".sst"):
			ssts++
			if info, err := e.Info(); err == nil && info.ModTime().After(newest) {
				newest = info.ModTime()
			}
		}
	}
	if !newest.IsZero() {
		st.tableAge = now.Sub(newest)
	}
	st.building = max(ssts-len(b.db.Tables()), 0)
	return st
}

// since is now less a UnixNano time (0: none).
func since(now time.Time, at int64) time.Duration {
	if at == 0 {
		return 0
	}
	return now.Sub(time.Unix(0, at))
}

// SlowCommits is how many commits took longer than BadgerOptions.SlowCommit since open
// (gateway_storage_slow_commits_total).
func (b *Badger) SlowCommits() uint64 {
	if b.slow == nil {
		return 0
	}
	return b.slow.slow.Load()
}
