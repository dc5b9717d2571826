package persist

// Events out (DESIGN.md section 10): webhook subscriptions, each subscription's durable
// delivery queue, its ring of recent attempts, and incoming messages kept 7 days.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/gateway/gateway/domain"
)

// ---- Key schema of the webhook stores (to move into schema.go) ----------------------------
//
//	webhook_sub/<subID>                          domain.WebhookSubscription (v1)
//	webhook_owner/<userID> NUL <subID>           empty: index by owner
//	webhook_q/<subID> NUL <seq: 16 hex digits>   domain.WebhookDelivery (v1): the queue, in order
//	webhook_try/<subID> NUL <slot: 2 digits>     domain.WebhookAttempt (v1): ring of the last
//	                                             RecentWebhookAttempts attempts
//	inbound/<userID> NUL <unix ms: 13 digits> NUL <msgID>
//	                                             domain.InboundMessage (v1), TTL 7 days: read
//	                                             only by MessageLog.AdoptInbound (incoming
//	                                             messages now live in the history, msg_log/)
//
// NUL ends a user or subscription id, so "u1" never matches the records of "u1x". Sequence
// numbers are fixed-width hex so key order is delivery order.
const (
	webhookSubTable     = "webhook_sub"
	webhookOwnerIndex   = "webhook_owner/"
	webhookQueueTable   = "webhook_q"
	webhookAttemptTable = "webhook_try"
	inboundTable        = "inbound"
	// RecentWebhookAttempts is how many attempts a subscription keeps for its deliveries list.
	RecentWebhookAttempts = 50
	// deleteBatch bounds the ops of one commit when a subscription's queue is removed.
	deleteBatch = 512
)

// ---- end of the webhook key schema -----------------------------------------------------------

// Webhooks is the typed store of events out. Safe for concurrent use; it keeps no state above
// the KV.
type Webhooks struct {
	kv       KV
	subs     *Table[domain.WebhookSubscription]
	queue    *Table[domain.WebhookDelivery]
	attempts *Table[domain.WebhookAttempt]
	log      *MessageLog
	journal  *Table[eventWire] // events_log.go
	outbox   *Table[eventWire]
}

// NewWebhooks returns the webhook stores on kv.
func NewWebhooks(kv KV) *Webhooks {
	return &Webhooks{
		kv:       kv,
		subs:     NewTable[domain.WebhookSubscription](kv, webhookSubTable, recordVersion1),
		queue:    NewTable[domain.WebhookDelivery](kv, webhookQueueTable, recordVersion1),
		attempts: NewTable[domain.WebhookAttempt](kv, webhookAttemptTable, recordVersion1),
		log:      NewMessageLog(kv),
		journal:  NewTable[eventWire](kv, eventLogTable, recordVersion1),
		outbox:   NewTable[eventWire](kv, eventOutTable, recordVersion1),
	}
}

func checkID(what, id string) error {
	if id == "" || strings.IndexByte(id, 0) >= 0 {
		return fmt.Errorf("%w: %s %q is empty or contains NUL", domain.ErrRecordInvalid, what, id)
	}
	return nil
}

// PutSubscription writes s and its owner index in one commit.
func (w *Webhooks) PutSubscription(ctx context.Context, s domain.WebhookSubscription) error {
	if err := checkID("subscription id", s.ID); err != nil {
		return err
	}
	if err := checkID("user id", s.UserID); err != nil {
		return err
	}
	put, err := w.subs.PutOp(s.ID, s)
	if err != nil {
		return err
	}
	return w.kv.Commit(ctx, put, Op{Key: webhookOwnerKey(s.UserID, s.ID), Value: []byte{}})
}

// GetSubscription returns subscription id, or an error matching both ErrNotFound and
// domain.ErrWebhookNotFound.
func (w *Webhooks) GetSubscription(id string) (domain.WebhookSubscription, error) {
	s, err := w.subs.Get(id)
	if errors.Is(err, domain.ErrRecordNotFound) {
		return s, fmt.Errorf("%w: %w", domain.ErrWebhookNotFound, err)
	}
	return s, err
}

// ListSubscriptions returns every subscription, by id (for boot).
func (w *Webhooks) ListSubscriptions() ([]domain.WebhookSubscription, error) {
	var out []domain.WebhookSubscription
	err := w.subs.Scan("", func(_ string, s domain.WebhookSubscription) error {
		out = append(out, s)
		return nil
	})
	return out, err
}

