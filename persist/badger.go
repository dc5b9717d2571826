package persist

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
	"github.com/gateway/gateway/domain"
)

// Fsync says when Badger's commits reach the disk.
type Fsync string

const (
	// FsyncBatch syncs each group commit before any of its callers returns (survives a
	// machine crash). The syncs are pipelined (badger_sync.go): while one group is synced the
	// next is written, and each caller waits for the first sync after its group was written.
	FsyncBatch Fsync = "batch"
	// FsyncInterval does not sync per commit but every syncInterval (survives a process
	// crash; a machine crash may lose the last interval).
	FsyncInterval Fsync = "interval"
)

// BadgerOptions configures OpenBadger.
type BadgerOptions struct {
	Fsync  Fsync        // "" means FsyncBatch
	Logger *slog.Logger // badger's own logs go through it, at warn and above only; nil discards
	// Writers is how many group commits may be in flight at once (default 1). Measured with
	// BenchmarkGroupCommit (64 committers, 2 cores): 1 writer 110k durable items/s at 32 items
	// per transaction; 2 writers 76k at 18; 4 writers 51k at 9: concurrent transactions split
	// the groups and Badger syncs each. Callers issue a dependent write only after the previous
	// one returned, so concurrent groups would never hold writes that must be ordered.
	InMemory bool // for tests and benchmarks only: nothing is written to disk
	Writers  int
	// MemTableSize is each memtable's size (default DefaultMemTableSize; Badger refuses a
	// transaction over 15 % of it). Every other size of the tree follows from it (options).
	MemTableSize int64
	// MinFreeDisk is the free-space floor of the data disk: under it, commits fail with
	// ErrStorageUnavailable (reads go on) until space returns, and OpenBadger refuses to
	// start. 0 disables the floor; Badger's mapped files are still allocated ahead of its
	// writes (see disk.go). A floor under MinFreeDiskFor(MemTableSize) is refused: it could not
	// hold what Badger writes after commits stop.
	MinFreeDisk int64
	// SlowCommit: a commit waiting longer is a slow one; a run of them is logged at warn with
	// what they waited on (badger_slow.go), at most every 10 s. 0: DefaultSlowCommit; below 0:
	// no report.
	SlowCommit time.Duration
	// freeSpace replaces statfs in tests.
	freeSpace func(dir string) (uint64, error)
	// tune, in benchmarks, changes Badger's options last.
	tune func(badger.Options) badger.Options
	// absentHold, when set by a test, holds the scan of the keys known absent (after its read
	// snapshot) until closed.
	absentHold chan struct{}
}

// Group commit limits and background periods.
const (
	// maxGroupOps and maxGroupBytes stop gathering requests into one transaction; Badger's
	// own limit (15 % of the memtable, 2.4 MiB here) is enforced by splitting on ErrTxnTooBig.
	maxGroupOps   = 1024
	maxGroupBytes = 2 << 20
	// queueSize is how many commit requests may wait for the writer; more callers block.
	queueSize = 4096
	// pooledBufMax keeps requests with huge buffers out of the pool.
	pooledBufMax  = 64 << 10
	syncInterval  = 100 * time.Millisecond
	gcInterval    = 5 * time.Minute
	gcDiscardRate = 0.5
)

// Badger is the durable KV. All writes go through writer goroutines that each gather every
// Commit waiting into one Badger transaction (group commit), written without a sync; with
// FsyncBatch the syncer (badger_sync.go) makes them durable, one sync for every group written
// since the last, while the writer goes on with the next group, and answers their callers.
//
// Concurrency: Get, Scan and Commit run on the caller's goroutine and are counted by gate;
// only the writer goroutine creates write transactions; Close waits for the calls in flight,
// then for the writer, the syncer, the background syncs and value-log GC, then closes Badger.
type Badger struct {
	db       *badger.DB
	log      *slog.Logger
	inMemory bool
	disk     *diskGuard // nil in memory

	gate       *gate
	fsync      Fsync
	sync       *syncer // FsyncBatch on disk: the pipelined syncs
	reqs       chan *commitReq
	pool       sync.Pool // *commitReq
	writerDone chan struct{}
	stop       chan struct{} // stops the syncer and the GC loop
	bg         sync.WaitGroup

	closeOnce sync.Once
	closeErr  error

	txns atomic.Uint64 // write transactions committed, for tests and benchmarks
	// writes and writeBytes count the ops committed and their keys' and values' bytes
	// (WriteStats: gateway_storage_writes_total, what a message costs the store).
	writes, writeBytes atomic.Uint64
	// slow reports the slow commits (nil: none); writingAt is when the writer took the
	// group it is writing (UnixNano; 0: none).
	slow      *slowReport
	writingAt atomic.Int64
	// beforeGroup, when set by a test, runs in the writer before each group is written.
	beforeGroup func(group []*commitReq)
	// absent holds the keys under outlog_pos/ and idem/, so a look-up of one never written
	// reads nothing (badger_absent.go).
	absent *absentKeys
	// commitFault, when set by a test, runs after a group is staged: an error fails the
	// group's commit as Badger's would (a full disk, an I/O error).
	commitFault func() error
}

