package engine

// Events out (DESIGN.md section 10): webhook subscriptions per user, the publisher the rest of
// the core calls when something happens, and the incoming messages kept for the v1 listing.
//
// Concurrency: Events owns the subscription index (by user and by id) and the actor registry,
// both behind mu (never held while talking to an actor or the store). Each subscription's
// deliveries are owned by its actor (actors/webhook).

import (
	"context"
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anthdm/hollywood/actor"
	json "github.com/goccy/go-json"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gateway/gateway/actors/webhook"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/media"
	"github.com/gateway/gateway/persist"
)

// Events-out errors (to move into domain/errors.go with their codes).
var (
	// ErrWebhookNotFound: no such subscription, or not the caller's (404 webhook_not_found).
	ErrWebhookNotFound = domain.ErrWebhookNotFound
	// ErrWebhookURL: not an absolute http(s) URL with a host that resolves (400 invalid_webhook_url).
	ErrWebhookURL = errors.New("invalid webhook URL")
	// ErrWebhookBlocked: the URL leads to a private, loopback or link-local address and
	// --webhook-allow-private is off (400 webhook_url_blocked).
	ErrWebhookBlocked = errors.New("webhook URL not allowed")
	// ErrWebhookLimit: the user has MaxSubscriptions already (409 webhook_limit).
	ErrWebhookLimit = errors.New("too many webhook subscriptions")
)

// EventStore is what the events facet needs from storage (persist.Webhooks).
type EventStore interface {
	webhook.Store
	PutSubscription(ctx context.Context, s domain.WebhookSubscription) error
	ListSubscriptions() ([]domain.WebhookSubscription, error)
	DeleteSubscription(ctx context.Context, id string) error
	Enqueue(ctx context.Context, ds []domain.WebhookDelivery) error
	EnqueueOps(ds []domain.WebhookDelivery) ([]persist.Op, error)
	QueueHeads() (pending map[string]int, maxSeq uint64, err error)
	Attempts(subID string) ([]domain.WebhookAttempt, error)
	SaveInbound(ctx context.Context, m domain.InboundMessage, ds []domain.WebhookDelivery) error
	ListInbound(userID string, since time.Time, limit int) ([]domain.InboundMessage, error)
}

// URLGuard checks a webhook URL before it is stored (media.Guard). The poster's dialer checks
// every connection again.
type URLGuard interface {
	CheckURL(ctx context.Context, r *net.Resolver, raw string) (*url.URL, error)
}

// Interface guards.
var (
	_ EventStore    = (*persist.Webhooks)(nil)
	_ URLGuard      = media.Guard{}
	_ webhook.Store = (*persist.Webhooks)(nil)
)

// EventsConfig is what the events facet is built from.
type EventsConfig struct {
	Store  EventStore
	Actors *actor.Engine
	Log    *slog.Logger
	// Metrics receives the facet's metrics (nil: not exported).
	Metrics prometheus.Registerer
	// Poster sends deliveries: webhook.NewHTTPPoster(media.Guard{...}.Dialer(...), ...).
	Poster webhook.Poster
	Guard  URLGuard
	// Clock is real time when nil (tests pass a fake one).
	Clock  webhook.Clock
	Policy webhook.Policy
	// MaxSubscriptions per user (default 10).
	MaxSubscriptions int
	// Secrets seals signing secrets at rest (NewSecretBox, with the key that seals store
	// credentials); nil keeps them in clear (tests).
	Secrets SecretBox
}

// SecretBox seals secrets at rest and opens them (webhook.Secrets is its opening half).
type SecretBox interface {
	Seal(plain string) (string, error)
	Open(stored string) (string, error)
}

// NewSecretBox seals with the store credentials' sealer (the same key and key file). A secret
// stored in clear (whsec_...) opens as itself.
func NewSecretBox(s *persist.Sealer) SecretBox { return secretBox{s} }

type secretBox struct{ s *persist.Sealer }

