package persist

// The event journal and the broker outbox (DESIGN.md section 20): every event committed is kept
// 24 h in its user's journal (a live stream resumed with Last-Event-ID replays it) and, while
// the gateway publishes its events to a broker (--events-nats), in the outbox of events not yet
// published, until the broker acknowledged it.
//
//	event_log/<uid>/<seq: 16 hex digits>   eventWire (v1), TTL 24 h: the user's journal
//	event_out/<seq: 16 hex digits>         eventWire (v1), TTL 7 days: the broker outbox
//	event_epoch/boot                       the last boot's epoch (decimal): a journal sequence
//	                                       number starts with it (engine: events_journal.go)
//	event_watch/<uid>                      until when the user's events are journaled (unix ms,
//	                                       decimal), TTL until then: a live stream opened
//	event_final/<uid>/<message id>         finalWire (v1), TTL 7 days: a message's failed or
//	                                       cancelled status, in its event's commit (a boot
//	                                       settles the message so when its record was lost);
//	                                       deleted by that record's commit (outbox.go: ops)
//
// The user id is path-escaped (url.PathEscape) as in the message history, so one user's
// prefix never covers another's. Sequence numbers are fixed-width hex, so key order is journal
// order; an event is written once and never changed, so on JetStream a key's subject holds one
// message.

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"time"

	json "github.com/goccy/go-json"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/internal/jsonenc"
)

const (
	eventLogTable   = "event_log"
	eventOutTable   = "event_out"
	eventEpochTable = "event_epoch"
	eventEpochID    = "boot"
	eventWatchTable = "event_watch"
	eventFinalTable = "event_final"
)

// finalRetention is how long a failed or cancelled status is kept beside its event when its
// message's record never deletes it (a kill -9 between the two, and no boot since): a boot that
// finds the record missing comes within this, or the broker outbox's events would be gone too.
const finalRetention = domain.EventOutboxRetention

// eventWire is an event record as stored: the body is the webhook body's JSON, kept as it is.
type eventWire struct {
	Seq  uint64           `json:"seq"`
	ID   string           `json:"id"`
	User string           `json:"user"`
	Type domain.EventType `json:"type"`
	Body json.RawMessage  `json:"body"`
	// Dedupe is the broker's Nats-Msg-Id when not the id (domain.EventRecord.DedupeID).
	Dedupe string `json:"dedupe,omitempty"`
}

func (w eventWire) record() domain.EventRecord {
	return domain.EventRecord{Seq: w.Seq, ID: w.ID, UserID: w.User, Type: w.Type, Body: w.Body, DedupeID: w.Dedupe}
}

func seqHex(seq uint64) string { return fmt.Sprintf("%016x", seq) }

func eventLogID(uid string, seq uint64) string { return logUserPrefix(uid) + seqHex(seq) }

