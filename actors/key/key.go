// Package key is the actor of one API key: its record and its daily rate limiter. The day's
// count and the all-time api_calls are reserved durably in blocks (a durable high-water mark,
// actors/internal/mark), so the hot path rarely waits for a commit and a crash loses at most
// one block of a key's day. While storage refuses the mark (a full disk), calls go on counted
// in memory (reads must go on; the daily cap still holds) and the mark is written once storage
// returns: a crash during such an outage forgets the calls made in it.
//
// Imports: domain, actors/internal/mark and hollywood; what the actor needs from the rest of
// the gateway is declared here as interfaces (Store, Clock, Publisher). Only the engine imports
// it: it spawns one actor per key and implements those interfaces.
//
// Concurrency: the key's record and counters are a Counter, shared by the actor and the callers
// under its mutex: a call the durable marks cover is counted by the caller at once
// (TryAuthorize), without a message to the actor (one of a send's four actor messages, issue
// 21). Whatever needs the disk is the actor's: loading, raising the marks, the calls parked
// until a mark lands, changes to the record. Receive never waits on the disk for a mark: a
// worker goroutine writes it and reports back with a message.
package key

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/actors/internal/mark"
	"github.com/gateway/gateway/domain"
)

// Store is what a key actor needs from storage (persist.Store).
type Store interface {
	GetKey(id string) (domain.APIKey, error)
	PutKey(ctx context.Context, k domain.APIKey) error
	GetKeyUsage(id string) (domain.KeyUsage, error)
	PutKeyUsage(ctx context.Context, id string, u domain.KeyUsage) error
	// DeleteKey returns an error matching domain.ErrRecordNotFound when the key is absent.
	DeleteKey(ctx context.Context, id string) error
}

// Clock is the actor's time: the day the count belongs to, expiry, and the reset it reports.
type Clock interface {
	Now() time.Time
}

// Publisher receives the key's record whenever it changes, so reads that need no counting
// (validate, lists) are served without a round trip to the actor. It is called from the actor's
// goroutine and must not block.
type Publisher interface {
	Publish(rec domain.APIKey)
}

// Deps are the key actor's collaborators.
type Deps struct {
	Store Store
	Clock Clock
	Log   *slog.Logger
	// Block is the most requests (and api_calls) reserved durably at a time (0: 1,000): the hot
	// path writes about once per half block, and a crash loses at most one block of allowance.
	Block int64
	// Publisher is optional (nil: nothing is published).
	Publisher Publisher
}

// Plan is the daily cap the key's owner has.
type Plan struct {
	Name  string
	Limit int64 // requests per UTC day; 0 = no cap
}

// Key-actor messages. Each carries its own reply channel (buffered, capacity 1): the actor never
// blocks on a reply, and the caller avoids engine.Request's registry round trips.
type (
	// Authorize counts one API call if the key is usable for Scope ("" = any scope).
	Authorize struct {
		Scope string
		Reply chan Result
	}
	// Get answers the key's current view without counting.
	Get struct{ Reply chan Result }
	// Update renames and/or changes the status of the key (nil = unchanged).
	Update struct {
		Name   *string
		Status *string
		Reply  chan error
	}
	// SetPlan changes the daily cap (the owner's plan changed).
	SetPlan struct{ Plan Plan }
	// Refund gives back a call of Day (UTC, 2006-01-02) the gateway could not serve (it was
	// answered 503): it does not count against the daily cap. api_calls keeps it.
	Refund struct{ Day string }
	// Delete removes the key and its counters from storage; the actor then stops itself.
	Delete struct{ Reply chan error }
)

// Result is a key's view as of one message, and why the message failed. Err rides in the reply
// because the reply is a channel message; the engine returns it as its own error value.
type Result struct {
	domain.Grant
	Err error
}

// Failure is the reply's error (the engine's ask returns it).
func (r Result) Failure() error { return r.Err }

// Counter is one key's record and daily count, shared by its actor and the callers. All its
// fields are guarded by mu.
type Counter struct {
	mu   sync.Mutex
	id   string
	plan Plan

	rec     domain.APIKey
	loaded  bool // false before the load and after the stop: callers go to the actor
	deleted bool
	day     string // UTC day of count
	// dayStart, dayEnd bound day: the hot path compares times, and formats a day only when it
	// rolls (the text on every call was a measurable part of a send, issue 21).
	dayStart, dayEnd time.Time
	count            int64 // requests counted today
	calls            int64 // api_calls, all time
	// usage is the durable high-water mark: count may not pass usage.DayMark and calls may not
	// pass usage.CallsMark until a larger mark is committed (unless storage refuses it).
	usage   domain.KeyUsage
	failing bool // the last mark write failed (the actor's mark.Failing, mirrored)
	asked   bool // a caller asked the actor to raise the marks; cleared when a write lands
	block   int64
	// notify sends a message to the actor: set at its start, before loaded (callers use it
	// only when loaded).
	notify func(msg any)
}

