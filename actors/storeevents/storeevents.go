// Package storeevents is the actor of one connected store (Shopify or WooCommerce): it works
// through the store's durable inbox of accepted webhooks in order, one event at a time (parse,
// fetch the order when the payload lacks it, render the owner's template, send through the
// owner's session), records each outcome, and retries transient failures with capped
// exponential backoff.
//
// Imports: domain, ecom (its stateless parsers and renderer) and hollywood; what the actor needs
// from the rest of the gateway is declared here as interfaces (Store, OrderFetcher, Templates,
// Sender, Outbox, Publisher, Workers, Clock). Only the engine imports it: it spawns one actor
// per connected store and implements those interfaces.
//
// Concurrency: every field of StoreEvents is owned by the actor's goroutine. Receive never does
// I/O: a worker goroutine processes the head of the queue and reports back with a message, and
// retries wait on timers.
package storeevents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/ecom"
)

// DefaultRetryWindow is how long an event keeps being retried after it was received, unless
// Deps.RetryWindow says otherwise.
const DefaultRetryWindow = 24 * time.Hour

// ErrNoStoreToken is returned by OrderFetcher when the store was connected without an Admin
// API token (native webhooks, WooCommerce), so an order cannot be fetched.
var ErrNoStoreToken = errors.New("the store was connected without an access token")

// What a storeevents actor needs from the rest of the gateway: small interfaces declared here,
// where they are consumed, and implemented by the engine. Everything that does I/O is called
// from the actor's worker goroutine, never from Receive.

// Store is the actor's storage: the store's durable inbox and its recorded outcomes.
type Store interface {
	// PendingInbox lists the seqs of the shop's inbox, in order.
	PendingInbox(shop string) ([]string, error)
	// InboxEntry reads one entry; found is false once it was removed.
	InboxEntry(shop, seq string) (e domain.InboxEntry, found bool, err error)
	// LastEventN is the highest domain.StoreEvent.N recorded for the shop (0 for none).
	LastEventN(shop string) (int64, error)
	// AlreadySent tells whether a message for this event (ecom.Event.DedupeKey) went out already.
	AlreadySent(shop, key string) bool
	// FinishEvent records an outcome in one commit: the record in its ring slot, the inbox
	// entry removed (seq "" = none), and sentKey marked as sent (ecom.Event.DedupeKey; "" = none).
	FinishEvent(ctx context.Context, shop, seq string, rec domain.StoreEvent, sentKey string) error
}

// OrderFetcher reads orders from the store platform.
type OrderFetcher interface {
	// FetchOrder reads an order from the store platform's Admin API (REST-shaped, for
	// ecom.MergeOrder). Errors match ecom's sentinels, or ErrNoStoreToken.
	FetchOrder(ctx context.Context, shop string, orderID int64) ([]byte, error)
}

// Templates is what a message is rendered from.
type Templates interface {
	// Template is the owner's template for a topic (the default when they wrote none).
	Template(uid, topic string) (text string, enabled bool, err error)
	// StoreName fills {store_name}.
	StoreName(shop string) string
}

// Sender sends through the owner's session.
type Sender interface {
	// Send sends a text through the user's session under msgID, with its allowance.
	Send(ctx context.Context, uid, msgID, to, text, origin string) (domain.OutboxEntry, error)
	// SessionReady tells whether the user's session is connected (a cheap read, no I/O).
	SessionReady(uid string) bool
}

// Outbox finds what became of a message sent before (a crash between the send and the
// recorded outcome).
type Outbox interface {
	// Outcome looks a message up in the outbox.
	Outcome(msgID string) (domain.OutboxEntry, bool)
}

// Publisher receives the actor's queue view after every change. It is called from the actor's
// goroutine and must not block.
type Publisher interface {
	Publish(v View)
}

// Workers counts worker goroutines, so a shutdown can wait for them.
type Workers interface {
	Add(int)
	Done()
}

// Clock is the actor's time: records, the retry window, and retry times.
type Clock interface {
	Now() time.Time
}

