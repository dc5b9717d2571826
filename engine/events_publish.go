package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/gateway/gateway/domain"
)

// Publishing: events made ready for their subscriptions, committed, then handed on.

// Publish commits ev to the queue of every subscription of uid that takes its type, in one
// commit, then wakes their actors. It returns once the event is durable (nil at once when no
// subscription wants it); it never waits for a delivery. Calls for one user that must arrive in
// order (a message's queued, sent, delivered) must be made one after the other.
func (e *Events) Publish(ctx context.Context, uid string, ev domain.Event) error {
	ds, live, err := e.deliveries(uid, ev)
	if err != nil {
		return err
	}
	if len(ds) > 0 {
		if err := e.cfg.Store.Enqueue(ctx, ds); err != nil {
			return fmt.Errorf("%w: queue event: %w", domain.ErrUnavailable, err)
		}
		e.kick(ds)
	}
	e.sendLive(uid, live)
	return nil
}

// PreparedEvent is an event made ready for a batch commit (Prepare, then Commit).
type PreparedEvent struct {
	deliveries []domain.WebhookDelivery
	uid        string
	live       *LiveEvent // for the user's open streams (nil: none)
}

// Len is how many subscriptions take the event (0: none; committing it writes nothing).
func (p PreparedEvent) Len() int { return len(p.deliveries) }

// Prepare is Publish for a caller that commits many events at once (the publisher): it fixes
// the event's place in every subscription's order; Commit then writes a batch of them, and
// Committed hands each on once it is durable. An event prepared and never committed is simply
// not sent.
func (e *Events) Prepare(uid string, ev domain.Event) (PreparedEvent, error) {
	ds, live, err := e.deliveries(uid, ev)
	if err != nil || (len(ds) == 0 && live == nil) {
		return PreparedEvent{}, err
	}
	return PreparedEvent{deliveries: ds, uid: uid, live: live}, nil
}

// Commit queues prepared events durably, in order (their deliveries in as few commits as the
// store takes).
func (e *Events) Commit(ctx context.Context, ps []PreparedEvent) error {
	var ds []domain.WebhookDelivery
	for _, p := range ps {
		ds = append(ds, p.deliveries...)
	}
	if len(ds) == 0 {
		return nil
	}
	return e.cfg.Store.Enqueue(ctx, ds)
}

// Committed hands a prepared event whose Ops were committed to its subscriptions' actors and
// the user's open streams.
func (e *Events) Committed(p PreparedEvent) {
	if len(p.deliveries) > 0 {
		e.kick(p.deliveries)
	}
	e.sendLive(p.uid, p.live)
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
// in one commit.
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
	ds, live, err := e.deliveries(m.UserID, domain.Event{Type: domain.EventMessageReceived, At: m.Timestamp, Data: m})
	if err != nil {
		return err
	}
	if err := e.cfg.Store.SaveInbound(ctx, m, ds); err != nil {
		return fmt.Errorf("%w: keep incoming message: %w", domain.ErrUnavailable, err)
	}
	if len(ds) > 0 {
		e.kick(ds)
	}
	e.sendLive(m.UserID, live)
	return nil
}

// envelope is the Standard Webhooks body.
type envelope struct {
	Type      domain.EventType `json:"type"`
	Timestamp string           `json:"timestamp"`
	Data      any              `json:"data"`
}

// deliveries builds one delivery of ev per subscription of uid that takes it (none: nil), and
// the event for uid's open streams (nil when none is open).
func (e *Events) deliveries(uid string, ev domain.Event) ([]domain.WebhookDelivery, *LiveEvent, error) {
	if !ev.Type.Valid() {
		return nil, nil, fmt.Errorf("%w: unknown event type %q", domain.ErrValidation, ev.Type)
	}
	e.mu.RLock()
	var subs []string
	for _, s := range e.byUser[uid] {
		if s.Wants(ev.Type) {
			subs = append(subs, s.ID)
		}
	}
	e.mu.RUnlock()
	listening := e.listening(uid)
	if len(subs) == 0 && !listening {
		return nil, nil, nil
	}
	now := e.cfg.Clock.Now().UTC()
	if ev.At.IsZero() {
		ev.At = now
	}
	if ev.ID == "" {
		ev.ID = "evt_" + randomID(10)
	}
	body, err := json.Marshal(envelope{Type: ev.Type, Timestamp: ev.At.UTC().Format(timestampMillis), Data: ev.Data})
	if err != nil {
		return nil, nil, fmt.Errorf("%w: event data: %w", domain.ErrValidation, err)
	}
	var live *LiveEvent
	if listening {
		live = &LiveEvent{ID: ev.ID, Type: ev.Type, Body: body}
	}
	ds := make([]domain.WebhookDelivery, len(subs))
	for i, id := range subs {
		ds[i] = domain.WebhookDelivery{
			ID: "msg_" + randomID(10), SubscriptionID: id, Seq: e.seq.Add(1), EventID: ev.ID,
			Type: ev.Type, CreatedAt: now, Body: body,
		}
	}
	return ds, live, nil
}

// timestampMillis is RFC 3339 UTC with milliseconds (DESIGN.md section 4).
const timestampMillis = "2006-01-02T15:04:05.000Z07:00"
