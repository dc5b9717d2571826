// Package account is the actor of one user's monthly message allowance: reservations in
// memory, the count written behind, and a durable mark raised a block ahead so that a crash
// never lets a user exceed the monthly limit.
//
// Imports: domain, actors/internal/mark (the durable-mark protocol it shares with the key
// actor) and hollywood; what the actor needs from the rest of the gateway is declared
// here as interfaces (Store, Clock). Only the engine imports it: it spawns one actor per user
// (on first use) and implements those interfaces (persist.Accounts is the Store).
//
// Concurrency: the count is a Counter, shared by the actor and the callers under its mutex: a
// reservation the durable mark covers, and every settlement, are made by the caller at once
// (TryReserve, Settle), without a message to the actor (two of a send's four actor messages,
// issue 21). Whatever needs the disk is the actor's: raising the mark, the parked reservations
// waiting for it, the writes of the count. Receive never waits on the disk: a worker goroutine
// writes the snapshot (one write in flight at a time) and reports back with a message.
package account

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/actors/internal/mark"
	"github.com/gateway/gateway/domain"
)

// Store persists account snapshots (persist.Accounts).
type Store interface {
	GetAccount(userID string) (domain.Allowance, error) // zero state and nil when none
	PutAccount(ctx context.Context, s domain.Allowance) error
}

// Clock is the actor's time: the month a count belongs to, and the reset it reports.
type Clock interface {
	Now() time.Time
}

// Deps are the account actor's collaborators.
type Deps struct {
	Store Store
	Clock Clock
	Log   *slog.Logger
	// FlushEvery is how often, at most, the count alone is written (0: accountFlushEvery): a
	// store whose boot recounts what a kill -9 left out (Seeds) can write it seldom.
	FlushEvery time.Duration
}

// Account-actor messages.
type (
	// Reserve asks for up to N messages of this month's allowance. Granted may be less than N
	// (a bulk batch is clipped); zero with domain.ErrQuotaExceeded when none is left.
	Reserve struct {
		N int64
		// Force grants N whatever is left: a message accepted before a crash and sent again
		// at boot must be counted, not refused.
		Force bool
		// Reclaim takes back, first, allowance the last process held (its reservations count
		// in the mark it left, which boot sees as ghost): a campaign resumed or a message
		// recovered at boot re-takes its own reservation instead of taking it twice.
		Reclaim bool
		Reply   chan Result

		reclaimed int64 // taken from the ghost (set by the actor)
	}
	// Settle reports the outcome of reserved messages: Sent succeeded, Unreserve is how much of
	// the reservation to give back (successes included). A message re-sent at boot after a
	// crash is reserved again (Force) and settles like any other.
	Settle struct {
		Sent, Unreserve int64
		At              int64 // when the Sent messages were sent (ms; 0: unknown)
	}
	// Get answers the current allowance.
	Get struct{ Reply chan Result }
	// SetLimit changes the monthly limit (the plan changed).
	SetLimit struct{ Limit int64 }

	accountFlush struct{}
)

// Result is the allowance after a message. Err rides in the reply because the reply is a
// channel message; the engine returns it as its own error value.
type Result struct {
	Granted   int64
	Sent      int64 // messagesSent this month
	Limit     int64 // monthly limit, 0 = none
	Remaining int64 // allowance left, reservations deducted (0 when Limit is 0)
	Reset     time.Time
	Err       error
}

// Failure is the reply's error (the engine's ask returns it).
func (r Result) Failure() error { return r.Err }

// Counter is one user's monthly count, shared by the account actor and its callers. After a
// kill -9 the allowance between the persisted Sent and Mark counts as used (at most one block
// lost, never the limit exceeded); a graceful stop writes the exact count. Sent is written
// behind (at most every Deps.FlushEvery, one commit in flight at a time), so the send path
// waits on the disk only when a reservation passes the durable Mark, which is then raised a
// block ahead. Each snapshot says how many of its messages were sent lately (recent.go), so
// that a boot recounting the outbox (Seeds) restores what a kill -9 left out of it.
type Counter struct {
	mu       sync.Mutex
	limit    int64
	st       domain.Allowance // st.Mark is the mark known to be durable
	reserved int64
	ghost    int64 // allowance of the last process whose fate is unknown (crash leftovers)
	wantMark int64
	loaded   bool // false before the load and after the stop: callers go to the actor
	// loadErr is why the load failed (a reservation's error says it: a cluster partition whose
	// store closed under it is node_unavailable, and the request runs again on its next owner)
	loadErr error
	failing bool // the last mark write failed (the actor's mark.Failing, mirrored)
	dirty   bool
	// flushQueued: a write of the count is scheduled.
	flushQueued bool
	// periodStart, periodEnd bound st.Period: the hot path compares times, and formats the
	// month only when it rolls (the text on every reservation showed in a send's profile).
	periodStart, periodEnd time.Time
	// notify sends a message to the actor: set at its start, before loaded (a settlement
	// needs a reservation, which needs the account loaded).
	notify func(msg any)
	// recent: the messages counted lately, by the second they were sent (snapshots' Recent).
	recent     recent
	flushEvery time.Duration
}

