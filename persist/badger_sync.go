package persist

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// Pipelined syncs (issue 32, item 4). Badger's own SyncWrites syncs inside its one write path:
// a group's memtable inserts, then its fdatasync, then the next group's inserts; every commit
// waited for the sync of the group before it and then for its own. Here Badger writes without
// syncing, and the syncer makes the writes durable: it takes every group written since its
// last sync, syncs once, and answers their callers, while the writer goes on writing the next
// groups. A caller waits for the first sync that starts after its group was written, never for
// a sync that began before (the tail of a slow sync holds only the groups written before it
// started, plus the next round). NATS JetStream's file store and Badger's value log were read
// for this (bench/README.md, "The accept's tail").
//
// What a sync covers (read in badger v4.9.6's source): DB.Sync syncs the active memtable's
// write-ahead log (an msync of its map) and the newest value-log file only. A memtable that
// filled after a group was written became immutable, and its log is synced by nobody until the
// memtable is flushed to a table (which Badger syncs before it deletes the log); a full
// value-log file likewise (its doneWriting syncs only with SyncWrites). So the barrier also
// notices when Badger started a new log file (the next one's name exists: <fid>.mem, %05d;
// <fid>.vlog, %06d) and then fdatasyncs every older log file still there: on Linux an fsync of
// a file writes back its pages dirtied through any map of it.

// syncer is a Badger's sync pipeline (FsyncBatch), and the barrier every mode uses.
type syncer struct {
	db  *badger.DB
	dir string
	log *slog.Logger

	mu      sync.Mutex
	pending []*commitReq // written, waiting for the next sync
	callers int          // how many of pending are callers' (not background)
	closed  bool
	kick    chan struct{} // capacity 1: there is something to sync, or closed
	// want, while gather waits: the pending count that ends the wait (0: not waiting);
	// add then sends on gathered (capacity 1) once.
	want     int
	gathered chan struct{}
	timer    *time.Timer // gather's, the syncer goroutine's own

	// barrierMu serialises barriers (the syncer's and the interval loop's, Close's).
	barrierMu sync.Mutex
	// mem and vlog: the newest log files the last barrier saw (-1: none yet).
	mem, vlog int64
	// syncs counts barriers, rotations those that found a new log file (tests).
	syncs, rotations atomic.Uint64
	// barrierAt is when the barrier running started (UnixNano; 0: none), for the slow-commit
	// report.
	barrierAt atomic.Int64
	// beforeBarrier, when a test sets it, runs at the start of each barrier.
	beforeBarrier func()
	// afterAnswers, when a test sets it, runs after a barrier's answers, before gather.
	afterAnswers func(answered int)
}

func newSyncer(db *badger.DB, dir string, log *slog.Logger) *syncer {
	s := &syncer{db: db, dir: dir, log: log, kick: make(chan struct{}, 1), gathered: make(chan struct{}, 1), mem: -1, vlog: -1}
	s.mem, s.vlog = s.newest()
	return s
}

