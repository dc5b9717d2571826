package engine

// Events out (DESIGN.md section 10): webhook subscriptions per user, the publisher the rest of
// the core calls when something happens, and the incoming messages kept for the v1 listing.
//
// Concurrency: Events owns the subscription index (by user and by id) and the actor registry,
// both behind mu (never held while talking to an actor or the store). Each subscription's
// deliveries are owned by its actor (actors/webhook).

import (
	"context"
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
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gateway/gateway/actors/webhook"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/media"
)

// EventStore is what the events facet needs from storage (persist.Webhooks).
type EventStore interface {
	webhook.Store
	PutSubscription(ctx context.Context, s domain.WebhookSubscription) error
	ListSubscriptions() ([]domain.WebhookSubscription, error)
	DeleteSubscription(ctx context.Context, id string) error
	Enqueue(ctx context.Context, ds []domain.WebhookDelivery) error
	QueueHeads() (pending map[string]int, maxSeq uint64, err error)
	Attempts(subID string) ([]domain.WebhookAttempt, error)
	// AppendEvents commits deliveries and events: logged in their users' journals (24 h),
	// forwarded there and in the broker outbox; finals, the failed or cancelled statuses among
	// them, in the same commit (FinalStatuses reads them back at boot).
	AppendEvents(ctx context.Context, ds []domain.WebhookDelivery, logged, forwarded []domain.EventRecord, finals ...domain.FinalStatus) error
	// FinalStatuses returns the failed or cancelled statuses kept for the messages among es
	// (a boot's pending messages), by message id.
	FinalStatuses(es []domain.OutboxEntry) (map[string]domain.FinalStatus, error)
	// SaveInbound keeps an incoming message, with its event as AppendEvents does, in one commit.
	SaveInbound(ctx context.Context, m domain.InboundMessage, ds []domain.WebhookDelivery, logged, forwarded []domain.EventRecord) error
	EventJournal
	// NextEventEpoch counts a boot durably (events_journal.go).
	NextEventEpoch(ctx context.Context) (uint64, error)
	// MarkWatched keeps uid's events journaled until until, durably; WatchMarks reads every
	// mark still running (boot).
	MarkWatched(ctx context.Context, uid string, until time.Time) error
	WatchMarks() (map[string]time.Time, error)
	// The broker outbox (events_forward.go): its events from from on, their removal once
	// published, how many wait.
	OutboxFrom(from uint64, limit int) ([]domain.EventRecord, error)
	DeleteOutbox(ctx context.Context, seqs []uint64) error
	OutboxLen() (int, error)
}

// URLGuard checks a webhook URL before it is stored (media.Guard). The poster's dialer checks
// every connection again.
type URLGuard interface {
	CheckURL(ctx context.Context, r *net.Resolver, raw string) (*url.URL, error)
}

// Interface guards.
var _ URLGuard = media.Guard{}

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
	// Live takes the events of users' open streams instead of this facet's own streams (a
	// cluster node publishes them on NATS); nil: Listen's streams get them.
	Live LiveSink
	// Watchers are the users streaming lately, shared by a cluster node's facets and kept by
	// the node (it hears of the streams every node opens); nil: this facet keeps its own, marked
	// by Listen and written down in the store.
	Watchers *Watchers
	// Forward publishes every committed event to a broker (--events-nats: natsevents), through
	// the outbox of events not yet published; nil: no broker.
	Forward EventForwarder
	// ForwardBacklog bounds the events waiting for the broker (DefaultForwardBacklog when 0);
	// past it, new events are not queued for it (gateway_events_nats_dropped_total).
	ForwardBacklog int
}

// SecretBox seals secrets at rest and opens them (webhook.Secrets is its opening half).
type SecretBox interface {
	Seal(plain string) (string, error)
	Open(stored string) (string, error)
}

// NewSecretBox seals with the store credentials' sealer (the same key and key file). A secret
// stored in clear (whsec_...) opens as itself.
func NewSecretBox(s Sealer) SecretBox { return secretBox{s} }

type secretBox struct{ s Sealer }

func (b secretBox) Seal(plain string) (string, error) { return b.s.Seal(plain) }

func (b secretBox) Open(stored string) (string, error) {
	if strings.HasPrefix(stored, "whsec_") {
		return stored, nil
	}
	return b.s.Open(stored)
}