// NewCounter returns user userID's counter, with the monthly limit (0 = none).
func NewCounter(userID string, limit int64) *Counter {
	return &Counter{limit: limit, st: domain.Allowance{UserID: userID}}
}

// raiseMark asks the actor to write the mark wanted (a reservation made by a caller came within
// half a block of it).
type raiseMark struct{}

// TryReserve reserves n messages at now when the durable mark covers them, as a Reserve would
// (granted may be less than n; none left: domain.ErrQuotaExceeded), and reports ok. Not ok: the
// reservation needs the actor (a mark to raise first, the account not loaded): send a Reserve.
func (a *Counter) TryReserve(now time.Time, n int64) (r Result, ok bool) {
	a.mu.Lock()
	if !a.loaded {
		a.mu.Unlock()
		return Result{}, false
	}
	a.roll(now)
	granted := n
	if a.limit > 0 {
		granted = min(n, max(a.limit-a.used(), 0))
		if a.used()+granted > a.st.Mark {
			a.mu.Unlock()
			return Result{}, false
		}
	}
	a.reserved += granted
	raise := a.raiseAhead()
	r = a.result(now)
	notify := a.notify
	a.mu.Unlock()
	if raise {
		notify(raiseMark{})
	}
	r.Granted = granted
	if granted == 0 && n > 0 {
		r.Err = domain.ErrQuotaExceeded
	}
	return r, true
}

// Settle reports the outcome of reserved messages (see the Settle message): sent succeeded,
// unreserve is how much of the reservation to give back (successes included).
func (a *Counter) Settle(now time.Time, sent, unreserve int64) {
	a.SettleAt(now, 0, sent, unreserve)
}

// SettleAt is Settle of sent messages sent at (ms; their outcome's send time, 0: unknown).
func (a *Counter) SettleAt(now time.Time, at int64, sent, unreserve int64) {
	a.mu.Lock()
	if !a.loaded && a.notify != nil {
		// Before the load (which would overwrite it), the actor applies it after loading.
		notify := a.notify
		a.mu.Unlock()
		notify(Settle{Sent: sent, Unreserve: unreserve, At: at})
		return
	}
	a.settle(now, at, sent, unreserve)
}

// settle applies a settlement and unlocks mu.
func (a *Counter) settle(now time.Time, at, sent, unreserve int64) {
	a.roll(now)
	a.st.Sent += sent
	if sent > 0 && at >= a.periodStart.UnixMilli() {
		a.recent.note(at, sent)
	}
	a.reserved = max(a.reserved-unreserve, 0)
	flush := sent > 0 && !a.flushQueued && a.notify != nil
	if flush {
		// Coalesce the writes of the count (they cost 7 % of a send's CPU one per commit).
		a.flushQueued = true
	}
	notify := a.notify
	a.mu.Unlock()
	if flush {
		time.AfterFunc(untilTick(time.Now(), a.flushEvery), func() { notify(accountFlush{}) })
	}
}

// untilTick is how long from now until the next multiple of every since the Unix epoch (at
// most every). Every account's count is written on the same ticks, not each on a phase of
// its own, so the writes of all busy users land together and share their commit and its sync:
// with --fsync batch, 100 busy users each written once a second on their own phases were
// about 100 synced commits a second (bench/README.md, "Twenty-seventh look").
func untilTick(now time.Time, every time.Duration) time.Duration {
	return every - time.Duration(now.UnixNano()%int64(every))
}

// raiseAhead raises the mark wanted while half a block is still covered, so reservations
// seldom wait for it; true when the actor should write it. Called under mu.
func (a *Counter) raiseAhead() bool {
	if a.limit > 0 && a.used()+a.block()/2 > a.wantMark && a.wantMark < a.limit {
		a.wantMark = max(a.wantMark, min(a.limit, a.used()+a.block()))
		return !a.failing
	}
	return false
}

