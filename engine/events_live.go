package engine

// Live events (DESIGN.md section 15): the same events the webhooks carry, handed to the
// signed-in user's open streams (GET /api/client/events/stream) once they are committed. A
// stream is a view for a person watching: it is not durable, and a stream that falls behind is
// ended (the dashboard reconnects and reloads what it shows) rather than slowing the core.
// Also here: a subscription's test event and the redelivery of a recorded event.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gateway/gateway/domain"
)

// EventWebhookTest is the type of a subscription's test event (POST /api/client/webhooks/test):
// sent to that subscription only, never subscribed to.
const EventWebhookTest domain.EventType = "webhook.test"

// LiveEvent is one event for a stream: its id, type and the webhook body ({type, timestamp,
// data}) as the subscriptions receive it.
type LiveEvent struct {
	ID   string
	Type domain.EventType
	Body []byte
}

// liveBuffer is how many events a stream may have waiting before it is ended.
const liveBuffer = 256

// Listener is one open stream of a user's events. C is closed when the listener is closed or
// falls behind.
type Listener struct {
	C    <-chan LiveEvent
	c    chan LiveEvent
	uid  string
	hub  *liveHub
	once sync.Once
}

// Close stops the listener (idempotent).
func (l *Listener) Close() { l.hub.remove(l) }

type liveHub struct {
	n      atomic.Int64 // open listeners: the publishing path skips the hub when 0
	mu     sync.Mutex
	byUser map[string]map[*Listener]struct{}
	// first and last, when set, are told (under mu) when uid's first stream opens and its
	// last one ends: a cluster node subscribes to the user's events then (LiveHub).
	first, last func(uid string)
}

// Listen opens a stream of uid's events; Close it when done. From now on (and for the
// journal's retention after the stream could have ended) uid's events are journaled, so the
// stream can resume.
func (e *Events) Listen(uid string) *Listener {
	e.watch(uid)
	return e.live.listen(uid)
}

func (h *liveHub) listen(uid string) *Listener {
	c := make(chan LiveEvent, liveBuffer)
	l := &Listener{C: c, c: c, uid: uid, hub: h}
	h.mu.Lock()
	if h.byUser == nil {
		h.byUser = map[string]map[*Listener]struct{}{}
	}
	if h.byUser[uid] == nil {
		h.byUser[uid] = map[*Listener]struct{}{}
		if h.first != nil {
			h.first(uid)
		}
	}
	h.byUser[uid][l] = struct{}{}
	h.n.Add(1)
	h.mu.Unlock()
	return l
}

func (h *liveHub) remove(l *Listener) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l.once.Do(func() {
		delete(h.byUser[l.uid], l)
		h.n.Add(-1)
		close(l.c)
	})
	h.gone(l.uid)
}

// gone forgets uid when it has no stream left (mu held).
func (h *liveHub) gone(uid string) {
	if ls, ok := h.byUser[uid]; ok && len(ls) == 0 {
		delete(h.byUser, uid)
		if h.last != nil {
			h.last(uid)
		}
	}
}

// listening tells whether uid has an open stream (cheap: the common case has none at all).
func (h *liveHub) listening(uid string) bool {
	if h.n.Load() == 0 {
		return false
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.byUser[uid]) > 0
}