// Events is the events-out facet: subscriptions, publishing, incoming messages.
type Events struct {
	cfg      EventsConfig
	log      *slog.Logger
	seq      atomic.Uint64 // the last delivery sequence number given out
	workers  sync.WaitGroup
	metrics  *eventMetrics
	live     liveHub        // the users' open event streams (events_live.go)
	journal  journal        // the events' numbers (events_journal.go)
	epochs   sync.WaitGroup // the journal's epoch count (Boot); Stop waits for it
	watchers *Watchers      // the users whose events the journal keeps
	fwd      *forwarder     // nil without a broker (events_forward.go)
	stopped  sync.Once      // Stop's work, done once

	mu      sync.RWMutex
	numbers atomic.Pointer[func(string) string] // a session's phone (events_meta.go)

	byUser map[string][]domain.WebhookSubscription
	byID   map[string]domain.WebhookSubscription
	subs   atomic.Int64 // len(byID), read without mu (Quiet: no lock while there are none)
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
	if cfg.Forward != nil {
		if e.fwd, err = newForwarder(e, cfg.Forward, cfg.ForwardBacklog, cfg.Metrics); err != nil {
			return nil, err
		}
	}
	if e.watchers = cfg.Watchers; e.watchers == nil {
		e.watchers = NewWatchers()
	}
	return e, nil
}

// Boot loads the subscriptions and restarts delivery of every queued event (DESIGN.md section 3,
// flow 4: "event deliveries resumed"), and the publishing of the events the broker has not
// acknowledged. Queues left by a subscription deleted part-way are removed.
//
// Its reads are made at once (the journal's, the subscriptions and their queues); the journal's
// epoch is counted beside the rest of the runtime's boot (Counted).
func (e *Events) Boot(ctx context.Context) error {
	var (
		reads            sync.WaitGroup
		subs             []domain.WebhookSubscription
		heads            map[string]int
		maxSeq           uint64
		subsErr, headErr error
	)
	reads.Go(func() { subs, subsErr = e.cfg.Store.ListSubscriptions() })
	reads.Go(func() { heads, maxSeq, headErr = e.cfg.Store.QueueHeads() })
	err := e.bootJournal(ctx)
	reads.Wait()
	if err != nil {
		return err
	}
	if subsErr != nil {
		return fmt.Errorf("engine: load webhook subscriptions: %w", subsErr)
	}
	if headErr != nil {
		return fmt.Errorf("engine: load webhook queues: %w", headErr)
	}
	e.mu.Lock()
	for _, s := range subs {
		s.Secret = "" // the actors read it from the store and open it
		e.index(s)
	}
	e.mu.Unlock()
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
	e.metrics.addPending(pending)
	if e.fwd != nil {
		e.fwd.start()
		e.log.Info("events booted", "subscriptions", len(subs), "pending_deliveries", pending, "resumed", len(heads),
			"waiting_for_broker", e.fwd.pending.Load())
		return nil
	}
	e.log.Info("events booted", "subscriptions", len(subs), "pending_deliveries", pending, "resumed", len(heads))
	return nil
}

// Stop stops every subscription actor; each commits what it recorded. It returns when they and
// their workers are done, or when ctx ends (an attempt in flight takes at most webhook.Timeout;
// what it did not record is sent again after the restart, under the same webhook-id). A second
// call (or one at the same time) returns once the first is done: idempotent.
func (e *Events) Stop(ctx context.Context) {
	e.stopped.Do(func() { e.stop(ctx) }) // a second call waits for the first, then returns
}

func (e *Events) stop(ctx context.Context) {
	e.live.closeAll()
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
	waitCtx(ctx, &e.epochs)
	e.metrics.release()
	if e.fwd != nil {
		e.fwd.stop(ctx)
	}
}

// Subscribe creates a subscription of uid to types at rawURL. The returned record carries the
// secret: the only time it is shown.
func (e *Events) Subscribe(ctx context.Context, uid, rawURL string, types []domain.EventType) (domain.WebhookSubscription, error) {
	return e.SubscribeAs(ctx, uid, rawURL, types, "")
}

