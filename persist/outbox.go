package persist

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/gateway/gateway/domain"
)

// Outbox retention: a message's outcome is kept this long for GET /api/v1/messages/{id}, and an
// idempotency record this long for a retry.
const (
	OutboxRetention = 7 * 24 * time.Hour
	IdempotencyTTL  = domain.IdempotencyTTL
)

// IdemRecord is what an Idempotency-Key stands for (domain.IdemRecord).
type IdemRecord = domain.IdemRecord

// Outbox is the durable outbox. An accepted entry sits under "outbox_pending/<id>" (with its
// body) until the network's outcome is known (boot scans only those); the outcome then goes to
// "outbox/<id>", the whole message with its outcome, kept OutboxRetention, in the commit that
// removes the pending entry. Receipts (delivered, read) are separate small records
// "outbox_receipt/<id>/<status>", so a receipt racing the outcome's commit never overwrites it.
type Outbox struct {
	done     *Table[domain.OutboxEntry]
	pending  *Table[domain.OutboxEntry]
	receipts *Table[domain.StatusChange]
	idem     *Table[IdemRecord]
	log      *MessageLog
	wg       sync.WaitGroup

	bgMu      sync.Mutex
	bgQueue   []bgWrite
	bgRunning bool
}

// NewOutbox returns the outbox on kv.
func NewOutbox(kv KV) *Outbox {
	return &Outbox{
		done:     NewTable[domain.OutboxEntry](kv, outboxTable, 1),
		pending:  NewTable[domain.OutboxEntry](kv, outboxPendingTable, 1),
		receipts: NewTable[domain.StatusChange](kv, outboxReceiptTable, 1),
		idem:     NewTable[IdemRecord](kv, idemTable, 1),
		log:      NewMessageLog(kv),
	}
}

// Accept commits a queued entry durably with its history entry (MessageLog), and with them the
// idempotency record when idemID is not empty: one commit, so a crash leaves all or none.
func (o *Outbox) Accept(ctx context.Context, e domain.OutboxEntry, idemID string, rec IdemRecord) error {
	ops, err := o.acceptOps(nil, e)
	if err != nil {
		return err
	}
	if idemID != "" {
		ip, err := o.idem.PutTTLOp(idemID, rec, IdempotencyTTL)
		if err != nil {
			return err
		}
		ops = append(ops, ip)
	}
	return o.pending.KV().Commit(ctx, ops...)
}

// AcceptMany commits several queued entries in one commit (a store's queued events).
func (o *Outbox) AcceptMany(ctx context.Context, es []domain.OutboxEntry) error {
	ops := make([]Op, 0, 2*len(es))
	for _, e := range es {
		var err error
		if ops, err = o.acceptOps(ops, e); err != nil {
			return err
		}
	}
	return o.pending.KV().Commit(ctx, ops...)
}

// acceptOps appends a queued entry's writes: the pending entry and its history entry.
func (o *Outbox) acceptOps(ops []Op, e domain.OutboxEntry) ([]Op, error) {
	put, err := o.pending.PutOp(e.ID, e)
	if err != nil {
		return ops, err
	}
	ops = append(ops, put)
	if e.UserID == "" {
		return ops, nil // not a user's message (tests): nothing to list
	}
	lop, err := o.log.OutOp(e)
	if err != nil {
		return ops, err
	}
	return append(ops, lop), nil
}

// IdemOp is the write of an idempotency record, for a caller's own commit (a campaign's).
func (o *Outbox) IdemOp(idemID string, rec IdemRecord) (Op, error) {
	return o.idem.PutTTLOp(idemID, rec, IdempotencyTTL)
}

// Idem returns the idempotency record idemID, or ErrNotFound.
func (o *Outbox) Idem(idemID string) (IdemRecord, error) { return o.idem.Get(idemID) }

// Settle records a network outcome (sent or failed) in the background: the deliverer does not
// wait for it (a lost outcome only means the message is sent again under the same id at boot,
// which the network treats as the same message). done is called with the commit's error.
//
// Outcomes and receipts are written by one background writer in batches, one commit each (a
// commit per outcome and per receipt made three commits per message, which bounded the send
// rate: profiled in bench/README.md), and a receipt queued behind its message's outcome is
// folded into it (one record instead of two).
func (o *Outbox) Settle(e domain.OutboxEntry, done func(error)) {
	e.History = slices.Clip(e.History) // a folded receipt appends: never into the caller's array
	o.background(bgWrite{entry: e, outcome: true, done: done})
}

// Receipt records a receipt (delivered, read) in the background.
func (o *Outbox) Receipt(id string, c domain.StatusChange, done func(error)) {
	o.background(bgWrite{entry: domain.OutboxEntry{ID: id}, receipt: c, done: done})
}

// Flush waits for the outcomes and receipts being written (graceful shutdown).
func (o *Outbox) Flush() { o.wg.Wait() }

// bgWrite is an outcome (the whole entry) or a receipt waiting for the background writer.
type bgWrite struct {
	entry   domain.OutboxEntry
	outcome bool
	receipt domain.StatusChange
	done    func(error)
	folded  []func(error) // receipts folded into this outcome: answered with it
}

// bgBatchMax bounds one background commit: a batch's ops stay well under Badger's
// transaction limit (a batch of large media entries is also cut by bgBatchBytes).
const (
	bgBatchMax   = 256
	bgBatchBytes = 1 << 20
)

