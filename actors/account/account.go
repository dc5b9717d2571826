// Package account is the actor of one user's monthly message allowance: reservations in
// memory, the count written behind, and a durable mark raised a block ahead so that a crash
// never lets a user exceed the monthly limit.
//
// Imports: domain, actors/internal/mark (the durable-mark protocol it shares with the key
// actor) and hollywood; what the actor needs from the rest of the gateway is declared
// here as interfaces (Store, Clock). Only the engine imports it: it spawns one actor per user
// (on first use) and implements those interfaces (persist.Accounts is the Store).
//
// Concurrency: every field of Account is owned by the actor's goroutine. Receive never waits on
// the disk: a worker goroutine writes the snapshot (one write in flight at a time) and reports
// back with a message.
package account

import (
	"context"
	"fmt"
	"log/slog"
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
	Settle struct{ Sent, Unreserve int64 }
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

// Account is the actor of one user's monthly allowance. Reservations are in memory; Sent is
// written behind (at most every 20 ms, one commit in flight at a time), so
// the send path rarely waits on the disk: only when a reservation passes the durable Mark,
// which is then raised a block ahead. After a kill -9 the allowance between the persisted Sent
// and Mark counts as used (at most one block lost, never the limit exceeded); a graceful stop
// writes the exact count.
type Account struct {
	deps     Deps
	limit    int64
	st       domain.Allowance // st.Mark is the mark known to be durable
	reserved int64
	ghost    int64 // allowance of the last process whose fate is unknown (crash leftovers)
	wantMark int64
	mark     mark.Mark[*Reserve] // the snapshot writer; reservations wait in it for their mark
	loaded   bool
	dirty    bool
	// periodStart, periodEnd bound st.Period: the hot path compares times, and formats the
	// month only when it rolls (the text on every reservation showed in a send's profile).
	periodStart, periodEnd time.Time
	// flushQueued: a write of the count is scheduled.
	flushQueued bool
}

// accountFlushEvery is how often, at most, the count alone is written.
const accountFlushEvery = 20 * time.Millisecond

// block is how far ahead the durable mark is raised: 0.2 % of the monthly limit, 1 to 1,000
// messages. A kill -9 counts at most one block as used (a 500-message month: 1, where a floor
// of 20 cost up to 4 % of the month per crash). Months under 1,000 messages pay for it with a
// commit that every other reservation waits for (their block of 1 is not raised ahead).
func (a *Account) block() int64 { return mark.Block(a.limit, 500, 1000) }

// New returns the producer of a user's account actor.
func New(userID string, limit int64, deps Deps) actor.Producer {
	return func() actor.Receiver { return &Account{deps: deps, limit: limit, st: domain.Allowance{UserID: userID}} }
}

// Receive implements actor.Receiver.
func (a *Account) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		a.load()
	case *Reserve:
		a.reserve(c, m)
	case Settle:
		a.roll()
		a.st.Sent += m.Sent
		a.reserved = max(a.reserved-m.Unreserve, 0)
		if m.Sent > 0 && !a.flushQueued {
			// Coalesce the writes of the count (they cost 7 % of a send's CPU one per commit).
			a.flushQueued = true
			hw, self := c.Engine(), c.PID()
			time.AfterFunc(accountFlushEvery, func() { hw.Send(self, accountFlush{}) })
		}
	case accountFlush:
		a.flushQueued = false
		a.save(c)
	case *Get:
		a.roll()
		m.Reply <- a.result()
	case SetLimit:
		a.limit = m.Limit
	case mark.Saved:
		a.saved(c, m)
	case mark.Retry:
		if a.mark.Retried() && a.loaded {
			a.save(c)
		}
	case actor.Stopped:
		a.mark.Wait() // a save in flight must not land after the exact count
		if a.loaded {
			st := a.st
			st.Mark = a.used()
			if err := a.deps.Store.PutAccount(context.Background(), st); err != nil {
				a.deps.Log.Warn("account actor: flush", "user_id", a.st.UserID, "err", err)
			}
		}
	}
}

func (a *Account) used() int64 { return a.st.Sent + a.reserved + a.ghost }