// View is what the actor publishes about its queue (for GET /api/client/store).
type View struct {
	Pending   int       // entries in the inbox
	Head      string    // seq of the entry being processed or waiting for a retry
	Attempts  int       // failed attempts of Head so far
	LastError string    // why Head's last attempt failed
	NextRetry time.Time // when Head is tried again (zero when it is not waiting)
}

// Deps are a storeevents actor's collaborators.
type Deps struct {
	Store     Store
	Orders    OrderFetcher
	Templates Templates
	Sender    Sender
	Outbox    Outbox
	Publisher Publisher // optional
	Workers   Workers   // optional
	Clock     Clock
	Log       *slog.Logger
	// Retry policy: backoff doubles from BaseBackoff up to MaxBackoff; while the session is
	// disconnected it is polled every SessionPoll; an event is given up RetryWindow after it was
	// received. Zero values take 1 s, 5 min, 1 s and DefaultRetryWindow.
	BaseBackoff, MaxBackoff, SessionPoll, RetryWindow time.Duration
}

// Storeevents-actor messages.
type (
	// InboxAdded tells the actor an entry was committed to its inbox.
	InboxAdded struct{ Seq string }
	// RecordEvent records an event that was answered without entering the inbox (ignored
	// at the receiver: no phone, a topic that sends nothing).
	RecordEvent struct{ Record domain.StoreEvent }

	storeLoaded struct {
		seqs  []string
		lastN int64
		err   error
	}
	storeWorked struct {
		run         *int // the attempt this is the result of (see StoreEvents.running)
		seq         string
		retry       bool // transient failure: try again later
		waitSession bool
		uid         string
		receivedAt  time.Time
		err         error
	}
	storeWake struct{}
)

// StoreEvents is the actor of one connected store: it works through the store's durable inbox
// in order, one event at a time, on a worker goroutine (parse, fetch the order, render, send),
// and retries transient failures with capped exponential backoff on timers. All fields are
// owned by the actor's goroutine.
type StoreEvents struct {
	shop string
	deps Deps

	loaded bool
	queue  []string // pending seqs, sorted
	known  map[string]bool
	early  []domain.StoreEvent // records that arrived before the load finished
	nextN  int64
	// running identifies the attempt whose worker runs for queue[0] (nil: none). A result of
	// another attempt, say one from before a restart after a panic, is ignored.
	running  *int
	waiting  bool // queue[0] waits for a retry timer
	timer    *time.Timer
	attempts int
	last     storeWorked
	next     time.Time
}

// New returns the producer of the actor of shop.
func New(shop string, deps Deps) actor.Producer {
	if deps.BaseBackoff <= 0 {
		deps.BaseBackoff = time.Second
	}
	if deps.MaxBackoff <= 0 {
		deps.MaxBackoff = 5 * time.Minute
	}
	if deps.SessionPoll <= 0 {
		deps.SessionPoll = time.Second
	}
	if deps.RetryWindow <= 0 {
		deps.RetryWindow = DefaultRetryWindow
	}
	return func() actor.Receiver {
		return &StoreEvents{shop: shop, deps: deps, known: map[string]bool{}}
	}
}

// Receive implements actor.Receiver.
func (a *StoreEvents) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		a.load(c)
	case storeLoaded:
		if m.err != nil {
			a.deps.Log.Error("storeevents: load inbox", "shop", a.shop, "err", m.err)
			hw, self := c.Engine(), c.PID()
			a.timer = time.AfterFunc(time.Second, func() { hw.Send(self, storeWake{}) })
			return
		}
		a.loaded = true
		a.nextN = max(a.nextN, m.lastN+1)
		for _, s := range m.seqs {
			a.add(s)
		}
		for _, r := range a.early {
			a.record(r)
		}
		a.early = nil
		a.kick(c)
	case InboxAdded:
		a.add(m.Seq)
		a.kick(c)
	case RecordEvent:
		if !a.loaded {
			a.early = append(a.early, m.Record)
			return
		}
		a.record(m.Record)
	case storeWorked:
		a.worked(c, m)
	case storeWake:
		a.wake(c)
	case actor.Stopped:
		if a.timer != nil {
			a.timer.Stop()
		}
	}
}

