package actors

import (
	"context"
	"log/slog"
	"time"

	"github.com/anthdm/hollywood/actor"
)

// AccountState is a user's monthly message allowance snapshot.
type AccountState struct {
	UserID string `json:"userId"`
	Period string `json:"period"` // UTC month "2006-01" that Sent belongs to
	Sent   int64  `json:"sent"`   // messages sent successfully this period (messagesSent)
}

// AccountStore persists account snapshots.
type AccountStore interface {
	GetAccount(userID string) (AccountState, error) // zero state and nil when none
	PutAccount(ctx context.Context, s AccountState) error
}

// AccountDeps are the account actor's collaborators.
type AccountDeps struct {
	Store AccountStore
	Now   func() time.Time
	Log   *slog.Logger
}

// Account-actor messages.
type (
	// Reserve asks for up to N messages of this month's allowance. Granted may be less than N
	// (a bulk batch is clipped); zero with ErrQuotaExceeded when none is left.
	Reserve struct {
		N     int64
		Reply chan AccountResult
	}
	// Settle reports the outcome of reserved messages: Sent succeeded, Unreserve is how much of
	// the reservation to give back (successes included). A message recovered after a crash
	// settles with Sent 1 and Unreserve 0 (its reservation died with the process).
	Settle struct{ Sent, Unreserve int64 }
	// GetAccount answers the current allowance.
	GetAccount struct{ Reply chan AccountResult }
	// SetAccountLimit changes the monthly limit (the plan changed).
	SetAccountLimit struct{ Limit int64 }

	accountSaved struct{ err error }
)

// AccountResult is the allowance after a message.
type AccountResult struct {
	Granted   int64
	Sent      int64 // messagesSent this month
	Limit     int64 // monthly limit, 0 = none
	Remaining int64 // allowance left, reservations deducted (0 when Limit is 0)
	Reset     time.Time
	Err       error
}

// Account is the actor of one user's monthly allowance. Reservations are in memory; Sent is
// written behind (one commit in flight at a time, coalescing every change made meanwhile), so
// the send path never waits on the disk for it. A kill -9 can lose the increments of the commit
// in flight (milliseconds); a graceful stop writes the exact count.
type Account struct {
	deps     AccountDeps
	limit    int64
	st       AccountState
	reserved int64
	loaded   bool
	saving   bool
	dirty    bool
}

// NewAccount returns the producer of a user's account actor.
func NewAccount(userID string, limit int64, deps AccountDeps) actor.Producer {
	return func() actor.Receiver { return &Account{deps: deps, limit: limit, st: AccountState{UserID: userID}} }
}

// Receive implements actor.Receiver.
func (a *Account) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		a.load()
	case *Reserve:
		a.roll()
		if !a.loaded {
			m.Reply <- AccountResult{Err: ErrUnavailable}
			return
		}
		granted := m.N
		if a.limit > 0 {
			granted = min(m.N, max(a.limit-a.st.Sent-a.reserved, 0))
		}
		a.reserved += granted
		r := a.result()
		r.Granted = granted
		if granted == 0 && m.N > 0 {
			r.Err = ErrQuotaExceeded
		}
		m.Reply <- r
	case Settle:
		a.roll()
		a.st.Sent += m.Sent
		a.reserved = max(a.reserved-m.Unreserve, 0)
		if m.Sent > 0 {
			a.save(c)
		}
	case *GetAccount:
		a.roll()
		m.Reply <- a.result()
	case SetAccountLimit:
		a.limit = m.Limit
	case accountSaved:
		a.saving = false
		if m.err != nil {
			a.deps.Log.Error("account actor: save", "user_id", a.st.UserID, "err", m.err)
			a.dirty = true
		}
		if a.dirty {
			a.save(c)
		}
	case actor.Stopped:
		if a.loaded {
			if err := a.deps.Store.PutAccount(context.Background(), a.st); err != nil {
				a.deps.Log.Warn("account actor: flush", "user_id", a.st.UserID, "err", err)
			}
		}
	}
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
}

// roll starts a new period at the first message of a new UTC month.
func (a *Account) roll() {
	if p := a.deps.Now().UTC().Format("2006-01"); p != a.st.Period {
		a.st.Period, a.st.Sent = p, 0
	}
}

func (a *Account) save(c *actor.Context) {
	if a.saving {
		a.dirty = true
		return
	}
	a.saving, a.dirty = true, false
	st, store, engine, self := a.st, a.deps.Store, c.Engine(), c.PID()
	go func() { engine.Send(self, accountSaved{err: store.PutAccount(context.Background(), st)}) }()
}

func (a *Account) result() AccountResult {
	r := AccountResult{Sent: a.st.Sent, Limit: a.limit, Reset: nextMonth(a.deps.Now())}
	if a.limit > 0 {
		r.Remaining = max(a.limit-a.st.Sent-a.reserved, 0)
	}
	return r
}

func nextMonth(t time.Time) time.Time {
	y, m, _ := t.UTC().Date()
	return time.Date(y, m+1, 1, 0, 0, 0, 0, time.UTC)
}
