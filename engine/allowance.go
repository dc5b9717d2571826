package engine

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/actors/account"
	"github.com/gateway/gateway/domain"
)

// Reservation is monthly allowance held for messages that have no outcome yet: the one owner
// of the count. Every path that sends (a v1 or dashboard send, a campaign's numbers, a store
// event, a message recovered at boot) takes one, then commits what was sent and releases the
// rest, exactly once: Commit and Release may be called from any goroutine, and whatever is
// committed or released is gone from the reservation, so no path can count a message twice.
type Reservation struct {
	ms   *Messages
	uid  string
	left atomic.Int64
}

// ReserveOpts are the account actor's options for a reservation (see account.Reserve).
type ReserveOpts struct {
	Force, Reclaim bool
	at             time.Time    // the caller's clock read (Send's), zero: reserve reads the clock
	into           *Reservation // where the reservation goes (Send's, in its pending record); nil: a new one
}

// reserve asks the user's account for up to n messages; the reservation may hold less (a bulk
// batch is clipped). ErrQuotaExceeded when nothing is left this month.
func (ms *Messages) reserve(ctx context.Context, uid string, n int64, o ReserveOpts) (*Reservation, error) {
	ent := ms.account(uid)
	if !o.Force && !o.Reclaim {
		// Covered by the durable mark: reserved here, without a message to the actor.
		at := o.at
		if at.IsZero() {
			at = ms.e.now()
		}
		if r, ok := ent.counter.TryReserve(at, n); ok {
			if r.Err != nil {
				return nil, r.Err
			}
			return ms.adoptInto(o.into, uid, r.Granted), nil
		}
	}
	msg := &account.Reserve{N: n, Force: o.Force, Reclaim: o.Reclaim, Reply: make(chan account.Result, 1)}
	res, err := ask(ctx, ms.e, ent.pid, msg, msg.Reply, ms.e.cfg.AskTimeout, "account")
	if err != nil {
		return nil, err
	}
	return ms.adoptInto(o.into, uid, res.Granted), nil
}

// adopt wraps allowance reserved already (a campaign's batch, handed out one number at a time).
func (ms *Messages) adopt(uid string, n int64) *Reservation { return ms.adoptInto(nil, uid, n) }

// adoptInto is adopt in r (unused; nil: a new one).
func (ms *Messages) adoptInto(r *Reservation, uid string, n int64) *Reservation {
	if r == nil {
		r = &Reservation{}
	}
	r.ms, r.uid = ms, uid
	r.left.Store(n)
	return r
}

// Granted is what the reservation still holds.
func (r *Reservation) Granted() int64 { return r.left.Load() }

// Take moves n of the reservation into a new one (a campaign's number becomes a message).
func (r *Reservation) Take(n int64) *Reservation {
	if !r.take(n) {
		return r.ms.adopt(r.uid, 0)
	}
	return r.ms.adopt(r.uid, n)
}

// Commit counts n held messages as sent.
func (r *Reservation) Commit(n int64) { r.CommitAt(n, 0) }

// CommitAt counts n held messages as sent, at (their outcome's send time: a snapshot of the
// count says how many of its messages were sent lately, for the recount after a kill -9).
// A send time is the engine's clock read a write's latency ago (the deliverer's, after the
// send): it stands for now, a clock read a message fewer.
func (r *Reservation) CommitAt(n int64, at domain.Millis) {
	if r.take(n) {
		now := at.Time()
		if at <= 0 {
			now = r.ms.e.now()
		}
		r.ms.account(r.uid).counter.SettleAt(now, int64(at), n, n)
	}
}

// Release gives back whatever the reservation still holds.
func (r *Reservation) Release() {
	if n := r.left.Swap(0); n > 0 {
		r.ms.account(r.uid).counter.Settle(r.ms.e.now(), 0, n)
	}
}

func (r *Reservation) take(n int64) bool {
	for {
		left := r.left.Load()
		if n <= 0 || left < n {
			return false
		}
		if r.left.CompareAndSwap(left, left-n) {
			return true
		}
	}
}

// campaignAllowance gives back a campaign's unused allowance (campaign.Allowance), but for
// the numbers its resume did not reserve (campaignEntry.unheld).
type campaignAllowance struct {
	c  *Campaigns
	ce *campaignEntry
}

func (ca campaignAllowance) Release(uid string, n int64) {
	for {
		u := ca.ce.unheld.Load()
		if skip := min(u, n); ca.ce.unheld.CompareAndSwap(u, u-skip) {
			ca.c.e.Messages.adopt(uid, n-skip).Release()
			return
		}
	}
}

// accountEntry is a user's account actor (spawned on first use) and the count it shares with
// the callers (account.Counter: reservations the durable mark covers, and settlements, made
// without a message). It publishes no view: the allowance is asked for.
type accountEntry struct {
	pid     *actor.PID // set before ready is closed
	counter *account.Counter
	ready   chan struct{} // closed once the actor is spawned
}

func (a *accountEntry) actorPID() *actor.PID {
	<-a.ready
	return a.pid
}

// account returns the user's account, spawning its actor on first use. The spawn runs its
// start, which reads the account's record (on NATS a round trip), outside the registry's
// lock: the first uses of several users' accounts load them at once (a boot hands back the
// queued messages of every user of a partition taken over), and no other user's lookup waits
// for a load; a second caller for the same user waits for the first one's spawn.
func (ms *Messages) account(uid string) *accountEntry {
	e := ms.e
	mine := false
	ent := ms.accounts.getOrPut(uid, func() *accountEntry {
		mine = true
		return &accountEntry{counter: account.NewCounter(uid, e.Users.planOf(uid).MonthlyMessages), ready: make(chan struct{})}
	})
	if !mine {
		if <-ent.ready; ent.pid == nil {
			return ms.account(uid) // the first caller's spawn panicked and took its entry out: try again
		}
		return ent
	}
	// A spawn that panics (the HTTP layer recovers a handler's panic) takes its entry out and
	// lets its waiters go, so this user's next use spawns again instead of waiting for ever.
	defer func() {
		if ent.pid == nil {
			ms.accounts.delete(uid)
		}
		close(ent.ready)
	}()
	deps := account.Deps{Store: ms.accountTable, Clock: clockFunc(e.cfg.Now), Log: e.log}
	if e.cfg.Records.Recount != nil {
		deps.FlushEvery = recountFlushEvery
	}
	ent.pid = e.spawn(account.New(ent.counter, deps), "account", uid)
	return ent
}

// Allowance is the user's monthly allowance: the limit, what was sent this month, what is
// reserved for messages in flight, and when it resets.
func (ms *Messages) Allowance(ctx context.Context, uid string) (account.Result, error) {
	msg := &account.Get{Reply: make(chan account.Result, 1)}
	return ask(ctx, ms.e, ms.account(uid).pid, msg, msg.Reply, ms.e.cfg.AskTimeout, "account")
}

// setLimit gives the user's account a new monthly limit (a plan change).
func (ms *Messages) setLimit(uid string, limit int64) {
	ms.e.hw.Send(ms.account(uid).pid, account.SetLimit{Limit: limit})
}