// load reads the inbox on a goroutine: Started runs on the spawner's goroutine, which may be a
// webhook request.
func (a *StoreEvents) load(c *actor.Context) {
	hw, self, deps, shop := c.Engine(), c.PID(), a.deps, a.shop
	a.spawnWorker(func() {
		seqs, err := deps.Store.PendingInbox(shop)
		var n int64
		if err == nil {
			n, err = deps.Store.LastEventN(shop)
		}
		hw.Send(self, storeLoaded{seqs: seqs, lastN: n, err: err})
	})
}

func (a *StoreEvents) add(seq string) {
	if a.known[seq] {
		return
	}
	a.known[seq] = true
	i, _ := slices.BinarySearch(a.queue, seq)
	if i == 0 && (a.running != nil || a.waiting) && len(a.queue) > 0 {
		i = 1 // the head is in progress: a late arrival with a lower seq goes after it
	}
	a.queue = slices.Insert(a.queue, i, seq)
	a.publish()
}

// record writes a record of an event that never entered the inbox.
func (a *StoreEvents) record(r domain.StoreEvent) {
	r.N = a.nextN
	a.nextN++
	store, shop, log := a.deps.Store, a.shop, a.deps.Log
	a.spawnWorker(func() {
		if err := store.FinishEvent(context.Background(), shop, "", r, ""); err != nil {
			log.Warn("storeevents: record ignored event", "shop", shop, "err", err)
		}
	})
}

// kick starts the worker on the head of the queue when nothing is in progress.
func (a *StoreEvents) kick(c *actor.Context) {
	if !a.loaded || a.running != nil || a.waiting || len(a.queue) == 0 {
		return
	}
	run := new(int)
	a.running = run
	seq, n, attempts := a.queue[0], a.nextN, a.attempts
	a.nextN++ // a retried attempt leaves a gap in N: harmless, N only orders records
	w := storeWorker{shop: a.shop, deps: a.deps}
	hw, self := c.Engine(), c.PID()
	a.spawnWorker(func() {
		res := w.process(seq, n, attempts)
		res.run = run
		hw.Send(self, res)
	})
	a.publish()
}

func (a *StoreEvents) worked(c *actor.Context, m storeWorked) {
	if m.run != a.running {
		return
	}
	a.running = nil
	if len(a.queue) == 0 || a.queue[0] != m.seq {
		a.kick(c)
		return
	}
	if m.retry {
		a.attempts++
		a.last = m
		delay := a.backoff()
		if m.waitSession {
			delay = a.deps.SessionPoll
		}
		a.schedule(c, delay)
		a.publish()
		if a.attempts == 1 || a.attempts%10 == 0 {
			a.deps.Log.Info("storeevents: event will be retried", "shop", a.shop, "seq", m.seq, "attempts", a.attempts, "err", m.err)
		}
		return
	}
	delete(a.known, m.seq)
	a.queue = a.queue[1:]
	a.attempts, a.last, a.next = 0, storeWorked{}, time.Time{}
	a.publish()
	a.kick(c)
}

// wake ends a wait. While the head waits for its session, the session's state is polled
// (a memory read) and the next attempt starts as soon as it is connected.
func (a *StoreEvents) wake(c *actor.Context) {
	a.waiting = false
	if !a.loaded {
		a.load(c)
		return
	}
	if a.last.waitSession && !a.deps.Sender.SessionReady(a.last.uid) && a.deps.Clock.Now().Sub(a.last.receivedAt) < a.deps.RetryWindow {
		a.schedule(c, a.deps.SessionPoll)
		return
	}
	a.kick(c)
}

