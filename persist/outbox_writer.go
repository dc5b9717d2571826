package persist

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Part is one commit among several handed to a store at once (PartsCommitter): the KV it is
// made through (a cluster partition's view, with that partition's fence) and its ops.
type Part struct {
	KV  KV
	Ops []Op
}

// PartsCommitter is a store that takes several commits at once, each atomic on its own and
// made through its own KV (so each carries its own partition's fence), and sends them out
// together (natskv: into its group commit in one hand-over, where they merge into a few
// batches). errs[i] is parts[i]'s error; every part's KV is one of the store's.
type PartsCommitter interface {
	CommitParts(ctx context.Context, parts []Part, errs []error)
}

// SharedWriting is a KV whose store shares one outcome writer between the outboxes of all its
// views (a cluster node's partitions: one writer for the node, not one per partition).
type SharedWriting interface {
	OutcomeWriter() *OutcomeWriter
}

// OutcomeWriter writes the outboxes' outcomes and receipts in the background (Outbox.Settle,
// Outbox.Receipt): it gathers for bgGather, then commits what every outbox queued, all handed
// to the store at once through a PartsCommitter: each outbox's writes in as few commits as
// their size allows, or each write a commit of its own (natskv on one server, where a
// one-message commit is a pipelined publish and a larger one an atomic batch). One serves each outbox of a store
// that shares it (SharedWriting: a cluster node's 64 partition engines), so the outcomes of
// all partitions go to the store together, in a few large groups, from one goroutine waking
// once per gather instead of one per partition (bench/README.md, issue 27); other stores give
// each outbox its own.
//
// An outbox has at most one batch in flight: its next writes wait for it, so its commits apply
// in the order they were queued (a later outcome of a message never lands before an earlier
// one), while the other outboxes' writes go on (a partition whose records stream elects a
// leader holds only its own outcomes). Each part is committed through its own outbox's KV:
// a partition's outcomes carry that partition's fence, and a partition fenced meanwhile has its
// writes refused (and answered so), not the others'.
type OutcomeWriter struct {
	commit PartsCommitter // nil: each part committed alone, through its KV, in turn
	// each: every write a commit of its own (a store where a one-message commit costs less
	// than its share of a larger one: natskv on one server).
	each bool

	mu      sync.Mutex
	queue   []bgWrite
	spare   []bgWrite // the other queue array, emptied, while no batch is being taken
	busy    map[*Outbox]bool
	running bool
	// freed is signalled when a batch in flight finishes or a write is queued, while the
	// writer waits; parked counts that wait (tests).
	freed  chan struct{}
	parked atomic.Int32
	// held: per outbox, the paged outcomes (and their receipts) the writer holds for a coarser
	// page (Outbox.PagesPerSecond; outbox_nats.go), in order; an outbox with writes held has no
	// batch in flight, and its next writes are taken behind them. heldSince: since when,
	// until they are written (a hold taken up again with more writes ends at the same time).
	held      map[*Outbox][]bgWrite
	heldSince map[*Outbox]time.Time
}

// NewOutcomeWriter returns a writer committing through c (nil: each part through its own KV,
// one after the other: an outbox's own writer); with each, every write is a commit of its own.
func NewOutcomeWriter(c PartsCommitter, each bool) *OutcomeWriter {
	return &OutcomeWriter{commit: c, each: each, busy: map[*Outbox]bool{}, held: map[*Outbox][]bgWrite{}, heldSince: map[*Outbox]time.Time{}, freed: make(chan struct{}, 1)}
}

// bgBatchMax bounds one background commit: a batch's ops stay well under Badger's
// transaction limit (a batch that renews large media bodies is also cut by bgBatchBytes).
const (
	bgBatchMax   = 256
	bgBatchBytes = 1 << 20
	bgGather     = time.Millisecond
)

// add queues o's write w; the writer goroutine runs while a queue is not empty.
func (ow *OutcomeWriter) add(o *Outbox, w bgWrite) {
	o.queued.add(1) // Flush waits for it
	w.o = o
	ow.mu.Lock()
	ow.queue = append(ow.queue, w)
	start := !ow.running
	ow.running = true
	ow.mu.Unlock()
	if start {
		go ow.run()
		return
	}
	// The writer may be waiting for a batch in flight (every write it had queued was its
	// outbox's next): w may be another outbox's, free to go now. Without this, one partition's
	// stalled batch held every other partition's outcomes until it ended.
	ow.wake()
}

