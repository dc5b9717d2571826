package engine

// A message's outcome and its receipts: what the network says of a message once it went, and
// the events that report it, in order.

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// Outcome implements session.Deliveries: the network's final word on a message. The outcome is
// recorded in the background once its events are committed (a lost one only means a re-send
// under the same id at boot, which the network treats as the same message, and publishes the
// events again), and the reservation is settled only once that record is durable: a message
// is counted in messagesSent after its pending entry is gone, so a crash between the two can
// undercount by the last few, never count one message twice. Whoever waits is answered at once
// of a success, and of a failure or a cancellation once its record is durable (settled).
func (m *messages) Outcome(e domain.OutboxEntry, sendErr error) {
	var before []domain.StatusChange // recorded by the last process, before the boot sent it again
	if m.wasResumed(e.ID) {
		var err error
		if before, err = m.outbox.Receipts(e.ID); err != nil {
			m.e.log.Warn("outbox: receipts recorded before a boot not read; the message's events leave them out", "message_id", e.ID, "err", err)
		}
	}
	// Receipts that overtook the outcome go into the same record (one write, not one each).
	atOutcome := e
	atOutcome.History = slices.Clip(e.History)
	sh := m.shard(e.ID)
	sh.mu.Lock()
	p := sh.m[e.ID]
	var (
		folded   []domain.StatusChange
		waiters  []chan outcome
		late     *lateFailure
		after    []network.Done // a late failure's Done, when moot: told once the outcome is written
		knownLID string         // the LID the accept read from the LID map
	)
	if p != nil {
		knownLID = p.lid
		late, p.late = p.late, nil
		for _, c := range append(before, p.early...) {
			if c.Status == domain.MsgFailed {
				if late == nil {
					late = lateOf(c) // recorded by the last process (Failed)
				}
				continue
			}
			if e.SetStatus(c.Status, c.At.Time()) {
				folded = append(folded, c)
			}
			if c.Category != "" {
				e.Pricing = c.Category
			}
		}
		p.early = nil
		p.settled, p.entry = true, e
		if sendErr == nil {
			// Taken under the lock: the record's commit below may land (and clear them)
			// first. A failure's or a cancellation's waiters are told once its record is
			// durable (settled): told now, a kill -9 before the record had the boot send
			// again a message its caller was told would not go. A success is told at once:
			// sent again under its id, the network takes it as the same message.
			waiters, p.waiters = p.waiters, nil
		}
	}
	if late != nil && sendErr != nil {
		after = append(after, late.done) // the message failed already: the late failure is moot
	}
	written := thenAll(m.settled(sh, p, e.ID, sendErr), after)
	// Published under the lock: a receipt that comes once the entry is settled (receiptOf)
	// publishes after taking the same lock, so it never overtakes the outcome's event. The
	// record is written once the events are committed (the last one's then: they commit in
	// order), as a receipt's is (recordAfterEvent): a kill -9 between leaves the message
	// pending, and the boot's resend under its id settles and publishes it again.
	events := m.e.pub.takes(e.UserID)
	if events {
		record := m.settleAfterEvents(e, written)
		then := record
		if len(folded) > 0 {
			then = nil
		}
		// publishThen, not messageThen: takes is not asked again (were it to change between
		// two events, the record would not wait for the first).
		m.e.pub.publishThen(e.UserID, messageEvent(atOutcome, atOutcome.Status, atOutcome.UpdatedAt.Time()), then)
		for i, c := range folded {
			if i == len(folded)-1 {
				then = record
			}
			m.e.pub.publishThen(e.UserID, messageEvent(e, c.Status, c.At.Time()), then)
		}
	}
	sh.mu.Unlock()
	if p != nil {
		m.depth.Add(-1)
	}
	switch {
	case sendErr == nil:
		m.e.metrics.sent.Add(1)
		if e.LID != knownLID {
			// The map held it at the accept already: a lookup a message fewer (one cleared
			// since, past lidMapMax, learns it again from the number's next send).
			m.e.Messages.lids.put(e.Message.To, e.LID)
		}
		m.e.Messages.sentOp(&e)
	case e.Status != domain.MsgCancelled:
		m.e.metrics.failed.Add(1)
	}
	if !events {
		m.outbox.Settle(e, written)
	}
	waitErr := sendErr
	if e.Status == domain.MsgCancelled {
		waitErr = nil // taken back, not failed: whoever waits reads its status
	}
	for _, w := range waiters {
		w <- outcome{entry: atOutcome, err: waitErr}
	}
	if late != nil && sendErr == nil {
		m.Failed(e.ID, late.err, late.at, late.done)
	}
}