// send hands ev to uid's streams; one whose buffer is full is ended.
func (h *liveHub) send(uid string, ev LiveEvent) {
	if h.n.Load() == 0 {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for l := range h.byUser[uid] {
		select {
		case l.c <- ev:
		default:
			l.once.Do(func() {
				delete(h.byUser[uid], l)
				h.n.Add(-1)
				close(l.c)
			})
		}
	}
	h.gone(uid)
}

// LiveSink is where the events facet hands the events of users' open streams, instead of its
// own streams: a cluster node publishes them on NATS, for whichever node holds the stream.
type LiveSink interface {
	// Listening tells whether uid may have an open stream (a sink that cannot tell says true).
	Listening(uid string) bool
	Send(uid string, ev LiveEvent)
}

// LiveHub is a set of users' open event streams fed from outside the events facet: a cluster
// node's, whose streams take the events every partition's owner publishes on NATS. first and
// last (each may be nil) are told when a user's first stream opens and its last ends.
type LiveHub struct{ h liveHub }

// NewLiveHub makes an empty hub.
func NewLiveHub(first, last func(uid string)) *LiveHub {
	return &LiveHub{h: liveHub{first: first, last: last}}
}

// Listen opens a stream of uid's events; Close it when done.
func (h *LiveHub) Listen(uid string) *Listener { return h.h.listen(uid) }

// Send hands ev to uid's open streams.
func (h *LiveHub) Send(uid string, ev LiveEvent) { h.h.send(uid, ev) }

// Close ends every stream.
func (h *LiveHub) Close() { h.h.closeAll() }

// closeAll ends every stream (shutdown).
func (h *liveHub) closeAll() {
	h.mu.Lock()
	var all []*Listener
	for _, ls := range h.byUser {
		for l := range ls {
			all = append(all, l)
		}
	}
	h.mu.Unlock()
	for _, l := range all {
		h.remove(l)
	}
}

// Test queues a signed webhook.test event for one of uid's subscriptions (and its live
// streams do not see it: it is about the receiver).
func (e *Events) Test(ctx context.Context, uid, subID string) (domain.WebhookDelivery, error) {
	s, err := e.Subscription(uid, subID)
	if err != nil {
		return domain.WebhookDelivery{}, err
	}
	if s.Disabled {
		return domain.WebhookDelivery{}, domain.ErrWebhookDisabled
	}
	now := e.cfg.Clock.Now().UTC()
	evID := "evt_" + randomID(10)
	body, err := json.Marshal(envelope{Type: EventWebhookTest, Timestamp: now.Format(timestampMillis),
		Data: map[string]string{"subscription": s.ID, "eventId": evID, "message": "A test event from the gateway's dashboard."}})
	if err != nil {
		return domain.WebhookDelivery{}, err
	}
	d := domain.WebhookDelivery{ID: "msg_" + randomID(10), SubscriptionID: s.ID, Seq: e.seq.Add(1), EventID: evID,
		Type: EventWebhookTest, CreatedAt: now, Body: body}
	return d, e.enqueue(ctx, d)
}

// Redeliver queues a recorded event again for one of uid's subscriptions: the same body and
// webhook-id (receivers dedupe by it), newly signed. Only events among the subscription's
// recent attempts can be sent again.
func (e *Events) Redeliver(ctx context.Context, uid, subID, eventID string) (domain.WebhookDelivery, error) {
	s, err := e.Subscription(uid, subID)
	if err != nil {
		return domain.WebhookDelivery{}, err
	}
	if s.Disabled {
		return domain.WebhookDelivery{}, domain.ErrWebhookDisabled
	}
	as, err := e.cfg.Store.Attempts(subID)
	if err != nil {
		return domain.WebhookDelivery{}, fmt.Errorf("%w: %w", domain.ErrUnavailable, err)
	}
	for _, a := range as {
		if a.EventID != eventID || len(a.Body) == 0 {
			continue
		}
		d := domain.WebhookDelivery{ID: a.ID, SubscriptionID: s.ID, Seq: e.seq.Add(1), EventID: a.EventID,
			Type: a.Type, CreatedAt: e.cfg.Clock.Now().UTC(), Body: a.Body}
		return d, e.enqueue(ctx, d)
	}
	return domain.WebhookDelivery{}, domain.ErrEventNotFound
}

func (e *Events) enqueue(ctx context.Context, d domain.WebhookDelivery) error {
	if err := e.cfg.Store.Enqueue(ctx, []domain.WebhookDelivery{d}); err != nil {
		return fmt.Errorf("%w: queue event: %w", domain.ErrUnavailable, err)
	}
	e.kick([]domain.WebhookDelivery{d})
	return nil
}
