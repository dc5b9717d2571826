package engine

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/gateway/gateway/domain"
)

// Publishing: events made ready for their subscriptions, committed, then handed on.

// Publish commits ev to its user's journal (and the broker outbox) and to the queue of every
// subscription of uid that takes its type, in one commit, then wakes their actors. It returns
// once the event is durable; it never waits for a delivery. Calls for one user that must arrive
// in order (a message's queued, sent, delivered) must be made one after the other.
func (e *Events) Publish(ctx context.Context, uid string, ev domain.Event) error {
	p, err := e.Prepare(uid, ev)
	if err != nil {
		return err
	}
	if err := e.Commit(ctx, []PreparedEvent{p}); err != nil {
		e.abandon(p)
		return fmt.Errorf("%w: queue event: %w", domain.ErrUnavailable, err)
	}
	e.Committed(p)
	return nil
}

// PreparedEvent is an event made ready for a batch commit (Prepare, then Commit).
type PreparedEvent struct {
	deliveries []domain.WebhookDelivery
	uid        string
	live       *LiveEvent         // for the user's open streams (nil: none)
	rec        domain.EventRecord // the event, numbered when journaled or forwarded
	journal    bool               // rec goes to the user's journal
	forward    bool               // rec goes to the broker outbox
	// final is a message's failed or cancelled status, kept in the event's commit (nil: not
	// one): a boot that finds the message pending settles it so (messages_told.go).
	final *domain.FinalStatus
}

// Len is how many subscriptions take the event.
func (p PreparedEvent) Len() int { return len(p.deliveries) }

// records appends p's record to journaled and forwarded where it goes (the journal, the broker).
func (p PreparedEvent) records(journaled, forwarded []domain.EventRecord) ([]domain.EventRecord, []domain.EventRecord) {
	if p.journal {
		journaled = append(journaled, p.rec)
	}
	if p.forward {
		forwarded = append(forwarded, p.rec)
	}
	return journaled, forwarded
}

// Commit writes prepared events durably, in order (in as few commits as the store takes). A
// batch that keeps a failed or cancelled status (final) and takes more writes than one commit
// goes in commits of whole events, one after the other: the store's own split (persist:
// AppendEvents) could leave the status and its event in two commits, and a kill -9 between
// them kept the status alone (the boot settles the message failed, its event lost for good) or
// the event alone (the boot sends again a message told failed).
func (e *Events) Commit(ctx context.Context, ps []PreparedEvent) error {
	total, finals := 0, false
	for _, p := range ps {
		total += p.writes()
		finals = finals || p.final != nil
	}
	for finals && total > domain.MaxCommitWrites {
		n, w := 1, ps[0].writes()
		for n < len(ps) && w+ps[n].writes() <= domain.MaxCommitWrites {
			w += ps[n].writes()
			n++
		}
		if err := e.commit(ctx, ps[:n]); err != nil {
			return err
		}
		ps, total = ps[n:], total-w
	}
	return e.commit(ctx, ps)
}

// writes is how many writes p's commit makes (persist.Webhooks.AppendEvents): one for each
// delivery, its journal record, its broker outbox record, and its final status.
func (p PreparedEvent) writes() int {
	n := len(p.deliveries)
	for _, b := range []bool{p.journal, p.forward, p.final != nil} {
		if b {
			n++
		}
	}
	return n
}

// commit writes prepared events durably in one call to the store.
func (e *Events) commit(ctx context.Context, ps []PreparedEvent) error {
	var ds []domain.WebhookDelivery
	var journaled, forwarded []domain.EventRecord
	var finals []domain.FinalStatus
	for _, p := range ps {
		ds = append(ds, p.deliveries...)
		journaled, forwarded = p.records(journaled, forwarded)
		if p.final != nil {
			finals = append(finals, *p.final)
		}
	}
	if len(ds) == 0 && len(journaled) == 0 && len(forwarded) == 0 && len(finals) == 0 {
		return nil
	}
	return e.cfg.Store.AppendEvents(ctx, ds, journaled, forwarded, finals...)
}

// Committed hands a prepared event whose commit returned to its subscriptions' actors, the
// user's open streams and the broker's forwarder.
func (e *Events) Committed(p PreparedEvent) {
	if len(p.deliveries) > 0 {
		e.kick(p.deliveries)
	}
	e.sendLive(p.uid, p.live)
	if p.forward {
		e.fwd.handoff(p.rec)
	}
}

// abandon gives up a prepared event whose commit failed: it was never written.
func (e *Events) abandon(p PreparedEvent) {
	if p.forward {
		e.fwd.addPending(-1)
	}
}

func (e *Events) sendLive(uid string, ev *LiveEvent) {
	switch {
	case ev == nil:
	case e.cfg.Live != nil:
		e.cfg.Live.Send(uid, *ev)
	default:
		e.live.send(uid, *ev)
	}
}