func (a *StoreEvents) schedule(c *actor.Context, d time.Duration) {
	a.waiting = true
	a.next = a.deps.Clock.Now().Add(d)
	hw, self := c.Engine(), c.PID()
	if a.timer != nil {
		a.timer.Stop()
	}
	a.timer = time.AfterFunc(d, func() { hw.Send(self, storeWake{}) })
}

// backoff is the wait after the attempts-th failure: BaseBackoff doubling, capped.
func (a *StoreEvents) backoff() time.Duration {
	d := a.deps.BaseBackoff
	for i := 1; i < a.attempts && d < a.deps.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, a.deps.MaxBackoff)
}

func (a *StoreEvents) spawnWorker(fn func()) {
	if w := a.deps.Workers; w != nil {
		w.Add(1)
		go func() { defer w.Done(); fn() }()
		return
	}
	go fn()
}

func (a *StoreEvents) publish() {
	if a.deps.Publisher == nil {
		return
	}
	v := View{Pending: len(a.queue), Attempts: a.attempts, NextRetry: a.next}
	if len(a.queue) > 0 {
		v.Head = a.queue[0]
	}
	if a.last.err != nil {
		v.LastError = a.last.err.Error()
	}
	a.deps.Publisher.Publish(v)
}

// storeWorker processes one inbox entry, off the actor's goroutine.
type storeWorker struct {
	shop string
	deps Deps
}

// process runs one attempt at an entry and, when its outcome is final, records it.
func (w storeWorker) process(seq string, n int64, attempts int) storeWorked {
	res := storeWorked{seq: seq}
	entry, found, err := w.deps.Store.InboxEntry(w.shop, seq)
	if err != nil {
		res.retry, res.err, res.receivedAt = true, fmt.Errorf("%w: read inbox: %v", domain.ErrUnavailable, err), w.deps.Clock.Now()
		return res
	}
	if !found {
		return res // removed meanwhile (the store was disconnected)
	}
	res.uid, res.receivedAt = entry.UserID, entry.ReceivedAt
	rec := domain.StoreEvent{
		N: n, Seq: seq, Topic: entry.Topic, WebhookID: entry.WebhookID, Attempts: attempts + 1, ReceivedAt: entry.ReceivedAt,
	}
	sentKey, retryErr, waitSession := w.run(entry, &rec)
	if retryErr != nil {
		if w.deps.Clock.Now().Sub(entry.ReceivedAt) < w.deps.RetryWindow {
			res.retry, res.err, res.waitSession = true, retryErr, waitSession
			return res
		}
		rec.Status, rec.Reason = domain.StoreEventFailed, "gave up after "+hours(w.deps.RetryWindow)+" of retries: "+retryErr.Error()
	}
	rec.ProcessedAt = w.deps.Clock.Now().UTC()
	if err := w.deps.Store.FinishEvent(context.Background(), w.shop, seq, rec, sentKey); err != nil {
		// The outcome is not recorded: run the entry again later (its message id makes a second
		// run find the message in the outbox rather than send it twice).
		res.retry, res.err = true, fmt.Errorf("%w: record outcome: %v", domain.ErrUnavailable, err)
		return res
	}
	if rec.Status != domain.StoreEventSent {
		w.deps.Log.Info("store event not sent", "shop", w.shop, "seq", seq, "topic", rec.Topic, "status", rec.Status, "reason", rec.Reason)
	}
	return res
}