// EventOps returns the writes that keep events: journaled ones in their users' journals,
// forwarded ones in the broker outbox (an event may be in both).
func (w *Webhooks) EventOps(journaled, forwarded []domain.EventRecord) ([]Op, error) {
	ops := make([]Op, 0, len(journaled)+len(forwarded))
	var both map[string][]byte // an event in both is encoded once: its id → its encoding
	if len(journaled) > 0 && len(forwarded) > 0 {
		both = make(map[string][]byte, len(journaled))
	}
	for _, r := range journaled {
		v, err := encodeEvent(r)
		if err != nil {
			return nil, err
		}
		if both != nil {
			both[r.ID] = v
		}
		op, err := w.journal.PutRawOp(eventLogID(r.UserID, r.Seq), v, domain.EventJournalRetention)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	for _, r := range forwarded {
		v, ok := both[r.ID]
		if !ok {
			var err error
			if v, err = encodeEvent(r); err != nil {
				return nil, err
			}
		}
		op, err := w.outbox.PutRawOp(seqHex(r.Seq), v, domain.EventOutboxRetention)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// encodeEvent writes r as eventWire (version 1) by hand: the body, JSON the engine encoded, is
// copied as it is (a reflecting encoder would parse it again).
func encodeEvent(r domain.EventRecord) ([]byte, error) {
	if err := checkID("user id", r.UserID); err != nil {
		return nil, err
	}
	if r.ID == "" || len(r.Body) == 0 {
		return nil, fmt.Errorf("%w: an event record needs an id and a body", domain.ErrRecordInvalid)
	}
	b := make([]byte, 0, 96+len(r.UserID)+len(r.ID)+len(r.Body))
	b = append(b, recordVersion1)
	b = append(b, `{"seq":`...)
	b = strconv.AppendUint(b, r.Seq, 10)
	b = append(b, `,"id":`...)
	b = jsonenc.AppendString(b, r.ID)
	b = append(b, `,"user":`...)
	b = jsonenc.AppendString(b, r.UserID)
	b = append(b, `,"type":`...)
	b = jsonenc.AppendString(b, string(r.Type))
	if r.DedupeID != "" {
		b = append(b, `,"dedupe":`...)
		b = jsonenc.AppendString(b, r.DedupeID)
	}
	b = append(b, `,"body":`...)
	b = append(b, r.Body...)
	return append(b, '}'), nil
}

// AppendEvents commits ds (events fanned out to their subscriptions) and the events themselves
// (EventOps). The writes go in commits of at most maxCommitOps made one after the other; a
// caller that gets an error retries them all (each write is idempotent).
//
// finals (failed or cancelled statuses among the events) are kept in the same commit: were
// they in a later one, a kill -9 between would leave the event told and the boot sending the
// message again (FinalStatuses).
func (w *Webhooks) AppendEvents(ctx context.Context, ds []domain.WebhookDelivery, journaled, forwarded []domain.EventRecord, finals ...domain.FinalStatus) error {
	ops, err := w.recordOps(ds, journaled, forwarded)
	if err != nil {
		return err
	}
	// A batch with finals comes in whole events of at most one commit (engine: Events.Commit),
	// so a final and its event land together.
	for _, f := range finals {
		op, err := finalOp(f)
		if err != nil {
			return err
		}
		ops = append(ops, op)
	}
	return w.commitChunks(ctx, ops)
}

// finalWire is a kept failed or cancelled status (event_final).
type finalWire struct {
	Status domain.MessageStatus `json:"status"`
	At     int64                `json:"at"` // unix ms
	Code   string               `json:"code,omitempty"`
	Error  string               `json:"error,omitempty"`
}

func finalKey(uid, id string) []byte {
	return []byte(eventFinalTable + "/" + logUserPrefix(uid) + url.PathEscape(id))
}

func finalOp(f domain.FinalStatus) (Op, error) {
	if err := checkID("user id", f.UserID); err != nil {
		return Op{}, err
	}
	if f.MessageID == "" || (f.Status != domain.MsgFailed && f.Status != domain.MsgCancelled) {
		return Op{}, fmt.Errorf("%w: a final status needs a message id and failed or cancelled, not %q", domain.ErrRecordInvalid, f.Status)
	}
	v, err := Encode(recordVersion1, finalWire{Status: f.Status, At: f.At.UnixMilli(), Code: f.Code, Error: f.Error})
	if err != nil {
		return Op{}, err
	}
	return Op{Key: finalKey(f.UserID, f.MessageID), Value: v, TTL: finalRetention}, nil
}

// FinalStatuses returns the failed or cancelled statuses kept (AppendEvents) for the messages
// among es, by message id: a boot's pending messages, nearly always none (one batched
// presence check, then a read for each found).
func (w *Webhooks) FinalStatuses(es []domain.OutboxEntry) (map[string]domain.FinalStatus, error) {
	if len(es) == 0 {
		return nil, nil
	}
	keys := make([][]byte, 0, len(es))
	for _, e := range es {
		keys = append(keys, finalKey(e.UserID, e.ID))
	}
	found, err := Has(w.kv, keys)
	if err != nil {
		return nil, err
	}
	var out map[string]domain.FinalStatus
	for i, ok := range found {
		if !ok {
			continue
		}
		v, err := w.kv.Get(keys[i])
		if errors.Is(err, domain.ErrRecordNotFound) {
			continue // expired meanwhile
		}
		if err != nil {
			return nil, err
		}
		var fw finalWire
		if _, err := Decode(v, recordVersion1, &fw); err != nil {
			return nil, fmt.Errorf("%s %q: %w", eventFinalTable, keys[i], err)
		}
		if out == nil {
			out = map[string]domain.FinalStatus{}
		}
		e := es[i]
		out[e.ID] = domain.FinalStatus{UserID: e.UserID, MessageID: e.ID, Status: fw.Status, At: time.UnixMilli(fw.At).UTC(), Code: fw.Code, Error: fw.Error}
	}
	return out, nil
}

func (w *Webhooks) recordOps(ds []domain.WebhookDelivery, journaled, forwarded []domain.EventRecord) ([]Op, error) {
	ops, err := w.EnqueueOps(ds)
	if err != nil {
		return nil, err
	}
	evOps, err := w.EventOps(journaled, forwarded)
	if err != nil {
		return nil, err
	}
	return append(ops, evOps...), nil
}

// JournalFrom returns up to limit events of uid's journal with a sequence number at or above
// from, in order, read in one snapshot.
func (w *Webhooks) JournalFrom(uid string, from uint64, limit int) ([]domain.EventRecord, error) {
	if checkID("user id", uid) != nil {
		return nil, nil
	}
	return w.eventsFrom([]byte(eventLogTable+"/"+logUserPrefix(uid)), from, limit)
}

// OutboxFrom returns up to limit events of the broker outbox with a sequence number at or
// above from, in order.
func (w *Webhooks) OutboxFrom(from uint64, limit int) ([]domain.EventRecord, error) {
	return w.eventsFrom([]byte(eventOutTable+"/"), from, limit)
}

func (w *Webhooks) eventsFrom(prefix []byte, from uint64, limit int) ([]domain.EventRecord, error) {
	var out []domain.EventRecord
	start := append(slices.Clone(prefix), seqHex(from)...)
	fn := func(key, value []byte) error {
		var ew eventWire
		if _, err := Decode(value, recordVersion1, &ew); err != nil {
			return fmt.Errorf("event %q: %w", key, err)
		}
		out = append(out, ew.record())
		if len(out) == limit {
			return errStopScan
		}
		return nil
	}
	return out, stopped(scanFrom(w.kv, prefix, start, fn)) // published events before start are not walked
}

// DeleteOutbox removes the events seqs from the broker outbox (the broker has them), in one
// commit.
func (w *Webhooks) DeleteOutbox(ctx context.Context, seqs []uint64) error {
	if len(seqs) == 0 {
		return nil
	}
	ops := make([]Op, len(seqs))
	for i, s := range seqs {
		ops[i] = w.outbox.DeleteOp(seqHex(s))
	}
	return w.commitChunks(ctx, ops)
}

// OutboxLen counts the events in the broker outbox (boot: how many wait).
func (w *Webhooks) OutboxLen() (int, error) {
	n := 0
	err := w.kv.Scan([]byte(eventOutTable+"/"), func(_, _ []byte) error {
		n++
		return nil
	})
	return n, err
}

// NextEventEpoch counts this boot (or this owner's start of the partition): it returns the
// previous epoch plus one, durably, so every journal sequence number of this run sorts after
// every earlier run's.
func (w *Webhooks) NextEventEpoch(ctx context.Context) (uint64, error) {
	var cur uint64
	switch v, err := w.kv.Get([]byte(eventEpochTable + "/" + eventEpochID)); {
	case err == nil:
		if cur, err = strconv.ParseUint(string(v), 10, 64); err != nil {
			return 0, fmt.Errorf("%w: event epoch %q: %w", domain.ErrRecordInvalid, v, err)
		}
	case !errors.Is(err, domain.ErrRecordNotFound):
		return 0, err
	}
	next := cur + 1
	err := w.kv.Commit(ctx, Op{Key: []byte(eventEpochTable + "/" + eventEpochID), Value: strconv.AppendUint(nil, next, 10)})
	return next, err
}

// MarkWatched keeps uid's events journaled until until (a live stream opened), durably.
func (w *Webhooks) MarkWatched(ctx context.Context, uid string, until time.Time) error {
	if err := checkID("user id", uid); err != nil {
		return err
	}
	ttl := time.Until(until)
	if ttl <= 0 {
		return nil
	}
	key := []byte(eventWatchTable + "/" + url.PathEscape(uid))
	return w.kv.Commit(ctx, Op{Key: key, Value: strconv.AppendInt(nil, until.UnixMilli(), 10), TTL: ttl})
}

// WatchMarks returns every mark still running, by user.
func (w *Webhooks) WatchMarks() (map[string]time.Time, error) {
	out := map[string]time.Time{}
	prefix := []byte(eventWatchTable + "/")
	err := w.kv.Scan(prefix, func(key, value []byte) error {
		uid, err := url.PathUnescape(string(key[len(prefix):]))
		if err != nil {
			return nil // not a key this version writes
		}
		ms, err := strconv.ParseInt(string(value), 10, 64)
		if err != nil {
			return nil
		}
		out[uid] = time.UnixMilli(ms)
		return nil
	})
	return out, err
}
