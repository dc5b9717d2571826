package persist

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/gateway/gateway/domain"
)

// Outbox retention: a message's outcome is kept this long for GET /api/v1/messages/{id}, and an
// idempotency record this long for a retry.
const (
	OutboxRetention = 7 * 24 * time.Hour
	IdempotencyTTL  = 24 * time.Hour
)

// IdemRecord is what an Idempotency-Key stands for: the request's body hash and what it made (a
// message or a campaign), committed with the outbox entry or the campaign record it names, so a
// retry after a crash finds both or neither.
type IdemRecord struct {
	BodyHash   string `json:"bodyHash"` // hex SHA-256 of the request body
	MessageID  string `json:"messageId,omitempty"`
	CampaignID string `json:"campaignId,omitempty"`
	// Status and Body: a stored response, for routes whose answer is not rebuilt from a record.
	Status int    `json:"status,omitempty"`
	Body   []byte `json:"body,omitempty"`
}

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
	wg       sync.WaitGroup
}

// NewOutbox returns the outbox on kv.
func NewOutbox(kv KV) *Outbox {
	return &Outbox{
		done:     NewTable[domain.OutboxEntry](kv, outboxTable, 1),
		pending:  NewTable[domain.OutboxEntry](kv, outboxPendingTable, 1),
		receipts: NewTable[domain.StatusChange](kv, outboxReceiptTable, 1),
		idem:     NewTable[IdemRecord](kv, idemTable, 1),
	}
}

// Accept commits a queued entry durably, and with it the idempotency record when idemID is not
// empty: one commit, so a crash leaves both or neither.
func (o *Outbox) Accept(ctx context.Context, e domain.OutboxEntry, idemID string, rec IdemRecord) error {
	put, err := o.pending.PutOp(e.ID, e)
	if err != nil {
		return err
	}
	if idemID == "" {
		return o.pending.KV().Commit(ctx, put)
	}
	ip, err := o.idem.PutTTLOp(idemID, rec, IdempotencyTTL)
	if err != nil {
		return err
	}
	return o.pending.KV().Commit(ctx, put, ip)
}

// IdemOp is the write of an idempotency record, for a caller's own commit (a campaign's).
func (o *Outbox) IdemOp(idemID string, rec IdemRecord) (Op, error) {
	return o.idem.PutTTLOp(idemID, rec, IdempotencyTTL)
}

// Idem returns the idempotency record idemID, or ErrNotFound.
func (o *Outbox) Idem(idemID string) (IdemRecord, error) { return o.idem.Get(idemID) }

// PutIdem commits an idempotency record alone (a stored response).
func (o *Outbox) PutIdem(ctx context.Context, idemID string, rec IdemRecord) error {
	op, err := o.IdemOp(idemID, rec)
	if err != nil {
		return err
	}
	return o.idem.KV().Commit(ctx, op)
}

// Settle records a network outcome (sent or failed) in the background: the deliverer does not
// wait for it (a lost outcome only means the message is sent again under the same id at boot,
// which the network treats as the same message). done is called with the commit's error.
func (o *Outbox) Settle(e domain.OutboxEntry, done func(error)) {
	// The outcome keeps the whole message, media bytes included, for the network's re-send
	// requests (retry receipts) during OutboxRetention.
	put, err := o.done.PutTTLOp(e.ID, e, OutboxRetention)
	if err != nil {
		done(err)
		return
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		done(o.done.KV().Commit(context.Background(), put, o.pending.DeleteOp(e.ID)))
	}()
}

// Receipt records a receipt (delivered, read) in the background.
func (o *Outbox) Receipt(id string, c domain.StatusChange, done func(error)) {
	put, err := o.receipts.PutTTLOp(id+"/"+c.Status, c, OutboxRetention)
	if err != nil {
		done(err)
		return
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		done(o.receipts.KV().Commit(context.Background(), put))
	}()
}

// Flush waits for the outcomes and receipts being written (graceful shutdown).
func (o *Outbox) Flush() { o.wg.Wait() }

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