// background queues w; a writer goroutine runs while the queue is not empty.
func (o *Outbox) background(w bgWrite) {
	o.bgMu.Lock()
	o.bgQueue = append(o.bgQueue, w)
	start := !o.bgRunning
	o.bgRunning = true
	if start {
		o.wg.Add(1)
	}
	o.bgMu.Unlock()
	if start {
		go o.writeBackground()
	}
}

func (o *Outbox) writeBackground() {
	defer o.wg.Done()
	for {
		o.bgMu.Lock()
		batch := o.bgQueue
		if len(batch) == 0 {
			o.bgRunning = false
			o.bgMu.Unlock()
			return
		}
		if len(batch) > bgBatchMax {
			batch = batch[:bgBatchMax:bgBatchMax]
			o.bgQueue = o.bgQueue[bgBatchMax:]
		} else {
			o.bgQueue = nil
		}
		o.bgMu.Unlock()
		o.writeBatch(batch)
	}
}

// writeBatch commits batch in as few commits as its size allows and answers every write.
func (o *Outbox) writeBatch(batch []bgWrite) {
	// Fold each receipt into its message's outcome when that is in the batch (receipts come
	// after their outcome: the engine holds early ones until the outcome is known).
	at := map[string]int{}
	kept := batch[:0]
	for _, w := range batch {
		if !w.outcome {
			if i, ok := at[w.entry.ID]; ok {
				kept[i].entry.SetStatus(w.receipt.Status, w.receipt.At.Time())
				kept[i].folded = append(kept[i].folded, w.done)
				continue
			}
		} else {
			at[w.entry.ID] = len(kept)
		}
		kept = append(kept, w)
	}
	var (
		ops   []Op
		group []bgWrite
		size  int
	)
	flush := func() {
		if len(group) == 0 {
			return
		}
		err := o.done.KV().Commit(context.Background(), ops...)
		if err != nil && len(group) > 1 {
			// One write may be what the store refuses (too large): write each alone.
			for _, w := range group {
				o.writeBatch([]bgWrite{w})
			}
		} else {
			for _, w := range group {
				w.answer(err)
			}
		}
		ops, group, size = nil, nil, 0
	}
	for _, w := range kept {
		wops, err := o.ops(w)
		if err != nil {
			w.answer(err)
			continue
		}
		n := 0
		for _, op := range wops {
			n += len(op.Key) + len(op.Value)
		}
		if size+n > bgBatchBytes {
			flush()
		}
		ops, group, size = append(ops, wops...), append(group, w), size+n
	}
	flush()
}

// ops are a background write's ops: an outcome moves the entry from pending to the outcome
// table (the whole message, media bytes included, for the network's re-send requests during
// OutboxRetention); a receipt is its own small record.
func (o *Outbox) ops(w bgWrite) ([]Op, error) {
	if !w.outcome {
		put, err := o.receipts.PutTTLOp(w.entry.ID+"/"+w.receipt.Status, w.receipt, OutboxRetention)
		return []Op{put}, err
	}
	put, err := o.done.PutTTLOp(w.entry.ID, w.entry, OutboxRetention)
	return []Op{put, o.pending.DeleteOp(w.entry.ID)}, err
}

func (w bgWrite) answer(err error) {
	w.done(err)
	for _, f := range w.folded {
		f(err)
	}
}

// Get returns a message as it stands: its outcome with the receipts laid over it, or the
// pending entry while it has none. ErrNotFound when there is neither.
//
// The pending entry is read first: the outcome's commit removes it and writes the outcome in one
// transaction, so reading in this order never falls between the two (the other order could
// miss both while that commit lands).
func (o *Outbox) Get(id string) (domain.OutboxEntry, error) {
	if e, err := o.pending.Get(id); !errors.Is(err, ErrNotFound) {
		return e, err
	}
	e, err := o.done.Get(id)
	if err != nil {
		return e, err
	}
	var rs []domain.StatusChange
	if err := o.receipts.Scan(id+"/", func(_ string, c domain.StatusChange) error {
		rs = append(rs, c)
		return nil
	}); err != nil {
		return e, err
	}
	sort.Slice(rs, func(i, j int) bool { return domain.StatusRank(rs[i].Status) < domain.StatusRank(rs[j].Status) })
	for _, c := range rs {
		e.SetStatus(c.Status, c.At.Time())
	}
	return e, nil
}

// Pending lists every entry without an outcome, in acceptance order.
func (o *Outbox) Pending() ([]domain.OutboxEntry, error) {
	var out []domain.OutboxEntry
	err := o.pending.Scan("", func(_ string, e domain.OutboxEntry) error {
		out = append(out, e)
		return nil
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt < out[j].CreatedAt })
	return out, err
}

// Accounts persists account snapshots (the monthly allowance).
type Accounts struct{ t *Table[domain.Allowance] }

// NewAccounts returns the account table on kv.
func NewAccounts(kv KV) Accounts { return Accounts{NewTable[domain.Allowance](kv, accountTable, 1)} }

// GetAccount returns a user's snapshot (a zero one when none).
func (a Accounts) GetAccount(uid string) (domain.Allowance, error) {
	s, err := a.t.Get(uid)
	if errors.Is(err, ErrNotFound) {
		return domain.Allowance{UserID: uid}, nil
	}
	return s, err
}

// PutAccount writes a snapshot.
func (a Accounts) PutAccount(ctx context.Context, s domain.Allowance) error {
	return a.t.Put(ctx, s.UserID, s)
}
