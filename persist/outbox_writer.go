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
}

// NewOutcomeWriter returns a writer committing through c (nil: each part through its own KV,
// one after the other: an outbox's own writer); with each, every write is a commit of its own.
func NewOutcomeWriter(c PartsCommitter, each bool) *OutcomeWriter {
	return &OutcomeWriter{commit: c, each: each, busy: map[*Outbox]bool{}, freed: make(chan struct{}, 1)}
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
		if len(ow.queue) == 0 {
			ow.running = false
			ow.mu.Unlock()
			return
		}
		batch := ow.take()
		if len(batch) == 0 {
			// Every queued write waits for its outbox's batch in flight: until one ends or a
			// write is queued (add).
			ow.mu.Unlock()
			ow.parked.Add(1)
			<-ow.freed
			ow.parked.Add(-1)
			continue
		}
		for _, w := range batch {
			ow.busy[w.o] = true
		}
		ow.mu.Unlock()
		if ow.commit == nil {
			ow.write(batch)
		} else {
			go ow.write(batch)
		}
	}
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
// outbox's commits handed to the store together, and answers every write.
func (ow *OutcomeWriter) write(batch []bgWrite) {
	runs := [][]bgWrite{batch}
	if o := batch[0].o; slices.ContainsFunc(batch, func(w bgWrite) bool { return w.o != o }) {
		// Several outboxes: each one's writes apart, in their order.
		runs = runs[:0]
		at := map[*Outbox]int{}
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
	ow.mu.Lock()
	for _, run := range runs {
		delete(ow.busy, run[0].o)
	}
	// Only the writes taken are cleared: past its length an array is still zero. Clearing
	// the whole capacity (up to 3.4 MB) after every batch of a few writes was 3 % of the send
	// path's CPU (profiled).
	clear(batch)
	if cap(batch) <= bgSpareMax && ow.spare == nil {
		ow.spare = batch[:0]
	}
	ow.mu.Unlock()
	select {
	case ow.freed <- struct{}{}:
	default:
	}
}

// bgCtx is the outcome writer's commits' context: a background writer's (a Badger's syncer
// does not wait for its next commit to gather a barrier: badger_sync.go).
var bgCtx = background(context.Background())

// bgSpareMax is the largest queue array the writer keeps for the next turn (384 KB: a write
// is 96 bytes).
const bgSpareMax = 4096
