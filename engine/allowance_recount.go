package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gateway/gateway/actors/account"
	"github.com/gateway/gateway/domain"
)

// AccountRecounter counts, at boot, the messages a kill -9 left out of the account snapshots
// (persist.Accounts.Recount on a store with a time index, the outbox beside it; on a lone
// gateway's log outbox, persist.LogRecount): per user, the snapshot as it should be, and the
// send times of the messages of its window it counts.
type AccountRecounter interface {
	Recount(now time.Time, margin time.Duration) (map[string]domain.AccountRecount, error)
}

// With a recount at boot, the count alone is written at most every recountFlushEvery (without
// one, every 20 ms: account.Deps.FlushEvery): a kill -9 loses nothing of it, so the flush is a
// matter of how much the boot reads. A record every 20 ms a busy user was a quarter of a
// record a message on NATS, about a fifth of a message's CPU (bench/README.md, issue 27).
const recountFlushEvery = time.Second

// recountMargin bounds how long before the newest snapshot a message the snapshots left out
// was sent (persist.Accounts.Recount's margin): counted within the recent window (10 s) of its
// send, then in a snapshot within the flush interval and two writes of the store (each
// bounded by its hold: natskv.DefaultHold, 10 s), with room to spare.
const recountMargin = recountFlushEvery + 2*10*time.Second + 10*time.Second + 9*time.Second

// recountedAccounts is the account store once a boot recounted: it hands each account actor,
// at its load, the send times its recount counted (account.Seeds).
type recountedAccounts struct {
	account.Store
	mu    sync.Mutex
	seeds map[string][]domain.Millis
}

// SentSeeds implements account.Seeds (once per user: a later load reads a snapshot written
// since, which counts them).
func (r *recountedAccounts) SentSeeds(uid string) []domain.Millis {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.seeds[uid]
	delete(r.seeds, uid)
	return s
}

// recount runs the boot's recount before any account is loaded (the outbox's recovery reserves
// first), writes each snapshot it corrected (a user whose account is not used before the next
// kill keeps the messages counted) and returns how many it wrote. Without a recounter it does
// nothing.
func (ms *Messages) recount() (int, error) {
	rc := ms.e.cfg.Records.Recount
	if rc == nil {
		return 0, nil
	}
	got, err := rc.Recount(ms.e.now(), recountMargin)
	if err != nil {
		return 0, fmt.Errorf("engine: recount the allowances: %w", err)
	}
	seeds := make(map[string][]domain.Millis, len(got))
	for uid, r := range got {
		if err := ms.accountTable.PutAccount(context.Background(), r.Allowance); err != nil {
			return 0, fmt.Errorf("engine: write the recounted allowance of %s: %w", uid, err)
		}
		seeds[uid] = r.Sent
	}
	ms.accountTable = &recountedAccounts{Store: ms.accountTable, seeds: seeds}
	return len(got), nil
}