// NewCounter returns key id's counter, on plan.
func NewCounter(id string, plan Plan) *Counter { return &Counter{id: id, plan: plan} }

// reserveAhead asks the actor to raise the marks (a call counted by a caller came within half
// a block of them).
type reserveAhead struct{}

// TryAuthorize counts one call at now for scope, as an Authorize would, when the durable marks
// cover it, and reports ok (the result's Err says why the call may not proceed, if it may not).
// Not ok: the call needs the actor (a mark to wait for, the key not loaded or gone): send an
// Authorize.
func (k *Counter) TryAuthorize(now time.Time, scope string) (r Result, ok bool) {
	k.mu.Lock()
	if !k.loaded || k.deleted {
		k.mu.Unlock()
		return Result{}, false
	}
	r, ok = k.take(now, scope, false)
	ask := ok && r.Err == nil && !k.asked && k.wantsMark()
	k.asked = k.asked || ask
	notify := k.notify
	k.mu.Unlock()
	if ask {
		notify(reserveAhead{})
	}
	return r, ok
}

// take counts one call at now for scope when the durable marks cover it, or, with uncovered,
// when they do not (storage refuses them: the call goes on counted in memory); the result's Err
// says why the call may not proceed, if it may not. Not ok: a mark must land first. Under mu.
func (k *Counter) take(now time.Time, scope string, uncovered bool) (r Result, ok bool) {
	k.rollDay(now)
	if err := k.usable(now, scope); err != nil {
		return k.resultAt(now, err), true
	}
	if k.plan.Limit > 0 && k.count >= k.plan.Limit {
		return k.resultAt(now, domain.ErrRateLimited), true
	}
	if (k.count >= k.usage.DayMark || k.calls >= k.usage.CallsMark) && !uncovered {
		return Result{}, false
	}
	k.count++
	k.calls++
	return k.resultAt(now, nil), true
}

// wantsMark reports whether the marks should be raised now, ahead of need, so the hot path
// rarely waits for a commit (while storage refuses marks, the retry writes them). Under mu.
func (k *Counter) wantsMark() bool {
	b := k.block
	return !k.failing && (k.usage.CallsMark-k.calls <= b/2 ||
		(k.usage.DayMark-k.count <= b/2 && (k.plan.Limit == 0 || k.usage.DayMark < k.plan.Limit)))
}

// usable reports why the key may not be used now, if it may not. Under mu.
func (k *Counter) usable(now time.Time, scope string) error {
	if k.rec.Status != "active" {
		return domain.ErrKeyRevoked
	}
	if k.rec.ExpiresAt != nil && !now.Before(*k.rec.ExpiresAt) {
		return domain.ErrKeyExpired
	}
	if scope != "" && !slices.Contains(k.rec.Scopes, scope) {
		return fmt.Errorf("%w: %s", domain.ErrInsufficientScope, scope)
	}
	return nil
}

// rollDay starts a new day's count at the first call of a new UTC day. Under mu. It only goes
// forward: a caller reads the clock before it waits for mu, so a reading from just before
// midnight may arrive after another caller rolled the day; it counts toward the current day
// (going back would zero the new day's count, and the cap could be passed at every midnight).
func (k *Counter) rollDay(now time.Time) {
	if !k.dayEnd.IsZero() && now.Before(k.dayEnd) {
		return
	}
	if old := k.day; k.setDay(now) != old {
		k.count = 0
		k.usage.Day, k.usage.DayMark = k.day, 0
	}
}

// setDay makes now's UTC day the current one and returns it. Under mu.
func (k *Counter) setDay(now time.Time) string {
	y, m, d := now.UTC().Date()
	k.dayStart = time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	k.dayEnd = k.dayStart.AddDate(0, 0, 1)
	k.day = k.dayStart.Format(time.DateOnly)
	return k.day
}

