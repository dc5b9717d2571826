// Package webhook delivers events to one webhook subscription (DESIGN.md section 10): its actor
// works through the subscription's durable queue in order, one delivery in flight, signs each
// with the Standard Webhooks scheme, retries failures with exponential backoff and jitter, and
// disables the subscription after WebhookFailureWindow of failures.
//
// Imports: domain, hollywood and the Standard Webhooks library; what it needs from the rest of
// the gateway is declared here as interfaces (Store, Poster, Clock, Observer).
//
// Concurrency: every field of Subscription is owned by the actor's goroutine. Receive never does
// I/O: a worker goroutine reads the delivery, signs and posts it, and reports back; a writer
// goroutine commits the attempts (at most one at a time per subscription, so writes stay in
// order and batch while one is in flight).
package webhook

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/domain"
)

// Store is the subscription actor's storage (persist.Webhooks).
type Store interface {
	// GetSubscription returns an error matching domain.ErrWebhookNotFound when id is unknown.
	GetSubscription(id string) (domain.WebhookSubscription, error)
	// Pending lists the subscription's queued sequence numbers, in order.
	Pending(subID string) ([]uint64, error)
	// DeliveriesFrom reads up to limit queued deliveries with a sequence number at or above
	// from, in order.
	DeliveriesFrom(subID string, from uint64, limit int) ([]domain.WebhookDelivery, error)
	// LastAttemptN is the highest attempt number recorded (0 for none).
	LastAttemptN(subID string) (int64, error)
	// SaveProgress commits attempts, removes delivered entries and writes the subscription
	// record (when set), in one commit.
	SaveProgress(ctx context.Context, subID string, p domain.WebhookProgress) error
	// PurgeQueue removes every queued delivery of the subscription.
	PurgeQueue(ctx context.Context, subID string) error
}

// Poster sends one signed delivery and returns the receiver's HTTP status, or an error when no
// status came back. It bounds the attempt by Timeout itself.
type Poster interface {
	Post(ctx context.Context, url string, h Headers, body []byte) (status int, err error)
}

// Clock is the actor's time: Now for records and the failure window, AfterFunc for retries.
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface{ Stop() bool }

// Observer hears about outcomes, for metrics and the engine's view of subscriptions. It is
// called from the actor's goroutine and must not block.
type Observer interface {
	// Delivered: a delivery got a 2xx, lag after its event was committed.
	Delivered(subID string, lag time.Duration)
	// Failed: an attempt failed (status 0 when none came back).
	Failed(subID string, status int)
	// Dropped: n queued deliveries were dropped because the subscription was disabled.
	Dropped(subID string, n int)
	// Changed: the subscription's health changed (FailingSince, Disabled).
	Changed(s domain.WebhookSubscription)
}

// Policy is the retry schedule. Zero fields take the defaults.
type Policy struct {
	// BaseBackoff is the wait after the first failure (default 1 s); it doubles with each
	// failure up to MaxBackoff (default 10 min). Each wait is drawn uniformly from [d/2, d]
	// (jitter), so receivers that come back are not hit by every subscription at once.
	BaseBackoff, MaxBackoff time.Duration
	// FailureWindow is how long a subscription may fail without one success before it is
	// disabled (default domain.WebhookFailureWindow, 24 h).
	FailureWindow time.Duration
}

func (p Policy) withDefaults() Policy {
	if p.BaseBackoff <= 0 {
		p.BaseBackoff = time.Second
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = 10 * time.Minute
	}
	if p.FailureWindow <= 0 {
		p.FailureWindow = domain.WebhookFailureWindow
	}
	return p
}

// Backoff is the wait after the attempts-th consecutive failure (attempts >= 1), before jitter.
func (p Policy) Backoff(attempts int) time.Duration {
	p = p.withDefaults()
	d := p.BaseBackoff
	for i := 1; i < attempts && d < p.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, p.MaxBackoff)
}