// settled is what Outcome does once the outcome of message id (tracked as p in shard sh) is
// written. Apart from Outcome so that the callback holds the id, not the whole entry (which
// would move to the heap with every outcome).
func (m *messages) settled(sh *pendingShard, p *pending, id string, sendErr error) func(error) {
	return func(err error) {
		again := false
		sh.mu.Lock()
		var waiters []chan outcome // a failure's (Outcome leaves them), or a wait's since
		var told domain.OutboxEntry
		var sentAt domain.Millis
		if p != nil {
			// Read under the lock: a late failure (Failed) replaces p.entry under it meanwhile.
			sentAt = p.entry.SentAt
			if len(p.waiters) > 0 { // none on a success (Outcome took them): no copy
				waiters, p.waiters, told = p.waiters, nil, p.entry
			}
		}
		if cur := sh.m[id]; err == nil && cur != nil && cur == p {
			cur.durable, cur.unrecorded = true, false
			msg := cur.entry.Message
			cur.entry.Message = domain.Message{ID: msg.ID, To: msg.To, Kind: msg.Kind}
			sh.keep(id)
		} else if cur != nil && cur == p && sendErr != nil && !errors.Is(err, errEventDropped) {
			// A failure or a cancellation, told (its event committed): kept, not sent, and
			// recorded again (recordAgain; a cancellation tried again: cancelling).
			cur.unrecorded = true
			again = true
		} else if cur == p {
			delete(sh.m, id)
		}
		sh.mu.Unlock()
		tellRecorded(waiters, told, sendErr, err)
		if err != nil {
			// Still pending on disk: a sent outcome is sent again under its id by the next
			// boot, which settles it then; this process keeps its reservation held.
			m.e.log.Error("outbox: record outcome", "message_id", id, "err", err)
			if again {
				m.again.later(m, id)
			}
			return
		}
		if sendErr == errRecordedAgain {
			m.again.recorded()
		}
		if p == nil {
			return
		}
		if sendErr == nil {
			p.res.CommitAt(1, sentAt)
		} else {
			p.res.Release()
		}
	}
}

// tellRecorded answers the waiters of message e's failure or cancellation (sendErr) once its
// record's write returned err: the message as recorded, or, when it was not (still pending on
// disk: the next boot sends or settles it), errNotRecorded, which ends their waits untold.
func tellRecorded(waiters []chan outcome, e domain.OutboxEntry, sendErr, err error) {
	if len(waiters) == 0 {
		return
	}
	o := outcome{entry: e, err: sendErr}
	switch {
	case err != nil:
		o = outcome{err: errNotRecorded}
	case e.Status == domain.MsgCancelled:
		o.err = nil // taken back, not failed: whoever waits reads its status
	case o.err == nil || o.err == errToldFinal || o.err == errRecordedAgain:
		// A late failure laid over a sent outcome, waited for since (wait); a failure told
		// before its record failed, settled so (settleTold) or recorded again (recordAgain):
		// the error its code names.
		o.err = failure(e)
	}
	for _, w := range waiters {
		w <- o
	}
}

// errNotRecorded tells a waiter that the outcome it waits for was not recorded: its wait ends
// with the message as it was (queued), as a wait that ran out does.
var errNotRecorded = errors.New("engine: the outcome was not recorded")

// settleAfterEvents is the then of an outcome's last event: it records outcome e once its
// events are committed, and tells written; an event the engine stopped before committing
// leaves the outcome unrecorded (written is told that error: the message stays pending, sent
// again at the next boot, and its reservation held). Apart from Outcome so that only an
// outcome whose events are published moves its entry to the heap.
func (m *messages) settleAfterEvents(e domain.OutboxEntry, written func(error)) func(error) {
	return func(err error) {
		if err != nil {
			// Not on the teller's goroutine: written (settled) takes the message's shard lock,
			// which Outcome holds while it publishes (publishThen tells a stopped publisher's
			// error at once), or while it waits for room in the publisher's full queue (whose
			// goroutine tells this).
			go written(fmt.Errorf("its events not committed, so not recorded: %w", err))
			return
		}
		if outcomeRecordHeld {
			return // a test build's fault point: the process is killed before the record
		}
		m.outbox.Settle(e, written)
	}
}

// outcomeRecordHeld is a fault point of the test build (messages_fault.go): false in a release.
var outcomeRecordHeld bool

// Receipt implements session.Deliveries: the recipient's device reported on a message
// (delivered, read; with the pricing category a network gives); recorded beside its outcome.
func (m *messages) Receipt(id string, c domain.StatusChange, done network.Done) {
	m.receiptOf(id, c, done)
}