func (a *Account) reserve(c *actor.Context, m *Reserve) {
	a.roll()
	if !a.loaded {
		m.Reply <- Result{Err: domain.ErrUnavailable}
		return
	}
	if m.Reclaim {
		take := min(a.ghost, m.N)
		a.ghost -= take
		a.reserved += take
		m.N, m.reclaimed, m.Reclaim = m.N-take, take, false // the rest is a new reservation
	}
	granted := m.N
	if a.limit > 0 && !m.Force {
		granted = min(m.N, max(a.limit-a.used(), 0))
		if need := a.used() + granted; need > a.st.Mark {
			if a.mark.Failing() {
				// Storage refuses the mark (a full disk): nothing could be accepted anyway.
				m.Reply <- Result{Err: fmt.Errorf("%w: the allowance mark cannot be saved", domain.ErrStorageUnavailable)}
				return
			}
			// Not covered by a durable mark yet: raise it a block ahead, then answer.
			a.wantMark = max(a.wantMark, min(a.limit, need+a.block()))
			a.mark.Park(m)
			a.save(c)
			return
		}
	}
	a.reserved += granted
	if a.limit > 0 && a.used()+a.block()/2 > a.wantMark && a.wantMark < a.limit {
		// Raise the mark ahead, while half a block is still covered, so reservations seldom
		// wait for it.
		a.wantMark = max(a.wantMark, min(a.limit, a.used()+a.block()))
		a.save(c)
	}
	r := a.result()
	r.Granted = granted + m.reclaimed
	if r.Granted == 0 && m.N > 0 {
		r.Err = domain.ErrQuotaExceeded
	}
	m.Reply <- r
}

func (a *Account) load() {
	st, err := a.deps.Store.GetAccount(a.st.UserID)
	if err != nil {
		a.deps.Log.Error("account actor: load", "user_id", a.st.UserID, "err", err)
		return
	}
	st.UserID = a.st.UserID
	a.st, a.loaded = st, true
	a.roll()
	// A mark above the count is allowance a crashed process may have used.
	a.ghost = max(a.st.Mark-a.st.Sent, 0)
	a.wantMark = a.st.Mark
}

// roll starts a new period at the first message of a new UTC month.
func (a *Account) roll() {
	now := a.deps.Clock.Now()
	if !now.Before(a.periodStart) && now.Before(a.periodEnd) {
		return
	}
	y, m, _ := now.UTC().Date()
	a.periodStart = time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	a.periodEnd = a.periodStart.AddDate(0, 1, 0)
	if p := a.periodStart.Format("2006-01"); p != a.st.Period {
		a.st.Period, a.st.Sent, a.st.Mark, a.wantMark, a.ghost = p, 0, 0, 0, 0
	}
}

// save writes the snapshot with the mark wanted, on the mark's worker (one write in flight; a
// save asked for meanwhile follows it).
func (a *Account) save(c *actor.Context) {
	a.dirty = false
	st, store := a.st, a.deps.Store
	st.Mark = max(st.Mark, a.wantMark)
	a.mark.Write(c, st, func(ctx context.Context) error { return store.PutAccount(ctx, st) })
}

func (a *Account) saved(c *actor.Context, s mark.Saved) {
	parked, again := a.mark.Landed(c, s, a.deps.Log, "account actor: allowance", "user_id", a.st.UserID)
	if s.Err != nil {
		a.dirty = true
		a.wantMark = a.st.Mark
		for _, p := range parked {
			p.Reply <- Result{Err: fmt.Errorf("%w: storage: %w", domain.ErrUnavailable, s.Err)}
		}
		return
	}
	if st := s.Snapshot.(domain.Allowance); st.Period == a.st.Period { // a mark of a month that has ended means nothing now
		a.st.Mark = max(a.st.Mark, st.Mark)
	}
	for _, p := range parked {
		a.reserve(c, p)
	}
	if again || a.dirty || a.wantMark > a.st.Mark {
		a.save(c)
	}
}

func (a *Account) result() Result {
	reset := a.periodEnd
	if now := a.deps.Clock.Now(); now.Before(a.periodStart) || !now.Before(reset) {
		reset = nextMonth(now)
	}
	r := Result{Sent: a.st.Sent, Limit: a.limit, Reset: reset}
	if a.limit > 0 {
		r.Remaining = max(a.limit-a.used(), 0)
	}
	return r
}

func nextMonth(t time.Time) time.Time {
	y, m, _ := t.UTC().Date()
	return time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
}