// Workers counts the goroutines an actor starts, so a shutdown can wait for them.
type Workers interface {
	Add(int)
	Done()
}

// Secrets opens a signing secret as the store keeps it (sealed at rest).
type Secrets interface {
	Open(stored string) (string, error)
}

// Deps are a subscription actor's collaborators.
type Deps struct {
	Store    Store
	Secrets  Secrets // optional: nil when the store keeps secrets in clear
	Poster   Poster
	Clock    Clock
	Observer Observer
	Workers  Workers // optional
	Log      *slog.Logger
	Policy   Policy
}

// Messages the actor takes.
type (
	// Enqueued tells the actor deliveries were committed to its queue. It carries them, so the
	// actor need not read them back (up to maxCached are kept in memory; the rest are read
	// from the store in batches when their turn comes).
	Enqueued struct{ Deliveries []domain.WebhookDelivery }

	loaded struct {
		sub     domain.WebhookSubscription
		signer  Signer
		seqs    []uint64
		lastN   int64
		missing bool // the subscription no longer exists
		err     error
	}
	attempted struct {
		run       *int
		seq       uint64
		read      []domain.WebhookDelivery // the worker read deliveries instead of posting
		gone      bool                     // the delivery was removed meanwhile
		last      bool                     // the worker's last report: it has finished
		id        string
		eventID   string
		typ       domain.EventType
		createdAt time.Time
		body      []byte // kept with the attempt, for a redelivery from the dashboard
		status    int
		err       error
		at        time.Time
		took      time.Duration
	}
	saved struct{ err error }
	wake  struct{}
)

// Subscription is the actor of one webhook subscription.
type Subscription struct {
	id   string
	deps Deps

	loaded bool
	sub    domain.WebhookSubscription
	signer Signer
	queue  []uint64 // pending, in order
	known  map[uint64]bool
	cached map[uint64]domain.WebhookDelivery // the bodies of some of queue, read or enqueued
	// recent are the last recentMax seqs delivered: an Enqueued that comes after the load read
	// the same seq from the store and it was delivered (the publisher was slow to send it) must
	// not queue it again, or the receiver gets it twice.
	recent     map[uint64]bool
	recentRing []uint64
	nextN      int64

	running  *int // the worker running for the head of the queue; nil: none
	inflight int  // how many of the queue's first entries that worker holds
	waiting  bool // queue[0] waits for a retry timer
	timer    Timer
	attempts int // consecutive failures of queue[0]

	unsaved domain.WebhookProgress
	purge   bool // the queue is to be removed (the subscription was disabled)
	saving  bool
	writing chan struct{} // closed when the last writer started has finished
	stopped bool
	done    chan struct{} // closed when the actor stops: a worker posts nothing more after it
}

// New returns the producer of subscription id's actor.
func New(id string, deps Deps) actor.Producer {
	deps.Policy = deps.Policy.withDefaults()
	if deps.Log == nil {
		deps.Log = slog.New(slog.DiscardHandler)
	}
	return func() actor.Receiver {
		return &Subscription{id: id, deps: deps, known: map[uint64]bool{}, cached: map[uint64]domain.WebhookDelivery{}, done: make(chan struct{})}
	}
}

// Receive implements actor.Receiver.
func (a *Subscription) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		a.load(c)
	case loaded:
		a.onLoaded(c, m)
	case Enqueued:
		for _, d := range m.Deliveries {
			if a.add(d.Seq) && len(a.cached) < maxCached {
				a.cached[d.Seq] = d
			}
		}
		a.kick(c)
	case attempted:
		a.onAttempted(c, m)
	case saved:
		a.saving = false
		if m.err != nil {
			a.deps.Log.Warn("webhook: record attempts", "subscription", a.id, "err", m.err)
		}
		a.save(c)
	case wake:
		a.waiting = false
		if !a.loaded {
			a.load(c)
			return
		}
		a.kick(c)
	case actor.Stopped:
		a.stopped = true
		close(a.done)
		if a.timer != nil {
			a.timer.Stop()
		}
		a.save(c) // the last batch: Workers lets the shutdown wait for it
	}
}