// commitReq is one Commit call handed to the writer. Its ops point into buf, a private copy,
// so a caller that gives up (context ended) may reuse its own slices at once.
type commitReq struct {
	ops  []Op
	buf  []byte
	size int
	done chan error // buffered: the writer never blocks on a caller that left
	err  error      // set by stage: the request's condition failed (ErrExists)
	// res is the request's answer once its group was written (the commit's error, or err);
	// written: its group was committed (to be synced before the answer, with FsyncBatch).
	res     error
	written bool
	// at is when Commit was called: the ops' TTLs count from it (stage), as the keys known
	// absent reckon their expiry (absentKeys.written).
	at time.Time
	// background: a writer's own commit (outcomes, allowance counts), not a caller's: the
	// syncer's gather does not wait for it to come back (see gather).
	background bool
	// times: when it went through the writer and the syncer (the slow-commit report).
	times commitTimes
}

// backgroundKey marks a commit's context as a background writer's (background).
type backgroundKey struct{}

// background returns ctx marked as a background writer's: with FsyncBatch its commit is synced
// before it is answered as any other, but the syncer does not hold a barrier for it to come
// back (its writer commits on a clock of its own, not when answered).
func background(ctx context.Context) context.Context {
	return context.WithValue(ctx, backgroundKey{}, true)
}