// wake wakes the writer when it waits (for a batch in flight, or a held page's time).
func (ow *OutcomeWriter) wake() {
	select {
	case ow.freed <- struct{}{}:
	default:
	}
}

func (ow *OutcomeWriter) run() {
	for {
		ow.mu.Lock()
		if len(ow.queue) < bgBatchMax {
			// Gather for a moment: a receipt that follows its outcome by a little (the sim's
			// comes at once) lands in the outcome's record, and the commit is larger.
			ow.mu.Unlock()
			time.Sleep(bgGather)
			ow.mu.Lock()
		}
		if len(ow.queue) == 0 && len(ow.held) == 0 {
			ow.running = false
			ow.mu.Unlock()
			return
		}
		full := len(ow.queue) >= bgBatchMax
		now := time.Now()
		batch := ow.take()
		joined := ow.joinHeld(batch, now, full)
		if len(batch) == 0 && len(joined) == 0 {
			// Every queued write waits for its outbox's batch in flight, and every held one
			// for its time: until a batch ends, a write is queued (add) or Flush (wake).
			wait := ow.nextDue(now)
			ow.mu.Unlock()
			ow.parked.Add(1)
			if wait < 0 {
				<-ow.freed
			} else {
				t := time.NewTimer(wait)
				select {
				case <-ow.freed:
				case <-t.C:
				}
				t.Stop()
			}
			ow.parked.Add(-1)
			continue
		}
		for _, w := range batch {
			ow.busy[w.o] = true
		}
		for _, run := range joined {
			ow.busy[run[0].o] = true
		}
		ow.mu.Unlock()
		if ow.commit == nil {
			ow.write(batch, joined, now, full)
		} else {
			go ow.write(batch, joined, now, full)
		}
	}
}

// joinHeld takes out of held the writes of each outbox that has writes in batch, whose hold
// is over, that is flushed, or all of them when the gather is full (under mu): each outbox's
// run, to go ahead of its writes in batch.
func (ow *OutcomeWriter) joinHeld(batch []bgWrite, now time.Time, full bool) [][]bgWrite {
	var joined [][]bgWrite
	for o, ws := range ow.held {
		if full || o.unheld() || now.Sub(ow.heldSince[o]) >= pageHoldFor ||
			slices.ContainsFunc(batch, func(w bgWrite) bool { return w.o == o }) {
			joined = append(joined, ws)
			delete(ow.held, o)
		}
	}
	return joined
}

// nextDue is how long until the first held outbox's hold is over (or one is flushed: 0); -1
// when none is held (under mu).
func (ow *OutcomeWriter) nextDue(now time.Time) time.Duration {
	d := time.Duration(-1)
	for o := range ow.held {
		left := max(pageHoldFor-now.Sub(ow.heldSince[o]), 0)
		if o.unheld() {
			left = 0
		}
		if d < 0 || left < d {
			d = left
		}
	}
	return d
}

// take takes the queued writes of every outbox without a batch in flight (the others stay
// queued, in order), under mu. Two arrays take turns: the queue fills one while the other's
// writes are committed. A queue grown from nil for every batch was 3-4 KB of allocation per
// message (an entry is large).
func (ow *OutcomeWriter) take() []bgWrite {
	q, batch := ow.queue, ow.spare[:0]
	ow.spare = nil
	if len(ow.busy) == 0 {
		ow.queue = batch
		return q
	}
	rest := q[:0] // filtered in place: the write index never passes the read index
	for _, w := range q {
		if ow.busy[w.o] {
			rest = append(rest, w)
		} else {
			batch = append(batch, w)
		}
	}
	clear(q[len(rest):]) // moved to batch: the array keeps no pointers to them
	ow.queue = rest
	return batch
}

