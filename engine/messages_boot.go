package engine

// A boot's recovery of the outbox's pending messages, and the outbox's periodic upkeep
// (checkpoints, the renewal of long-queued bodies), which recovery starts.

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/gateway/gateway/domain"
)

// recover hands every entry without an outcome (pending: the outbox's Pending, read by boot)
// back to its session's deliverer, which sends it again under the same id once connected. Its
// reservation died with the last process: it is taken again (forced: the message was accepted)
// before any new send can use the same allowance. The outbox is read once, before any
// deliverer runs, so no outcome can land between the read and the re-reservation.
func (ms *Messages) recover(pending []domain.OutboxEntry) (int, error) {
	e := ms.e
	// One forced reservation per user for all of its charged entries, handed out one per
	// message: a partition taken over with thousands of messages queued asks each account
	// actor once, not once per message.
	charged := map[string]int64{}
	for _, entry := range pending {
		if entry.Message.Kind.Charged() && e.Sessions.idx.get(entry.SessionID) != nil {
			charged[entry.UserID]++
		}
	}
	// The users' reservations (each its account actor's: a read of its record, a write of its
	// mark) and the statuses told are independent: asked at once, not one after the other.
	held := make(map[string]*Reservation, len(charged))
	var (
		asks     sync.WaitGroup
		mu       sync.Mutex
		told     map[string]domain.FinalStatus
		toldErr  error
		firstErr error
	)
	asks.Go(func() { told, toldErr = ms.toldFinal(pending) }) // failed or cancelled before the restart (messages_told.go)
	slots := make(chan struct{}, recoverAsks)
	for uid, n := range charged {
		asks.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			// Once one user's ask failed the boot fails: the users still waiting for a slot are
			// not asked (each ask of a store gone away holds for its retries), so a failed boot
			// ends after one round of asks, not one per 32 users.
			mu.Lock()
			failed := firstErr != nil
			mu.Unlock()
			if failed {
				return
			}
			r, err := ms.reserve(context.Background(), uid, n, ReserveOpts{Force: true, Reclaim: true})
			mu.Lock()
			defer mu.Unlock()
			held[uid] = r
			if err != nil && firstErr == nil {
				firstErr = fmt.Errorf("engine: outbox: reserve %d queued messages of %s: %w", n, uid, err)
			}
		})
	}
	asks.Wait()
	if firstErr != nil {
		return 0, firstErr
	}
	if toldErr != nil {
		return 0, fmt.Errorf("engine: outbox: read the statuses told of queued messages: %w", toldErr)
	}
	for _, entry := range pending {
		ent := e.Sessions.idx.get(entry.SessionID)
		if ent == nil {
			e.log.Error("outbox entry for an unknown session", "message_id", entry.ID, "session_id", entry.SessionID)
			continue
		}
		res := ms.adopt(entry.UserID, 0) // an edit or a revoke: not charged
		if entry.Message.Kind.Charged() {
			res = held[entry.UserID].Take(1)
		}
		if f, ok := told[entry.ID]; ok {
			if f.Status == domain.MsgFailed {
				e.metrics.failed.Add(1) // as Outcome counts a failure: this process settles it
			}
			ms.msgs.track(entry.ID, res, nil)
			ms.msgs.settleTold(entry, f)
			continue
		}
		if entry.Status == domain.MsgScheduled {
			// Accepted for later: back on the schedule (at once when its time has passed).
			ms.msgs.track(entry.ID, res, nil)
			ms.later.add(entry.ID, entry.UserID, entry.SendAt.Time())
			continue
		}
		ms.msgs.track(entry.ID, res, nil)
		ms.msgs.resumed(entry.ID)
		ms.push(ent, entry)
	}
	ms.renewMu.Lock()
	ms.renewal = time.AfterFunc(renewEvery, ms.renew)
	ms.checkpoints = time.AfterFunc(checkpointEvery, ms.checkpoint)
	ms.renewMu.Unlock()
	return len(pending), nil
}

// recoverAsks bounds the users whose reservations a boot asks at once (each a read of the
// user's account on the store: a partition with thousands of users queued would otherwise
// send thousands of reads at once).
const recoverAsks = 32

// checkpoint lets the outbox mark what is pending for long and move its checkpoint on, so a
// boot reads the accepts of the last half minute or so, not of the day.
func (ms *Messages) checkpoint() {
	if err := ms.msgs.outbox.Checkpoint(); err != nil {
		ms.e.log.Warn("outbox: checkpoint", "err", err)
	}
	ms.renewMu.Lock()
	defer ms.renewMu.Unlock()
	if ms.checkpoints != nil {
		ms.checkpoints = time.AfterFunc(checkpointEvery, ms.checkpoint)
	}
}

// checkpointEvery is how often the outbox's Checkpoint runs (persist.Outbox: a boot reads the
// accepts since the last one, and those of its half minute before marking).
const checkpointEvery = 5 * time.Second

// renewEvery is how often the bodies of long-queued messages are renewed (persist keeps a body
// two weeks from its last write and renews it when under ten days are left).
const renewEvery = 24 * time.Hour

func (ms *Messages) renew() {
	if n, err := ms.msgs.outbox.Renew(); err != nil {
		ms.e.log.Error("outbox: renew the bodies of long-queued messages", "err", err)
	} else if n > 0 {
		ms.e.log.Info("outbox: renewed the bodies of long-queued messages", "messages", n)
	}
	ms.renewMu.Lock()
	defer ms.renewMu.Unlock()
	if ms.renewal != nil {
		ms.renewal = time.AfterFunc(renewEvery, ms.renew)
	}
}

// stopRenewal stops the daily renewal (Stop).
func (ms *Messages) stopRenewal() {
	ms.msgs.again.stop()
	ms.renewMu.Lock()
	defer ms.renewMu.Unlock()
	if ms.renewal != nil {
		ms.renewal.Stop()
		ms.renewal = nil
	}
	if ms.checkpoints != nil {
		ms.checkpoints.Stop()
		ms.checkpoints = nil
	}
}