// receiptOf applies a receipt to message id: held until its outcome when it overtook the
// deliverer; else recorded and reported, unless the message is there already. Its event is
// published under the shard's lock when the message is tracked, as Outcome publishes: a
// receipt that comes just after the outcome never overtakes the outcome's event. done is
// called once the receipt is written (or needs no write).
//
// It copies no entry: a tracked message's receipt is applied where it is kept, and one read
// from storage is receiptStored's. Its frame stays small (it was 3.4 KB with two entries in
// it): a network's event goroutine is often new (the sim starts one per burst of events),
// and a frame that large grew its stack, copied, on every receipt (3.5 % of the send path's
// CPU in process with 100 sessions).
func (m *messages) receiptOf(id string, c domain.StatusChange, done network.Done) {
	sh := m.shard(id)
	sh.mu.Lock()
	p := sh.m[id]
	if p == nil {
		sh.mu.Unlock()
		m.receiptStored(sh, id, c, done)
		return
	}
	if !p.settled {
		// Folded into the outcome (its record and its events, in order) when it lands. A
		// network that waits for the receipt's record (a send in doubt may wait a minute for
		// its outcome: meanwhile WhatsApp's connection and Meta's webhook would wait) has it
		// written now, its own record, which the outcome's read lays over it: durable, and
		// never behind the outcome.
		p.early = append(p.early, c)
		sh.mu.Unlock()
		if done != nil {
			m.outbox.Receipt(id, c, m.receiptWritten(id, c.Status, true, done))
		}
		return
	}
	before := p.entry.Status
	changed := applyReceipt(&p.entry, c)
	moved := changed && p.entry.Status != before
	if moved && m.e.pub.takes(p.entry.UserID) {
		// messageThen copies the entry into its event before it returns.
		m.e.pub.messageThen(&p.entry, c.Status, c.At.Time(), m.recordAfterEvent(id, c, done))
		sh.mu.Unlock()
		return
	}
	sh.mu.Unlock()
	if !changed {
		if done != nil {
			// A network that waits sends a receipt again when its record may have failed:
			// the entry here may be ahead of the disk, so it is written again (a receipt's
			// record is its own key: rewriting it changes nothing else).
			m.outbox.Receipt(id, c, m.receiptWritten(id, c.Status, false, done))
		}
		return
	}
	m.outbox.Receipt(id, c, m.receiptWritten(id, c.Status, moved, done))
}

// receiptStored is receiptOf for a message this process does not keep: read from storage.
func (m *messages) receiptStored(sh *pendingShard, id string, c domain.StatusChange, done network.Done) {
	e, err := m.outbox.Get(id)
	if err != nil {
		done.Call(unlessGone(err)) // not ours (a message sent from the phone), or gone
		return
	}
	stored := e
	stored.History = slices.Clip(e.History)
	before := e.Status
	if !applyReceipt(&e, c) {
		done.Call(nil) // a repeat, or behind what the message reached
		return
	}
	if stored.Final() {
		// Kept as a settled message is (keep): this receipt and the next are applied to it
		// under the lock, in order, not each to storage, which lags a receipt whose record
		// waits for its event (recordAfterEvent): a delivered after a read would go back.
		m.remember(sh, id, stored)
		m.receiptOf(id, c, done)
		return
	}
	moved := e.Status != before
	if moved && m.e.pub.takes(e.UserID) {
		m.e.pub.messageThen(&e, c.Status, c.At.Time(), m.recordAfterEvent(id, c, done))
		return
	}
	m.outbox.Receipt(e.ID, c, m.receiptWritten(e.ID, c.Status, moved, done))
}

// remember keeps message e, read from storage with its outcome, among the shard's recent
// settled messages (without its body), unless the shard holds it already (tracked or kept
// meanwhile: a receipt then goes to that).
func (m *messages) remember(sh *pendingShard, id string, e domain.OutboxEntry) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.m[id] != nil {
		return
	}
	msg := e.Message
	e.Message = domain.Message{ID: msg.ID, To: msg.To, Kind: msg.Kind}
	sh.m[id] = &pending{settled: true, durable: true, entry: e}
	sh.keep(id)
}

// recordAfterEvent writes a receipt's record once its event (message.delivered, read) is
// durable, then tells done: a network that waits for the record (done set) sends the receipt
// again until done is told, and that again finds the record written or not; written before its
// event, a kill -9 between the two kept the record and lost the event for good (the receipt
// sent again changes nothing, so publishes nothing). This way the worst is the event twice.
func (m *messages) recordAfterEvent(id string, c domain.StatusChange, done network.Done) func(error) {
	return func(err error) {
		if err != nil {
			m.e.log.Warn("outbox: receipt's event not committed; its record waits for the network to send it again", "message_id", id, "status", c.Status, "err", err)
			done.Call(err)
			return
		}
		m.outbox.Receipt(id, c, m.receiptWritten(id, c.Status, true, done))
	}
}

// receiptWritten logs a receipt's record that failed, and tells done. Apart from receiptOf so
// that the callback holds the id, not the whole entry.
func (m *messages) receiptWritten(id, status string, moved bool, done network.Done) func(error) {
	what := "outbox: record receipt"
	if !moved {
		what = "outbox: record pricing" // recorded, not published
	}
	return func(err error) {
		if err != nil {
			m.e.log.Warn(what, "message_id", id, "status", status, "err", err)
		}
		done.Call(err)
	}
}

// thenAll is written followed by each of after (nil ones skipped): written itself when after
// is empty (the common case allocates nothing).
func thenAll(written func(error), after []network.Done) func(error) {
	if len(after) == 0 {
		return written
	}
	return func(err error) {
		written(err)
		for _, d := range after {
			d.Call(err)
		}
	}
}

// unlessGone is err, or nil when it only says the record is not there (nothing to write).
func unlessGone(err error) error {
	if errors.Is(err, domain.ErrRecordNotFound) {
		return nil
	}
	return err
}