// write commits a batch: each outbox's writes in as few commits as their size allows, every
// outbox's commits handed to the store together, and answers every write. An outbox that holds
// its pages (Outbox.PagesPerSecond) and whose writes may be held (Outbox.holdable) has them held,
// not written, until pageHold paged outcomes or pageHoldFor since the first (full: the gather
// took bgBatchMax writes, and nothing is held).
func (ow *OutcomeWriter) write(batch []bgWrite, joined [][]bgWrite, now time.Time, full bool) {
	var runs [][]bgWrite
	alone := len(batch) > 0 && len(joined) == 0 && !slices.ContainsFunc(batch, func(w bgWrite) bool { return w.o != batch[0].o })
	if alone {
		runs = [][]bgWrite{batch} // one outbox's (its array the batch's)
	} else {
		// Several outboxes, or held writes: each one's writes apart, in their order, those
		// held first (their arrays the writer's own, appended to).
		runs = joined
		at := make(map[*Outbox]int, len(joined))
		for i, run := range joined {
			at[run[0].o] = i
		}
		for _, w := range batch {
			i, ok := at[w.o]
			if !ok {
				i = len(runs)
				at[w.o] = i
				runs = append(runs, nil)
			}
			runs[i] = append(runs[i], w)
		}
	}
	if !full {
		runs = ow.hold(runs, now, alone)
	}
	if len(runs) == 0 {
		ow.done(batch, nil)
		return
	}
	type prepared struct {
		kept  []bgWrite
		parts []bgPart
	}
	preps := make([]prepared, len(runs))
	var parts []Part
	for i, run := range runs {
		o := run[0].o
		preps[i].kept, preps[i].parts = o.prepareBatch(run, ow.each)
		for _, p := range preps[i].parts {
			parts = append(parts, Part{KV: o.kv, Ops: p.ops})
		}
	}
	errs := make([]error, len(parts))
	if ow.commit != nil {
		ow.commit.CommitParts(bgCtx, parts, errs)
	} else {
		for i, p := range parts {
			errs[i] = p.KV.Commit(bgCtx, p.Ops...)
		}
	}
	k := 0
	for i, run := range runs {
		o := run[0].o
		for _, p := range preps[i].parts {
			o.finishPart(preps[i].kept, p, errs[k])
			k++
		}
	}
	for _, run := range runs {
		run[0].o.queued.add(-len(run))
	}
	ow.done(batch, runs)
}

// done ends a batch whose runs were written (the others held): their outboxes free for their
// next writes, the batch's array spare.
func (ow *OutcomeWriter) done(batch []bgWrite, runs [][]bgWrite) {
	ow.mu.Lock()
	for _, run := range runs {
		delete(ow.busy, run[0].o)
		delete(ow.heldSince, run[0].o)
	}
	// Only the writes taken are cleared: past its length an array is still zero. Clearing
	// the whole capacity (up to 3.4 MB) after every batch of a few writes was 3 % of the send
	// path's CPU (profiled).
	clear(batch)
	if cap(batch) <= bgSpareMax && ow.spare == nil {
		ow.spare = batch[:0]
	}
	ow.mu.Unlock()
	ow.wake()
}

// hold takes out of runs those their outboxes may hold (write), and holds them: the rest is
// written now. inBatch: the one run is the batch's array (copied when held: it is the next
// gather's).
func (ow *OutcomeWriter) hold(runs [][]bgWrite, now time.Time, inBatch bool) [][]bgWrite {
	rest := runs[:0]
	for _, run := range runs {
		o := run[0].o
		if !o.coarse {
			rest = append(rest, run)
			continue
		}
		ow.mu.Lock()
		since, ok := ow.heldSince[o]
		ow.mu.Unlock()
		if !ok {
			since = now
		}
		n, ok := o.holdable(run)
		if !ok || n >= pageHold || now.Sub(since) >= pageHoldFor {
			rest = append(rest, run)
			continue
		}
		if inBatch {
			run = slices.Clone(run)
		}
		ow.mu.Lock()
		ow.held[o], ow.heldSince[o] = run, since
		delete(ow.busy, o)
		if !ow.running {
			// The writer ended while this batch was in flight: held writes need it again.
			ow.running = true
			go ow.run()
		}
		ow.mu.Unlock()
	}
	return rest
}

// bgCtx is the outcome writer's commits' context: a background writer's (a Badger's syncer
// does not wait for its next commit to gather a barrier: badger_sync.go).
var bgCtx = background(context.Background())

// bgSpareMax is the largest queue array the writer keeps for the next turn (384 KB: a write
// is 96 bytes).
const bgSpareMax = 4096