// listening tells whether uid may have an open stream (EventsConfig.Live, else this facet's).
func (e *Events) listening(uid string) bool {
	if e.cfg.Live != nil {
		return e.cfg.Live.Listening(uid)
	}
	return e.live.listening(uid)
}

// ReceiveMessage keeps an incoming message (7 days) and publishes its message.received event,
// in one commit. A message kept already under its id (the network sent it again) is neither
// kept nor published again: nil.
func (e *Events) ReceiveMessage(ctx context.Context, m domain.InboundMessage) error {
	if m.UserID == "" || m.ID == "" {
		return fmt.Errorf("%w: an incoming message needs a user and an id", domain.ErrValidation)
	}
	if m.Timestamp.IsZero() {
		m.Timestamp = e.cfg.Clock.Now()
	}
	m.Timestamp = m.Timestamp.UTC().Truncate(time.Millisecond)
	if m.Kind == "" {
		m.Kind = m.Type // Type is Kind's older name: both are always set
	}
	if m.Type == "" {
		m.Type = m.Kind
	}
	p, err := e.Prepare(m.UserID, domain.Event{Type: domain.EventMessageReceived, At: m.Timestamp, Data: m})
	if err != nil {
		return err
	}
	journaled, forwarded := p.records(nil, nil)
	if err := e.cfg.Store.SaveInbound(ctx, m, p.deliveries, journaled, forwarded); err != nil {
		e.abandon(p)
		if errors.Is(err, domain.ErrRecordExists) {
			return nil
		}
		return fmt.Errorf("%w: keep incoming message: %w", domain.ErrUnavailable, err)
	}
	e.Committed(p)
	return nil
}

// envelope is the Standard Webhooks body.
type envelope struct {
	Type      domain.EventType `json:"type"`
	Timestamp string           `json:"timestamp"`
	Data      any              `json:"data"`
}

// Quiet tells whether nothing would take an event of uid now: no webhook subscription of
// the user's, no open stream, no journal kept for a stream's resume, no broker (the same test
// prepare makes; the publisher skips a message's status events on it).
func (e *Events) Quiet(uid string) bool {
	if e.fwd != nil || e.listening(uid) || e.watched(uid) {
		return false
	}
	if e.subs.Load() == 0 {
		return true // no subscription at all: no lock (Quiet runs for each of a message's events)
	}
	e.mu.RLock()
	n := len(e.byUser[uid])
	e.mu.RUnlock()
	return n == 0
}

// Prepare is Publish for a caller that commits many events at once (the publisher): it fixes
// the event's place in the journal and in every subscription's order; Commit then writes a
// batch of them, and Committed hands each on once it is durable (and must be called for every
// prepared event, committed or not). An event prepared and never committed is simply not sent.
// It builds ev's deliveries, one per subscription of uid that takes it, the event for uid's
// open streams (when one is open), and its record, numbered, for uid's journal (when uid
// streamed lately) and the broker (when there is one). An event nobody takes costs no encoding.
func (e *Events) Prepare(uid string, ev domain.Event) (PreparedEvent, error) {
	if !ev.Type.Valid() {
		return PreparedEvent{}, fmt.Errorf("%w: unknown event type %q", domain.ErrValidation, ev.Type)
	}
	if uid == "" {
		return PreparedEvent{}, fmt.Errorf("%w: an event needs a user", domain.ErrValidation)
	}
	p := PreparedEvent{uid: uid, journal: e.watched(uid)}
	listening := e.listening(uid)
	e.mu.RLock()
	var subs []string
	var meta map[string]bool // the subscriptions of format meta among subs
	for _, s := range e.byUser[uid] {
		if s.Wants(ev.Type) {
			subs = append(subs, s.ID)
			if s.Format == domain.WebhookFormatMeta {
				if meta == nil {
					meta = map[string]bool{}
				}
				meta[s.ID] = true
			}
		}
	}
	e.mu.RUnlock()
	if len(subs) == 0 && !listening && !p.journal && e.fwd == nil {
		return p, nil
	}
	now := e.cfg.Clock.Now().UTC()
	if ev.At.IsZero() {
		ev.At = now
	}
	body, err := json.Marshal(envelope{Type: ev.Type, Timestamp: ev.At.UTC().Format(timestampMillis), Data: ev.Data})
	if err != nil {
		return PreparedEvent{}, fmt.Errorf("%w: event data: %w", domain.ErrValidation, err)
	}
	p.forward = e.fwd != nil && e.fwd.admit()
	p.rec = domain.EventRecord{UserID: uid, Type: ev.Type, Body: body}
	if p.journal || p.forward {
		if p.rec.Seq, err = e.journal.next(); err != nil {
			e.abandon(p)
			return PreparedEvent{}, err
		}
	}
	if ev.ID == "" {
		ev.ID = newEventID(p.rec.Seq)
	}
	p.rec.ID = ev.ID
	st, once := onceStatus(&ev)
	if once && p.forward {
		p.rec.DedupeID = statusDedupeID(uid, st)
	}
	if once && (st.Status == domain.MsgFailed || st.Status == domain.MsgCancelled) {
		p.final = &domain.FinalStatus{UserID: uid, MessageID: st.MessageID, Status: st.Status, At: st.At, Code: st.Code, Error: st.Error}
	}
	if listening || p.journal {
		// A journaled user's stream may open between now and the commit, and resume from the
		// journal before the commit lands: Committed hands the event to whatever stream is
		// open by then. A cluster's sink publishes it (the node where such a stream opens
		// may not have told this owner yet): for the users who streamed in the journal's
		// span only, whose events the journal writes anyway.
		p.live = &LiveEvent{ID: ev.ID, Type: ev.Type, Body: body}
	}
	var metaBody []byte
	if len(meta) > 0 {
		b, ok, err := e.metaBody(ev.Type, ev.ID, body)
		if err != nil {
			return PreparedEvent{}, fmt.Errorf("%w: event data: %w", domain.ErrValidation, err)
		}
		if !ok {
			subs = slices.DeleteFunc(subs, func(id string) bool { return meta[id] })
		}
		metaBody = b
	}
	p.deliveries = make([]domain.WebhookDelivery, len(subs))
	for i, id := range subs {
		p.deliveries[i] = domain.WebhookDelivery{
			ID: deliveryID(id, st, once), SubscriptionID: id, Seq: e.seq.Add(1), EventID: ev.ID,
			Type: ev.Type, CreatedAt: now, Body: body,
		}
		if meta[id] {
			p.deliveries[i].Body = metaBody
		}
	}
	return p, nil
}

