// Package storeevents is the actor of one connected store (of any ecom.Platform): it works
// through the store's durable inbox of accepted webhooks in order, up to 32 events a pass
// (parse, fetch the order when the payload lacks it, compose the customer's messages; then
// their messages accepted through the owner's session in one commit and their outcomes
// recorded in another), and retries transient failures with capped exponential backoff.
//
// Imports: domain, ecom (its platform registry and parsers) and hollywood; what the actor needs
// from the rest of the gateway is declared here as interfaces (Store, OrderFetcher, Composer,
// Sender, Outbox, Publisher, Workers, Clock). Only the engine imports it: it spawns one actor
// per connected store and implements those interfaces.
//
// Concurrency: every field of StoreEvents is owned by the actor's goroutine. Receive never does
// I/O: a worker goroutine runs a pass over the head of the queue and reports back with a message, and
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
	// AlreadySent tells, for each key (ecom.Event.DedupeKey), whether a message for that
	// event went out already, in one read.
	AlreadySent(shop string, keys []string) ([]bool, error)
	// FinishEvents records outcomes in one commit: each record in its ring slot, its inbox
	// entry removed (Seq "" = none), its SentKey marked as sent ("" = none). When an entry was
	// removed meanwhile (the store was disconnected) nothing is written and it returns nil.
	FinishEvents(ctx context.Context, shop string, fs []Finished) error
}

// Finished is one event's outcome, as FinishEvents records it.
type Finished struct {
	Seq     string
	Record  domain.StoreEvent
	SentKey string
}

// OrderFetcher reads orders from the store platform.
type OrderFetcher interface {
	// FetchOrder reads an order from the store platform's Admin API (REST-shaped, for
	// ecom.MergeOrder). Errors match ecom's sentinels, or ErrNoStoreToken.
	FetchOrder(ctx context.Context, shop string, orderID int64) ([]byte, error)
}

// Composer turns an event into what the customer gets (the engine: the owner's template for
// the topic with its delay and confirmation question, quiet hours, the suppression list, and
// the store loop's records of orders and checkouts, DESIGN.md section 18).
type Composer interface {
	// Compose decides an event's messages. An error is transient: the event is tried again.
	// It is called again for an event tried before, and must then compose the same messages.
	Compose(ctx context.Context, c Compose) (Composed, error)
}

// Compose is one event to compose.
type Compose struct {
	UserID, Shop string
	// MessageID is the entry's: the id of the first message (more are derived from it).
	MessageID  string
	ReceivedAt time.Time
	// N is the number of the event's record (domain.StoreEvent.N).
	N     int64
	Event ecom.Event
}

// Composed is what an event sends: its messages in order (none when Skip says why not).
type Composed struct {
	Skip string
	Out  []Outgoing
}

// Outgoing is one message of an event, accepted at once or for later (SendAt).
type Outgoing struct {
	Message domain.Message
	SendAt  time.Time
}

// Sender sends through the owner's session.
type Sender interface {
	// SendGroups accepts groups of messages through the user's session, in order, in one
	// commit, under their ids (new ones: never accepted before) and with their allowance; a
	// group (one event's messages) is accepted whole or not at all. It returns how many groups
	// it accepted and, when that is not all, why the next one was not (nil: try it again at
	// once, e.g. the allowance clipped the batch).
	SendGroups(ctx context.Context, uid, origin string, groups [][]Outgoing) (int, error)
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
	Composer  Composer
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
	// InboxAdded tells the actor an entry was committed to its inbox. Entry, when given, is
	// that entry: the worker then needs no read to start on it.
	InboxAdded struct {
		Seq   string
		Entry *domain.InboxEntry
	}
	// Rescan has the actor read its inbox again: a commit whose outcome the receiver could
	// not tell (a timeout, on NATS a server lost under it) may have entered an entry nobody
	// told the actor about; the platform's retry then meets the dedupe mark and says so.
	Rescan struct{}
	// RecordEvent records an event that was answered without entering the inbox (ignored
	// at the receiver: no phone, a topic that sends nothing).
	RecordEvent struct{ Record domain.StoreEvent }

	storeLoaded struct {
		seqs  []string
		lastN int64
		err   error
	}
	// storeWorked is a worker pass's result: its first done seqs are finished (recorded, or
	// removed meanwhile); when retry, the next one failed transiently.
	storeWorked struct {
		run         *int // the pass this is the result of (see StoreEvents.running)
		done        int
		retry       bool
		seq         string // the seq that failed (retry)
		waitSession bool
		uid         string
		receivedAt  time.Time
		err         error
	}
	storeWake struct{}
)