// OpenBadger opens (or creates) the Badger database in dir (DATA/db) and starts its writer.
func OpenBadger(dir string, o BadgerOptions) (*Badger, error) {
	switch o.Fsync {
	case "":
		o.Fsync = FsyncBatch
	case FsyncBatch, FsyncInterval:
	default:
		return nil, fmt.Errorf("%w: fsync mode %q (want %q or %q)", domain.ErrRecordInvalid, o.Fsync, FsyncBatch, FsyncInterval)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "badger")

	opts := badger.DefaultOptions(dir)
	if o.InMemory {
		opts = badger.DefaultOptions("").WithInMemory(true)
	}
	shape := shapeFor(cmp.Or(o.MemTableSize, DefaultMemTableSize))
	if o.MinFreeDisk > 0 && !o.InMemory && o.MinFreeDisk < shape.minFree() {
		return nil, fmt.Errorf("%w: a free-space floor of %s is under the %s Badger may write after commits stop with %s memtables (flushes and compactions); give at least that (--min-free-disk), or smaller memtables",
			domain.ErrRecordInvalid, mib(uint64(o.MinFreeDisk)), mib(uint64(shape.minFree())), mib(uint64(shape.memTable)))
	}
	opts = shape.apply(opts).
		WithLogger(badgerLogger{log}).
		// No sync in Badger's write path: batch syncs each group (and those written while it
		// synced) before its callers are answered, in a goroutine of its own, so the next
		// group is written meanwhile (badger_sync.go); interval syncs every syncInterval.
		WithSyncWrites(false).
		// Only the writers write, and concurrent groups hold independent writes (see Writers).
		WithDetectConflicts(false).
		WithMetricsEnabled(false).
		// Memory kept modest (10k actors share 24 GiB): defaults are 5 x 64 MiB memtables,
		// a 256 MiB block cache and 1 GiB value-log files. Here 32 MiB block cache, 16 MiB
		// index cache; the tree's shape is shape's.
		WithBlockCacheSize(32 << 20).
		WithIndexCacheSize(16 << 20).
		// Records are small JSON; compressing tables cost about 5 % of the CPU of a send
		// under load (profiled) for little disk saved.
		WithCompression(options.None)
	if o.InMemory {
		opts = opts.WithValueThreshold(1 << 20) // an in-memory Badger keeps every value in its tree
	}

	if o.tune != nil {
		opts = o.tune(opts)
	}
	var disk *diskGuard
	if !o.InMemory {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("persist: open badger at %q: %w", dir, err)
		}
		disk = newDiskGuard(dir, uint64(max(o.MinFreeDisk, 0)), log)
		disk.valueThreshold, disk.vlogFile = shape.valueThreshold, shape.vlogFile
		if o.freeSpace != nil {
			disk.free = o.freeSpace
		}
		// Opening replays the log into a new, mapped memtable: on a full disk that write
		// would fault. Refuse to start instead, with the reason.
		if disk.check(); disk.low.Load() {
			return nil, fmt.Errorf("persist: open badger at %q: %w", dir, disk.err())
		}
		if err := dropEmptyLogs(dir, log); err != nil {
			return nil, err
		}
	}
	db, err := badger.Open(opts)
	if err != nil {
		if noSpace(err) {
			err = fmt.Errorf("%w: %w", domain.ErrStorageUnavailable, err)
		}
		return nil, fmt.Errorf("persist: open badger at %q: %w", dir, err)
	}
	b := &Badger{
		db:         db,
		log:        log,
		inMemory:   o.InMemory,
		disk:       disk,
		gate:       newGate(),
		fsync:      o.Fsync,
		reqs:       make(chan *commitReq, queueSize),
		writerDone: make(chan struct{}),
		stop:       make(chan struct{}),
		absent:     newAbsentKeys(absentPrefixes),
	}
	b.absent.hold = o.absentHold
	b.pool.New = func() any { return &commitReq{done: make(chan error, 1)} }
	writers := o.Writers
	if writers <= 0 {
		writers = 1
	}
	if !o.InMemory {
		b.sync = newSyncer(db, dir, log)
	}
	if o.SlowCommit >= 0 {
		b.slow = newSlowReport(cmp.Or(o.SlowCommit, DefaultSlowCommit), log, b.slowState)
	}
	var wg sync.WaitGroup
	for range writers {
		wg.Go(b.write)
	}
	go func() { wg.Wait(); close(b.writerDone) }()
	b.bg.Go(func() { b.absent.run(db, b.stop, b.log.Warn) })
	if !o.InMemory {
		disk.check() // allocate the memtable Badger just created
		b.bg.Go(func() { disk.watch(b.stop) })
		if o.Fsync == FsyncBatch {
			b.bg.Go(b.sync.run)
		} else {
			b.bg.Go(b.syncLoop)
		}
		b.bg.Go(b.gcLoop)
	}
	return b, nil
}

// Get returns a copy of the value at key.
func (b *Badger) Get(key []byte) ([]byte, error) {
	if !b.gate.enter() {
		return nil, ErrClosed
	}
	defer b.gate.leave()
	if len(key) == 0 || b.absent.absent(key) {
		return nil, domain.ErrRecordNotFound
	}
	var value []byte
	err := b.db.View(func(txn *badger.Txn) error {
		item, err := txn.Get(key)
		if err != nil {
			return err
		}
		value, err = item.ValueCopy(nil)
		return err
	})
	if errors.Is(err, badger.ErrKeyNotFound) {
		return nil, domain.ErrRecordNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("persist: get: %w", err)
	}
	return value, nil
}