// run takes an entry from payload to sent message. It fills rec with the outcome, or returns a
// transient error to retry (waitSession: the owner's session is not connected).
func (w storeWorker) run(entry domain.InboxEntry, rec *domain.StoreEvent) (sentKey string, retry error, waitSession bool) {
	final := func(status, reason string) (string, error, bool) {
		rec.Status, rec.Reason = status, reason
		return "", nil, false
	}
	var ev ecom.Event
	var err error
	switch entry.Platform {
	case ecom.PlatformWooCommerce:
		ev, err = ecom.ParseWoo(entry.Topic, entry.Body)
	default:
		ev, err = ecom.ParseShopify(entry.Topic, entry.Body)
	}
	switch {
	case errors.Is(err, ecom.ErrIgnored):
		return final(domain.StoreEventSkipped, reasonOf(err))
	case err != nil:
		return final(domain.StoreEventFailed, reasonOf(err))
	}
	rec.Topic, rec.OrderID, rec.OrderName = ev.Topic, ev.OrderID, ev.OrderName
	ctx := context.Background()
	if ev.NeedsOrder {
		order, err := w.deps.Orders.FetchOrder(ctx, entry.Shop, ev.OrderID)
		switch {
		case errors.Is(err, ErrNoStoreToken) && ev.Phone != "":
			// Go with what the payload carries (a fulfillment's destination).
		case errors.Is(err, ErrNoStoreToken):
			return final(domain.StoreEventSkipped, "no phone number in the payload, and no access token to fetch its order")
		case errors.Is(err, ecom.ErrUpstream):
			return "", fmt.Errorf("fetch order %d: %w", ev.OrderID, err), false
		case err != nil:
			return final(domain.StoreEventFailed, "fetch order: "+reasonOf(err))
		default:
			if err := ecom.MergeOrder(&ev, order); err != nil {
				return final(domain.StoreEventFailed, "fetched order: "+reasonOf(err))
			}
		}
		ev.NeedsOrder = false
		rec.OrderID, rec.OrderName = ev.OrderID, ev.OrderName
	}
	rec.Phone = ev.Phone
	if ev.SkipReason != "" {
		return final(domain.StoreEventSkipped, ev.SkipReason)
	}
	key := ev.DedupeKey()
	if w.deps.Store.AlreadySent(entry.Shop, key) {
		return final(domain.StoreEventSkipped, "already sent: the store repeated this event")
	}
	tmpl, enabled, err := w.deps.Templates.Template(entry.UserID, ev.Topic)
	if err != nil {
		return "", fmt.Errorf("%w: read template: %v", domain.ErrUnavailable, err), false
	}
	if !enabled {
		return final(domain.StoreEventSkipped, "template disabled")
	}
	text := ecom.Render(tmpl, ev, w.deps.Templates.StoreName(entry.Shop))
	if text == "" {
		return final(domain.StoreEventSkipped, "the template renders an empty message")
	}
	if prev, found := w.deps.Outbox.Outcome(entry.MessageID); found {
		switch prev.Status {
		case domain.MsgSent:
			rec.Status, rec.MessageID = domain.StoreEventSent, prev.ID
			return key, nil, false
		case domain.MsgQueued:
			// In the outbox without an outcome (a send in flight, or one the session re-sends
			// after a restart): wait for it rather than send again.
			return "", fmt.Errorf("%w: the message is still in the outbox", domain.ErrUnavailable), false
		}
	}
	sent, err := w.deps.Sender.Send(ctx, entry.UserID, entry.MessageID, ev.Phone, text, "store:"+entry.Shop)
	switch {
	case err == nil:
		rec.Status, rec.MessageID = domain.StoreEventSent, sent.ID
		return key, nil, false
	case errors.Is(err, domain.ErrNotConnected):
		return "", err, true
	case errors.Is(err, domain.ErrNetwork), errors.Is(err, domain.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return "", err, false
	}
	rec.MessageID = entry.MessageID
	return final(domain.StoreEventFailed, err.Error())
}

// reasonOf is an ecom error's text without the package prefix.
func reasonOf(err error) string {
	s := err.Error()
	for _, p := range []string{ecom.ErrIgnored.Error() + ": ", "ecom: "} {
		if rest, ok := strings.CutPrefix(s, p); ok {
			return rest
		}
	}
	return s
}

// hours writes a duration for people: "24 h" when it is whole hours.
func hours(d time.Duration) string {
	if d >= time.Hour && d%time.Hour == 0 {
		return strconv.FormatInt(int64(d/time.Hour), 10) + " h"
	}
	return d.String()
}