// StoreEvents is the actor of one connected store: it works through the store's durable inbox
// in order, up to batchMax events per pass on a worker goroutine (parse, fetch the order,
// render; then their messages accepted in one commit and their outcomes recorded in another),
// and retries transient failures with capped exponential backoff on timers. All fields are
// owned by the actor's goroutine.
type StoreEvents struct {
	shop string
	deps Deps

	loaded bool
	queue  []string // pending seqs, sorted
	known  map[string]bool
	// cache holds entries handed over by InboxAdded that no pass has tried yet: the worker
	// reads none of them, and their message ids are known to be new (never accepted), so it
	// looks none up in the outbox either. At most cacheMax entries, cacheBytes of bodies.
	cache      map[string]domain.InboxEntry
	cacheBytes int
	early      []domain.StoreEvent // records that arrived before the load finished
	nextN      int64
	// running identifies the pass whose worker runs over queue[:len(pass)] (nil: none). A
	// result of another pass, say one from before a restart after a panic, is ignored.
	running  *int
	pass     []string
	waiting  bool // queue[0] waits for a retry timer
	timer    *time.Timer
	attempts int
	last     storeWorked
	next     time.Time
}

// A pass takes at most batchMax events; the cache holds at most cacheMax entries and
// cacheBodyMax bytes of bodies.
const (
	batchMax     = 32
	cacheMax     = 1024
	cacheBodyMax = 8 << 20
)

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
		return &StoreEvents{shop: shop, deps: deps, known: map[string]bool{}, cache: map[string]domain.InboxEntry{}}
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
		if m.Entry != nil && !a.known[m.Seq] && len(a.cache) < cacheMax && a.cacheBytes+len(m.Entry.Body) <= cacheBodyMax {
			a.cache[m.Seq] = *m.Entry
			a.cacheBytes += len(m.Entry.Body)
		}
		a.add(m.Seq)
		a.kick(c)
	case Rescan:
		if a.loaded {
			a.load(c)
		}
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
	busy := len(a.pass)
	if a.waiting && busy == 0 {
		busy = 1
	}
	// The seqs of the pass in progress (or the head waiting for a retry) stay first: a late
	// arrival with a lower seq goes after them.
	i = max(i, min(busy, len(a.queue)))
	a.queue = slices.Insert(a.queue, i, seq)
	a.publish()
}

// uncache forgets seq's cached entry.
func (a *StoreEvents) uncache(seq string) {
	if e, ok := a.cache[seq]; ok {
		a.cacheBytes -= len(e.Body)
		delete(a.cache, seq)
	}
}

// record writes a record of an event that never entered the inbox.
func (a *StoreEvents) record(r domain.StoreEvent) {
	r.N = a.nextN
	a.nextN++
	store, shop, log := a.deps.Store, a.shop, a.deps.Log
	a.spawnWorker(func() {
		if err := store.FinishEvents(context.Background(), shop, []Finished{{Record: r}}); err != nil {
			log.Warn("storeevents: record ignored event", "shop", shop, "err", err)
		}
	})
}

// kick starts a worker pass on the head of the queue when nothing is in progress.
func (a *StoreEvents) kick(c *actor.Context) {
	if !a.loaded || a.running != nil || a.waiting || len(a.queue) == 0 {
		return
	}
	run := new(int)
	a.running = run
	a.pass = slices.Clone(a.queue[:min(len(a.queue), batchMax)])
	items := make([]item, len(a.pass))
	for i, seq := range a.pass {
		items[i].seq = seq
		if e, ok := a.cache[seq]; ok {
			items[i].entry, items[i].fresh = &e, true
		}
	}
	items[0].attempts = a.attempts
	n0 := a.nextN
	a.nextN += int64(len(items)) // a retried pass leaves gaps in N: harmless, N only orders records
	w := storeWorker{shop: a.shop, deps: a.deps}
	hw, self := c.Engine(), c.PID()
	a.spawnWorker(func() {
		res := w.process(items, n0)
		res.run = run
		hw.Send(self, res)
	})
	a.publish()
}