// resultAt is the key's view at now. Under mu.
func (k *Counter) resultAt(now time.Time, err error) Result {
	reset := k.dayEnd
	if !now.Before(reset) {
		reset = nextDay(now)
	}
	r := Result{Grant: domain.Grant{
		Key: k.rec, Plan: k.plan.Name, Limit: k.plan.Limit, Used: k.count,
		Reset: reset, APICalls: k.calls,
	}, Err: err}
	if k.plan.Limit > 0 {
		r.Remaining = max(k.plan.Limit-k.count, 0)
	}
	return r
}

// Key is the actor of one API key: the Counter's loader, the writer of its marks and record,
// and where a call the marks do not cover waits for them.
type Key struct {
	deps Deps
	id   string
	c    *Counter
	mark mark.Mark[*Authorize]
}

// New returns the producer of the actor of counter c's key.
func New(c *Counter, deps Deps) actor.Producer {
	if deps.Block <= 0 {
		deps.Block = 1000
	}
	return func() actor.Receiver { return &Key{deps: deps, id: c.id, c: c} }
}

// Receive implements actor.Receiver.
func (k *Key) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		k.load(c)
	case *Authorize:
		k.c.mu.Lock()
		k.authorize(c, m)
	case *Get:
		k.c.mu.Lock()
		r := Result{Err: domain.ErrKeyNotFound}
		if !k.c.deleted {
			r = k.c.resultAt(k.deps.Clock.Now(), nil)
		}
		k.c.mu.Unlock()
		m.Reply <- r
	case *Update:
		m.Reply <- k.update(m)
	case SetPlan:
		k.c.mu.Lock()
		k.c.plan = m.Plan
		k.c.block = k.block()
		k.c.mu.Unlock()
	case Refund:
		k.c.mu.Lock()
		if m.Day == k.c.day && k.c.count > 0 {
			k.c.count--
		}
		k.c.mu.Unlock()
	case *Delete:
		k.delete(c, m)
	case mark.Saved:
		k.saved(c, m)
	case reserveAhead:
		k.c.mu.Lock()
		if k.c.loaded && !k.c.deleted {
			k.reserve(c)
		}
		k.c.mu.Unlock()
	case mark.Retry:
		k.c.mu.Lock()
		if k.mark.Retried() && k.c.loaded && !k.c.deleted {
			k.reserve(c)
		}
		k.c.mu.Unlock()
	case actor.Stopped:
		k.flush()
	}
}

// load rebuilds the actor from storage; it runs on every (re)start. After a crash the counters
// resume from the durable marks, which are never below what was granted.
func (k *Key) load(c *actor.Context) {
	kc := k.c
	kc.mu.Lock()
	kc.notify = mark.To(c)
	kc.mu.Unlock()
	rec, err := k.deps.Store.GetKey(k.id)
	if err != nil {
		k.deps.Log.Error("key actor: load record", "key_id", k.id, "err", err)
		return
	}
	u, err := k.deps.Store.GetKeyUsage(k.id)
	if err != nil {
		k.deps.Log.Error("key actor: load usage", "key_id", k.id, "err", err)
		return
	}
	kc.mu.Lock()
	kc.rec, kc.usage, kc.loaded, kc.asked = rec, u, true, false
	kc.block = k.block()
	kc.setDay(k.deps.Clock.Now())
	kc.calls = u.CallsMark
	if u.Day == kc.day {
		kc.count = u.DayMark
	} else {
		kc.count, kc.usage.Day, kc.usage.DayMark = 0, kc.day, 0
	}
	kc.mu.Unlock()
	k.publish(rec)
}

// authorize answers an Authorize; called with mu held, it unlocks it.
func (k *Key) authorize(c *actor.Context, m *Authorize) {
	kc := k.c
	if kc.deleted {
		kc.mu.Unlock()
		m.Reply <- Result{Err: domain.ErrUnknownKey}
		return
	}
	if !kc.loaded {
		kc.mu.Unlock()
		m.Reply <- Result{Err: domain.ErrUnavailable}
		return
	}
	// While storage refuses the mark, the call goes on counted in memory; the retry writes it.
	r, ok := kc.take(k.deps.Clock.Now(), m.Scope, k.mark.Failing())
	if !ok {
		// Not covered by a durable mark yet: wait for the reservation in flight.
		k.mark.Park(m)
		k.reserve(c)
		kc.mu.Unlock()
		return
	}
	if r.Err == nil && kc.wantsMark() {
		k.reserve(c)
	}
	kc.mu.Unlock()
	m.Reply <- r
}

