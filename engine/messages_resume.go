package engine

import (
	"context"

	"github.com/gateway/gateway/domain"
)

// An accept whose commit failed as far as Send knew (a timeout, the NATS server that led the
// records stream killed under it, a request ctx that ended while the commit waited) may have
// been stored all the same: the message, its pending mark and its Idempotency-Key's record.
// Send gave its reservation back and queued it nowhere, so it waited for its partition's next
// boot; the client's retry under the same Idempotency-Key was answered 200 from the record,
// and a campaign's retried number found the message "as it stands". Either way an accepted
// message nobody sent. So the two paths that find a message accepted before (Replay, and Send
// with a caller-chosen id) hand it to its session's deliverer when this engine has it in no
// queue.

// Replay returns one of the user's messages for the replay of a request that made it (an
// Idempotency-Key's record names it), queuing it here if it is pending in storage but in no
// session's queue (resume).
func (ms *Messages) Replay(uid, id string) (domain.OutboxEntry, error) {
	m, err := ms.Get(uid, id)
	if err != nil {
		return m, err
	}
	ms.resume(m)
	return m, nil
}

// resume hands a message that storage holds as pending to its session's deliverer unless this
// engine tracks it already (queued, or its outcome being written). A message whose outcome
// was known but could not be written is tracked no more either: it goes again under its id,
// which the network takes as the same message.
func (ms *Messages) resume(e domain.OutboxEntry) {
	if e.Final() {
		return
	}
	m := ms.msgs
	if m.tracked(e.ID) {
		return
	}
	ent := ms.e.Sessions.idx.get(e.SessionID)
	if ent == nil {
		ms.e.log.Error("outbox entry for an unknown session", "message_id", e.ID, "session_id", e.SessionID)
		return
	}
	// Accepted: counted whatever is left of the month (its first reservation went back when
	// the accept seemed to fail).
	res, err := ms.reserve(context.Background(), e.UserID, 1, ReserveOpts{Force: true})
	if err != nil {
		ms.e.log.Warn("outbox: a pending message in no queue waits for the next boot", "message_id", e.ID, "err", err)
		return
	}
	if !m.track(e.ID, res, nil) {
		return // queued meanwhile (its reservation went back)
	}
	// Read again now that it is tracked: an outcome written between the first read and the
	// claim (a settled message no longer tracked) must not send it again.
	cur, err := m.outbox.Get(e.ID)
	if err != nil || cur.Final() {
		m.unclaim(e.ID)
		return
	}
	// A failure or a cancellation told (its event committed, its status kept beside it) whose
	// record failed is settled so, as a boot settles it (messages_told.go), never sent: the
	// webhook, the stream and the broker were told it would not go.
	told, err := ms.toldFinal([]domain.OutboxEntry{cur})
	if err != nil {
		ms.e.log.Warn("outbox: a pending message in no queue waits for the next boot (its told status not read)", "message_id", e.ID, "err", err)
		m.unclaim(e.ID)
		return
	}
	if f, ok := told[e.ID]; ok {
		m.settleTold(cur, f)
		return
	}
	if e.Status == domain.MsgScheduled {
		ms.later.add(e.ID, e.UserID, e.SendAt.Time())
		return
	}
	ms.e.log.Warn("outbox: a message accepted by a commit that seemed to fail is queued now", "message_id", e.ID, "session_id", e.SessionID)
	ms.push(ent, e)
}

// tracked: the message is queued here or its outcome is being written (or was, a moment ago).
func (m *messages) tracked(id string) bool {
	sh := m.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.m[id] != nil
}

// unclaim undoes resume's track (its reservation goes back). What the network reported on the
// message meanwhile (a receipt, a late failure, held for the outcome with the Done its network
// waits on) is applied to the message as it stands, as it would be untracked: every Done is
// told once.
func (m *messages) unclaim(id string) {
	sh := m.shard(id)
	sh.mu.Lock()
	p := sh.m[id]
	var (
		early []domain.StatusChange
		late  *lateFailure
	)
	if p != nil && !p.settled {
		delete(sh.m, id)
		m.depth.Add(-1)
		early, late = p.early, p.late
	} else {
		p = nil
	}
	sh.mu.Unlock()
	if p != nil && p.res != nil {
		p.res.Release()
	}
	for _, c := range early {
		m.receiptOf(id, c, nil)
	}
	if late != nil {
		m.Failed(id, late.err, late.at, late.done)
	}
}

// resumed marks tracked message id as one a boot sends again (pending.resumed).
func (m *messages) resumed(id string) {
	sh := m.shard(id)
	sh.mu.Lock()
	if p := sh.m[id]; p != nil && !p.resumed {
		p.resumed = true
		m.resumedLeft.Add(1)
	}
	sh.mu.Unlock()
}

// wasResumed tells whether message id is tracked as one a boot sends again, asked once by its
// outcome (which settles it). Without such a message left (every outcome after the boot's
// resends were settled: nearly always) it takes no lock: the outcome of every message asked.
func (m *messages) wasResumed(id string) bool {
	if m.resumedLeft.Load() == 0 {
		return false
	}
	sh := m.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p := sh.m[id]
	if p != nil && p.resumed && !p.settled {
		m.resumedLeft.Add(-1) // its outcome is being settled
		return true
	}
	return false
}
