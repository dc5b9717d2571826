package persist

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
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

// Outbox is the durable outbox. A message costs two records in the common case (issue 32): the
// accepted message, which is also its history entry and carries its Idempotency-Key's record,
// and its outcome:
//
//	msg_log/<uid>/<ms>/out/<id>  the message as accepted (body v3, the Idempotency-Key's body
//	                             hash included), TTL bodyTTL: written once, at accept; the
//	                             history lists it (MessageLog), <ms> is its acceptance time
//	outbox_status/<id>           the outcome: status, network id, error, attempts, history, and
//	                             where the body is (its uid and ms); TTL OutboxRetention
//	outbox_receipt/<id>/<st>     a receipt (delivered, read; failed with its code: a failure
//	                             reported while the send was in doubt) that came after the
//	                             outcome's commit, or before the outcome when its network waits
//	                             for it (the engine also folds that one into the outcome; a
//	                             boot's re-send folds in those the last process left), TTL
//	                             OutboxRetention; laid over the outcome by reads, by rank
//	outbox_pending/<id>          a pending mark, only for a message still pending after
//	                             markAfter (a disconnected session's queue, pacing): where its
//	                             body is and the body's expiry; removed with its outcome
//	outbox_checkpoint/pending    the checkpoint: every message accepted at or after this time
//	                             (ms) that is still pending has no mark
//	outbox_checkpoint/floor      the accepts' floor, on a store that stamps its records (NATS):
//	                             every message still pending without a mark was stored at or
//	                             after this time (ms, the store's clock; outbox_boot.go)
//
// There is no pending mark per message: boot (Pending) finds what is pending by reading the
// accepts since the checkpoint that have no outcome, and the marks. The checkpoint is the
// acceptance time of the oldest message pending without a mark, written every few seconds
// (Checkpoint, run by the engine every 5 s, which marks the messages pending longer than markAfter first, so it moves on
// past them). An accept is keyed at or after the last checkpoint computed (floor), so no
// accept can land behind a checkpoint that was written.
//
// This process keeps an index of the messages it knows to be pending (accepting, queued, or
// whose accept answered an error and may be stored all the same), so Get finds a pending
// message's body without a record that says where it is.
//
// On a store that pages outcomes (NATS JetStream; outbox_nats.go), the outbox mints the ids of
// messages that come without one, and their outcomes (and the receipts that follow soon after)
// are written many to a record, outbox_page/<window>/<random>, instead of outbox_status/<id>.
//
// Older layouts are read: the body at outbox/<id> (version 1, the whole entry; version 2, the
// message as accepted) with the outcome beside it (outbox_status, version 1) or as the whole
// entry; pending marks of version 1 (the whole entry) and 2 (the body's expiry), which Pending
// moves to this layout.
type Outbox struct {
	kv       KV
	blobs    Blobs // nil: media stays in the body record
	maxValue int   // the store's largest value (maxValueOf): a body over it keeps its media apart
	status   *Table[outcome]
	receipts *Table[domain.StatusChange]
	idem     *Table[domain.IdemRecord]
	logger   atomic.Pointer[slog.Logger]
	queued   inflight // the outcomes and receipts queued and not yet answered
	// writer writes them: the store's shared one (SharedWriting), or the outbox's own.
	writer *OutcomeWriter

	// mu guards the index of pending messages and the checkpoint.
	mu    sync.Mutex
	index map[string]*pendingMsg
	// floor: no accept is keyed before it (ms); the checkpoint is never written past it.
	floor int64
	// booted: Pending has run, so the index holds every pending message and Checkpoint may
	// move the checkpoint.
	booted bool
	// ckptMu serialises Checkpoint calls.
	ckptMu sync.Mutex
	// now is the clock (tests move it).
	now func() time.Time
	// stored: the store time the outbox read last (ms on the store's clock, readWritten; 0:
	// none yet), which a message indexed from then on is stored after (the accepts' floor,
	// outbox_boot.go). Under mu.
	stored int64
	// bootFloor: the floor the boot read the accepts from (ms on the store's clock), which the
	// messages it found were written at or after; 0: the boot read every accept.
	bootFloor int64
	// older: the outbox a switch of --outbox left behind, read for a message not here (nil:
	// none; outbox_older.go).
	older OutboxReader
	// pages: the store, when the outbox mints ids and pages outcomes there (outbox_nats.go);
	// nil: every outcome is outbox_status/<id>.
	pages pageScanner
	// recordsOnly: pages are read, never written, and ids not minted (WriteOutcomeRecords).
	recordsOnly bool
	// seconds: a read by id and the boot read a second's pages beside a window's, and with
	// coarse the writer holds the paged outcomes a while and pages them per second, not per
	// window (a cluster's partition: PagesPerSecond).
	seconds, coarse bool
	// flushing counts the Flush calls waiting: while one does, nothing is held.
	flushing atomic.Int32
	// holdsEnded: the engine is stopping (EndHolds), so nothing is held from then on.
	holdsEnded atomic.Bool
	// The random bits of the ids minted in the current second (from mintedFrom, a window) and
	// the one before (under mu).
	mintedAt, mintedPrev map[uint64]struct{}
	mintedFrom           uint32
	// The messages whose outcome this outbox paged in about the last 10 s (from pagedFrom) and
	// the 10 s before (under mu): a receipt of one goes into its window's next page.
	pagedAt, pagedPrev map[string]struct{}
	pagedFrom          time.Time
}