// block is how far ahead the durable mark is raised: 0.2 % of the monthly limit, 1 to 1,000
// messages. A kill -9 counts at most one block as used (a 500-message month: 1, where a floor
// of 20 cost up to 4 % of the month per crash). Months under 1,000 messages pay for it with a
// commit that every other reservation waits for (their block of 1 is not raised ahead).
func (a *Counter) block() int64 { return mark.Block(a.limit, 500, 1000) }

func (a *Counter) used() int64 { return a.st.Sent + a.reserved + a.ghost }

// roll starts a new period at the first message of a new UTC month. Called under mu. It only
// goes forward: a caller's clock reading from before the month's end may arrive after another
// caller rolled the period; it counts toward the current one (going back would zero the new
// month's count and mark, and the allowance could be passed).
func (a *Counter) roll(now time.Time) {
	if !a.periodEnd.IsZero() && now.Before(a.periodEnd) {
		return
	}
	y, m, _ := now.UTC().Date()
	a.periodStart = time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	a.periodEnd = a.periodStart.AddDate(0, 1, 0)
	if p := a.periodStart.Format("2006-01"); p != a.st.Period {
		a.st.Period, a.st.Sent, a.st.Mark, a.wantMark, a.ghost = p, 0, 0, 0, 0
		a.recent = recent{}
	}
}

// result is the allowance at now. Called under mu.
func (a *Counter) result(now time.Time) Result {
	reset := a.periodEnd
	if !now.Before(reset) {
		reset = nextMonth(now)
	}
	r := Result{Sent: a.st.Sent, Limit: a.limit, Reset: reset}
	if a.limit > 0 {
		r.Remaining = max(a.limit-a.used(), 0)
	}
	return r
}

// Account is the actor of one user's monthly allowance: the Counter's loader and the writer of
// its marks and count, and where a reservation the mark does not cover waits for it.
type Account struct {
	deps Deps
	uid  string
	c    *Counter
	mark mark.Mark[*Reserve] // the snapshot writer; reservations wait in it for their mark
}

// accountFlushEvery is how often, at most, the count alone is written.
const accountFlushEvery = 20 * time.Millisecond

// New returns the producer of a user's account actor, on its counter.
func New(c *Counter, deps Deps) actor.Producer {
	return func() actor.Receiver { return &Account{deps: deps, uid: c.st.UserID, c: c} }
}

// Receive implements actor.Receiver.
func (a *Account) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		a.load(c)
	case *Reserve:
		a.reserve(c, m)
	case Settle:
		a.c.mu.Lock()
		a.c.settle(a.deps.Clock.Now(), m.At, m.Sent, m.Unreserve)
	case accountFlush:
		a.c.mu.Lock()
		a.c.flushQueued = false
		a.c.mu.Unlock()
		a.save(c)
	case raiseMark:
		a.save(c)
	case *Get:
		a.c.mu.Lock()
		now := a.deps.Clock.Now()
		a.c.roll(now)
		r := a.c.result(now)
		a.c.mu.Unlock()
		m.Reply <- r
	case SetLimit:
		a.c.mu.Lock()
		a.c.limit = m.Limit
		a.c.mu.Unlock()
	case mark.Saved:
		a.saved(c, m)
	case mark.Retry:
		if a.mark.Retried() {
			a.c.mu.Lock()
			loaded := a.c.loaded
			a.c.mu.Unlock()
			if loaded {
				a.save(c)
			}
		}
	case actor.Stopped:
		a.mark.Wait() // a save in flight must not land after the exact count
		a.c.mu.Lock()
		loaded := a.c.loaded
		a.c.loaded = false // callers go to the actor, which is gone: no reservation after this
		st := a.c.st
		st.Mark = a.c.used()
		a.c.stamp(&st, a.deps.Clock.Now())
		a.c.mu.Unlock()
		if loaded {
			if err := a.deps.Store.PutAccount(context.Background(), st); err != nil {
				a.deps.Log.Warn("account actor: flush", "user_id", a.uid, "err", err)
			}
		}
	}
}

