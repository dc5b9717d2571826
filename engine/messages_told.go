package engine

// A message whose failed or cancelled status was told (its event committed) and whose record a
// kill -9 lost is still pending at the next boot. Sent again it may then succeed: the webhook,
// the stream and the broker were told "failed", and a client that sends again on that gets the
// recipient two messages. So the event's commit keeps the status beside it (persist:
// event_final, deleted by the record's commit), and the boot settles such a message as that
// status: the record written, no send, no second event, its allowance given back as a failed
// send's is. The caller itself (a send's waiter, a DELETE, a read) is told only once the record
// is durable (Outcome, outcomeRecorded, Get): no boot before it has anything to settle for it.

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gateway/gateway/domain"
)

// finalsReader is what reads the kept statuses back (Events, over persist.Webhooks).
type finalsReader interface {
	FinalStatuses(es []domain.OutboxEntry) (map[string]domain.FinalStatus, error)
}

// FinalStatuses returns the failed or cancelled statuses committed with their events for the
// messages among es, by message id.
func (e *Events) FinalStatuses(es []domain.OutboxEntry) (map[string]domain.FinalStatus, error) {
	return e.cfg.Store.FinalStatuses(es)
}

// toldFinal returns the failed or cancelled statuses already told of the boot's pending
// messages (none without an events sink: nothing was kept, and nobody told before the record).
func (ms *Messages) toldFinal(pending []domain.OutboxEntry) (map[string]domain.FinalStatus, error) {
	r, ok := ms.e.cfg.Events.(finalsReader)
	if !ok || len(pending) == 0 {
		return nil, nil
	}
	return r.FinalStatuses(pending)
}

// errToldFinal is the outcome of a message the boot settles as the failed or cancelled status
// told before: not sent, its reservation released.
var errToldFinal = errors.New("engine: settled as told before the restart")

// settleTold records pending message e, tracked, as status f (told before the restart, or
// told by this process whose record failed: resume), with no send and no event; its
// reservation goes back once the record is durable (settled). The boot counts a failure
// (recover), as Outcome counts one: the counter is the process's, and the process that told
// it died before its record.
func (m *messages) settleTold(e domain.OutboxEntry, f domain.FinalStatus) {
	e.SetStatus(f.Status, f.At)
	e.Code, e.Error = f.Code, f.Error
	sh := m.shard(e.ID)
	sh.mu.Lock()
	p := sh.m[e.ID]
	if p != nil {
		p.settled, p.entry = true, e
	}
	sh.mu.Unlock()
	if p != nil {
		m.depth.Add(-1)
	}
	m.e.log.Warn("outbox: a message told failed or cancelled, its record lost, is settled so (not sent again)", "message_id", e.ID, "status", f.Status)
	m.outbox.Settle(e, m.settled(sh, p, e.ID, errToldFinal))
}

// outcomeRecorded is Outcome for a caller that tells its own client of a cancellation (a
// DELETE, a store's cancelled order): it returns once the outcome is recorded, as a waiter is
// told (settled), so that no restart sends a message its client was told was taken back;
// domain.ErrUnavailable when the record failed or took longer than an actor's answer may
// (cfg.AskTimeout: it may still land). The message must be tracked and its outcome unknown
// (taken off the schedule, or out of routing's wait, by this caller).
func (m *messages) outcomeRecorded(e domain.OutboxEntry, cause error) error {
	ch := make(chan outcome, 1)
	sh := m.shard(e.ID)
	sh.mu.Lock()
	p := sh.m[e.ID]
	waits := p != nil && !p.settled
	if waits {
		p.waiters = append(p.waiters, ch)
	}
	sh.mu.Unlock()
	m.Outcome(e, cause)
	if !waits {
		return nil // not tracked: nothing here holds its outcome
	}
	return m.awaitRecord(ch, e)
}

// awaitRecord waits for the record of message e's outcome (its waiter ch answered by
// settled), at most cfg.AskTimeout: domain.ErrUnavailable when it failed or took longer.
func (m *messages) awaitRecord(ch chan outcome, e domain.OutboxEntry) error {
	t := time.NewTimer(m.e.cfg.AskTimeout)
	defer t.Stop()
	select {
	case o := <-ch:
		if o.err == errNotRecorded {
			return fmt.Errorf("%w: the %s of message %s was not recorded", domain.ErrUnavailable, e.Status, e.ID)
		}
		return nil
	case <-t.C:
		return fmt.Errorf("%w: the %s of message %s is not recorded yet", domain.ErrUnavailable, e.Status, e.ID)
	}
}