func (b secretBox) Seal(plain string) (string, error) { return b.s.Seal(plain) }

func (b secretBox) Open(stored string) (string, error) {
	if strings.HasPrefix(stored, "whsec_") {
		return stored, nil
	}
	return b.s.Open(stored)
}

// Events is the events-out facet: subscriptions, publishing, incoming messages.
type Events struct {
	cfg     EventsConfig
	log     *slog.Logger
	seq     atomic.Uint64 // the last delivery sequence number given out
	workers sync.WaitGroup
	metrics *eventMetrics

	mu     sync.RWMutex
	byUser map[string][]domain.WebhookSubscription
	byID   map[string]domain.WebhookSubscription
	pids   map[string]*actor.PID
}

// NewEvents builds the facet; Boot resumes the deliveries the store holds.
func NewEvents(cfg EventsConfig) (*Events, error) {
	if cfg.Store == nil || cfg.Actors == nil || cfg.Poster == nil || cfg.Guard == nil {
		return nil, errors.New("engine: events need a store, an actor engine, a poster and a URL guard")
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.MaxSubscriptions <= 0 {
		cfg.MaxSubscriptions = 10
	}
	e := &Events{
		cfg: cfg, log: cfg.Log,
		byUser: map[string][]domain.WebhookSubscription{}, byID: map[string]domain.WebhookSubscription{},
		pids: map[string]*actor.PID{},
	}
	e.seq.Store(uint64(time.Now().UnixNano()))
	var err error
	if e.metrics, err = newEventMetrics(cfg.Metrics); err != nil {
		return nil, err
	}
	return e, nil
}

// Boot loads the subscriptions and restarts delivery of every queued event (DESIGN.md section 3,
// flow 4: "event deliveries resumed"). Queues left by a subscription deleted part-way are removed.
func (e *Events) Boot(ctx context.Context) error {
	subs, err := e.cfg.Store.ListSubscriptions()
	if err != nil {
		return fmt.Errorf("engine: load webhook subscriptions: %w", err)
	}
	e.mu.Lock()
	for _, s := range subs {
		s.Secret = "" // the actors read it from the store and open it
		e.index(s)
	}
	e.mu.Unlock()
	heads, maxSeq, err := e.cfg.Store.QueueHeads()
	if err != nil {
		return fmt.Errorf("engine: load webhook queues: %w", err)
	}
	// New deliveries are numbered above everything queued, whatever the clock did meanwhile.
	if cur := e.seq.Load(); maxSeq >= cur {
		e.seq.Store(maxSeq)
	}
	pending := 0
	for id, n := range heads {
		if _, ok := e.subscription(id); !ok {
			if err := e.cfg.Store.PurgeQueue(ctx, id); err != nil {
				return fmt.Errorf("engine: remove the queue of deleted subscription %q: %w", id, err)
			}
			continue
		}
		pending += n
		e.actor(id) // it loads its queue from the store
	}
	e.metrics.pending.Add(float64(pending))
	e.log.Info("events booted", "subscriptions", len(subs), "pending_deliveries", pending, "resumed", len(heads))
	return nil
}

// Stop stops every subscription actor; each commits what it recorded. It returns when they and
// their workers are done, or when ctx ends (an attempt in flight takes at most webhook.Timeout;
// what it did not record is sent again after the restart, under the same webhook-id).
func (e *Events) Stop(ctx context.Context) {
	e.mu.Lock()
	pids := make([]*actor.PID, 0, len(e.pids))
	for _, pid := range e.pids {
		pids = append(pids, pid)
	}
	e.pids = map[string]*actor.PID{}
	e.mu.Unlock()
	var wg sync.WaitGroup
	for _, pid := range pids {
		done := e.cfg.Actors.Poison(pid)
		wg.Go(func() { <-done.Done() })
	}
	waitCtx(ctx, &wg)
	waitCtx(ctx, &e.workers)
}

// Subscribe creates a subscription of uid to types at rawURL. The returned record carries the
// secret: the only time it is shown.
func (e *Events) Subscribe(ctx context.Context, uid, rawURL string, types []domain.EventType) (domain.WebhookSubscription, error) {
	if uid == "" {
		return domain.WebhookSubscription{}, fmt.Errorf("%w: no user", ErrValidation)
	}
	if len(rawURL) > 2048 {
		return domain.WebhookSubscription{}, fmt.Errorf("%w: longer than 2048 bytes", ErrWebhookURL)
	}
	if len(types) == 0 {
		return domain.WebhookSubscription{}, fmt.Errorf("%w: events must name at least one event type", ErrValidation)
	}
	var events []domain.EventType
	for _, t := range types {
		if !t.Valid() {
			return domain.WebhookSubscription{}, fmt.Errorf("%w: unknown event type %q (one of %v)", ErrValidation, t, domain.EventTypes())
		}
		if !slices.Contains(events, t) {
			events = append(events, t)
		}
	}
	checkCtx, cancel := context.WithTimeout(ctx, 5*time.Second) // the host's DNS answers, or not
	u, err := e.cfg.Guard.CheckURL(checkCtx, nil, rawURL)
	cancel()
	switch {
	case errors.Is(err, media.ErrBlocked):
		return domain.WebhookSubscription{}, fmt.Errorf("%w: %v", ErrWebhookBlocked, err)
	case err != nil:
		return domain.WebhookSubscription{}, fmt.Errorf("%w: %v", ErrWebhookURL, err)
	}
	e.mu.RLock()
	n := len(e.byUser[uid])
	e.mu.RUnlock()
	if n >= e.cfg.MaxSubscriptions {
		return domain.WebhookSubscription{}, fmt.Errorf("%w: at most %d per user", ErrWebhookLimit, e.cfg.MaxSubscriptions)
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		return domain.WebhookSubscription{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	s := domain.WebhookSubscription{
		ID: "wh_" + randomID(10), UserID: uid, URL: u.String(), Events: events,
		CreatedAt: e.cfg.Clock.Now().UTC().Truncate(time.Millisecond),
	}
	stored := s
	if stored.Secret, err = e.seal(secret); err != nil {
		return domain.WebhookSubscription{}, fmt.Errorf("%w: seal the secret: %v", ErrUnavailable, err)
	}
	if err := e.cfg.Store.PutSubscription(ctx, stored); err != nil {
		return domain.WebhookSubscription{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	e.mu.Lock()
	e.index(s) // the index never holds a secret
	e.mu.Unlock()
	s.Secret = secret
	return s, nil
}

func (e *Events) seal(secret string) (string, error) {
	if e.cfg.Secrets == nil {
		return secret, nil
	}
	return e.cfg.Secrets.Seal(secret)
}

// List returns uid's subscriptions, oldest first, without their secrets.
func (e *Events) List(uid string) []domain.WebhookSubscription {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return slices.Clone(e.byUser[uid])
}

// Delete removes uid's subscription id: nothing more is sent to it, and its queue is dropped.
func (e *Events) Delete(ctx context.Context, uid, id string) error {
	e.mu.Lock()
	s, ok := e.byID[id]
	if !ok || s.UserID != uid {
		e.mu.Unlock()
		return ErrWebhookNotFound
	}
	e.unindex(s)
	pid := e.pids[id]
	delete(e.pids, id)
	e.mu.Unlock()
	if pid != nil {
		select {
		case <-e.cfg.Actors.Poison(pid).Done():
		case <-ctx.Done():
		}
	}
	pending, _ := e.cfg.Store.Pending(id)
	if err := e.cfg.Store.DeleteSubscription(ctx, id); err != nil && !errors.Is(err, domain.ErrWebhookNotFound) {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	e.metrics.pending.Sub(float64(len(pending)))
	return nil
}

// Deliveries returns the recent attempts of uid's subscription id, newest first.
func (e *Events) Deliveries(uid, id string) ([]domain.WebhookAttempt, error) {
	if s, ok := e.subscription(id); !ok || s.UserID != uid {
		return nil, ErrWebhookNotFound
	}
	as, err := e.cfg.Store.Attempts(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return as, nil
}

// Subscription returns uid's subscription id without its secret.
func (e *Events) Subscription(uid, id string) (domain.WebhookSubscription, error) {
	s, ok := e.subscription(id)
	if !ok || s.UserID != uid {
		return domain.WebhookSubscription{}, ErrWebhookNotFound
	}
	return s, nil
}

// Publish commits ev to the queue of every subscription of uid that takes its type, in one
// commit, then wakes their actors. It returns once the event is durable (nil at once when no
// subscription wants it); it never waits for a delivery. Calls for one user that must arrive in
// order (a message's queued, sent, delivered) must be made one after the other.
func (e *Events) Publish(ctx context.Context, uid string, ev domain.Event) error {
	ds, err := e.deliveries(uid, ev)
	if err != nil || len(ds) == 0 {
		return err
	}
	if err := e.cfg.Store.Enqueue(ctx, ds); err != nil {
		return fmt.Errorf("%w: queue event: %v", ErrUnavailable, err)
	}
	e.kick(ds)
	return nil
}

// PreparedEvent is an event made ready for the caller's own commit (Prepare).
type PreparedEvent struct {
	deliveries []domain.WebhookDelivery
	ops        []persist.Op
}

// Ops are the writes that queue the event; empty when no subscription wants it.
func (p PreparedEvent) Ops() []persist.Op { return p.ops }

// Prepare is Publish for a caller that commits the event together with the fact it reports
// (an outbox entry's new status and its message.status event in one group commit): add Ops to
// that commit, then call Committed once it is durable. An event prepared and never committed is
// simply not sent.
func (e *Events) Prepare(uid string, ev domain.Event) (PreparedEvent, error) {
	ds, err := e.deliveries(uid, ev)
	if err != nil || len(ds) == 0 {
		return PreparedEvent{}, err
	}
	ops, err := e.cfg.Store.EnqueueOps(ds)
	if err != nil {
		return PreparedEvent{}, fmt.Errorf("%w: %v", ErrValidation, err)
	}
	return PreparedEvent{deliveries: ds, ops: ops}, nil
}

// Committed hands a prepared event whose Ops were committed to its subscriptions' actors.
func (e *Events) Committed(p PreparedEvent) {
	if len(p.deliveries) > 0 {
		e.kick(p.deliveries)
	}
}

// ReceiveMessage keeps an incoming message (7 days) and publishes its message.received event,
// in one commit.
func (e *Events) ReceiveMessage(ctx context.Context, m domain.InboundMessage) error {
	if m.UserID == "" || m.ID == "" {
		return fmt.Errorf("%w: an incoming message needs a user and an id", ErrValidation)
	}
	if m.Timestamp.IsZero() {
		m.Timestamp = e.cfg.Clock.Now()
	}
	m.Timestamp = m.Timestamp.UTC().Truncate(time.Millisecond)
	ds, err := e.deliveries(m.UserID, domain.Event{Type: domain.EventMessageReceived, At: m.Timestamp, Data: m})
	if err != nil {
		return err
	}
	if err := e.cfg.Store.SaveInbound(ctx, m, ds); err != nil {
		return fmt.Errorf("%w: keep incoming message: %v", ErrUnavailable, err)
	}
	e.kick(ds)
	return nil
}

// Inbound lists uid's incoming messages at or after since, oldest first (at most limit; 0 = 1000).
func (e *Events) Inbound(uid string, since time.Time, limit int) ([]domain.InboundMessage, error) {
	if limit <= 0 || limit > 1000 {
		limit = 1000
	}
	out, err := e.cfg.Store.ListInbound(uid, since, limit)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	return out, nil
}

// EventsStats are the facet's figures (the metrics carry them too).
type EventsStats struct {
	Subscriptions int
	Pending       int64
}

// Stats reads the facet's figures.
func (e *Events) Stats() EventsStats {
	e.mu.RLock()
	n := len(e.byID)
	e.mu.RUnlock()
	return EventsStats{Subscriptions: n, Pending: int64(e.metrics.pendingN.Load())}
}

// envelope is the Standard Webhooks body.
type envelope struct {
	Type      domain.EventType `json:"type"`
	Timestamp string           `json:"timestamp"`
	Data      any              `json:"data"`
}

// deliveries builds one delivery of ev per subscription of uid that takes it (none: nil).
func (e *Events) deliveries(uid string, ev domain.Event) ([]domain.WebhookDelivery, error) {
	if !ev.Type.Valid() {
		return nil, fmt.Errorf("%w: unknown event type %q", ErrValidation, ev.Type)
	}
	e.mu.RLock()
	var subs []string
	for _, s := range e.byUser[uid] {
		if s.Wants(ev.Type) {
			subs = append(subs, s.ID)
		}
	}
	e.mu.RUnlock()
	if len(subs) == 0 {
		return nil, nil
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
		return nil, fmt.Errorf("%w: event data: %v", ErrValidation, err)
	}
	ds := make([]domain.WebhookDelivery, len(subs))
	for i, id := range subs {
		ds[i] = domain.WebhookDelivery{
			ID: "msg_" + randomID(10), SubscriptionID: id, Seq: e.seq.Add(1), EventID: ev.ID,
			Type: ev.Type, CreatedAt: now, Body: body,
		}
	}
	return ds, nil
}

// timestampMillis is RFC 3339 UTC with milliseconds (DESIGN.md section 4).
const timestampMillis = "2006-01-02T15:04:05.000Z07:00"

// kick tells each delivery's actor about it (spawning the actor if it is not running).
func (e *Events) kick(ds []domain.WebhookDelivery) {
	e.metrics.queued.Add(float64(len(ds)))
	e.metrics.pending.Add(float64(len(ds)))
	for _, d := range ds {
		if pid := e.actor(d.SubscriptionID); pid != nil {
			e.cfg.Actors.Send(pid, webhook.Enqueued{Deliveries: []domain.WebhookDelivery{d}})
		}
	}
}

// actor returns subscription id's actor, spawning it when it is not running (nil once the
// subscription is deleted).
func (e *Events) actor(id string) *actor.PID {
	e.mu.RLock()
	pid := e.pids[id]
	_, exists := e.byID[id]
	e.mu.RUnlock()
	if pid != nil || !exists {
		return pid
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if pid := e.pids[id]; pid != nil {
		return pid
	}
	if _, ok := e.byID[id]; !ok {
		return nil
	}
	deps := webhook.Deps{
		Store: e.cfg.Store, Poster: e.cfg.Poster, Clock: e.cfg.Clock, Observer: (*eventsObserver)(e),
		Workers: &e.workers, Log: e.log, Policy: e.cfg.Policy,
	}
	if e.cfg.Secrets != nil {
		deps.Secrets = e.cfg.Secrets
	}
	// The engine's spawn rules (DESIGN.md section 7): a small inbox, an unlimited restart budget.
	pid = e.cfg.Actors.Spawn(webhook.New(id, deps), "webhook",
		actor.WithID(id),
		actor.WithInboxSize(8),
		actor.WithMaxRestarts(math.MaxInt32),
		actor.WithRestartDelay(10*time.Millisecond),
	)
	e.pids[id] = pid
	return pid
}

func (e *Events) subscription(id string) (domain.WebhookSubscription, bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	s, ok := e.byID[id]
	return s, ok
}

// index adds or replaces s; e.mu is held.
func (e *Events) index(s domain.WebhookSubscription) {
	if _, ok := e.byID[s.ID]; ok {
		e.unindex(s)
	}
	e.byID[s.ID] = s
	list := append(e.byUser[s.UserID], s)
	slices.SortFunc(list, func(a, b domain.WebhookSubscription) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return cmpString(a.ID, b.ID)
	})
	e.byUser[s.UserID] = list
}

// unindex removes s; e.mu is held.
func (e *Events) unindex(s domain.WebhookSubscription) {
	delete(e.byID, s.ID)
	list := slices.DeleteFunc(slices.Clone(e.byUser[s.UserID]), func(x domain.WebhookSubscription) bool { return x.ID == s.ID })
	if len(list) == 0 {
		delete(e.byUser, s.UserID)
		return
	}
	e.byUser[s.UserID] = list
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// eventsObserver is the facet as the actors' webhook.Observer.
type eventsObserver Events

func (o *eventsObserver) Delivered(_ string, lag time.Duration) {
	o.metrics.delivered.Inc()
	o.metrics.pending.Dec()
	o.metrics.lag.Observe(lag.Seconds())
}

func (o *eventsObserver) Failed(string, int) { o.metrics.failed.Inc() }

func (o *eventsObserver) Dropped(_ string, n int) {
	o.metrics.dropped.Add(float64(n))
	o.metrics.pending.Sub(float64(n))
}

// Changed keeps the index's copy of a subscription's health (never its secret, which the index
// does not hold, nor its events, which only Subscribe sets).
func (o *eventsObserver) Changed(s domain.WebhookSubscription) {
	e := (*Events)(o)
	e.mu.Lock()
	defer e.mu.Unlock()
	cur, ok := e.byID[s.ID]
	if !ok {
		return
	}
	cur.FailingSince, cur.Disabled, cur.DisabledAt, cur.DisabledReason = s.FailingSince, s.Disabled, s.DisabledAt, s.DisabledReason
	e.index(cur)
}

// eventMetrics: queued, delivered, failed, dropped, pending and lag (DESIGN.md section 10).
type eventMetrics struct {
	queued, delivered, failed, dropped prometheus.Counter
	pending                            gauge
	pendingN                           *atomic.Int64
	lag                                prometheus.Histogram
}

// gauge is a prometheus gauge whose value is also readable (for Stats).
type gauge struct {
	g prometheus.Gauge
	n *atomic.Int64
}

func (g gauge) Add(v float64) { g.g.Add(v); g.n.Add(int64(v)) }
func (g gauge) Sub(v float64) { g.Add(-v) }
func (g gauge) Dec()          { g.Add(-1) }

func newEventMetrics(reg prometheus.Registerer) (*eventMetrics, error) {
	n := new(atomic.Int64)
	m := &eventMetrics{
		queued: prometheus.NewCounter(prometheus.CounterOpts{Name: "gateway_webhook_events_queued_total",
			Help: "Webhook deliveries committed to a subscription's queue (one per event and subscription)."}),
		delivered: prometheus.NewCounter(prometheus.CounterOpts{Name: "gateway_webhook_deliveries_total",
			Help: "Webhook deliveries a receiver accepted (2xx)."}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "gateway_webhook_attempts_failed_total",
			Help: "Webhook delivery attempts that failed (non-2xx, timeout, connection); each is retried."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "gateway_webhook_deliveries_dropped_total",
			Help: "Webhook deliveries dropped because their subscription was disabled after 24 h of failures."}),
		pending: gauge{g: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gateway_webhook_pending",
			Help: "Webhook deliveries queued and not yet accepted by their receiver."}), n: n},
		pendingN: n,
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gateway_webhook_delivery_lag_seconds",
			Help:    "Time from an event's commit to its receiver's 2xx.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 30, 60, 300, 1800, 3600, 6 * 3600, 24 * 3600}}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.queued, m.delivered, m.failed, m.dropped, m.pending.g, m.lag} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("engine: events metrics: %w", err)
		}
	}
	return m, nil
}

// realClock is webhook.Clock on the system clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) webhook.Timer { return time.AfterFunc(d, f) }

// randomID returns n random bytes, lower-case base32 without padding (2n*8/5 characters).
func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand panics rather than return an error)
	return lowerBase32.EncodeToString(b)
}

var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)