// load reads the subscription and its queue on a goroutine (Started runs on the spawner's
// goroutine, which may be a request).
func (a *Subscription) load(c *actor.Context) {
	hw, self, store, secrets, id := c.Engine(), c.PID(), a.deps.Store, a.deps.Secrets, a.id
	a.spawn(func() {
		var m loaded
		m.sub, m.err = store.GetSubscription(id)
		switch {
		case errors.Is(m.err, domain.ErrWebhookNotFound):
			m.missing, m.err = true, nil
		case m.err == nil:
			secret := m.sub.Secret
			if secrets != nil {
				secret, m.err = secrets.Open(secret)
			}
			if m.err == nil {
				m.signer, m.err = NewSigner(secret)
			}
			if m.err == nil && m.sub.Format == domain.WebhookFormatMeta {
				m.signer = m.signer.WithHub(secret)
			}
		}
		if m.err == nil && !m.missing {
			m.seqs, m.err = store.Pending(id)
		}
		if m.err == nil && !m.missing {
			m.lastN, m.err = store.LastAttemptN(id)
		}
		hw.Send(self, m)
	})
}

func (a *Subscription) onLoaded(c *actor.Context, m loaded) {
	if m.err != nil {
		a.deps.Log.Error("webhook: load subscription", "subscription", a.id, "err", m.err)
		a.waiting = true
		hw, self := c.Engine(), c.PID()
		a.timer = a.deps.Clock.AfterFunc(time.Second, func() { hw.Send(self, wake{}) })
		return
	}
	if m.missing {
		a.queue, a.known, a.cached = nil, map[uint64]bool{}, map[uint64]domain.WebhookDelivery{} // deleted: the engine stops this actor
		return
	}
	a.loaded, a.sub, a.signer = true, m.sub, m.signer
	a.nextN = max(a.nextN, m.lastN+1)
	for _, s := range m.seqs {
		a.add(s)
	}
	if a.sub.Disabled {
		a.drop(c)
		return
	}
	a.kick(c)
}

// maxCached bounds the deliveries a subscription keeps in memory (a receiver that is down
// lets its queue grow in the store, not in memory); readBatch is how many are read at once.
const (
	recentMax = 4096
	maxCached = 1024
	readBatch = 256
	postBatch = 64 // the most deliveries one worker posts back to back
)

// add inserts seq in order; a late arrival with a lower seq than the head in progress goes
// right after it. It reports whether seq was new.
func (a *Subscription) add(seq uint64) bool {
	if a.known[seq] || a.recent[seq] {
		return false
	}
	a.known[seq] = true
	i, _ := slices.BinarySearch(a.queue, seq)
	if len(a.queue) > 0 && (a.running != nil || a.waiting) {
		i = max(i, a.inflight, 1)
	}
	a.queue = slices.Insert(a.queue, i, seq)
	return true
}

