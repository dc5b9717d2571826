package persist

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/internal/jsonenc"
)

// Outbox retention: a message's outcome is kept this long for GET /api/v1/messages/{id}, and an
// idempotency record this long for a retry.
const (
	OutboxRetention = 7 * 24 * time.Hour
)

// Outbox is the durable outbox. A message is written once, when it is accepted, and what
// becomes of it is written beside it as small records, never as a second copy:
//
//	outbox/<id>              the message as accepted (body included), TTL bodyTTL
//	outbox_pending/<id>      the pending mark: the body's expiry (8 bytes), no TTL; removed
//	                         in the commit that writes the outcome (boot scans only these)
//	outbox_status/<id>       the outcome: status, network id, error, attempts, history; TTL
//	                         OutboxRetention
//	outbox_receipt/<id>/<st> a receipt (delivered, read), TTL OutboxRetention, so a receipt
//	                         racing the outcome's commit never overwrites it
//
// A message reads as its body with the outcome and the receipts laid over it. Writing the whole
// entry again with its outcome (and the pending entry before it) put each message's body
// through Badger's memtable, write-ahead log and compactions twice; the profile of a send
// spent 13 % of its CPU in those memtable inserts (issue 21).
//
// The body outlives the outcome by at least OutboxRetention (the history lists its text, the
// network may ask for it again): it is written with bodyTTL, twice the retention, and written
// again (the one case of a second copy) when its outcome comes so late that less than the
// retention would be left. A message that stays queued for long has its body renewed by
// Renew, at boot and daily, before it could expire.
type Outbox struct {
	kv       KV
	blobs    Blobs // nil: media stays in the body record
	status   *Table[outcome]
	receipts *Table[domain.StatusChange]
	idem     *Table[domain.IdemRecord]
	log      *MessageLog
	logger   atomic.Pointer[slog.Logger]
	wg       sync.WaitGroup

	bgMu      sync.Mutex
	bgQueue   []bgWrite
	bgRunning bool
}

// Body lifetimes (see Outbox).
const (
	// bodyTTL is how long a message's body lives after it was (last) written.
	bodyTTL = 2 * OutboxRetention
	// renewBelow: Renew writes a pending message's body again when less than this is left, so
	// a gateway that was stopped for up to renewBelow - 1 day still finds every queued body.
	renewBelow = bodyTTL - 4*24*time.Hour
	// pendingMarkV2 starts a pending mark of this layout; an older mark (version 1) is the
	// whole entry, moved to this layout by Pending.
	pendingMarkV2 = 2
)

// outcome is what became of a message (the fields of domain.OutboxEntry the deliverer sets),
// kept beside its body. Its names are short: it is written for every message.
type outcome struct {
	Status    domain.MessageStatus `json:"s"`
	NetworkID string               `json:"n,omitempty"`
	LID       string               `json:"l,omitempty"`
	SentAt    domain.Millis        `json:"t,omitempty"`
	Code      string               `json:"c,omitempty"`
	Error     string               `json:"e,omitempty"`
	Attempts  int                  `json:"a,omitempty"`
	UpdatedAt domain.Millis        `json:"u"`
	// Pricing: the Cloud API's pricing category.
	Pricing string `json:"p,omitempty"`
	// History: the steps after the first (queued, which the body holds).
	History []step `json:"h,omitempty"`
}

type step struct {
	Status domain.MessageStatus `json:"s"`
	At     domain.Millis        `json:"t"`
}

func outcomeOf(e domain.OutboxEntry) outcome {
	c := outcome{Status: e.Status, NetworkID: e.NetworkID, LID: e.LID, SentAt: e.SentAt, Code: e.Code, Error: e.Error,
		Attempts: e.Attempts, UpdatedAt: e.UpdatedAt, Pricing: e.Pricing}
	h := e.History
	if len(h) > 0 && (h[0].Status == domain.MsgQueued || h[0].Status == domain.MsgScheduled) {
		h = h[1:] // the body's own step: queued, or scheduled (sendAt)
	}
	if len(h) > 0 {
		c.History = make([]step, len(h))
		for i, s := range h {
			c.History[i] = step{s.Status, s.At}
		}
	}
	return c
}