// block is how many calls one durable mark reserves: 1 % of the daily cap (at least 1, at most
// deps.Block), so a kill -9, which loses what the last mark reserved and did not use, costs a
// key at most 1 % of its day (a 300-a-day key: 3 calls, not 98). Without a cap, deps.Block.
// Under mu.
func (k *Key) block() int64 { return mark.Block(k.c.plan.Limit, 100, k.deps.Block) }

// reserve commits the next block of marks in the background; the outcome comes back as a
// mark.Saved message, so Receive never waits on the disk. Under mu.
func (k *Key) reserve(c *actor.Context) {
	if k.mark.Writing() {
		return // its landing re-runs the parked calls, which reserve again if they need to
	}
	kc := k.c
	b := kc.block
	next := domain.KeyUsage{Day: kc.day, DayMark: kc.count + b, CallsMark: kc.calls + b}
	if kc.plan.Limit > 0 && next.DayMark > kc.plan.Limit {
		next.DayMark = max(kc.plan.Limit, kc.usage.DayMark)
	}
	store, id := k.deps.Store, k.id
	k.mark.Write(c, next, func(ctx context.Context) error { return store.PutKeyUsage(ctx, id, next) })
}

func (k *Key) saved(c *actor.Context, s mark.Saved) {
	parked, _ := k.mark.Landed(c, s, k.deps.Log, "key actor: usage mark", "key_id", k.id)
	kc := k.c
	kc.mu.Lock()
	kc.failing, kc.asked = k.mark.Failing(), false
	if s.Err == nil {
		u := s.Snapshot.(domain.KeyUsage)
		if u.Day == kc.day {
			kc.usage.DayMark = max(kc.usage.DayMark, u.DayMark)
		}
		kc.usage.CallsMark = max(kc.usage.CallsMark, u.CallsMark)
	}
	if kc.loaded && !kc.deleted && kc.wantsMark() {
		// Callers counted past half the new block while it was written.
		k.reserve(c)
	}
	kc.mu.Unlock()
	// Covered now, or (the write failed) going on in memory.
	for _, p := range parked {
		kc.mu.Lock()
		k.authorize(c, p)
	}
}

func (k *Key) update(m *Update) error {
	kc := k.c
	kc.mu.Lock()
	deleted, loaded, rec := kc.deleted, kc.loaded, kc.rec
	kc.mu.Unlock()
	if deleted {
		return domain.ErrKeyNotFound
	}
	if !loaded {
		return domain.ErrUnavailable
	}
	if m.Name != nil {
		rec.Name = *m.Name
	}
	if m.Status != nil {
		rec.Status = *m.Status
	}
	if err := k.deps.Store.PutKey(context.Background(), rec); err != nil {
		return fmt.Errorf("%w: %w", domain.ErrUnavailable, err)
	}
	kc.mu.Lock()
	kc.rec = rec
	kc.mu.Unlock()
	k.publish(rec)
	return nil
}

func (k *Key) delete(c *actor.Context, m *Delete) {
	kc := k.c
	kc.mu.Lock()
	deleted := kc.deleted
	kc.mu.Unlock()
	if deleted {
		m.Reply <- domain.ErrKeyNotFound
		return
	}
	if err := k.deps.Store.DeleteKey(context.Background(), k.id); err != nil && !errors.Is(err, domain.ErrRecordNotFound) {
		m.Reply <- fmt.Errorf("%w: %w", domain.ErrUnavailable, err)
		return
	}
	kc.mu.Lock()
	kc.deleted = true
	kc.mu.Unlock()
	for _, p := range k.mark.Take() {
		p.Reply <- Result{Err: domain.ErrUnknownKey}
	}
	m.Reply <- nil
	c.Engine().Poison(c.PID())
}

// flush writes the exact counters on a stop, so a graceful restart loses no allowance.
func (k *Key) flush() {
	k.mark.Wait() // a mark in flight must not land after the exact counters
	kc := k.c
	kc.mu.Lock()
	loaded := kc.loaded && !kc.deleted
	kc.loaded = false // callers go to the actor, which is gone: no call is counted after this
	u := domain.KeyUsage{Day: kc.day, DayMark: kc.count, CallsMark: kc.calls}
	kc.mu.Unlock()
	if !loaded {
		return
	}
	if err := k.deps.Store.PutKeyUsage(context.Background(), k.id, u); err != nil {
		k.deps.Log.Warn("key actor: flush usage", "key_id", k.id, "err", err)
	}
}

func (k *Key) publish(rec domain.APIKey) {
	if k.deps.Publisher != nil {
		k.deps.Publisher.Publish(rec)
	}
}

func nextDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}