// kick starts the worker on the head of the queue when nothing is in progress.
func (a *Subscription) kick(c *actor.Context) {
	if !a.loaded || a.stopped || a.running != nil || a.waiting || len(a.queue) == 0 || a.sub.Disabled {
		return
	}
	run := new(int)
	a.running, a.inflight = run, 1
	seq, url, signer, id := a.queue[0], a.sub.URL, a.signer, a.id
	store, poster, clock := a.deps.Store, a.deps.Poster, a.deps.Clock
	hw, self := c.Engine(), c.PID()
	d, cached := a.cached[seq]
	if !cached {
		// Read the head and what follows it in one go (after a restart, or past maxCached).
		room := max(1, min(readBatch, maxCached-len(a.cached)))
		a.spawn(func() {
			r := attempted{run: run, seq: seq, last: true}
			ds, err := store.DeliveriesFrom(id, seq, room)
			switch {
			case err != nil:
				r.err, r.at = fmt.Errorf("read the queued delivery: %w", err), clock.Now()
			case len(ds) == 0 || ds[0].Seq != seq:
				r.gone, r.read = true, ds
			default:
				r.read = ds
			}
			hw.Send(self, r)
		})
		return
	}
	// The worker posts the head and, while they succeed, the cached entries after it, without
	// waiting for the actor in between: still one request in flight, in order, each outcome
	// reported as it comes. It stops at the first failure.
	batch := []domain.WebhookDelivery{d}
	for _, next := range a.queue[1:min(len(a.queue), postBatch)] {
		nd, ok := a.cached[next]
		if !ok {
			break
		}
		batch = append(batch, nd)
	}
	a.inflight = len(batch)
	done := a.done
	a.spawn(func() {
		for i, d := range batch {
			select {
			case <-done:
				return // stopping: what was not posted stays queued
			default:
			}
			r := attempted{run: run, seq: d.Seq, id: d.ID, eventID: d.EventID, typ: d.Type, createdAt: d.CreatedAt, body: d.Body, at: clock.Now()}
			h, err := signer.Sign(d.ID, r.at, d.Body)
			if err == nil {
				r.status, err = poster.Post(context.Background(), url, h, d.Body)
			}
			r.err, r.took = err, clock.Now().Sub(r.at)
			failed := err != nil || r.status < 200 || r.status > 299
			r.last = failed || i == len(batch)-1
			hw.Send(self, r)
			if failed {
				return
			}
		}
	})
}

func (a *Subscription) onAttempted(c *actor.Context, m attempted) {
	if m.run != a.running {
		return // from before a restart, or for a queue that was dropped
	}
	if m.last {
		a.running, a.inflight = nil, 0
	} else {
		a.inflight--
	}
	if len(a.queue) == 0 || a.queue[0] != m.seq {
		a.kick(c)
		return
	}
	for _, d := range m.read {
		if a.known[d.Seq] {
			a.cached[d.Seq] = d
		}
	}
	if m.gone {
		a.pop()
		a.kick(c)
		return
	}
	if m.read != nil {
		a.kick(c) // the head is in memory now
		return
	}
	ok := m.err == nil && m.status >= 200 && m.status < 300
	rec := domain.WebhookAttempt{
		N: a.nextN, ID: m.id, EventID: m.eventID, Type: m.typ, Attempt: a.attempts + 1,
		Status: m.status, Delivered: ok, At: m.at.UTC(), Duration: m.took.Milliseconds(), Body: m.body,
	}
	a.nextN++
	if m.id == "" {
		rec.ID = strconv.FormatUint(m.seq, 16) // the delivery could not be read
	}
	switch {
	case m.err != nil:
		rec.Error = m.err.Error()
	case !ok:
		rec.Error = "the receiver answered " + strconv.Itoa(m.status)
	}
	a.unsaved.Attempts = append(a.unsaved.Attempts, rec)

	if ok {
		a.unsaved.Delivered = append(a.unsaved.Delivered, m.seq)
		a.pop()
		a.deps.Observer.Delivered(a.id, a.deps.Clock.Now().Sub(m.createdAt))
		if !a.sub.FailingSince.IsZero() {
			a.sub.FailingSince = time.Time{}
			a.subChanged()
		}
		a.save(c)
		a.kick(c)
		return
	}

	a.attempts++
	a.deps.Observer.Failed(a.id, m.status)
	now := a.deps.Clock.Now()
	if a.sub.FailingSince.IsZero() {
		a.sub.FailingSince = now.UTC()
		a.subChanged()
	}
	if now.Sub(a.sub.FailingSince) >= a.deps.Policy.FailureWindow {
		a.sub.Disabled, a.sub.DisabledAt = true, now.UTC()
		a.sub.DisabledReason = fmt.Sprintf("every delivery failed for %s (since %s); last error: %s",
			hours(a.deps.Policy.FailureWindow), a.sub.FailingSince.Format(time.RFC3339), rec.Error)
		a.deps.Log.Warn("webhook: subscription disabled", "subscription", a.id, "reason", a.sub.DisabledReason)
		a.subChanged()
		a.drop(c)
		return
	}
	a.save(c)
	if a.attempts == 1 || a.attempts%10 == 0 {
		a.deps.Log.Info("webhook: delivery will be retried", "subscription", a.id, "seq", m.seq, "attempts", a.attempts, "err", rec.Error)
	}
	a.schedule(c, a.jittered(a.deps.Policy.Backoff(a.attempts)))
}