// Has tells which of keys are present, in one read transaction (Haver).
func (b *Badger) Has(keys [][]byte) ([]bool, error) {
	if !b.gate.enter() {
		return nil, ErrClosed
	}
	defer b.gate.leave()
	out := make([]bool, len(keys))
	err := b.db.View(func(txn *badger.Txn) error {
		for i, k := range keys {
			if len(k) == 0 || b.absent.absent(k) {
				continue
			}
			switch _, err := txn.Get(k); {
			case err == nil:
				out[i] = true
			case !errors.Is(err, badger.ErrKeyNotFound):
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("persist: get: %w", err)
	}
	return out, nil
}

// readMany reads keys in one read transaction: values[i] is a copy of key i's value, nil when
// it is absent (or the key empty). One transaction's set-up (its read timestamp from the
// oracle) for many keys, where Get takes one each (manyReader: the log outbox's look-ups of an
// Idempotency-Key's ids).
func (b *Badger) readMany(keys [][]byte) ([][]byte, error) {
	if !b.gate.enter() {
		return nil, ErrClosed
	}
	defer b.gate.leave()
	out := make([][]byte, len(keys))
	var at [8]int
	read := at[:0] // the keys to read: not empty, not known absent
	for i, k := range keys {
		if len(k) != 0 && !b.absent.absent(k) {
			read = append(read, i)
		}
	}
	if len(read) == 0 {
		return out, nil
	}
	err := b.db.View(func(txn *badger.Txn) error {
		for _, i := range read {
			item, err := txn.Get(keys[i])
			switch {
			case errors.Is(err, badger.ErrKeyNotFound):
				continue
			case err != nil:
				return err
			}
			if out[i], err = item.ValueCopy(nil); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("persist: get: %w", err)
	}
	return out, nil
}

// Scan calls fn for every live key under prefix in key order, within one read snapshot.
// The slices passed to fn are only valid during the call.
func (b *Badger) Scan(prefix []byte, fn func(key, value []byte) error) error {
	return b.ScanFrom(prefix, prefix, fn)
}

// ScanFrom is Scan starting at the first key at or after start (a key under prefix): it seeks
// instead of walking the keys before start.
func (b *Badger) ScanFrom(prefix, start []byte, fn func(key, value []byte) error) error {
	if !b.gate.enter() {
		return ErrClosed
	}
	defer b.gate.leave()
	return b.db.View(func(txn *badger.Txn) error {
		// Values live in the LSM tree (under the 1 MiB value threshold): prefetching would
		// only copy them.
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		for it.Seek(start); it.Valid(); it.Next() {
			if err := visit(it.Item(), fn); err != nil {
				return err
			}
		}
		return nil
	})
}

// ScanGroupsFrom walks, for each group of keys under prefix (the keys sharing the part up to the
// first '/' after prefix), the group's keys at or after that part followed by from, in one
// read snapshot, seeking past the keys before it: boot's read of every user's accepts since
// the outbox's checkpoint costs a seek per user and a step per accept, not a walk of the week.
func (b *Badger) ScanGroupsFrom(prefix, from []byte, fn func(key, value []byte) error) error {
	if !b.gate.enter() {
		return ErrClosed
	}
	defer b.gate.leave()
	return b.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix})
		defer it.Close()
		var seek []byte
		for it.Seek(prefix); it.Valid(); {
			key := it.Item().Key()
			i := bytes.IndexByte(key[len(prefix):], '/')
			if i < 0 {
				it.Next()
				continue
			}
			group := key[:len(prefix)+i+1]
			if bytes.Compare(key[len(group):], from) < 0 {
				seek = append(append(seek[:0], group...), from...)
				it.Seek(seek)
				continue
			}
			if err := visit(it.Item(), fn); err != nil {
				return err
			}
			it.Next()
		}
		return nil
	})
}

// visit hands one item's key and value to fn.
func visit(item *badger.Item, fn func(key, value []byte) error) error {
	var fnErr error
	if err := item.Value(func(v []byte) error {
		fnErr = fn(item.Key(), v)
		return nil
	}); err != nil {
		return fmt.Errorf("persist: scan: %w", err)
	}
	return fnErr
}

// ScanBefore calls fn for the live keys under prefix that sort before end, newest key first
// (end nil: from the last key under prefix), within one read snapshot: a reverse iterator
// that seeks, so the keys after end are not walked.
func (b *Badger) ScanBefore(prefix, end []byte, fn func(key, value []byte) error) error {
	if !b.gate.enter() {
		return ErrClosed
	}
	defer b.gate.leave()
	seek := end
	if seek == nil {
		seek = append(slices.Clone(prefix), 0xff)
	}
	return b.db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: prefix, Reverse: true})
		defer it.Close()
		for it.Seek(seek); it.Valid(); it.Next() {
			if end != nil && bytes.Equal(it.Item().Key(), end) {
				continue
			}
			if err := visit(it.Item(), fn); err != nil {
				return err
			}
		}
		return nil
	})
}