// SubscribeAs is Subscribe with the deliveries' format: "" or "standard", or
// domain.WebhookFormatMeta (events_meta.go).
func (e *Events) SubscribeAs(ctx context.Context, uid, rawURL string, types []domain.EventType, format string) (domain.WebhookSubscription, error) {
	if format == "standard" {
		format = ""
	}
	if format != "" && format != domain.WebhookFormatMeta {
		return domain.WebhookSubscription{}, fmt.Errorf("%w: format is standard or meta", domain.ErrValidation)
	}
	if uid == "" {
		return domain.WebhookSubscription{}, fmt.Errorf("%w: no user", domain.ErrValidation)
	}
	if len(rawURL) > 2048 {
		return domain.WebhookSubscription{}, fmt.Errorf("%w: longer than 2048 bytes", domain.ErrWebhookURL)
	}
	if len(types) == 0 {
		return domain.WebhookSubscription{}, fmt.Errorf("%w: events must name at least one event type", domain.ErrValidation)
	}
	var events []domain.EventType
	for _, t := range types {
		if !t.Valid() {
			return domain.WebhookSubscription{}, fmt.Errorf("%w: unknown event type %q (one of %v)", domain.ErrValidation, t, domain.EventTypes())
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
		return domain.WebhookSubscription{}, fmt.Errorf("%w: %w", domain.ErrWebhookBlocked, err)
	case err != nil:
		return domain.WebhookSubscription{}, fmt.Errorf("%w: %w", domain.ErrWebhookURL, err)
	}
	e.mu.RLock()
	n := len(e.byUser[uid])
	e.mu.RUnlock()
	if n >= e.cfg.MaxSubscriptions {
		return domain.WebhookSubscription{}, fmt.Errorf("%w: at most %d per user", domain.ErrWebhookLimit, e.cfg.MaxSubscriptions)
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		return domain.WebhookSubscription{}, fmt.Errorf("%w: %w", domain.ErrUnavailable, err)
	}
	s := domain.WebhookSubscription{
		ID: "wh_" + randomID(10), UserID: uid, URL: u.String(), Events: events, Format: format,
		CreatedAt: e.cfg.Clock.Now().UTC().Truncate(time.Millisecond),
	}
	stored := s
	if stored.Secret, err = e.seal(secret); err != nil {
		return domain.WebhookSubscription{}, fmt.Errorf("%w: seal the secret: %w", domain.ErrUnavailable, err)
	}
	if err := e.cfg.Store.PutSubscription(ctx, stored); err != nil {
		return domain.WebhookSubscription{}, fmt.Errorf("%w: %w", domain.ErrUnavailable, err)
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
		return domain.ErrWebhookNotFound
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
		return fmt.Errorf("%w: %w", domain.ErrUnavailable, err)
	}
	e.metrics.addPending(-len(pending))
	return nil
}

// Deliveries returns the recent attempts of uid's subscription id, newest first.
func (e *Events) Deliveries(uid, id string) ([]domain.WebhookAttempt, error) {
	if s, ok := e.subscription(id); !ok || s.UserID != uid {
		return nil, domain.ErrWebhookNotFound
	}
	as, err := e.cfg.Store.Attempts(id)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", domain.ErrUnavailable, err)
	}
	return as, nil
}

// Subscription returns uid's subscription id without its secret.
func (e *Events) Subscription(uid, id string) (domain.WebhookSubscription, error) {
	s, ok := e.subscription(id)
	if !ok || s.UserID != uid {
		return domain.WebhookSubscription{}, domain.ErrWebhookNotFound
	}
	return s, nil
}

// kick tells each delivery's actor about it (spawning the actor if it is not running).
func (e *Events) kick(ds []domain.WebhookDelivery) {
	e.metrics.queued.Add(float64(len(ds)))
	e.metrics.addPending(len(ds))
	// One message per subscription, its deliveries in order.
	bySub := map[string][]domain.WebhookDelivery{}
	var subs []string
	for _, d := range ds {
		if _, ok := bySub[d.SubscriptionID]; !ok {
			subs = append(subs, d.SubscriptionID)
		}
		bySub[d.SubscriptionID] = append(bySub[d.SubscriptionID], d)
	}
	for _, id := range subs {
		if pid := e.actor(id); pid != nil {
			e.cfg.Actors.Send(pid, webhook.Enqueued{Deliveries: bySub[id]})
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
	e.subs.Store(int64(len(e.byID)))
	list := append(e.byUser[s.UserID], s)
	slices.SortFunc(list, func(a, b domain.WebhookSubscription) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	e.byUser[s.UserID] = list
}

// unindex removes s; e.mu is held.
func (e *Events) unindex(s domain.WebhookSubscription) {
	delete(e.byID, s.ID)
	e.subs.Store(int64(len(e.byID)))
	list := slices.DeleteFunc(slices.Clone(e.byUser[s.UserID]), func(x domain.WebhookSubscription) bool { return x.ID == s.ID })
	if len(list) == 0 {
		delete(e.byUser, s.UserID)
		return
	}
	e.byUser[s.UserID] = list
}
