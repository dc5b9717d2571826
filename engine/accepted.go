package engine

// A message as Send accepts it: its entry, queued now or scheduled for later, and what an
// outbox's refusal of it answers.

import (
	"errors"
	"fmt"
	"time"

	"github.com/gateway/gateway/domain"
)

// acceptErr is an outbox's refusal of an accept as answered: a message too large for it to
// hold is the caller's to make smaller (413); anything else is the storage's, retried (503).
func acceptErr(err error) error {
	if errors.Is(err, domain.ErrMediaTooLarge) {
		return err
	}
	return fmt.Errorf("%w: outbox: %w", domain.ErrUnavailable, err)
}

// queuedEntry is a message as it is accepted at now, queued on session sess: for the phone the
// session is linked to, from which alone it may go.
//
// Its history has room for the status after queued (the deliverer's sent or failed appends in
// place: an allocation a message fewer). Room for that one only: the copies of the entry made
// before it (the caller's answer, the event, the outbox's) read the first status alone, and
// only the worker that settles the message writes the second; every later status (a receipt,
// the outbox's outcome record, each on its own copy) finds the array full and appends into a
// new one, so no two copies ever write one element. room is that array (nil: made), Send's in
// the message's record: never reused, so the history is the message's alone, as a new one.
func queuedEntry(msg domain.Message, sess *domain.Session, uid, origin string, now time.Time, room []domain.StatusChange) domain.OutboxEntry {
	if room == nil {
		room = make([]domain.StatusChange, 0, 2)
	}
	entry := domain.OutboxEntry{ID: msg.ID, SessionID: sess.ID, UserID: uid, Origin: origin, From: sess.Phone, Message: msg, CreatedAt: domain.MillisOf(now),
		History: room[:0:2]}
	entry.SetStatus(domain.MsgQueued, now)
	return entry
}

// scheduledEntry is msg accepted at now to go at sendAt.
func scheduledEntry(msg domain.Message, sess *domain.Session, uid, origin string, now, sendAt time.Time) domain.OutboxEntry {
	entry := domain.OutboxEntry{ID: msg.ID, SessionID: sess.ID, UserID: uid, Origin: origin, From: sess.Phone, Message: msg,
		CreatedAt: domain.MillisOf(now), SendAt: domain.MillisOf(sendAt)}
	entry.SetStatus(domain.MsgScheduled, now)
	return entry
}