// Commit hands ops to the writer and waits until the group holding them is written (and,
// with FsyncBatch, synced). If ctx ends while waiting, Commit returns ctx.Err() but the ops
// may still be committed: the outcome is then unknown to the caller.
func (b *Badger) Commit(ctx context.Context, ops ...Op) error {
	if !b.gate.enter() {
		return ErrClosed
	}
	defer b.gate.leave()
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := ValidateOps(ops); err != nil {
		return err
	}
	if err := b.Health(); err != nil {
		return err
	}
	if len(ops) == 0 {
		return nil
	}
	start := time.Now() // also the ops' TTLs' start (commitReq.at)
	b.absent.written(ops, start)
	if b.inMemory {
		// In-memory Badger refuses values at or above its value threshold (1 MiB).
		for i, op := range ops {
			if len(op.Value) >= 1<<20 {
				return fmt.Errorf("%w: op %d: value of %d bytes too large for in-memory mode", domain.ErrRecordInvalid, i, len(op.Value))
			}
		}
	}
	req := b.pool.Get().(*commitReq)
	req.load(ops)
	req.at = start
	req.background = ctx.Value(backgroundKey{}) != nil
	req.times = commitTimes{}
	select {
	case b.reqs <- req:
	case <-ctx.Done():
		b.release(req)
		return ctx.Err()
	}
	select {
	case err := <-req.done:
		if b.slow != nil {
			b.slow.observe(&req.times, start)
		}
		b.release(req)
		return err
	case <-ctx.Done():
		return ctx.Err() // req still belongs to the writer: not pooled
	}
}

// load copies ops into r's own buffer.
func (r *commitReq) load(ops []Op) {
	n := 0
	for _, op := range ops {
		n += len(op.Key) + len(op.Value)
	}
	r.size = n
	if cap(r.buf) < n {
		r.buf = make([]byte, 0, n)
	}
	buf := r.buf[:0]
	r.ops = r.ops[:0]
	for _, op := range ops {
		// buf has room for everything: appends never move it, so earlier slices stay valid.
		k := len(buf)
		buf = append(buf, op.Key...)
		v := len(buf)
		buf = append(buf, op.Value...)
		r.ops = append(r.ops, Op{Key: buf[k:v:v], Value: buf[v:len(buf):len(buf)], Delete: op.Delete, TTL: op.TTL, IfAbsent: op.IfAbsent, IfPresent: op.IfPresent})
	}
	r.buf = buf
}

func (b *Badger) release(r *commitReq) {
	if cap(r.buf) > pooledBufMax {
		return
	}
	clear(r.ops)
	r.ops = r.ops[:0]
	b.pool.Put(r)
}

// write is the writer goroutine: it takes the first waiting request, gathers whatever else
// is already waiting (up to the group limits), writes the group and answers its callers.
// No timer: while one group is being synced the next one accumulates in the queue.
func (b *Badger) write() {
	var group []*commitReq
	for req := range b.reqs {
		group = append(group[:0], req)
		ops, size := len(req.ops), req.size
	gather:
		for ops < maxGroupOps && size < maxGroupBytes {
			select {
			case r, ok := <-b.reqs:
				if !ok {
					break gather // closed: the range loop ends after this group
				}
				group = append(group, r)
				ops += len(r.ops)
				size += r.size
			default:
				break gather
			}
		}
		picked := time.Now()
		b.writingAt.Store(picked.UnixNano())
		if b.beforeGroup != nil {
			b.beforeGroup(group)
		}
		if err := b.disk.beforeWrite(); err != nil {
			b.writingAt.Store(0)
			for _, r := range group {
				r.done <- err
			}
			clear(group)
			continue
		}
		b.commitGroup(group)
		written := time.Now()
		b.writingAt.Store(0)
		for _, r := range group {
			r.times.picked, r.times.written = picked, written
		}
		b.answer(group)
		clear(group)
	}
}

// answer answers a written group's callers: at once, or (FsyncBatch on disk) once the syncer
// made the group durable. A request whose condition failed waits for the sync too: its answer
// may rest on a write of an earlier group that is not synced yet. A request that was not
// written (its commit failed) is answered at once.
func (b *Badger) answer(group []*commitReq) {
	if b.fsync != FsyncBatch || b.sync == nil {
		for _, r := range group {
			r.done <- r.res
		}
		return
	}
	var durable []*commitReq
	for _, r := range group {
		if r.written {
			durable = append(durable, r)
		} else {
			r.done <- r.res
		}
	}
	b.sync.add(durable)
}

