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
// Concurrency: every field of Key is owned by the actor's goroutine. Receive never waits on the
// disk for a mark: a worker goroutine writes it and reports back with a message.
package key

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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
	// Block is how many requests (and api_calls) are reserved durably at a time: the hot path
	// writes once per Block requests, and a crash loses at most one Block of allowance.
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

// Key is the actor of one API key: its record and its daily rate limiter.
// All fields are owned by the actor's goroutine.
type Key struct {
	deps Deps
	id   string
	plan Plan

	rec     domain.APIKey
	loaded  bool
	deleted bool
	day     string // UTC day of count
	// dayStart, dayEnd bound day: the hot path compares times, and formats a day only when it
	// rolls (the text on every call was a measurable part of a send, issue 21).
	dayStart, dayEnd time.Time
	count            int64 // requests counted today
	calls            int64 // api_calls, all time
	// usage is the durable high-water mark: count may not pass usage.DayMark and calls may not
	// pass usage.CallsMark until a larger mark is committed (unless storage refuses it).
	usage domain.KeyUsage
	mark  mark.Mark[*Authorize]
}

// New returns the producer of the actor for key id.
func New(id string, plan Plan, deps Deps) actor.Producer {
	if deps.Block <= 0 {
		deps.Block = 100
	}
	return func() actor.Receiver { return &Key{deps: deps, id: id, plan: plan} }
}

// Receive implements actor.Receiver.
func (k *Key) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		k.load()
	case *Authorize:
		k.authorize(c, m)
	case *Get:
		if k.deleted {
			m.Reply <- Result{Err: domain.ErrKeyNotFound}
			return
		}
		m.Reply <- k.result(nil)
	case *Update:
		m.Reply <- k.update(m)
	case SetPlan:
		k.plan = m.Plan
	case Refund:
		if m.Day == k.day && k.count > 0 {
			k.count--
		}
	case *Delete:
		k.delete(c, m)
	case mark.Saved:
		k.saved(c, m)
	case mark.Retry:
		if k.mark.Retried() && k.loaded && !k.deleted {
			k.reserve(c)
		}
	case actor.Stopped:
		k.flush()
	}
}

// load rebuilds the actor from storage; it runs on every (re)start. After a crash the counters
// resume from the durable marks, which are never below what was granted.
func (k *Key) load() {
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
	k.rec, k.usage, k.loaded = rec, u, true
	k.setDay(k.deps.Clock.Now())
	k.calls = u.CallsMark
	if u.Day == k.day {
		k.count = u.DayMark
	} else {
		k.count, k.usage.Day, k.usage.DayMark = 0, k.day, 0
	}
	k.publish()
}

func (k *Key) authorize(c *actor.Context, m *Authorize) {
	if k.deleted {
		m.Reply <- Result{Err: domain.ErrUnknownKey}
		return
	}
	if !k.loaded {
		m.Reply <- Result{Err: domain.ErrUnavailable}
		return
	}
	now := k.deps.Clock.Now()
	k.rollDay(now)
	if err := k.usable(now, m.Scope); err != nil {
		m.Reply <- k.resultAt(now, err)
		return
	}
	if k.plan.Limit > 0 && k.count >= k.plan.Limit {
		m.Reply <- k.resultAt(now, domain.ErrRateLimited)
		return
	}
	if (k.count >= k.usage.DayMark || k.calls >= k.usage.CallsMark) && !k.mark.Failing() {
		// Not covered by a durable mark yet: wait for the reservation in flight. (While
		// storage refuses the mark, the call goes on counted in memory; the retry writes it.)
		k.mark.Park(m)
		k.reserve(c)
		return
	}
	k.count++
	k.calls++
	m.Reply <- k.resultAt(now, nil)
	// Reserve the next block ahead of need so the hot path rarely waits for a commit (while
	// storage refuses marks, the retry writes them).
	b := k.block()
	if !k.mark.Failing() && (k.usage.CallsMark-k.calls <= b/2 ||
		(k.usage.DayMark-k.count <= b/2 && (k.plan.Limit == 0 || k.usage.DayMark < k.plan.Limit))) {
		k.reserve(c)
	}
}

// block is how many calls one durable mark reserves: 1 % of the daily cap (at least 1, at most
// deps.Block), so a kill -9, which loses what the last mark reserved and did not use, costs a
// key at most 1 % of its day (a 300-a-day key: 3 calls, not 98). Without a cap, deps.Block.
func (k *Key) block() int64 { return mark.Block(k.plan.Limit, 100, k.deps.Block) }