func (a *Account) reserve(c *actor.Context, m *Reserve) {
	ac := a.c
	ac.mu.Lock()
	now := a.deps.Clock.Now()
	ac.roll(now)
	if !ac.loaded {
		var err error = domain.ErrUnavailable
		if ac.loadErr != nil {
			err = fmt.Errorf("%w: the account could not be read: %v", domain.ErrUnavailable, ac.loadErr)
		}
		ac.mu.Unlock()
		m.Reply <- Result{Err: err}
		return
	}
	if m.Reclaim {
		take := min(ac.ghost, m.N)
		ac.ghost -= take
		ac.reserved += take
		m.N, m.reclaimed, m.Reclaim = m.N-take, take, false // the rest is a new reservation
	}
	granted := m.N
	if ac.limit > 0 && !m.Force {
		granted = min(m.N, max(ac.limit-ac.used(), 0))
		if need := ac.used() + granted; need > ac.st.Mark {
			if a.mark.Failing() {
				ac.mu.Unlock()
				// Storage refuses the mark (a full disk): nothing could be accepted anyway.
				m.Reply <- Result{Err: fmt.Errorf("%w: the allowance mark cannot be saved", domain.ErrStorageUnavailable)}
				return
			}
			// Not covered by a durable mark yet: raise it a block ahead, then answer.
			ac.wantMark = max(ac.wantMark, min(ac.limit, need+ac.block()))
			ac.mu.Unlock()
			a.mark.Park(m)
			a.save(c)
			return
		}
	}
	ac.reserved += granted
	raise := ac.raiseAhead()
	r := ac.result(now)
	ac.mu.Unlock()
	if raise {
		a.save(c)
	}
	r.Granted = granted + m.reclaimed
	if r.Granted == 0 && m.N > 0 {
		r.Err = domain.ErrQuotaExceeded
	}
	m.Reply <- r
}

func (a *Account) load(c *actor.Context) {
	ac := a.c
	ac.mu.Lock()
	ac.notify = mark.To(c)
	ac.flushEvery = a.deps.FlushEvery
	if ac.flushEvery <= 0 {
		ac.flushEvery = accountFlushEvery
	}
	ac.mu.Unlock()
	uid := a.uid
	st, err := a.deps.Store.GetAccount(uid)
	if err != nil {
		a.deps.Log.Error("account actor: load", "user_id", uid, "err", err)
		ac.mu.Lock()
		ac.loadErr = err
		ac.mu.Unlock()
		return
	}
	st.UserID = uid
	ac.mu.Lock()
	defer ac.mu.Unlock()
	ac.st, ac.loaded = st, true
	ac.periodStart, ac.periodEnd = time.Time{}, time.Time{}
	ac.roll(a.deps.Clock.Now())
	// A mark above the count is allowance a crashed process may have used.
	ac.ghost = max(ac.st.Mark-ac.st.Sent, 0)
	ac.wantMark = ac.st.Mark
	if s, ok := a.deps.Store.(Seeds); ok {
		for _, at := range s.SentSeeds(uid) {
			if int64(at) >= ac.periodStart.UnixMilli() {
				ac.recent.note(int64(at), 1)
			}
		}
	}
}

// save writes the snapshot with the mark wanted, on the mark's worker (one write in flight; a
// save asked for meanwhile follows it).
func (a *Account) save(c *actor.Context) {
	ac := a.c
	ac.mu.Lock()
	ac.dirty = false
	st := ac.st
	st.Mark = max(st.Mark, ac.wantMark)
	ac.stamp(&st, a.deps.Clock.Now())
	ac.mu.Unlock()
	store := a.deps.Store
	a.mark.Write(c, st, func(ctx context.Context) error { return store.PutAccount(ctx, st) })
}

func (a *Account) saved(c *actor.Context, s mark.Saved) {
	ac := a.c
	parked, again := a.mark.Landed(c, s, a.deps.Log, "account actor: allowance", "user_id", a.uid)
	ac.mu.Lock()
	ac.failing = a.mark.Failing()
	if s.Err != nil {
		ac.dirty = true
		ac.wantMark = ac.st.Mark
		ac.mu.Unlock()
		for _, p := range parked {
			p.Reply <- Result{Err: fmt.Errorf("%w: storage: %w", domain.ErrUnavailable, s.Err)}
		}
		return
	}
	if st := s.Snapshot.(domain.Allowance); st.Period == ac.st.Period { // a mark of a month that has ended means nothing now
		ac.st.Mark = max(ac.st.Mark, st.Mark)
	}
	ac.mu.Unlock()
	for _, p := range parked {
		a.reserve(c, p)
	}
	ac.mu.Lock()
	more := again || ac.dirty || ac.wantMark > ac.st.Mark
	ac.mu.Unlock()
	if more {
		a.save(c)
	}
}

func nextMonth(t time.Time) time.Time {
	y, m, _ := t.UTC().Date()
	return time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
}