// deliveryID is the webhook-id of subscription sub's delivery of an event: random, but for a
// message's status that its record follows (once, onceStatus). Such a record is written only
// once the event is committed, so a kill -9 between the two has the boot send the message again
// and publish its status again: the delivery then has the webhook-id of the one before, which a
// receiver dedupes (Standard Webhooks' idempotency key).
func deliveryID(sub string, st domain.MessageStatusData, once bool) string {
	if !once {
		return "msg_" + randomID(10)
	}
	sum := statusDigest(sub, st)
	return "msg_" + lowerBase32.EncodeToString(sum[:10])
}

// onceStatus returns ev's message status when ev is one a message reaches at most once in its
// life and whose record follows the event: an outcome, a receipt, a late failure (sent,
// delivered, read, failed, cancelled). A queued event may come again for another reason
// (routed again, waiting for a contact), as may a scheduled one.
func onceStatus(ev *domain.Event) (domain.MessageStatusData, bool) {
	d, ok := ev.Data.(domain.MessageStatusData)
	if !ok || ev.Type != domain.EventMessageStatus || d.MessageID == "" ||
		d.Status == domain.MsgQueued || d.Status == domain.MsgScheduled {
		return domain.MessageStatusData{}, false
	}
	return d, true
}

// statusDedupeID is the broker's Nats-Msg-Id of user uid's message reaching status st
// (onceStatus): the same each time the event is published, so JetStream's duplicate window
// (natsevents.Duplicates) drops the copy a boot's resend publishes after a kill -9 between the
// event's commit and the message's record. The user is part of it: a stream's dedupe spans
// every user, and a caller may choose a message's id.
func statusDedupeID(uid string, st domain.MessageStatusData) string {
	sum := statusDigest(uid, st)
	return "sts_" + lowerBase32.EncodeToString(sum[:15])
}

// statusDigest is the SHA-256 of a message reaching status st.Status within scope (a
// subscription, a user): what the ids a status keeps across its publications are made of. The
// message is its id and its acceptance time (st.Accepted: the same when a boot's resend
// publishes the status again, read back from the outbox): a caller may choose the id, and use
// it again once the old message's record is gone, and a receiver deduping by those ids would
// drop the new message's statuses.
func statusDigest(scope string, st domain.MessageStatusData) [sha256.Size]byte {
	var buf [192]byte
	b := append(append(append(append(append(buf[:0], "message.status\x00"...), scope...), 0), st.MessageID...), 0)
	b = binary.BigEndian.AppendUint64(append(append(b, st.Status...), 0), uint64(st.Accepted))
	return sha256.Sum256(b)
}

// timestampMillis is RFC 3339 UTC with milliseconds (DESIGN.md section 4).
const timestampMillis = "2006-01-02T15:04:05.000Z07:00"