// ListSubscriptionsByOwner returns the subscriptions of userID, by createdAt then id.
func (w *Webhooks) ListSubscriptionsByOwner(userID string) ([]domain.WebhookSubscription, error) {
	if checkID("user id", userID) != nil {
		return nil, nil
	}
	prefix := []byte(webhookOwnerIndex + userID + "\x00")
	var ids []string
	if err := w.kv.Scan(prefix, func(key, _ []byte) error {
		ids = append(ids, string(key[len(prefix):]))
		return nil
	}); err != nil {
		return nil, err
	}
	out := make([]domain.WebhookSubscription, 0, len(ids))
	for _, id := range ids {
		s, err := w.subs.Get(id)
		if errors.Is(err, domain.ErrRecordNotFound) {
			continue // deleted between the index scan and this read
		}
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b domain.WebhookSubscription) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

// DeleteSubscription removes subscription id, its index, its attempts and its queue. The record
// and index go first, in one commit, so a crash part-way leaves only queue entries without a
// subscription, which PurgeQueue (or the next delete) removes.
func (w *Webhooks) DeleteSubscription(ctx context.Context, id string) error {
	s, err := w.GetSubscription(id)
	if err != nil {
		return err
	}
	ops := []Op{w.subs.DeleteOp(id), {Key: webhookOwnerKey(s.UserID, id), Delete: true}}
	for slot := range RecentWebhookAttempts {
		ops = append(ops, w.attempts.DeleteOp(attemptID(id, slot)))
	}
	if err := w.kv.Commit(ctx, ops...); err != nil {
		return err
	}
	return w.PurgeQueue(ctx, id)
}

// PurgeQueue removes every queued delivery of subscription subID, in bounded commits.
func (w *Webhooks) PurgeQueue(ctx context.Context, subID string) error {
	for {
		var ops []Op
		err := w.kv.Scan([]byte(webhookQueueTable+"/"+subID+"\x00"), func(key, _ []byte) error {
			ops = append(ops, Op{Key: slices.Clone(key), Delete: true})
			if len(ops) == deleteBatch {
				return errStopScan
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStopScan) {
			return err
		}
		if len(ops) == 0 {
			return nil
		}
		if err := w.kv.Commit(ctx, ops...); err != nil {
			return err
		}
	}
}

var errStopScan = errors.New("stop scan")

// EnqueueOps returns the writes that queue ds, for one commit with whatever else belongs to the
// same fact (an incoming message and its events).
func (w *Webhooks) EnqueueOps(ds []domain.WebhookDelivery) ([]Op, error) {
	ops := make([]Op, 0, len(ds))
	for _, d := range ds {
		if err := checkID("subscription id", d.SubscriptionID); err != nil {
			return nil, err
		}
		op, err := w.queue.PutOp(queueID(d.SubscriptionID, d.Seq), d)
		if err != nil {
			return nil, err
		}
		ops = append(ops, op)
	}
	return ops, nil
}

// Enqueue commits ds (events fanned out to their subscriptions), in commits of at most
// maxCommitOps deliveries made one after the other; a caller that gets an error retries them
// all (each write is idempotent).
func (w *Webhooks) Enqueue(ctx context.Context, ds []domain.WebhookDelivery) error {
	return w.AppendEvents(ctx, ds, nil, nil)
}

// maxCommitOps bounds one commit of many writes made one after the other.
const maxCommitOps = domain.MaxCommitWrites

// commitChunks commits ops in commits of at most maxCommitOps, one after the other.
func (w *Webhooks) commitChunks(ctx context.Context, ops []Op) error {
	for chunk := range slices.Chunk(ops, maxCommitOps) {
		if err := w.kv.Commit(ctx, chunk...); err != nil {
			return err
		}
	}
	return nil
}

// Pending returns the queued sequence numbers of subscription subID, in order.
func (w *Webhooks) Pending(subID string) ([]uint64, error) {
	var seqs []uint64
	prefix := []byte(webhookQueueTable + "/" + subID + "\x00")
	err := w.kv.Scan(prefix, func(key, _ []byte) error {
		seq, err := strconv.ParseUint(string(key[len(prefix):]), 16, 64)
		if err != nil {
			return fmt.Errorf("persist: webhook queue key %q: %w", key, err)
		}
		seqs = append(seqs, seq)
		return nil
	})
	return seqs, err
}

// QueueHeads returns, for every subscription with queued deliveries, how many it has, and the
// highest sequence number queued anywhere (0 when none): boot respawns those subscriptions and
// numbers new deliveries above it.
func (w *Webhooks) QueueHeads() (pending map[string]int, maxSeq uint64, err error) {
	pending = map[string]int{}
	prefix := []byte(webhookQueueTable + "/")
	err = w.kv.Scan(prefix, func(key, _ []byte) error {
		rest := string(key[len(prefix):])
		i := strings.IndexByte(rest, 0)
		if i < 0 {
			return fmt.Errorf("persist: webhook queue key %q", key)
		}
		seq, err := strconv.ParseUint(rest[i+1:], 16, 64)
		if err != nil {
			return fmt.Errorf("persist: webhook queue key %q: %w", key, err)
		}
		pending[rest[:i]]++
		maxSeq = max(maxSeq, seq)
		return nil
	})
	return pending, maxSeq, err
}

// Delivery reads one queued delivery; found is false once it was removed.
func (w *Webhooks) Delivery(subID string, seq uint64) (d domain.WebhookDelivery, found bool, err error) {
	d, err = w.queue.Get(queueID(subID, seq))
	if errors.Is(err, domain.ErrRecordNotFound) {
		return d, false, nil
	}
	return d, err == nil, err
}

// DeliveriesFrom returns up to limit queued deliveries of subscription subID with a sequence
// number at or above from, in order, read in one snapshot. (One read per batch matters: a
// Badger read waits for the commits in flight, an fsync with --fsync batch.)
func (w *Webhooks) DeliveriesFrom(subID string, from uint64, limit int) ([]domain.WebhookDelivery, error) {
	var out []domain.WebhookDelivery
	prefix := []byte(webhookQueueTable + "/" + subID + "\x00")
	start := fmt.Appendf(slices.Clone(prefix), "%016x", from)
	fn := func(key, value []byte) error {
		var d domain.WebhookDelivery
		if _, err := Decode(value, recordVersion1, &d); err != nil {
			return fmt.Errorf("%s %q: %w", webhookQueueTable, key, err)
		}
		out = append(out, d)
		if len(out) == limit {
			return errStopScan
		}
		return nil
	}
	return out, stopped(scanFrom(w.kv, prefix, start, fn)) // delivered entries before start are not walked
}

// stopped is err, unless it is fn's errStopScan that ended a scan.
func stopped(err error) error {
	if errors.Is(err, errStopScan) {
		return nil
	}
	return err
}

// rangeScanner is a KV that can start a scan past the beginning of its prefix (Badger, Memory).
type rangeScanner interface {
	ScanFrom(prefix, start []byte, fn func(key, value []byte) error) error
}

// LastAttemptN is the highest WebhookAttempt.N recorded for subscription subID (0 for none).
func (w *Webhooks) LastAttemptN(subID string) (int64, error) {
	var n int64
	err := w.attempts.Scan(subID+"\x00", func(_ string, a domain.WebhookAttempt) error {
		n = max(n, a.N)
		return nil
	})
	return n, err
}

// RecordAttempt writes attempt a in its ring slot and, when delivered is true, removes the
// delivery seq from the queue, in one commit.
func (w *Webhooks) RecordAttempt(ctx context.Context, subID string, seq uint64, delivered bool, a domain.WebhookAttempt) error {
	put, err := w.attempts.PutOp(attemptID(subID, int(a.N%RecentWebhookAttempts)), a)
	if err != nil {
		return err
	}
	if !delivered {
		return w.kv.Commit(ctx, put)
	}
	return w.kv.Commit(ctx, put, w.queue.DeleteOp(queueID(subID, seq)))
}

// SaveProgress commits p for subscription subID.
func (w *Webhooks) SaveProgress(ctx context.Context, subID string, p domain.WebhookProgress) error {
	ops := make([]Op, 0, len(p.Attempts)+len(p.Delivered)+2)
	// Only the last ring's worth of attempts survives the commit anyway.
	attempts := p.Attempts[max(0, len(p.Attempts)-RecentWebhookAttempts):]
	for _, a := range attempts {
		op, err := w.attempts.PutOp(attemptID(subID, int(a.N%RecentWebhookAttempts)), a)
		if err != nil {
			return err
		}
		ops = append(ops, op)
	}
	for _, seq := range p.Delivered {
		ops = append(ops, w.queue.DeleteOp(queueID(subID, seq)))
	}
	if s := p.Subscription; s != nil {
		if s.ID != subID {
			return fmt.Errorf("%w: progress of %q carries subscription %q", domain.ErrRecordInvalid, subID, s.ID)
		}
		// A subscription deleted meanwhile is not brought back (the window between this read
		// and the commit is the only one left).
		if _, err := w.subs.Get(subID); err == nil {
			put, err := w.subs.PutOp(s.ID, *s)
			if err != nil {
				return err
			}
			ops = append(ops, put)
		} else if !errors.Is(err, domain.ErrRecordNotFound) {
			return err
		}
	}
	if len(ops) == 0 {
		return nil
	}
	return w.kv.Commit(ctx, ops...)
}

// Attempts returns the recent attempts of subscription subID, newest first.
func (w *Webhooks) Attempts(subID string) ([]domain.WebhookAttempt, error) {
	var out []domain.WebhookAttempt
	err := w.attempts.Scan(subID+"\x00", func(_ string, a domain.WebhookAttempt) error {
		out = append(out, a)
		return nil
	})
	slices.SortFunc(out, func(a, b domain.WebhookAttempt) int { return int(b.N - a.N) })
	return out, err
}

// SaveInbound commits incoming message m (its history entry, MessageLog), the deliveries of
// its message.received event and the event's records (as AppendEvents) in one commit: the
// message is listed if and only if its event is queued. A message the session kept already
// under its id (the network sent it again: Meta sends a webhook it got no 200 for again), or
// one kept under the user's key of before (MessageLog.InOps), is ErrExists, nothing written:
// its event is not queued twice. Another session of the user's getting the same message (a
// group both numbers are in) keeps and publishes its own copy.
//
// The first copy of an id also writes the user's key of before (pointing at that copy), so
// that a node of the previous release (a cluster's rolling upgrade), which checks only that
// key, does not keep again what the network sends again after a session moved to it; another
// session's copy is then refused by that key at first, and committed again without it once the
// key is read to point at another session's copy (a group message two numbers got: rare).
func (w *Webhooks) SaveInbound(ctx context.Context, m domain.InboundMessage, ds []domain.WebhookDelivery, journaled, forwarded []domain.EventRecord) error {
	in, err := w.log.InOps(m)
	if err != nil {
		return err
	}
	ops, err := w.recordOps(ds, journaled, forwarded)
	if err != nil {
		return err
	}
	idx, user := inboundIDKey(m.UserID, m.SessionID, m.ID), userInboundIDKey(m.UserID, m.ID)
	base := len(ops)
	ops = append(ops, IfAbsentOp(idx), IfAbsentOp(user), Op{Key: user, Value: in[1].Value, TTL: domain.InboundRetention})
	err = w.kv.Commit(ctx, append(ops, in...)...)
	if !errors.Is(err, domain.ErrRecordExists) {
		return err
	}
	other, rerr := w.anotherSessionsCopy(m, user)
	if rerr != nil {
		return rerr // not known to be kept: the network sends it again
	}
	if !other {
		return err
	}
	ops = append(ops[:base], IfAbsentOp(idx))
	return w.kv.Commit(ctx, append(ops, in...)...)
}

// anotherSessionsCopy tells whether the user's key of m's id points at another session's copy
// of m (written by this release: its history position ends with that session's id), rather
// than at a copy kept before the key was per session (one per user: m is kept already) or at
// this session's own.
func (w *Webhooks) anotherSessionsCopy(m domain.InboundMessage, user []byte) (bool, error) {
	pos, err := w.kv.Get(user)
	if errors.Is(err, domain.ErrRecordNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	const dirAt = 14 // the time's 13 digits and '/'
	sid, ok := bytes.CutPrefix(pos[min(len(pos), dirAt):], []byte(domain.DirIn+"/"+m.ID+"/"))
	return ok && copyOf(pos, m.ID, sid) && string(sid) != url.PathEscape(m.SessionID), nil
}

func webhookOwnerKey(userID, subID string) []byte {
	return []byte(webhookOwnerIndex + userID + "\x00" + subID)
}

func queueID(subID string, seq uint64) string {
	return fmt.Sprintf("%s\x00%016x", subID, seq)
}

func attemptID(subID string, slot int) string {
	return fmt.Sprintf("%s\x00%02d", subID, slot)
}