// pendingMsg is a message this process knows to be pending.
type pendingMsg struct {
	uid   string
	at    int64     // its key's time (ms)
	since time.Time // when this process indexed it
	// after: the store time the outbox had read last when this process first indexed it
	// (Outbox.stored, ms), before its accept was sent; 0: none had been read.
	after int64
	// found: the boot found it (not indexed by this process).
	found bool
	state pendingState
	mark  markState
	// expires: the body's expiry (Unix seconds), for a marked message (Renew).
	expires int64
}

type pendingState uint8

const (
	accepting pendingState = iota // its accept's commit is in flight
	waiting                       // accepted: waiting for its outcome
	doubtful                      // its accept answered an error: it may be stored all the same
	settling                      // its outcome is being written
)

type markState uint8

const (
	unmarked markState = iota
	marking            // its mark's commit is in flight
	marked
)

// Body lifetimes and the checkpoint's rhythm.
const (
	// bodyTTL is how long a message's body lives after it was (last) written.
	bodyTTL = 2 * OutboxRetention
	// renewBelow: Renew writes a pending message's body again when less than this is left, so
	// a gateway that was stopped for up to renewBelow - 1 day still finds every queued body.
	renewBelow = bodyTTL - 4*24*time.Hour
	// pendingMarkV2 starts a pending mark of the older layout (the body's expiry); an older
	// mark still (version 1) is the whole entry. pendingMarkV3 starts a mark of this layout.
	pendingMarkV2 = 2
	pendingMarkV3 = 3
	// markAfter: a message pending this long gets a mark (at the next Checkpoint), so the
	// checkpoint can move on past it. The engine runs Checkpoint every 5 s, so boot reads at
	// most about 35 s of accepts (with a crash under load: some hundred thousand keys, read in
	// one walk).
	markAfter = 30 * time.Second
	// checkpointSlack: with nothing pending, the checkpoint is this far behind now, so an
	// accept whose time was taken a moment before it was indexed is never keyed before it.
	checkpointSlack = 2 * time.Second
	// bodyVersion3 is the accept record (msg_log); bodyVersion2 the older layout's body.
	bodyVersion2 = 2
	bodyVersion3 = 3
	// statusVersion2 is the outcome with where its body is; version 1 has none (older layout).
	statusVersion2 = 2
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
	Pricing string `json:"pc,omitempty"`
	// History: the steps after the first (queued, which the body holds).
	History []step `json:"h,omitempty"`
	// Pos: where the body is (version 2): the history key's user and time, "<uid>/<ms>".
	Pos string `json:"p,omitempty"`
}

type step struct {
	Status domain.MessageStatus `json:"s"`
	At     domain.Millis        `json:"t"`
}

// outcomeOf is what an outcome's write (Outbox.Settle) keeps of its message until the
// background writer encodes it: the fields its record (appendOutcome) and its ops read, about
// 200 bytes, where the whole entry (a copy for the writer, which folds receipts into it) was 768
// on the heap for every message.
type outcomeOf struct {
	UserID                               string
	Status                               domain.MessageStatus
	NetworkID, LID, Code, Error, Pricing string
	SentAt, UpdatedAt, CreatedAt         domain.Millis
	Attempts                             int
	History                              []domain.StatusChange
}

// settleOf is entry e's outcome as its write keeps it (its history shares e's array).
func settleOf(e *domain.OutboxEntry) *outcomeOf {
	o := outcomeOfEntry(e)
	return &o
}

func outcomeOfEntry(e *domain.OutboxEntry) outcomeOf {
	return outcomeOf{UserID: e.UserID, Status: e.Status, NetworkID: e.NetworkID, LID: e.LID, Code: e.Code, Error: e.Error,
		Pricing: e.Pricing, SentAt: e.SentAt, UpdatedAt: e.UpdatedAt, CreatedAt: e.CreatedAt, Attempts: e.Attempts, History: e.History}
}

// setStatus is domain.OutboxEntry.SetStatus on the outcome's status and history (the rule is
// the entry's: applied to an entry holding just these).
func (c *outcomeOf) setStatus(s domain.MessageStatus, t time.Time) bool {
	e := domain.OutboxEntry{Status: c.Status, UpdatedAt: c.UpdatedAt, History: c.History}
	ok := e.SetStatus(s, t)
	c.Status, c.UpdatedAt, c.History = e.Status, e.UpdatedAt, e.History
	return ok
}

// appendOutcome appends a message's outcome record (version 2) to b (appendOutcomeOf).
func appendOutcome(b []byte, e *domain.OutboxEntry) []byte {
	c := outcomeOfEntry(e)
	return appendOutcomeOf(b, &c)
}