func (a *Subscription) pop() {
	if a.recent == nil {
		a.recent = map[uint64]bool{}
	}
	if len(a.recentRing) == recentMax {
		delete(a.recent, a.recentRing[0])
		a.recentRing = a.recentRing[1:]
	}
	a.recent[a.queue[0]] = true
	a.recentRing = append(a.recentRing, a.queue[0])
	delete(a.known, a.queue[0])
	delete(a.cached, a.queue[0])
	a.queue = a.queue[1:]
	a.attempts = 0
}

// drop empties the queue of a disabled subscription: nothing more is sent to it.
func (a *Subscription) drop(c *actor.Context) {
	a.deps.Observer.Dropped(a.id, len(a.queue))
	a.queue, a.known, a.cached, a.attempts = nil, map[uint64]bool{}, map[uint64]domain.WebhookDelivery{}, 0
	a.unsaved.Delivered = nil // the purge removes them all
	a.purge = true
	a.save(c)
}

func (a *Subscription) subChanged() {
	s := a.sub
	a.unsaved.Subscription = &s
	a.deps.Observer.Changed(s)
}

// save hands the unsaved batch to the writer, unless it is busy: then the batch grows and goes
// when the writer reports back. Once the actor has stopped, the last batch goes at once, after
// the writer in flight (so a graceful stop leaves nothing to send again).
func (a *Subscription) save(c *actor.Context) {
	if (a.saving && !a.stopped) || (len(a.unsaved.Attempts) == 0 && len(a.unsaved.Delivered) == 0 && a.unsaved.Subscription == nil && !a.purge) {
		return
	}
	a.saving = true
	p, purge := a.unsaved, a.purge
	a.unsaved, a.purge = domain.WebhookProgress{}, false
	store, id, stopped, prev, log := a.deps.Store, a.id, a.stopped, a.writing, a.deps.Log
	done := make(chan struct{})
	a.writing = done
	hw, self := c.Engine(), c.PID()
	a.spawn(func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		err := store.SaveProgress(context.Background(), id, p)
		if err == nil && purge {
			err = store.PurgeQueue(context.Background(), id)
		}
		if stopped {
			if err != nil {
				log.Warn("webhook: record the last attempts", "subscription", id, "err", err)
			}
			return // nobody to tell: the actor is gone
		}
		hw.Send(self, saved{err: err})
	})
}

func (a *Subscription) schedule(c *actor.Context, d time.Duration) {
	a.waiting = true
	hw, self := c.Engine(), c.PID()
	if a.timer != nil {
		a.timer.Stop()
	}
	a.timer = a.deps.Clock.AfterFunc(d, func() { hw.Send(self, wake{}) })
}

// jittered draws the wait uniformly from [d/2, d].
func (a *Subscription) jittered(d time.Duration) time.Duration {
	half := d / 2
	if half <= 0 {
		return d
	}
	return half + rand.N(d-half+1)
}

func (a *Subscription) spawn(fn func()) {
	if w := a.deps.Workers; w != nil {
		w.Add(1)
		go func() { defer w.Done(); fn() }()
		return
	}
	go fn()
}

// hours writes a duration for people: "24 h" when it is whole hours.
func hours(d time.Duration) string {
	if d >= time.Hour && d%time.Hour == 0 {
		return strconv.FormatInt(int64(d/time.Hour), 10) + " h"
	}
	return d.String()
}
