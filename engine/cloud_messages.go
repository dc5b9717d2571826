package engine

import (
	"fmt"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// What a network says of a message after it was sent, beyond receipts (the Cloud API): its
// pricing category, and a failure after Meta had taken it.

// applyReceipt lays a receipt over a message: its status (never backwards) and its pricing
// category. It reports whether anything changed.
func applyReceipt(e *domain.OutboxEntry, c domain.StatusChange) bool {
	changed := e.SetStatus(c.Status, c.At.Time())
	if c.Category != "" && c.Category != e.Pricing {
		e.Pricing, changed = c.Category, true
	}
	return changed
}

// Failed implements session.Deliveries: the network could not deliver a message it had taken
// (a failed status of the Cloud API, with Meta's error): the message fails, once, with the
// code of err. One whose outcome is not known yet fails once it is. done is called once the
// failure is written (or needs no write).
func (m *messages) Failed(id string, err error, at time.Time, done network.Done) {
	sh := m.shard(id)
	sh.mu.Lock()
	p := sh.m[id]
	if p != nil && !p.settled {
		// Applied when the outcome lands; a network that waits for it (a send in doubt may
		// wait a minute for its outcome) has it recorded now on its own, which the outcome's
		// read lays over it, and a boot's outcome folds in (lateRecord).
		p.late = &lateFailure{err: err, at: at}
		sh.mu.Unlock()
		if done != nil {
			m.outbox.Receipt(id, lateRecord(err, at), m.lateWritten(id, done))
		}
		return
	}
	var e domain.OutboxEntry
	if p != nil {
		e = p.entry
		sh.mu.Unlock()
	} else {
		sh.mu.Unlock()
		var gerr error
		if e, gerr = m.outbox.Get(id); gerr != nil {
			done.Call(unlessGone(gerr)) // not ours, or gone
			return
		}
	}
	if e.Status == domain.MsgFailed || e.Status == domain.MsgCancelled {
		if p != nil && done != nil && e.Status == domain.MsgFailed && e.Code != "" {
			// Sent again by a network that waits, when its record may have failed: the entry
			// here may be ahead of the disk, so it is written again (the same record).
			m.outbox.Settle(e, m.lateWritten(id, done))
			return
		}
		done.Call(nil)
		return
	}
	if domain.CodeOf(err) == "" {
		err = fmt.Errorf("%w: %w", domain.ErrNetwork, err)
	}
	e.Code, e.Error = domain.CodeOf(err), err.Error()
	if !e.SetStatus(domain.MsgFailed, at) {
		done.Call(nil)
		return
	}
	m.e.metrics.failed.Add(1)
	// Recorded once its event is committed, as an outcome is (settleAfterEvents): the network
	// sends a failure again until done is told.
	written := m.lateWritten(id, done)
	events := m.e.pub.takes(e.UserID)
	if p != nil {
		// Published under the lock, as Outcome and receiptOf publish theirs.
		sh.mu.Lock()
		if cur := sh.m[id]; cur == p {
			p.entry = e
		}
	}
	if events {
		m.e.pub.messageThen(&e, domain.MsgFailed, at, m.settleAfterEvents(e, written))
	}
	if p != nil {
		sh.mu.Unlock()
	}
	if !events {
		m.outbox.Settle(e, written)
	}
}

// lateWritten logs a late failure's record that failed, and tells done.
func (m *messages) lateWritten(id string, done network.Done) func(error) {
	return func(err error) {
		if err != nil {
			m.e.log.Warn("outbox: record a late failure", "message_id", id, "err", err)
		}
		done.Call(err)
	}
}

// lateFailure is a failure the network reported before the message's outcome was known.
type lateFailure struct {
	err  error
	at   time.Time
	done network.Done // nil once recorded on its own (Failed)
}

// lateRecord is a late failure as its own record (a receipt of status failed, with its code).
func lateRecord(err error, at time.Time) domain.StatusChange {
	if domain.CodeOf(err) == "" {
		err = fmt.Errorf("%w: %w", domain.ErrNetwork, err)
	}
	return domain.StatusChange{Status: domain.MsgFailed, At: domain.MillisOf(at), Code: domain.CodeOf(err), Error: err.Error()}
}

// lateOf is a late failure read back from its own record (lateRecord).
func lateOf(c domain.StatusChange) *lateFailure {
	return &lateFailure{err: domain.E(c.Code, c.Error), at: c.At.Time()}
}