// commitGroup writes group, in order, in as few transactions as Badger accepts, and sets every
// request's answer (res; written when its transaction was committed). A request Badger refuses
// even alone fails by itself; its neighbours are written.
func (b *Badger) commitGroup(group []*commitReq) {
	for len(group) > 0 {
		txn := b.db.NewTransaction(true)
		n, err := stage(txn, group)
		if err != nil {
			txn.Discard() // it may hold part of group[n]
			if n == 0 || !errors.Is(err, badger.ErrTxnTooBig) {
				b.commitGroup(group[:n]) // these staged cleanly: one transaction
				group[n].res, group[n].written = b.commitErr(err), false
				group = group[n+1:]
				continue
			}
			// group[n] does not fit on top of group[:n]: write those, then start at group[n].
			b.commitGroup(group[:n])
			group = group[n:]
			continue
		}
		if b.commitFault != nil {
			if err = b.commitFault(); err != nil {
				txn.Discard()
			}
		}
		if err == nil {
			err = txn.Commit()
		}
		b.txns.Add(1)
		if err != nil {
			err = b.commitErr(err)
		} else {
			wal, vlog := groupBytes(group, b.valueThreshold())
			b.disk.wrote(wal, vlog)
			var ops, n int
			for _, r := range group {
				if r.err == nil {
					ops += len(r.ops)
					n += r.size
				}
			}
			b.writes.Add(uint64(ops))
			b.writeBytes.Add(uint64(n))
		}
		for _, r := range group {
			r.written, r.res = err == nil, r.err
			if err != nil {
				// Even a request whose condition failed: it may have failed on a write staged
				// before it in this transaction, which did not land (two copies of a webhook in
				// one group: the second's "exists" would answer it as kept).
				r.res = err
			}
		}
		return
	}
}

// groupBytes estimates what a group adds to Badger's write-ahead log (every entry, with its
// header) and to its value log (values over the 1 MiB value threshold).
func groupBytes(group []*commitReq, valueThreshold int64) (wal, vlog int64) {
	for _, r := range group {
		for _, op := range r.ops {
			n := int64(len(op.Key) + len(op.Value) + entryOverhead)
			wal += n
			if int64(len(op.Value)) >= valueThreshold {
				vlog += n
			}
		}
	}
	return wal, vlog
}

// valueThreshold is the size from which values go to the value log.
func (b *Badger) valueThreshold() int64 {
	if b.disk == nil {
		return 1 << 20
	}
	return b.disk.valueThreshold
}

// entryOverhead is an upper bound of Badger's per-entry header, checksum and version.
const entryOverhead = 64

// commitErr wraps a failed write; running out of space makes the storage unavailable (the
// watcher makes it available again once space returns).
func (b *Badger) commitErr(err error) error {
	if noSpace(err) && b.disk != nil {
		b.disk.setLow(fmt.Sprintf("a write failed: %v", err))
		return fmt.Errorf("persist: commit: %w: %w", domain.ErrStorageUnavailable, err)
	}
	return fmt.Errorf("persist: commit: %w", err)
}

// WriteStats returns the transactions committed, the ops they held and those ops' bytes (keys
// and values) since open.
func (b *Badger) WriteStats() (txns, writes, bytes uint64) {
	return b.txns.Load(), b.writes.Load(), b.writeBytes.Load()
}

// Syncs is the number of barriers (syncs of Badger's logs) since open: per group written
// with FsyncBatch, every syncInterval with FsyncInterval; 0 in memory.
func (b *Badger) Syncs() uint64 {
	if b.sync == nil {
		return 0
	}
	return b.sync.syncs.Load()
}

// Health is nil while commits are accepted, else ErrStorageUnavailable with its cause (free
// space under MinFreeDisk, or a write that found the disk full).
func (b *Badger) Health() error {
	if b.disk == nil {
		return nil
	}
	return b.disk.err()
}

// stage adds the requests' ops to txn; it returns how many requests were fully added and, if
// it stopped early, the error of the request it stopped at.
//
// A request whose IfAbsent condition fails is not staged: its err is set (ErrExists) and the
// others go on. Conditions see the writes staged before them in the same transaction, so of two
// requests that put the same key if absent, only the first is written.
func stage(txn *badger.Txn, group []*commitReq) (int, error) {
	for i, r := range group {
		r.err = nil
		for _, op := range r.ops {
			if !op.isCond() {
				continue
			}
			_, err := txn.Get(op.Key)
			switch {
			case err == nil && op.IfAbsent:
				r.err = domain.ErrRecordExists
			case errors.Is(err, badger.ErrKeyNotFound) && op.IfPresent:
				r.err = domain.ErrRecordNotFound
			case err != nil && !errors.Is(err, badger.ErrKeyNotFound):
				return i, err
			}
		}
		if r.err != nil {
			continue
		}
		for _, op := range r.ops {
			var err error
			if op.isCond() {
				continue
			}
			if op.Delete {
				err = txn.Delete(op.Key)
			} else {
				e := badger.NewEntry(op.Key, op.Value)
				if op.TTL > 0 {
					e.ExpiresAt = expiresAt(r.at, op.TTL)
				}
				err = txn.SetEntry(e)
			}
			if err != nil {
				return i, err
			}
		}
	}
	return len(group), nil
}