// usable reports why the key may not be used now, if it may not.
func (k *Key) usable(now time.Time, scope string) error {
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

// reserve commits the next block of marks in the background; the outcome comes back as a
// mark.Saved message, so Receive never waits on the disk.
func (k *Key) reserve(c *actor.Context) {
	if k.mark.Writing() {
		return // its landing re-runs the parked calls, which reserve again if they need to
	}
	b := k.block()
	next := domain.KeyUsage{Day: k.day, DayMark: k.count + b, CallsMark: k.calls + b}
	if k.plan.Limit > 0 && next.DayMark > k.plan.Limit {
		next.DayMark = max(k.plan.Limit, k.usage.DayMark)
	}
	store, id := k.deps.Store, k.id
	k.mark.Write(c, next, func(ctx context.Context) error { return store.PutKeyUsage(ctx, id, next) })
}

func (k *Key) saved(c *actor.Context, s mark.Saved) {
	parked, _ := k.mark.Landed(c, s, k.deps.Log, "key actor: usage mark", "key_id", k.id)
	if s.Err == nil {
		u := s.Snapshot.(domain.KeyUsage)
		if u.Day == k.day {
			k.usage.DayMark = max(k.usage.DayMark, u.DayMark)
		}
		k.usage.CallsMark = max(k.usage.CallsMark, u.CallsMark)
	}
	// Covered now, or (the write failed) going on in memory.
	for _, p := range parked {
		k.authorize(c, p)
	}
}

func (k *Key) rollDay(now time.Time) {
	if !now.Before(k.dayStart) && now.Before(k.dayEnd) {
		return
	}
	if old := k.day; k.setDay(now) != old {
		k.count = 0
		k.usage.Day, k.usage.DayMark = k.day, 0
	}
}

// setDay makes now's UTC day the current one and returns it.
func (k *Key) setDay(now time.Time) string {
	y, m, d := now.UTC().Date()
	k.dayStart = time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
	k.dayEnd = k.dayStart.AddDate(0, 0, 1)
	k.day = k.dayStart.Format(time.DateOnly)
	return k.day
}

func (k *Key) update(m *Update) error {
	if k.deleted {
		return domain.ErrKeyNotFound
	}
	if !k.loaded {
		return domain.ErrUnavailable
	}
	rec := k.rec
	if m.Name != nil {
		rec.Name = *m.Name
	}
	if m.Status != nil {
		rec.Status = *m.Status
	}
	if err := k.deps.Store.PutKey(context.Background(), rec); err != nil {
		return fmt.Errorf("%w: %w", domain.ErrUnavailable, err)
	}
	k.rec = rec
	k.publish()
	return nil
}

func (k *Key) delete(c *actor.Context, m *Delete) {
	if k.deleted {
		m.Reply <- domain.ErrKeyNotFound
		return
	}
	if err := k.deps.Store.DeleteKey(context.Background(), k.id); err != nil && !errors.Is(err, domain.ErrRecordNotFound) {
		m.Reply <- fmt.Errorf("%w: %w", domain.ErrUnavailable, err)
		return
	}
	k.deleted = true
	for _, p := range k.mark.Take() {
		p.Reply <- Result{Err: domain.ErrUnknownKey}
	}
	m.Reply <- nil
	c.Engine().Poison(c.PID())
}

// flush writes the exact counters on a stop, so a graceful restart loses no allowance.
func (k *Key) flush() {
	if !k.loaded || k.deleted {
		return
	}
	k.mark.Wait() // a mark in flight must not land after the exact counters
	u := domain.KeyUsage{Day: k.day, DayMark: k.count, CallsMark: k.calls}
	if err := k.deps.Store.PutKeyUsage(context.Background(), k.id, u); err != nil {
		k.deps.Log.Warn("key actor: flush usage", "key_id", k.id, "err", err)
	}
}

func (k *Key) publish() {
	if k.deps.Publisher != nil {
		k.deps.Publisher.Publish(k.rec)
	}
}

func (k *Key) result(err error) Result { return k.resultAt(k.deps.Clock.Now(), err) }

func (k *Key) resultAt(now time.Time, err error) Result {
	reset := k.dayEnd
	if now.Before(k.dayStart) || !now.Before(reset) {
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

func nextDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}