// encode is the outcome's record (version 1): its JSON, written by hand (one per message).
func (c outcome) encode() []byte {
	b := append(make([]byte, 0, 64+len(c.NetworkID)+len(c.LID)+len(c.Code)+len(c.Error)+24*len(c.History)), recordVersion1)
	b = jsonenc.AppendString(append(b, `{"s":`...), c.Status)
	b = jsonenc.AppendField(b, `,"n":`, c.NetworkID)
	b = jsonenc.AppendField(b, `,"l":`, c.LID)
	if c.SentAt != 0 {
		b = strconv.AppendInt(append(b, `,"t":`...), int64(c.SentAt), 10)
	}
	b = jsonenc.AppendField(b, `,"c":`, c.Code)
	b = jsonenc.AppendField(b, `,"e":`, c.Error)
	if c.Attempts != 0 {
		b = strconv.AppendInt(append(b, `,"a":`...), int64(c.Attempts), 10)
	}
	b = strconv.AppendInt(append(b, `,"u":`...), int64(c.UpdatedAt), 10)
	b = jsonenc.AppendField(b, `,"p":`, c.Pricing)
	if len(c.History) > 0 {
		b = append(b, `,"h":[`...)
		for i, st := range c.History {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonenc.AppendString(append(b, `{"s":`...), st.Status)
			b = strconv.AppendInt(append(b, `,"t":`...), int64(st.At), 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	return append(b, '}')
}

// apply lays the outcome over the body (as accepted: queued, one history step).
func (c outcome) apply(e *domain.OutboxEntry) {
	e.Status, e.NetworkID, e.LID, e.SentAt, e.Code, e.Error = c.Status, c.NetworkID, c.LID, c.SentAt, c.Code, c.Error
	e.Attempts, e.UpdatedAt, e.Pricing = c.Attempts, c.UpdatedAt, c.Pricing
	e.History = slices.Clip(e.History)
	for _, s := range c.History {
		e.History = append(e.History, domain.StatusChange{Status: s.Status, At: s.At})
	}
}

// body is a message as accepted (record version 2): the entry without what acceptance implies
// (queued, or scheduled with a SendAt; its one history step at its creation; the message's id,
// the entry's).
type body struct {
	ID        string         `json:"id"`
	SessionID string         `json:"session,omitempty"`
	UserID    string         `json:"user,omitempty"`
	Origin    string         `json:"origin,omitempty"`
	From      string         `json:"from,omitempty"`
	Message   domain.Message `json:"message"`
	CreatedAt domain.Millis  `json:"at"`
	// How the account's routing sent it (DESIGN.md section 17), and whether it waits for its
	// contact.
	Via       string `json:"via,omitempty"`
	ViaReason string `json:"viaReason,omitempty"`
	Waiting   bool   `json:"waiting,omitempty"`
	// DataRef names the media object holding Message.Data (Blobs), which the record leaves
	// out: media over BlobMin on a store whose records must stay small.
	DataRef string `json:"dataRef,omitempty"`
	// SendAt: accepted for later (scheduled until then); Transactional: may go to a phone on
	// the suppression list.
	SendAt        domain.Millis `json:"sendAt,omitempty"`
	Transactional bool          `json:"tx,omitempty"`
}

const bodyVersion = 2

// encodeBody is an entry's body record, its media left out when ref names the object that
// holds it. A message id other than the entry's (none is) is kept.
func encodeBody(e domain.OutboxEntry, ref string) ([]byte, error) {
	b := body{ID: e.ID, SessionID: e.SessionID, UserID: e.UserID, Origin: e.Origin, From: e.From, Message: e.Message, CreatedAt: e.CreatedAt,
		Via: e.Via, ViaReason: e.ViaReason, Waiting: e.Waiting,
		DataRef: ref, SendAt: e.SendAt, Transactional: e.Transactional}
	if b.Message.ID == e.ID {
		b.Message.ID = ""
	}
	if ref != "" {
		b.Message.Data = nil
	}
	m := &b.Message
	size := 180 + len(b.ID) + len(b.SessionID) + len(b.UserID) + len(b.Origin) + len(b.From) + len(b.DataRef) + len(m.ID) + len(m.To) +
		len(m.Text) + len(m.Caption) + len(m.FileName) + len(m.MimeType) + len(m.Address) + len(m.ContactName) + len(m.ContactPhone) +
		(len(m.Data)+2)/3*4
	return appendBody(append(make([]byte, 0, size), bodyVersion), &b)
}

// decodeBody reads a body record: version 2 (above), or version 1, the whole entry (the
// older layout's outcome record, or a pending entry it held); ref names the object holding
// its media, if any (the entry's Data is then empty).
func decodeBody(data []byte) (e domain.OutboxEntry, ref string, err error) {
	var b body
	v, err := Decode(data, bodyVersion, &b)
	if err != nil || v == bodyVersion {
		if err != nil {
			return domain.OutboxEntry{}, "", err
		}
		e := domain.OutboxEntry{ID: b.ID, SessionID: b.SessionID, UserID: b.UserID, Origin: b.Origin, From: b.From,
			Message: b.Message, CreatedAt: b.CreatedAt, Via: b.Via, ViaReason: b.ViaReason, Waiting: b.Waiting,
			SendAt: b.SendAt, Transactional: b.Transactional}
		if e.Message.ID == "" {
			e.Message.ID = e.ID
		}
		if b.SendAt != 0 {
			e.SetStatus(domain.MsgScheduled, b.CreatedAt.Time())
		} else {
			e.SetStatus(domain.MsgQueued, b.CreatedAt.Time())
		}
		return e, b.DataRef, nil
	}
	_, err = Decode(data, recordVersion1, &e)
	return e, "", err
}

func bodyKey(id string) []byte { return append([]byte(outboxTable+"/"), id...) }

// bodyOp is the write of an entry's body, to live ttl, its media in the object ref (if any).
func bodyOp(e domain.OutboxEntry, ttl time.Duration, ref string) (Op, error) {
	if e.ID == "" {
		return Op{}, fmt.Errorf("%w: %s: empty id", domain.ErrRecordInvalid, outboxTable)
	}
	v, err := encodeBody(e, ref)
	if err != nil {
		return Op{}, fmt.Errorf("%s %q: %w", outboxTable, e.ID, err)
	}
	return Op{Key: bodyKey(e.ID), Value: v, TTL: ttl}, nil
}

// getBody reads an entry's body, its media included (read from the object its record names).
func (o *Outbox) getBody(id string) (domain.OutboxEntry, error) {
	if id == "" {
		return domain.OutboxEntry{}, domain.ErrRecordNotFound
	}
	data, err := o.kv.Get(bodyKey(id))
	if err != nil {
		return domain.OutboxEntry{}, err
	}
	return o.bodyOf(id, data)
}

// bodyOf decodes an entry's body read as data (nil: absent), its media included.
func (o *Outbox) bodyOf(id string, data []byte) (domain.OutboxEntry, error) {
	if data == nil {
		return domain.OutboxEntry{}, domain.ErrRecordNotFound
	}
	e, ref, err := decodeBody(data)
	if err != nil {
		return e, fmt.Errorf("%s %q: %w", outboxTable, id, err)
	}
	return e, o.loadMedia(&e, ref)
}

// loadMedia reads the media an entry's body names (none: nothing to do).
func (o *Outbox) loadMedia(e *domain.OutboxEntry, ref string) error {
	if ref == "" {
		return nil
	}
	if o.blobs == nil {
		return fmt.Errorf("%w: %s %q names media object %s, and this store keeps none", domain.ErrRecordInvalid, outboxTable, e.ID, ref)
	}
	data, err := o.blobs.GetBlob(context.Background(), ref)
	if err != nil {
		return fmt.Errorf("%s %q: media: %w", outboxTable, e.ID, err)
	}
	e.Message.Data = data
	return nil
}

// putMedia stores an entry's media in an object of its own when the store keeps large values
// apart (Blobs) and the media is over BlobMin; it returns the object's name ("": the media
// stays in the body record).
func (o *Outbox) putMedia(ctx context.Context, e domain.OutboxEntry) (string, error) {
	if o.blobs == nil || len(e.Message.Data) <= BlobMin {
		return "", nil
	}
	ref := "media-" + e.ID
	if err := o.blobs.PutBlob(ctx, ref, e.Message.Data); err != nil {
		return "", fmt.Errorf("%s %q: media: %w", outboxTable, e.ID, err)
	}
	return ref, nil
}

// NewOutbox returns the outbox on kv.
func NewOutbox(kv KV) *Outbox {
	o := &Outbox{
		kv:       kv,
		blobs:    blobsOf(kv),
		status:   NewTable[outcome](kv, outboxStatusTable, 1),
		receipts: NewTable[domain.StatusChange](kv, outboxReceiptTable, 1),
		idem:     NewTable[domain.IdemRecord](kv, idemTable, 1),
		log:      NewMessageLog(kv),
	}
	o.logger.Store(slog.New(slog.DiscardHandler))
	return o
}

// SetLogger sets where the outbox reports what it cannot fix (a queued body that expired).
func (o *Outbox) SetLogger(l *slog.Logger) {
	if l != nil {
		o.logger.Store(l)
	}
}

func pendingKey(id string) []byte { return append([]byte(outboxPendingTable+"/"), id...) }

// pendingMark is the value of a pending mark: the body's expiry.
func pendingMark(expires time.Time) []byte {
	return binary.BigEndian.AppendUint64([]byte{pendingMarkV2}, uint64(max(expires.Unix(), 0)))
}

// blobsOf is kv's large-value store, if it has one.
func blobsOf(kv KV) Blobs {
	if b, ok := kv.(Blobs); ok {
		return b
	}
	return nil
}

// Accept commits a queued entry durably with its history entry (MessageLog), and with them the
// idempotency record when idemID is not empty: one commit, so a crash leaves all or none (its
// media, when stored apart, first: an object no committed record names just expires).
func (o *Outbox) Accept(ctx context.Context, e domain.OutboxEntry, idemID string, rec domain.IdemRecord) error {
	ops, err := o.acceptOps(ctx, make([]Op, 0, 4), e, time.Now())
	if err != nil {
		return err
	}
	if idemID != "" {
		ip, err := o.idem.PutTTLOp(idemID, rec, domain.IdempotencyTTL)
		if err != nil {
			return err
		}
		ops = append(ops, ip)
	}
	return o.kv.Commit(ctx, ops...)
}

// AcceptMany commits several queued entries in one commit (a store's queued events).
func (o *Outbox) AcceptMany(ctx context.Context, es []domain.OutboxEntry) error {
	ops := make([]Op, 0, 3*len(es))
	now := time.Now()
	for _, e := range es {
		var err error
		if ops, err = o.acceptOps(ctx, ops, e, now); err != nil {
			return err
		}
	}
	return o.kv.Commit(ctx, ops...)
}

// listed tells whether messages of a kind are listed in the history: reactions, edits and
// revokes are shown on the message they are about (MessageNotes), not as messages of their own.
func listed(k domain.Kind) bool {
	return k != domain.KindReaction && k != domain.KindEdit && k != domain.KindRevoke
}

// acceptOps appends a queued entry's writes: its body, its pending mark and its history entry.
func (o *Outbox) acceptOps(ctx context.Context, ops []Op, e domain.OutboxEntry, now time.Time) ([]Op, error) {
	ref, err := o.putMedia(ctx, e)
	if err != nil {
		return ops, err
	}
	put, err := bodyOp(e, bodyTTL, ref)
	if err != nil {
		return ops, err
	}
	ops = append(ops, put, Op{Key: pendingKey(e.ID), Value: pendingMark(now.Add(bodyTTL))})
	if e.UserID == "" || !listed(e.Message.Kind) {
		return ops, nil // not a user's message (tests), or not a message of its own: nothing to list
	}
	lop, err := o.log.OutOp(e)
	if err != nil {
		return ops, err
	}
	return append(ops, lop), nil
}

// IdemOp is the write of an idempotency record, for a caller's own commit (a campaign's).
func (o *Outbox) IdemOp(idemID string, rec domain.IdemRecord) (Op, error) {
	return o.idem.PutTTLOp(idemID, rec, domain.IdempotencyTTL)
}

// Idem returns the idempotency record idemID, or domain.ErrRecordNotFound.
func (o *Outbox) Idem(idemID string) (domain.IdemRecord, error) { return o.idem.Get(idemID) }

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

// bgWrite is an outcome or a receipt waiting for the background writer.
type bgWrite struct {
	entry   domain.OutboxEntry
	outcome bool
	receipt domain.StatusChange
	done    func(error)
	folded  []func(error) // receipts folded into this outcome: answered with it
}

// bgBatchMax bounds one background commit: a batch's ops stay well under Badger's
// transaction limit (a batch that renews large media bodies is also cut by bgBatchBytes).
const (
	bgBatchMax   = 256
	bgBatchBytes = 1 << 20
	bgGather     = time.Millisecond
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
		if len(o.bgQueue) < bgBatchMax {
			// Gather for a moment: a receipt that follows its outcome by a little (the sim's
			// comes at once) lands in the outcome's record, and the commit is larger.
			o.bgMu.Unlock()
			time.Sleep(bgGather)
			o.bgMu.Lock()
		}
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
				if w.receipt.Category != "" {
					kept[i].entry.Pricing = w.receipt.Category
				}
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
		err := o.kv.Commit(context.Background(), ops...)
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
	now := time.Now()
	for _, w := range kept {
		wops, err := o.ops(w, now)
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

// ops are a background write's ops: an outcome is its small record and the pending mark's
// removal (and the body again when it would not outlive the outcome by the retention); a
// receipt is its own small record.
func (o *Outbox) ops(w bgWrite, now time.Time) ([]Op, error) {
	if !w.outcome {
		put, err := o.receipts.PutTTLOp(w.entry.ID+"/"+w.receipt.Status, w.receipt, OutboxRetention)
		return []Op{put}, err
	}
	put, err := o.status.PutRawOp(w.entry.ID, outcomeOf(w.entry).encode(), OutboxRetention)
	if err != nil {
		return nil, err
	}
	ops := []Op{put, {Key: pendingKey(w.entry.ID), Delete: true}}
	if now.Sub(w.entry.CreatedAt.Time()) > bodyTTL-OutboxRetention-time.Hour {
		ref, err := o.putMedia(context.Background(), w.entry) // put again: it outlives the body
		if err != nil {
			return nil, err
		}
		body, err := bodyOp(w.entry, OutboxRetention+time.Hour, ref)
		if err != nil {
			return nil, err
		}
		ops = append(ops, body)
	}
	return ops, nil
}

func (w bgWrite) answer(err error) {
	w.done(err)
	for _, f := range w.folded {
		f(err)
	}
}

// Get returns a message as it stands: its body with its outcome and receipts laid over it, or
// the body alone while it is pending. domain.ErrRecordNotFound when there is no body, or when its outcome
// has expired.
func (o *Outbox) Get(id string) (domain.OutboxEntry, error) {
	e, err := o.getBody(id)
	if err != nil {
		return e, err
	}
	if !e.Final() {
		c, err := o.status.Get(id)
		if errors.Is(err, domain.ErrRecordNotFound) {
			// Pending, or its outcome expired. The outcome's commit writes the status and
			// removes the mark at once: read the status again after the mark, so that commit
			// landing between the two reads is seen.
			if _, merr := o.kv.Get(pendingKey(id)); merr == nil {
				return e, nil
			} else if !errors.Is(merr, domain.ErrRecordNotFound) {
				return e, merr
			}
			c, err = o.status.Get(id)
		}
		if err != nil {
			return e, err
		}
		c.apply(&e)
	}
	// Else a record of the older layout: the whole entry with its outcome.
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
		if c.Category != "" {
			e.Pricing = c.Category
		}
	}
	return e, nil
}

// Pending lists every entry without an outcome, in acceptance order. Marks of the older
// layout (the whole entry) are moved to this one first, and bodies with less than renewBelow
// left are renewed (Renew), so a boot always leaves every queued body with days to live.
func (o *Outbox) Pending() ([]domain.OutboxEntry, error) {
	var n int
	out, err := o.scanPending(time.Now(), true, &n)
	sort.SliceStable(out, func(i, j int) bool { return out[i].CreatedAt < out[j].CreatedAt })
	return out, err
}

// Renew writes again the bodies of pending messages that have less than renewBelow left (run
// daily while the gateway runs: a message may stay queued for weeks behind a disconnected
// session). It returns how many it renewed.
func (o *Outbox) Renew() (int, error) {
	n := 0
	_, err := o.scanPending(time.Now(), false, &n)
	return n, err
}

// scanPending walks the pending marks: it moves older-layout marks to this layout, renews
// bodies close to their expiry, drops the marks whose body is gone (logged: such a message
// cannot be sent), and with list, returns every pending entry.
func (o *Outbox) scanPending(now time.Time, list bool, renewed *int) ([]domain.OutboxEntry, error) {
	type mark struct {
		id      string
		old     []byte // an older-layout mark: the whole entry
		expires time.Time
	}
	var marks []mark
	prefix := []byte(outboxPendingTable + "/")
	err := o.kv.Scan(prefix, func(key, value []byte) error {
		m := mark{id: string(key[len(prefix):])}
		switch {
		case len(value) == 9 && value[0] == pendingMarkV2:
			m.expires = time.Unix(int64(binary.BigEndian.Uint64(value[1:])), 0)
		case len(value) > 0 && value[0] == recordVersion1:
			m.old = slices.Clone(value)
		default:
			return fmt.Errorf("%w: %s %q: unknown pending mark", domain.ErrRecordInvalid, outboxPendingTable, m.id)
		}
		marks = append(marks, m)
		return nil
	})
	if err != nil {
		return nil, err
	}
	var (
		out  []domain.OutboxEntry
		ops  []Op
		size int
	)
	flush := func() error {
		if len(ops) == 0 {
			return nil
		}
		err := o.kv.Commit(context.Background(), ops...)
		ops, size = nil, 0
		return err
	}
	// The bodies to read, read many at a time (a JetStream store answers up to 1,024 keys in one
	// round trip: a new owner of a partition with thousands queued boots in a few).
	var want [][]byte
	for _, m := range marks {
		if m.old == nil && (list || m.expires.Sub(now) < renewBelow) {
			want = append(want, bodyKey(m.id))
		}
	}
	bodies, err := GetMany(o.kv, want)
	if err != nil {
		return nil, err
	}
	next := 0
	for _, m := range marks {
		stale := m.old != nil || m.expires.Sub(now) < renewBelow
		if !list && !stale {
			continue
		}
		var e domain.OutboxEntry
		var data []byte
		if m.old == nil {
			data = bodies[next]
			next++
		}
		if m.old != nil {
			if _, err := Decode(m.old, recordVersion1, &e); err != nil {
				return nil, fmt.Errorf("%s %q: %w", outboxPendingTable, m.id, err)
			}
		} else if e, err = o.bodyOf(m.id, data); errors.Is(err, domain.ErrRecordNotFound) {
			o.logger.Load().Error("outbox: a queued message's body expired before it could be sent: dropped",
				"message_id", m.id, "expired_at", m.expires)
			ops = append(ops, Op{Key: pendingKey(m.id), Delete: true})
			continue
		} else if err != nil {
			return nil, err
		}
		if stale {
			ref, err := o.putMedia(context.Background(), e) // put again: it outlives the body
			if err != nil {
				return nil, err
			}
			put, err := bodyOp(e, bodyTTL, ref)
			if err != nil {
				return nil, err
			}
			ops = append(ops, put, Op{Key: pendingKey(m.id), Value: pendingMark(now.Add(bodyTTL))})
			size += len(put.Value)
			*renewed++
		}
		if list {
			out = append(out, e)
		}
		if len(ops) >= bgBatchMax || size >= bgBatchBytes {
			if err := flush(); err != nil {
				return nil, err
			}
		}
	}
	return out, flush()
}

// Accounts persists account snapshots (the monthly allowance).
type Accounts struct{ t *Table[domain.Allowance] }

// NewAccounts returns the account table on kv.
func NewAccounts(kv KV) Accounts { return Accounts{NewTable[domain.Allowance](kv, accountTable, 1)} }

// GetAccount returns a user's snapshot (a zero one when none).
func (a Accounts) GetAccount(uid string) (domain.Allowance, error) {
	s, err := a.t.Get(uid)
	if errors.Is(err, domain.ErrRecordNotFound) {
		return domain.Allowance{UserID: uid}, nil
	}
	return s, err
}

// PutAccount writes a snapshot. It is written for every user every few milliseconds under
// load, from a goroutine of its own: the JSON is written by hand (the reflecting encoder's deep
// stack was grown again in each such goroutine, 2 % of the CPU of a send, profiled).
func (a Accounts) PutAccount(ctx context.Context, s domain.Allowance) error {
	v := append(make([]byte, 0, 96), recordVersion1)
	v = append(v, `{"userId":`...)
	v = jsonenc.AppendString(v, s.UserID)
	v = append(v, `,"period":`...)
	v = jsonenc.AppendString(v, s.Period)
	v = strconv.AppendInt(append(v, `,"sent":`...), s.Sent, 10)
	v = strconv.AppendInt(append(v, `,"mark":`...), s.Mark, 10)
	op, err := a.t.PutRawOp(s.UserID, append(v, '}'), 0)
	if err != nil {
		return err
	}
	return a.t.KV().Commit(ctx, op)
}