// cancelling returns message id as cancelled by another call whose record is in flight (a
// DELETE again, a store's cancellation tried again), once that record is durable, as that call
// answers (awaitRecord); false when the message is not so. When that record failed
// (unrecorded), this call records the cancellation again, its event published again (under
// the same ids: statusDigest) as the first may not have been committed: the message stays
// pending on disk meanwhile, and this process does not send it.
func (m *messages) cancelling(id string) (domain.OutboxEntry, bool, error) {
	ch := make(chan outcome, 1)
	sh := m.shard(id)
	sh.mu.Lock()
	p := sh.m[id]
	if p == nil || !p.settled || p.durable || p.entry.Status != domain.MsgCancelled {
		sh.mu.Unlock()
		return domain.OutboxEntry{}, false, nil
	}
	p.waiters = append(p.waiters, ch)
	e, again := p.entry, p.unrecorded
	p.unrecorded = false
	var written func(error)
	if again {
		written = m.settled(sh, p, id, errCancelled)
		if m.e.pub.takes(e.UserID) { // under the lock, as Outcome publishes
			m.e.pub.publishThen(e.UserID, messageEvent(e, e.Status, e.UpdatedAt.Time()), m.settleAfterEvents(e, written))
			written = nil
		}
	}
	sh.mu.Unlock()
	if written != nil {
		m.outbox.Settle(e, written)
	}
	return e, true, m.awaitRecord(ch, e)
}

// recordAgain records again the failures and cancellations whose record failed (the store
// refused it for longer than its retries): their events were committed, their statuses kept
// beside them (event_final), and the messages stay pending on disk until their records land.
// Left for the next boot, a message read "queued" and a DELETE answered 503 for as long as the
// process ran, and a boot after the kept status's 7 days sent the message told failed. The
// records are tried again after recordAgainFirst, then less often while the store refuses them
// (up to recordAgainMost), until the engine stops; this process never sends such a message.
type recordAgain struct {
	mu      sync.Mutex
	ids     map[string]struct{}
	timer   *time.Timer
	wait    time.Duration // the last wait armed; back to 0 once a record tried again lands
	stopped bool
}

const recordAgainFirst, recordAgainMost = 250 * time.Millisecond, 30 * time.Second

// errRecordedAgain is the outcome error of a failure or a cancellation recorded again: its
// waiters are told as a failure's or a cancellation's are (tellRecorded), its reservation goes
// back.
var errRecordedAgain = errors.New("engine: the outcome recorded again")

// later queues message id's record to be tried again.
func (r *recordAgain) later(m *messages, id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return
	}
	if r.ids == nil {
		r.ids = map[string]struct{}{}
	}
	r.ids[id] = struct{}{}
	if r.timer == nil {
		r.wait = min(max(2*r.wait, recordAgainFirst), recordAgainMost)
		r.timer = time.AfterFunc(r.wait, m.recordAgain)
	}
}

// recorded says a record tried again landed: the next failure is tried again soon.
func (r *recordAgain) recorded() {
	r.mu.Lock()
	r.wait = 0
	r.mu.Unlock()
}

// stop ends the tries (the engine stops: the next boot settles what is left).
func (r *recordAgain) stop() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.stopped = true
	if r.timer != nil {
		r.timer.Stop()
		r.timer = nil
	}
	r.ids = nil
}

// unrecordedFailure tells whether message id failed and its record waits to be tried again
// (or is being tried): a DELETE answers 503 at once rather than wait for it (a try again may
// be 30 s away).
func (m *messages) unrecordedFailure(id string) bool {
	sh := m.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p := sh.m[id]
	return p != nil && p.unrecorded && !p.durable && p.entry.Status == domain.MsgFailed
}

// recordAgain writes again the record of every message queued (later) that is still unrecorded.
func (m *messages) recordAgain() {
	m.again.mu.Lock()
	ids := m.again.ids
	m.again.ids, m.again.timer = nil, nil
	m.again.mu.Unlock()
	for id := range ids {
		sh := m.shard(id)
		sh.mu.Lock()
		p := sh.m[id]
		if p == nil || !p.unrecorded || p.durable {
			sh.mu.Unlock()
			continue // recorded meanwhile (a cancellation tried again)
		}
		// A failure stays marked while its record is tried (a DELETE answers 503 at once, not
		// once this try failed and the next came); a cancellation's mark is cleared, so a DELETE
		// again (cancelling) waits for this record instead of writing another.
		p.unrecorded = p.entry.Status == domain.MsgFailed
		e, written := p.entry, m.settled(sh, p, id, errRecordedAgain)
		sh.mu.Unlock()
		m.outbox.Settle(e, written)
	}
}