// appendOutcomeOf appends a message's outcome record (version 2) to b: its JSON, written by
// hand from the entry (one per message, so nothing is allocated on the way: the history's
// steps and where the body is are written straight from the entry). The steps are those after
// the body's own first one (queued, or scheduled with a sendAt); pos is the body's history key
// (posOf).
func appendOutcomeOf(b []byte, e *outcomeOf) []byte {
	b = append(b, statusVersion2)
	b = jsonenc.AppendString(append(b, `{"s":`...), e.Status)
	b = jsonenc.AppendField(b, `,"n":`, e.NetworkID)
	b = jsonenc.AppendField(b, `,"l":`, e.LID)
	if e.SentAt != 0 {
		b = strconv.AppendInt(append(b, `,"t":`...), int64(e.SentAt), 10)
	}
	b = jsonenc.AppendField(b, `,"c":`, e.Code)
	b = jsonenc.AppendField(b, `,"e":`, e.Error)
	if e.Attempts != 0 {
		b = strconv.AppendInt(append(b, `,"a":`...), int64(e.Attempts), 10)
	}
	b = strconv.AppendInt(append(b, `,"u":`...), int64(e.UpdatedAt), 10)
	b = jsonenc.AppendField(b, `,"pc":`, e.Pricing)
	h := e.History
	if len(h) > 0 && (h[0].Status == domain.MsgQueued || h[0].Status == domain.MsgScheduled) {
		h = h[1:] // the body's own step: queued, or scheduled (sendAt)
	}
	if len(h) > 0 {
		b = append(b, `,"h":[`...)
		for i, st := range h {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonenc.AppendString(append(b, `{"s":`...), st.Status)
			b = strconv.AppendInt(append(b, `,"t":`...), int64(st.At), 10)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	// pos, "<uid path-escaped>/<ms>": the escaped uid needs no JSON escape beyond what
	// AppendString does, and the slash and digits none; the string is reopened after the uid.
	b = jsonenc.AppendString(append(b, `,"p":`...), url.PathEscape(e.UserID))
	b = appendLogPosPrefix(append(b[:len(b)-1], '/'), int64(e.CreatedAt))
	return append(b, `"}`...)
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

// body is a message as accepted: the entry without what acceptance implies (queued, or
// scheduled with a SendAt; its one history step at its creation; the message's id, the
// entry's), and its Idempotency-Key's body hash (the message's id is derived from the key: the
// record needs nothing else).
type body struct {
	ID        string         `json:"id"`
	SessionID string         `json:"session,omitempty"`
	UserID    string         `json:"user,omitempty"`
	Origin    string         `json:"origin,omitempty"`
	From      string         `json:"from,omitempty"`
	Message   domain.Message `json:"message"`
	CreatedAt domain.Millis  `json:"at"`
	IdemHash  string         `json:"ih,omitempty"`
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

// encodeBody is an entry's accept record (version 3), its media left out when ref names the
// object that holds it. A message id other than the entry's (none is) is kept.
func encodeBody(e domain.OutboxEntry, idemHash, ref string) ([]byte, error) {
	b, size := bodyOf(e, idemHash, ref)
	return appendBody(append(make([]byte, 0, size), bodyVersion3), &b)
}

// bodyOf is what encodeBody writes, and room enough for its record.
func bodyOf(e domain.OutboxEntry, idemHash, ref string) (body, int) {
	b := body{ID: e.ID, SessionID: e.SessionID, UserID: e.UserID, Origin: e.Origin, From: e.From, Message: e.Message,
		CreatedAt: e.CreatedAt, IdemHash: idemHash, Via: e.Via, ViaReason: e.ViaReason, Waiting: e.Waiting,
		DataRef: ref, SendAt: e.SendAt, Transactional: e.Transactional}
	if b.Message.ID == e.ID {
		b.Message.ID = ""
	}
	if ref != "" {
		b.Message.Data = nil
	}
	m := &b.Message
	size := 180 + len(b.DataRef) + len(b.ID) + len(b.SessionID) + len(b.UserID) + len(b.Origin) + len(b.From) + len(m.ID) + len(m.To) +
		len(m.Text) + len(m.Caption) + len(m.FileName) + len(m.MimeType) + len(m.Address) + len(m.ContactName) + len(m.ContactPhone) +
		len(idemHash) + (len(m.Data)+2)/3*4
	return b, size
}

// decodeBody reads a body record: version 3 (the accept record) or 2 (the older layout's body),
// or version 1, the whole entry (the older layout's outcome record, or a pending entry it
// held). It returns the Idempotency-Key's body hash the record carries. Media kept apart is
// not read (decodeRef names its object; Outbox.decodeFull reads it).
func decodeBody(data []byte) (domain.OutboxEntry, string, error) {
	e, hash, _, err := decodeRef(data)
	return e, hash, err
}

// decodeRef is decodeBody, and the name of the object holding the media ("": none).
func decodeRef(data []byte) (domain.OutboxEntry, string, string, error) {
	var b body
	v, err := Decode(data, bodyVersion3, &b)
	if err != nil {
		return domain.OutboxEntry{}, "", "", err
	}
	if v == bodyVersion3 || v == bodyVersion2 {
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
		return e, b.IdemHash, b.DataRef, nil
	}
	var e domain.OutboxEntry
	_, err = Decode(data, recordVersion1, &e)
	return e, "", "", err
}

// decodeFull is decodeBody with the media read from the object the record names, if any.
func (o *Outbox) decodeFull(data []byte) (domain.OutboxEntry, string, error) {
	e, hash, ref, err := decodeRef(data)
	if err != nil {
		return e, hash, err
	}
	return e, hash, o.loadMedia(&e, ref)
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
// stays in the body record). Put again when the body is written again: it outlives the body.
func (o *Outbox) putMedia(ctx context.Context, e domain.OutboxEntry) (string, error) {
	if o.blobs == nil || len(e.Message.Data) <= BlobMin {
		return "", nil
	}
	return o.putMediaObject(ctx, e)
}

// putMediaObject stores an entry's media as its object and returns the object's name.
func (o *Outbox) putMediaObject(ctx context.Context, e domain.OutboxEntry) (string, error) {
	ref := "media-" + e.ID
	if err := o.blobs.PutBlob(ctx, ref, e.Message.Data); err != nil {
		return "", fmt.Errorf("%s %q: media: %w", outboxTable, e.ID, err)
	}
	return ref, nil
}

// blobsOf is kv's large-value store, if it has one.
func blobsOf(kv KV) Blobs {
	if b, ok := kv.(Blobs); ok {
		return b
	}
	return nil
}

// posOf is where a message's body is: the history key's user (path-escaped) and time.
func posOf(uid string, at int64) string {
	return string(appendLogPosPrefix([]byte(logUserPrefix(uid)), at))
}

// appendLogPosPrefix appends a 13-digit time (ms).
func appendLogPosPrefix(b []byte, ms int64) []byte {
	var digits [13]byte
	v := max(ms, 0)
	for i := len(digits) - 1; i >= 0; i-- {
		digits[i] = byte('0' + v%10)
		v /= 10
	}
	return append(b, digits[:]...)
}

// acceptKey is the accept record's key: msg_log/<uid>/<ms>/out/<id>.
func acceptKey(uid string, at int64, id string) []byte {
	return appendAcceptKey(make([]byte, 0, acceptKeySize(uid, id)), uid, at, id)
}

// acceptKeySize is room enough for an accept record's key (the uid's path escape is at most
// three times as long).
func acceptKeySize(uid, id string) int { return len(messageLogTable) + 3*len(uid) + len(id) + 24 }

// appendAcceptKey appends the accept record's key to k (logUserPrefix's escape, without its
// string).
func appendAcceptKey(k []byte, uid string, at int64, id string) []byte {
	k = append(append(append(k, messageLogTable...), '/'), url.PathEscape(uid)...)
	k = appendLogPosPrefix(append(k, '/'), at)
	return append(append(k, "/"+domain.DirOut+"/"...), id...)
}

// acceptKeyAt is the accept record's key from its pos (posOf).
func acceptKeyAt(pos, id string) []byte {
	k := make([]byte, 0, len(messageLogTable)+len(pos)+len(id)+8)
	k = append(append(append(k, messageLogTable...), '/'), pos...)
	return append(append(k, "/"+domain.DirOut+"/"...), id...)
}

func bodyKey(id string) []byte { return append([]byte(outboxTable+"/"), id...) }

func pendingKey(id string) []byte { return append([]byte(outboxPendingTable+"/"), id...) }

// SetClock sets the clock the outbox reads times by to the one that stamps the messages it
// holds (the engine's, engine.New): a read by id looks for a page only within a window of that
// clock's now, and the Idempotency-Key's TTL runs from a message's time. Called before the
// outbox's first use; the default is time.Now.
func (o *Outbox) SetClock(now func() time.Time) { o.now = now }

// checkpointKey is the outbox's checkpoint (one key; schema.go).
var checkpointKey = []byte("outbox_checkpoint/pending")

// NewOutbox returns the outbox on kv.
func NewOutbox(kv KV) *Outbox {
	o := &Outbox{
		kv:       kv,
		blobs:    blobsOf(kv),
		maxValue: maxValueOf(kv),
		status:   NewTable[outcome](kv, outboxStatusTable, statusVersion2),
		receipts: NewTable[domain.StatusChange](kv, outboxReceiptTable, 1),
		idem:     NewTable[domain.IdemRecord](kv, idemTable, 1),
		index:    map[string]*pendingMsg{},
		now:      time.Now,
	}
	if ps, ok := kv.(pageScanner); ok {
		o.pages = ps
	}
	if sw, ok := kv.(SharedWriting); ok {
		o.writer = sw.OutcomeWriter()
	} else {
		o.writer = NewOutcomeWriter(nil, false)
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

// markV3 is a pending mark of this layout: where the body is, and its expiry.
func markV3(pos string, expires time.Time) []byte {
	v := binary.BigEndian.AppendUint64([]byte{pendingMarkV3}, uint64(max(expires.Unix(), 0)))
	return append(v, pos...)
}

// Accept commits an accepted entry durably in one record: its body, which is also its history
// entry, with the Idempotency-Key's body hash when idemHash is not empty (the message's id is
// derived from the key). The entry's time is moved up to the outbox's floor when the clock is
// behind it (a clock stepped back), so that boot always finds it.
func (o *Outbox) Accept(ctx context.Context, e *domain.OutboxEntry, idemHash string) error {
	o.index1(e)
	op, err := o.acceptOp(ctx, *e, idemHash)
	if err == nil {
		err = o.kv.Commit(ctx, op)
	}
	o.accepted(e.ID, err)
	return err
}

// AcceptMany commits several accepted entries in one commit (a store's queued events); their
// times may be moved up as Accept's.
func (o *Outbox) AcceptMany(ctx context.Context, es []domain.OutboxEntry) error {
	ops := make([]Op, 0, len(es))
	for i := range es {
		o.index1(&es[i])
	}
	var err error
	for _, e := range es {
		var op Op
		if op, err = o.acceptOp(ctx, e, ""); err != nil {
			break
		}
		ops = append(ops, op)
	}
	if err == nil {
		err = o.kv.Commit(ctx, ops...)
	}
	for _, e := range es {
		o.accepted(e.ID, err)
	}
	return err
}

// index1 indexes an entry about to be accepted: its time at or after the floor, or the time of
// the same message indexed already (an accept of an id that is pending here writes the same
// record again, never a second one). An entry without an id gets one naming its time's window
// (MintsIDs; an outbox that does not mint leaves it empty: acceptOp refuses it).
func (o *Outbox) index1(e *domain.OutboxEntry) {
	o.mu.Lock()
	defer o.mu.Unlock()
	at := int64(e.CreatedAt)
	if e.ID == "" && o.writesPages() {
		at = max(at, o.floor)
		o.mint(e, idWindow(at))
	}
	if p := o.index[e.ID]; e.ID != "" && p != nil && p.uid == e.UserID {
		at = p.at
		if p.state == doubtful {
			p.state = accepting
		}
	} else if e.ID != "" {
		at = max(at, o.floor)
		o.index[e.ID] = &pendingMsg{uid: e.UserID, at: at, since: o.now(), state: accepting, after: o.stored}
	}
	if at != int64(e.CreatedAt) {
		e.CreatedAt = domain.Millis(at)
		for i := range e.History {
			if e.History[i].Status == domain.MsgQueued {
				e.History[i].At = domain.Millis(at)
			}
		}
	}
}

// accepted records an accept's commit: queued, or doubtful when it answered an error (a
// commit whose answer was lost may be stored all the same: Checkpoint reads it back).
func (o *Outbox) accepted(id string, err error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if p := o.index[id]; p != nil && p.state == accepting {
		if err != nil {
			p.state, p.since = doubtful, o.now()
		} else {
			p.state = waiting
		}
	}
}

// listedKind tells whether messages of a kind are listed in the history: reactions, edits and
// revokes are shown on the message they are about (MessageNotes), not as messages of their own.
func listedKind(k domain.Kind) bool {
	return k != domain.KindReaction && k != domain.KindEdit && k != domain.KindRevoke
}

// acceptOp is an entry's accept record (its media, when stored apart, put first: an object no
// committed record names just expires).
func (o *Outbox) acceptOp(ctx context.Context, e domain.OutboxEntry, idemHash string) (Op, error) {
	if e.ID == "" {
		return Op{}, fmt.Errorf("%w: %s: empty id", domain.ErrRecordInvalid, outboxTable)
	}
	ref, err := o.putMedia(ctx, e)
	if err != nil {
		return Op{}, err
	}
	op, err := acceptRecord(e, idemHash, ref)
	if err != nil || ref != "" || o.blobs == nil || len(e.Message.Data) == 0 || len(op.Value) <= o.maxValue {
		return op, err
	}
	// Media under BlobMin whose record is over the store's largest value (a NATS server's
	// max_payload under about 700 KiB): kept apart too, as media over BlobMin is.
	if ref, err = o.putMediaObject(ctx, e); err != nil {
		return Op{}, err
	}
	return acceptRecord(e, idemHash, ref)
}

// acceptRecord is an entry's accept record, its media left out when ref names its object.
func acceptRecord(e domain.OutboxEntry, idemHash, ref string) (Op, error) {
	// The key and the record in one array (one allocation per accept, not three).
	b, size := bodyOf(e, idemHash, ref)
	buf := appendAcceptKey(make([]byte, 0, acceptKeySize(e.UserID, e.ID)+size), e.UserID, int64(e.CreatedAt), e.ID)
	k := len(buf)
	buf, err := appendBody(append(buf, bodyVersion3), &b)
	if err != nil {
		return Op{}, fmt.Errorf("%s %q: %w", outboxTable, e.ID, err)
	}
	return Op{Key: buf[:k:k], Value: buf[k:], TTL: bodyTTL}, nil
}

// IdemOp is the write of an idempotency record, for a caller's own commit (a campaign's).
func (o *Outbox) IdemOp(idemID string, rec domain.IdemRecord) (Op, error) {
	return o.idem.PutTTLOp(idemID, rec, domain.IdempotencyTTL)
}

// Idem returns the idempotency record idemID (a campaign's, or a message's of the older
// layout), or domain.ErrRecordNotFound.
func (o *Outbox) Idem(idemID string) (domain.IdemRecord, error) { return o.idem.Get(idemID) }

// IdemOf returns the idempotency record a message carries (its id is the one derived from the
// key), for domain.IdempotencyTTL after its accept; domain.ErrRecordNotFound otherwise.
func (o *Outbox) IdemOf(messageID string) (domain.IdemRecord, error) {
	e, hash, err := o.read(messageID, false, false)
	if err != nil {
		return orOlder(domain.IdemRecord{}, err, o.older, func(r OutboxReader) (domain.IdemRecord, error) { return r.IdemOf(messageID) })
	}
	if hash == "" || o.now().Sub(e.CreatedAt.Time()) > domain.IdempotencyTTL {
		return domain.IdemRecord{}, domain.ErrRecordNotFound
	}
	return domain.IdemRecord{BodyHash: hash, MessageID: e.ID, At: e.CreatedAt}, nil
}

// Settle records a network outcome (sent or failed) in the background: the deliverer does not
// wait for it (a lost outcome only means the message is sent again under the same id at boot,
// which the network treats as the same message). done is called with the commit's error.
//
// Outcomes and receipts are written by one background writer in batches, one commit each (a
// commit per outcome and per receipt made three commits per message, which bounded the send
// rate: profiled in bench/README.md), and a receipt queued behind its message's outcome is
// folded into it (one record instead of two).
func (o *Outbox) Settle(e domain.OutboxEntry, done func(error)) {
	c := settleOf(&e)
	c.History = slices.Clip(c.History) // a folded receipt appends: never into the caller's array
	o.mu.Lock()
	if p := o.index[e.ID]; p != nil && p.state != settling {
		p.state = settling
	}
	o.mu.Unlock()
	o.background(bgWrite{id: e.ID, entry: c, done: done})
}

// Receipt records a receipt (delivered, read) in the background.
func (o *Outbox) Receipt(id string, c domain.StatusChange, done func(error)) {
	if o.older != nil && !o.holds(id) {
		// Sent before a switch of --outbox: its receipt goes where it is (outbox_older.go),
		// still counted here (Flush waits for it).
		o.queued.add(1)
		o.older.Receipt(id, c, func(err error) {
			done(err)
			o.queued.add(-1)
		})
		return
	}
	o.background(bgWrite{id: id, receipt: c, done: done})
}

// EndHolds ends the writer's hold of this outbox's paged outcomes for good: the engine
// stops, and an outcome that comes after its last Flush (a send still in flight past the
// stop's bound) is written at once, while the partition's view is still open, not held
// until after it closed (the next owner would then send that message again).
func (o *Outbox) EndHolds() {
	o.holdsEnded.Store(true)
	o.writer.wake()
}

// unheld tells whether nothing of this outbox may be held now: a Flush waits, or the engine
// is stopping.
func (o *Outbox) unheld() bool { return o.flushing.Load() > 0 || o.holdsEnded.Load() }

// Flush waits for the outcomes and receipts being written (graceful shutdown); the paged
// outcomes the writer holds are written at once.
func (o *Outbox) Flush() {
	o.flushing.Add(1)
	defer o.flushing.Add(-1)
	o.writer.wake()
	o.queued.wait()
}

// inflight counts writes queued and not yet answered, and waits for none. Unlike a
// sync.WaitGroup, a write may be added while a wait runs (a network's late receipt while the
// engine stops: a WaitGroup's Add from zero during its Wait is a misuse the race detector
// reports); the wait ends once the count is zero.
type inflight struct {
	mu   sync.Mutex
	n    int
	zero *sync.Cond // on mu
}

func (f *inflight) add(d int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n += d; f.n == 0 && f.zero != nil {
		f.zero.Broadcast()
	}
}

func (f *inflight) wait() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.zero == nil {
		f.zero = sync.NewCond(&f.mu)
	}
	for f.n > 0 {
		f.zero.Wait()
	}
}

// bgWrite is an outcome or a receipt waiting for the background writer. An outcome is held by
// pointer: the queue's array is appended to for every message and grows under load, and with
// the entry inline (832 bytes a write) its growth copies were 8 % of the send path's CPU
// (profiled).
type bgWrite struct {
	o       *Outbox
	id      string
	entry   *outcomeOf // an outcome's (Settle's own copy); nil: a receipt
	receipt domain.StatusChange
	done    func(error)
	folded  []func(error) // receipts folded into this outcome: answered with it
	paged   bool          // written in a page (outbox_nats.go)
}

func (w *bgWrite) outcome() bool { return w.entry != nil }

// background queues w for the writer.
func (o *Outbox) background(w bgWrite) { o.writer.add(o, w) }

// bgPart is one commit of a background batch: its ops, and the writes (indexes in the batch's
// kept writes) it carries.
type bgPart struct {
	ops   []Op
	group []int
}

// prepareBatch folds each receipt into its message's outcome when that is in the batch, and
// encodes the batch's writes into as few commits as their size allows, or with each, one
// commit per write: it returns the writes kept (in batch's array) and the commits. A write that
// cannot be encoded is answered at once.
func (o *Outbox) prepareBatch(batch []bgWrite, each bool) ([]bgWrite, []bgPart) {
	// A receipt queued behind its outcome is folded into it. One queued before it (its
	// network waited for it while the send was in doubt) is its own record; the engine folds
	// it into the outcome too.
	at := map[string]int{}
	kept := batch[:0]
	for _, w := range batch {
		if !w.outcome() {
			if i, ok := at[w.id]; ok {
				if kept[i].entry.setStatus(w.receipt.Status, w.receipt.At.Time()) && w.receipt.Status == domain.MsgFailed {
					kept[i].entry.Code, kept[i].entry.Error = w.receipt.Code, w.receipt.Error // as laySettled
				}
				if w.receipt.Category != "" {
					kept[i].entry.Pricing = w.receipt.Category
				}
				kept[i].folded = append(kept[i].folded, w.done)
				continue
			}
		} else {
			at[w.id] = len(kept)
		}
		kept = append(kept, w)
	}
	var (
		parts []bgPart
		ops   = make([]Op, 0, len(kept)+8)
		group = make([]int, 0, len(kept))
		size  int
		// buf holds the outcomes' keys and records, one array for the batch.
		buf = make([]byte, 0, len(kept)*160)
	)
	now := o.now()
	o.mu.Lock()
	marks := make([]bool, len(kept))
	for i, w := range kept {
		if p := o.index[w.id]; w.outcome() && p != nil && p.mark != unmarked {
			marks[i] = true
		}
		if o.writesPages() {
			kept[i].paged = o.pagedNow(&kept[i], now)
		}
	}
	o.mu.Unlock()
	opStart, groupStart := 0, 0 // where the part being filled starts, in ops and group
	// cut ends the part being filled.
	cut := func() {
		parts = append(parts, bgPart{ops: ops[opStart:len(ops):len(ops)], group: group[groupStart:len(group):len(group)]})
		opStart, groupStart, size = len(ops), len(group), 0
	}
	var (
		wops  []Op
		paged []int // the outcomes written in pages (outbox_nats.go)
	)
	for i, w := range kept {
		if w.paged {
			paged = append(paged, i)
			continue
		}
		var err error
		wops, err = o.ops(wops[:0], &buf, w, now, marks[i])
		if err != nil {
			o.answer(w, err)
			continue
		}
		n := 0
		for _, op := range wops {
			n += len(op.Key) + len(op.Value)
		}
		if len(group) > groupStart && (each || size+n > bgBatchBytes || len(group)-groupStart == bgBatchMax) {
			cut()
		}
		ops, group, size = append(ops, wops...), append(group, i), size+n
	}
	if len(group) > groupStart {
		cut()
	}
	if len(paged) > 0 {
		parts = o.pageParts(parts, kept, paged, marks, now, &buf)
	}
	return kept, parts
}

// finishPart answers the writes of a part whose commit answered err. A commit of several
// writes that failed is tried write by write (one may be what the store refuses: too large).
func (o *Outbox) finishPart(kept []bgWrite, p bgPart, err error) {
	if err != nil && len(p.group) > 1 {
		for _, i := range p.group {
			o.writeAlone(kept[i])
		}
		return
	}
	for _, i := range p.group {
		o.answer(kept[i], err)
	}
}

// writeAlone commits one write (its receipts folded in already) and answers it.
func (o *Outbox) writeAlone(w bgWrite) {
	_, parts := o.prepareBatch([]bgWrite{w}, true)
	for _, p := range parts {
		o.answer(w, o.kv.Commit(context.Background(), p.ops...))
	}
}

// ops appends a background write's ops to ops: an outcome is its small record (and its
// mark's removal when it has one, a failure's or cancellation's kept status's removal, and the
// body again when it would not outlive the outcome by the retention); a receipt is its own
// small record.
func (o *Outbox) ops(ops []Op, buf *[]byte, w bgWrite, now time.Time, marked bool) ([]Op, error) {
	if !w.outcome() {
		put, err := o.receipts.PutTTLOp(w.id+"/"+w.receipt.Status, w.receipt, OutboxRetention)
		return append(ops, put), err
	}
	if w.id == "" {
		return ops, fmt.Errorf("%w: %s: empty id", domain.ErrRecordInvalid, outboxStatusTable)
	}
	// The key and the record go into the batch's buffer: one allocation for the batch, not
	// three or four per outcome.
	k := len(*buf)
	*buf = append(append(append(*buf, outboxStatusTable...), '/'), w.id...)
	v := len(*buf)
	*buf = appendOutcomeOf(*buf, w.entry)
	ops = append(ops, Op{Key: (*buf)[k:v:v], Value: (*buf)[v:len(*buf):len(*buf)], TTL: OutboxRetention})
	return o.extraOps(ops, w, now, marked)
}

// extraOps appends the ops an outcome's record needs beside it (ops).
func (o *Outbox) extraOps(ops []Op, w bgWrite, now time.Time, marked bool) ([]Op, error) {
	if st := w.entry.Status; st == domain.MsgFailed || st == domain.MsgCancelled {
		// The status kept with its event (event_final) until this record: no boot reads it
		// once the message is not pending, and it stayed for its 7 days, a key per failure.
		// Deleted in this commit, not one more; a message without one (no events taken)
		// costs a tombstone, a failure's only, never a sent message's.
		ops = append(ops, Op{Key: finalKey(w.entry.UserID, w.id), Delete: true})
	}
	if marked {
		ops = append(ops, Op{Key: pendingKey(w.id), Delete: true})
	}
	if now.Sub(w.entry.CreatedAt.Time()) > bodyTTL-OutboxRetention-time.Hour {
		cur, hash, err := o.get(w.id, false)
		if err != nil {
			return nil, err
		}
		body, err := o.acceptOp(context.Background(), cur, hash)
		if err != nil {
			return nil, err
		}
		body.TTL = OutboxRetention + time.Hour
		ops = append(ops, body)
	}
	return ops, nil
}

// answer answers a background write; an outcome's message leaves the index once its record is
// durable (or goes back to pending when it could not be written).
func (o *Outbox) answer(w bgWrite, err error) {
	if w.outcome() {
		o.mu.Lock()
		if w.paged && err == nil {
			o.pagedRecently(w.id)
		}
		if p := o.index[w.id]; p != nil && p.state == settling {
			if err == nil {
				delete(o.index, w.id)
			} else {
				p.state = waiting
			}
		}
		o.mu.Unlock()
	}
	if w.done != nil { // nil: answered with a later outcome of its message (pageParts)
		w.done(err)
	}
	for _, f := range w.folded {
		f(err)
	}
}

// Get returns a message as it stands: its body with its outcome and receipts laid over it, or
// the body alone while it is pending. domain.ErrRecordNotFound when there is no body, or when
// its outcome has expired.
func (o *Outbox) Get(id string) (domain.OutboxEntry, error) {
	e, _, err := o.get(id, true)
	return orOlder(e, err, o.older, func(r OutboxReader) (domain.OutboxEntry, error) { return r.Get(id) })
}

// get reads a message, with its outcome and receipts when full, and the Idempotency-Key's
// body hash its record carries.
func (o *Outbox) get(id string, full bool) (domain.OutboxEntry, string, error) {
	return o.read(id, full, true)
}

// read is get; without older, a message of the older layout is not read (ErrRecordNotFound):
// its body carries no Idempotency-Key's hash (IdemOf, which a keyed send calls for 3 ids or
// more, most of them absent: one read of an absent key fewer each).
func (o *Outbox) read(id string, full, older bool) (domain.OutboxEntry, string, error) {
	if id == "" {
		return domain.OutboxEntry{}, "", domain.ErrRecordNotFound
	}
	o.mu.Lock()
	var pos string
	p := o.index[id]
	if p != nil {
		pos = posOf(p.uid, p.at)
	}
	o.mu.Unlock()
	var (
		c       outcome
		settled bool
		paged   []domain.StatusChange // receipts in its pages
	)
	if pos == "" {
		// Not pending here: its outcome says where its body is.
		back := pageReadBack
		if !older {
			back = idemReadBack // IdemOf: a message accepted within its TTL
		}
		var err error
		switch c, paged, err = o.outcomeByID(id, back); {
		case err == nil:
			settled, pos = true, c.Pos
		case errors.Is(err, domain.ErrRecordNotFound):
			if m, merr := o.kv.Get(pendingKey(id)); merr == nil && len(m) > 9 && m[0] == pendingMarkV3 {
				pos = string(m[9:]) // marked by another process (not booted here)
			} else if merr != nil && !errors.Is(merr, domain.ErrRecordNotFound) {
				return domain.OutboxEntry{}, "", merr
			}
		default:
			return domain.OutboxEntry{}, "", err
		}
		if pos == "" {
			if !older {
				return domain.OutboxEntry{}, "", domain.ErrRecordNotFound
			}
			e, err := o.getOlder(id, settled, c, full)
			return e, "", err
		}
	}
	data, err := o.kv.Get(acceptKeyAt(pos, id))
	if err != nil {
		return domain.OutboxEntry{}, "", err
	}
	e, hash, err := o.decodeFull(data)
	if err != nil {
		return e, "", fmt.Errorf("%s %q: %w", messageLogTable, id, err)
	}
	if !full {
		return e, hash, nil
	}
	if !settled {
		// Pending when indexed; its outcome may have landed since.
		switch c, paged, err = o.outcomeByID(id, pageReadBack); {
		case err == nil:
			settled = true
		case !errors.Is(err, domain.ErrRecordNotFound):
			return e, "", err
		}
	}
	if settled {
		c.apply(&e)
		if err := o.laySettled(&e, paged...); err != nil {
			return e, "", err
		}
	}
	return e, hash, nil
}

// getOlder reads a message of the older layout (its body at outbox/<id>): settled says c is
// its outcome, read already.
func (o *Outbox) getOlder(id string, settled bool, c outcome, full bool) (domain.OutboxEntry, error) {
	data, err := o.kv.Get(bodyKey(id))
	if err != nil {
		return domain.OutboxEntry{}, err
	}
	e, _, err := o.decodeFull(data)
	if err != nil {
		return e, fmt.Errorf("%s %q: %w", outboxTable, id, err)
	}
	switch {
	case e.Final():
		// The oldest layout: the whole entry with its outcome.
		if full {
			err = o.laySettled(&e)
		}
		return e, err
	case !full:
		return e, nil
	case !settled:
		// Pending, or its outcome expired. The outcome's commit writes the status and removes
		// the mark at once: read the status again after the mark, so that commit landing
		// between the two reads is seen.
		if _, merr := o.kv.Get(pendingKey(id)); merr == nil {
			return e, nil
		} else if !errors.Is(merr, domain.ErrRecordNotFound) {
			return e, merr
		}
		if c, err = o.status.Get(id); err != nil {
			return e, err
		}
	}
	c.apply(&e)
	return e, o.laySettled(&e)
}

// Receipts returns the receipts recorded of message id on their own (Receipt), furthest last:
// those that came before its outcome are there while it is pending (the engine folds them
// into the outcome of a message a boot sends again).
func (o *Outbox) Receipts(id string) ([]domain.StatusChange, error) {
	var rs []domain.StatusChange
	if err := o.receipts.Scan(id+"/", func(_ string, c domain.StatusChange) error {
		rs = append(rs, c)
		return nil
	}); err != nil {
		return nil, err
	}
	sort.Slice(rs, func(i, j int) bool { return domain.StatusRank(rs[i].Status) < domain.StatusRank(rs[j].Status) })
	return rs, nil
}

// laySettled lays a settled message's receipts over it: its own records, and those of its
// pages (paged).
func (o *Outbox) laySettled(e *domain.OutboxEntry, paged ...domain.StatusChange) error {
	rs, err := o.Receipts(e.ID)
	if err != nil {
		return err
	}
	if len(paged) > 0 {
		rs = append(rs, paged...)
		sort.SliceStable(rs, func(i, j int) bool { return domain.StatusRank(rs[i].Status) < domain.StatusRank(rs[j].Status) })
	}
	for _, c := range rs {
		if e.SetStatus(c.Status, c.At.Time()) && c.Status == domain.MsgFailed {
			e.Code, e.Error = c.Code, c.Error // a failure recorded before the outcome
		}
		if c.Category != "" {
			e.Pricing = c.Category
		}
	}
	return nil
}