func (a *StoreEvents) worked(c *actor.Context, m storeWorked) {
	if m.run != a.running {
		return
	}
	pass := a.pass
	a.running, a.pass = nil, nil
	if len(a.queue) < len(pass) || !slices.Equal(a.queue[:len(pass)], pass) {
		a.kick(c) // the queue changed under the pass (a reload): start again from its head
		return
	}
	for _, seq := range pass[:m.done] {
		delete(a.known, seq)
		a.uncache(seq)
	}
	a.queue = a.queue[m.done:]
	if m.done > 0 {
		a.attempts, a.last, a.next = 0, storeWorked{}, time.Time{}
	}
	if !m.retry {
		a.publish()
		a.kick(c)
		return
	}
	// The rest of the pass may have been accepted before the failure: its entries are read
	// again and their messages looked up in the outbox next time.
	for _, seq := range pass[m.done:] {
		a.uncache(seq)
	}
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

// storeWorker runs a pass over queued entries, off the actor's goroutine.
type storeWorker struct {
	shop string
	deps Deps
}

// item is one entry of a pass.
type item struct {
	seq      string
	entry    *domain.InboxEntry // nil: read it
	fresh    bool               // never tried: its message id was never accepted
	attempts int                // failed attempts so far
}

// prepared is an entry of a pass taken as far as its message: its record so far, and the
// message to send (none when the record is final already).
type prepared struct {
	entry domain.InboxEntry
	rec   domain.StoreEvent
	fresh bool
	key   string     // ecom.Event.DedupeKey
	out   []Outgoing // the messages to send (nil when the record is final already)
}

// process runs a pass: each entry parsed and rendered in order, up to the first transient
// failure; the messages of those not answered already accepted in one commit; the outcomes
// recorded in one commit.
func (w storeWorker) process(items []item, n0 int64) storeWorked {
	var res storeWorked
	now := w.deps.Clock.Now()
	fail := func(i int, p *prepared, err error, waitSession bool) {
		res.retry, res.seq, res.err, res.waitSession = true, items[i].seq, err, waitSession
		res.uid, res.receivedAt = p.entry.UserID, p.entry.ReceivedAt
	}
	// giveUp turns a transient failure past the retry window into a final one.
	giveUp := func(p *prepared, err error) bool {
		if now.Sub(p.entry.ReceivedAt) < w.deps.RetryWindow {
			return false
		}
		p.rec.Status, p.rec.Reason = domain.StoreEventFailed, "gave up after "+hours(w.deps.RetryWindow)+" of retries: "+err.Error()
		p.out = nil
		return true
	}

	ps := make([]prepared, 0, len(items))
	idx := make([]int, 0, len(items)) // ps[j] is items[idx[j]]
	end := len(items)                 // items[end:] wait for the next pass
	for i, it := range items {
		p := prepared{fresh: it.fresh}
		if it.entry != nil {
			p.entry = *it.entry
		} else {
			e, found, err := w.deps.Store.InboxEntry(w.shop, it.seq)
			if err != nil {
				p.entry.ReceivedAt = now
				fail(i, &p, fmt.Errorf("%w: read inbox: %w", domain.ErrUnavailable, err), false)
				end = i
				break
			}
			if !found {
				continue // removed meanwhile (the store was disconnected)
			}
			p.entry = e
		}
		p.rec = domain.StoreEvent{
			N: n0 + int64(i), Seq: it.seq, Topic: p.entry.Topic, WebhookID: p.entry.WebhookID,
			Attempts: it.attempts + 1, ReceivedAt: p.entry.ReceivedAt,
		}
		if retry, waitSession := w.prepare(&p); retry != nil && !giveUp(&p, retry) {
			fail(i, &p, retry, waitSession)
			end = i
			break
		}
		ps, idx = append(ps, p), append(idx, i)
	}

	// Events the store repeated (a new delivery of the same order event): one read for all.
	var keys []string
	for _, p := range ps {
		if p.out != nil {
			keys = append(keys, p.key)
		}
	}
	if len(keys) > 0 {
		sent, err := w.deps.Store.AlreadySent(w.shop, keys)
		if err != nil {
			fail(idx[0], &ps[0], fmt.Errorf("%w: read sent marks: %w", domain.ErrUnavailable, err), false)
			return res
		}
		seen := map[string]bool{}
		k := 0
		for j := range ps {
			p := &ps[j]
			if p.out == nil {
				continue
			}
			if sent[k] || seen[p.key] {
				p.out, p.key = nil, ""
				p.rec.Status, p.rec.Reason = domain.StoreEventSkipped, "already sent: the store repeated this event"
			} else {
				seen[p.key] = true
			}
			k++
		}
	}
	// Entries tried before may have been accepted already: look their messages up.
	for j := range ps {
		if p := &ps[j]; p.out != nil && !p.fresh {
			if prev, found := w.deps.Outbox.Outcome(p.entry.MessageID); found {
				p.out, p.rec.MessageID = nil, prev.ID
				if prev.Status == domain.MsgFailed {
					p.rec.Status, p.rec.Reason, p.key = domain.StoreEventFailed, prev.Error, ""
				} else {
					p.rec.Status = domain.StoreEventSent // accepted: the outbox delivers it
				}
			}
		}
	}

	// The messages, in order, in one accept; the pass ends at the first event not accepted.
	var groups [][]Outgoing
	var at []int // groups[k] is ps[at[k]]'s
	for j, p := range ps {
		if p.out == nil {
			continue
		}
		if len(groups) > 0 && p.entry.UserID != ps[at[0]].entry.UserID {
			break // another owner (the shop was reconnected by someone else): next pass
		}
		groups, at = append(groups, p.out), append(at, j)
	}
	sendRetry := false
	if len(groups) > 0 {
		first := &ps[at[0]]
		accepted, err := w.deps.Sender.SendGroups(context.Background(), first.entry.UserID, "store:"+w.shop, groups)
		for k := range accepted {
			p := &ps[at[k]]
			p.rec.Status, p.rec.MessageID, p.out = domain.StoreEventSent, p.out[0].Message.ID, nil
		}
		if accepted < len(groups) && err != nil {
			j := at[accepted]
			p := &ps[j]
			waitSession := errors.Is(err, domain.ErrNotConnected)
			transient := waitSession || errors.Is(err, domain.ErrNetwork) || errors.Is(err, domain.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
			switch {
			case transient && !giveUp(p, err):
				fail(idx[j], p, err, waitSession)
				sendRetry = true
			case !transient:
				p.rec.Status, p.rec.Reason, p.rec.MessageID, p.out = domain.StoreEventFailed, err.Error(), p.entry.MessageID, nil
			}
		}
	}
	// ps[:last] are decided; ps[last] (a message not accepted) starts the next pass.
	last := len(ps)
	for j := range ps {
		if ps[j].out != nil {
			last = j
			break
		}
	}
	if last < len(ps) {
		if !sendRetry {
			res = storeWorked{} // not a failure (the allowance clipped the batch...): go on at once
		}
		res.done = idx[last]
	} else {
		res.done = end // items[end], if any, failed before its message
	}

	fs := make([]Finished, 0, last)
	for _, p := range ps[:last] {
		p.rec.ProcessedAt = now.UTC()
		f := Finished{Seq: p.rec.Seq, Record: p.rec}
		if p.rec.Status == domain.StoreEventSent {
			f.SentKey = p.key
		} else {
			w.deps.Log.Info("store event not sent", "shop", w.shop, "seq", p.rec.Seq, "topic", p.rec.Topic, "status", p.rec.Status, "reason", p.rec.Reason)
		}
		fs = append(fs, f)
	}
	if len(fs) > 0 {
		if err := w.deps.Store.FinishEvents(context.Background(), w.shop, fs); err != nil {
			// Not recorded: the pass runs again later (the message ids make the next run find
			// the messages in the outbox rather than send them twice).
			res = storeWorked{}
			fail(0, &ps[0], fmt.Errorf("%w: record outcome: %w", domain.ErrUnavailable, err), false)
			return res
		}
	}
	return res
}

// prepare takes an entry from payload to the message to send. It fills p.rec with a final
// outcome (p.msg nil), or sets p.msg, or returns a transient error to retry (waitSession: the
// owner's session is not connected).
func (w storeWorker) prepare(p *prepared) (retry error, waitSession bool) {
	entry, rec := p.entry, &p.rec
	final := func(status, reason string) (error, bool) {
		rec.Status, rec.Reason = status, reason
		return nil, false
	}
	platform, ok := ecom.Lookup(entry.Platform)
	if !ok {
		return final(domain.StoreEventFailed, "platform "+strconv.Quote(string(entry.Platform))+" is not known to this gateway")
	}
	ev, err := platform.Parse(entry.Topic, entry.Body)
	switch {
	case errors.Is(err, ecom.ErrIgnored):
		return final(domain.StoreEventSkipped, reasonOf(err))
	case err != nil:
		return final(domain.StoreEventFailed, reasonOf(err))
	}
	rec.Topic, rec.OrderID, rec.OrderName = ev.Topic, ev.OrderID, ev.OrderName
	if ev.NeedsOrder {
		order, err := w.deps.Orders.FetchOrder(context.Background(), entry.Shop, ev.OrderID)
		switch {
		case errors.Is(err, ErrNoStoreToken) && ev.Phone != "":
			// Go with what the payload carries (a fulfillment's destination).
		case errors.Is(err, ErrNoStoreToken):
			return final(domain.StoreEventSkipped, "no phone number in the payload, and no access token to fetch its order")
		case errors.Is(err, domain.ErrStorePlatform):
			return fmt.Errorf("fetch order %d: %w", ev.OrderID, err), false
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
	// The composer sees every event, one without a usable phone included: a cancellation
	// still skips what waits for its order.
	c, err := w.deps.Composer.Compose(context.Background(), Compose{
		UserID: entry.UserID, Shop: entry.Shop, MessageID: entry.MessageID, ReceivedAt: entry.ReceivedAt, N: rec.N, Event: ev,
	})
	if err != nil {
		return fmt.Errorf("%w: compose: %w", domain.ErrUnavailable, err), false
	}
	if c.Skip != "" || len(c.Out) == 0 {
		if c.Skip == "" {
			c.Skip = "nothing to send"
		}
		return final(domain.StoreEventSkipped, c.Skip)
	}
	p.key = ev.DedupeKey()
	p.out = c.Out
	if at := c.Out[0].SendAt; !at.IsZero() {
		rec.SendAt = at.UTC()
	}
	return nil, false
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