// expiresAt converts a TTL to Badger's expiry in Unix seconds, rounded up so that an entry
// never expires before its TTL (Badger's own WithTTL rounds down, so a TTL under a second
// could expire at once).
func expiresAt(now time.Time, ttl time.Duration) uint64 {
	t := now.Add(ttl)
	s := t.Unix()
	if t.Nanosecond() > 0 {
		s++
	}
	return uint64(s)
}

// syncLoop makes interval-mode commits durable every syncInterval.
func (b *Badger) syncLoop() {
	t := time.NewTicker(syncInterval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
			if err := b.sync.barrier(); err != nil {
				b.log.Warn("periodic sync failed", "err", err)
			}
		}
	}
}

// gcLoop reclaims value-log space. Records stay under the value threshold and live in the
// LSM tree, so this only matters for large values (media in the outbox).
func (b *Badger) gcLoop() {
	t := time.NewTicker(gcInterval)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
		// A collection rewrites live values into the value log, past what the guard
		// allocated ahead: only with a value-log file's room above the floor.
		if b.disk != nil {
			if free, err := b.disk.free(b.disk.dir); err != nil || free < b.disk.floor+uint64(b.disk.vlogFile) || b.disk.low.Load() {
				continue
			}
		}
		for {
			err := b.db.RunValueLogGC(gcDiscardRate)
			if err != nil {
				if !errors.Is(err, badger.ErrNoRewrite) && !errors.Is(err, badger.ErrRejected) {
					b.log.Warn("value log GC failed", "err", err)
				}
				break
			}
			select {
			case <-b.stop:
				return
			default:
			}
		}
	}
}

// Close lets the calls in flight finish (pending commits are written), stops the writer, the
// syncer and the GC, and closes Badger (which syncs). Later calls return ErrClosed; Close
// itself may be called again and returns the first result.
func (b *Badger) Close() error {
	b.closeOnce.Do(func() {
		b.gate.closeAndWait()
		// No caller is between enter and leave any more, so nothing can send on reqs.
		close(b.reqs)
		<-b.writerDone
		if b.sync != nil {
			b.sync.close() // the groups written last are synced and answered
		}
		close(b.stop)
		b.bg.Wait()
		if b.slow != nil {
			b.slow.flush()
		}
		if err := b.db.Close(); err != nil {
			b.closeErr = fmt.Errorf("persist: close badger: %w", err)
		}
	})
	return b.closeErr
}

// badgerLogger sends Badger's logs to slog, warnings and errors only: its info lines
// (compactions, flushes) are noise at the gateway's scale, but for the two it writes only when
// a write path stalled, kept at warn beside the slow-commit report (badger_slow.go): a flush
// held over a second by level 0 at NumLevelZeroTablesStall ("L0 was stalled for"), and a
// compaction over 2 s ("LOG Compact", its table names included: ids, no key).
type badgerLogger struct{ l *slog.Logger }

func (g badgerLogger) Errorf(f string, a ...any) {
	g.l.Error(strings.TrimSpace(fmt.Sprintf(f, a...)))
}

func (g badgerLogger) Warningf(f string, a ...any) {
	g.l.Warn(strings.TrimSpace(fmt.Sprintf(f, a...)))
}

func (g badgerLogger) Infof(f string, a ...any) {
	if strings.HasPrefix(f, "L0 was stalled") || strings.Contains(f, "LOG Compact") {
		g.l.Warn(strings.TrimSpace(fmt.Sprintf(f, a...)))
	}
}

func (badgerLogger) Debugf(string, ...any) {}

// Interface guards.
var (
	_ KV            = (*Badger)(nil)
	_ KV            = (*Memory)(nil)
	_ badger.Logger = badgerLogger{}
)