// add hands written requests to the syncer.
func (s *syncer) add(reqs []*commitReq) {
	if len(reqs) == 0 {
		return
	}
	s.mu.Lock()
	s.pending = append(s.pending, reqs...)
	for _, r := range reqs {
		if !r.background {
			s.callers++
		}
	}
	full := s.want > 0 && s.callers >= s.want
	if full {
		s.want = 0
	}
	s.mu.Unlock()
	if full {
		s.endGather()
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// close lets run finish: it syncs and answers what was handed to it, then returns. No add may
// follow (the writers have stopped).
func (s *syncer) close() {
	s.mu.Lock()
	s.closed = true
	full := s.want > 0
	s.want = 0
	s.mu.Unlock()
	if full {
		s.endGather()
	}
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// run is the sync goroutine: one barrier for everything written since the last, then the
// answers.
func (s *syncer) run() {
	var batch []*commitReq
	var gathered time.Duration // the last gather's wait
	for range s.kick {
		for {
			s.mu.Lock()
			batch, s.pending = s.pending, batch[:0]
			s.callers = 0
			closed := s.closed
			s.mu.Unlock()
			if len(batch) == 0 {
				if closed {
					return
				}
				break
			}
			start := time.Now()
			rotations := s.rotations.Load()
			err := s.barrier()
			took := time.Since(start)
			rotated := s.rotations.Load() != rotations
			if err != nil {
				err = fmt.Errorf("persist: commit: sync: %w", err)
			}
			// The callers written meanwhile, read before any answer below: an answered caller
			// may commit again before gather reads the count, and counted twice it would make
			// gather wait out its bound for a commit that never comes.
			s.mu.Lock()
			others := s.callers
			s.mu.Unlock()
			n := 0 // callers answered (a request answered is its caller's again: counted first)
			for _, r := range batch {
				if !r.background {
					n++
				}
				if r.res == nil {
					r.res = err
				}
				r.times.synced, r.times.syncTook, r.times.gather, r.times.rotated = start, took, gathered, rotated
				r.done <- r.res
			}
			clear(batch)
			if s.afterAnswers != nil {
				s.afterAnswers(n)
			}
			gathered = s.gather(n, others, took)
		}
	}
}

// gatherFraction and gatherMax bound gather's wait: a fraction of the barrier just done, at
// most gatherMax. Variables so benchmarks can compare (0: no wait).
var gatherFraction, gatherMax = 1.0, 2 * time.Millisecond

// gather waits a little before the next barrier when the last one answered more than one
// caller, until every caller in flight is pending again (the callers it answered, on top of
// those already pending) or a fraction of its time went by. The callers it answered commit
// again at once; without the wait the next barrier would begin before they were written, and
// they would wait for the one after it: callers split into two cohorts that take turns, each
// sync covering half of them. With the wait one sync covers both (PostgreSQL's commit_delay
// and MySQL's binlog_group_commit_sync_delay, here bounded by the sync's own time). A caller
// committing alone (one at a time) is never held. Background commits (the outcome writer's,
// the allowance counts': background) are synced as any other but not waited for: their
// writers commit on clocks of their own, and counting them made most waits run out (in
// BenchmarkSendPath/batch/send about 46 commits a barrier, 5 of them background, and 2 of 3
// gathers ran out). bench/README.md, "Sixth pass: the synced send's CPU and tail" and
// "Eighth pass: the synced send's CPU".
// It returns how long it waited.
func (s *syncer) gather(answered, others int, took time.Duration) time.Duration {
	d := min(time.Duration(float64(took)*gatherFraction), gatherMax)
	if d <= 0 || answered < 2 {
		return 0
	}
	s.mu.Lock()
	if s.closed || s.callers >= answered+others { // every one of them is back already
		s.mu.Unlock()
		return 0
	}
	began := time.Now()
	s.want = answered + others
	s.mu.Unlock()
	if s.timer == nil {
		s.timer = time.NewTimer(d)
	} else {
		s.timer.Reset(d)
	}
	select {
	case <-s.gathered:
	case <-s.timer.C:
	}
	s.timer.Stop()
	s.mu.Lock()
	s.want = 0
	s.mu.Unlock()
	select { // a signal sent after the timer fired
	case <-s.gathered:
	default:
	}
	return time.Since(began)
}

// endGather ends gather's wait (non-blocking: a signal already waiting does the same).
func (s *syncer) endGather() {
	select {
	case s.gathered <- struct{}{}:
	default:
	}
}

// barrier makes everything Badger was handed before it started durable: DB.Sync, and the log
// files Badger moved on from since the last barrier (see above).
func (s *syncer) barrier() error {
	s.barrierMu.Lock()
	defer s.barrierMu.Unlock()
	s.barrierAt.Store(time.Now().UnixNano())
	defer s.barrierAt.Store(0)
	if s.beforeBarrier != nil {
		s.beforeBarrier()
	}
	s.syncs.Add(1)
	err := s.db.Sync()
	if s.exists(s.mem+1, ".mem", 5) || s.exists(s.vlog+1, ".vlog", 6) {
		s.rotations.Add(1)
		mem, vlog := s.newest()
		err = errors.Join(err, s.syncOlder(mem, vlog))
		s.mem, s.vlog = mem, vlog
	}
	return err
}

// exists tells whether log file fid (with ext, its number in digits) is there.
func (s *syncer) exists(fid int64, ext string, digits int) bool {
	_, err := os.Stat(filepath.Join(s.dir, fmt.Sprintf("%0*d%s", digits, fid, ext)))
	return err == nil
}

// newest is the highest fid of the .mem and of the .vlog files in the directory (-1: none).
func (s *syncer) newest() (mem, vlog int64) {
	mem, vlog = -1, -1
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return mem, vlog
	}
	for _, e := range entries {
		if fid, ext, ok := logFile(e.Name()); ok {
			if ext == ".mem" {
				mem = max(mem, fid)
			} else {
				vlog = max(vlog, fid)
			}
		}
	}
	return mem, vlog
}

// syncOlder fdatasyncs every .mem file older than mem and every .vlog file older than vlog (a
// file flushed and removed meanwhile needs nothing: Badger synced its table first).
func (s *syncer) syncOlder(mem, vlog int64) error {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		fid, ext, ok := logFile(e.Name())
		if !ok || (ext == ".mem" && fid >= mem) || (ext == ".vlog" && fid >= vlog) {
			continue
		}
		if err := syncPath(filepath.Join(s.dir, e.Name())); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// logFile reads a Badger log file's name: its fid and extension.
func logFile(name string) (int64, string, bool) {
	for _, ext := range []string{".mem", ".vlog"} {
		if stem, ok := strings.CutSuffix(name, ext); ok {
			fid, err := strconv.ParseInt(stem, 10, 64)
			return fid, ext, err == nil
		}
	}
	return 0, "", false
}

// syncPath fdatasyncs the file at path.
func syncPath(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = fdatasync(f)
	return errors.Join(err, f.Close())
}
