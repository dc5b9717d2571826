package engine

import (
	"context"

	"github.com/gateway/gateway/actors/storeevents"
	"github.com/gateway/gateway/domain"
)

// SendGroups accepts groups of messages of one user, in order, through the user's default
// session, in ONE commit: what a store's queued events make (one commit per batch instead of
// one per event; a group is one event's messages, its question and follow-up included). Their
// ids must be new (never accepted before: no outbox lookup is made for them). A message with a
// SendAt ahead is accepted for later (scheduled, later.go).
//
// A group is accepted whole or not at all: it returns how many groups it accepted, fewer when
// the month's allowance is short of the whole batch (the rest is for the caller to try again,
// which then meets ErrQuotaExceeded on its first group). An error means nothing was accepted:
// no session, no allowance left, storage unavailable.
func (ms *Messages) SendGroups(ctx context.Context, uid, origin string, groups [][]storeevents.Outgoing) (int, error) {
	total := 0
	for _, g := range groups {
		total += len(g)
	}
	if total == 0 {
		return len(groups), nil
	}
	e := ms.e
	if e.Sessions.idx.cloudOf(uid) != nil {
		return ms.sendEach(ctx, uid, origin, groups) // routed one by one (routing.go)
	}
	ent, err := e.Sessions.forSend(uid, "")
	if err != nil {
		return 0, err
	}
	res, err := ms.reserve(ctx, uid, int64(total), ReserveOpts{})
	if err != nil {
		return 0, err
	}
	// Whole groups within what was granted.
	granted, n, msgs := int(res.Granted()), 0, 0
	for n < len(groups) && msgs+len(groups[n]) <= granted {
		msgs += len(groups[n])
		n++
	}
	if n == 0 {
		res.Release()
		return 0, domain.ErrQuotaExceeded
	}
	now := e.now().UTC()
	view := ent.view.Load()
	entries := make([]domain.OutboxEntry, 0, msgs)
	for _, g := range groups[:n] {
		for _, o := range g {
			if o.SendAt.After(now) {
				entries = append(entries, scheduledEntry(o.Message, view, uid, origin, now, o.SendAt))
			} else {
				entries = append(entries, queuedEntry(o.Message, view, uid, origin, now, nil))
			}
		}
	}
	if err := ms.msgs.outbox.AcceptMany(ctx, entries); err != nil {
		res.Release()
		return 0, acceptErr(err)
	}
	for _, entry := range entries {
		if entry.Status == domain.MsgScheduled {
			ms.scheduled(entry, res.Take(1))
			continue
		}
		ms.enqueue(ent, entry, res.Take(1), nil, now)
	}
	res.Release() // what whole groups left over
	return n, nil
}

// sendEach accepts the groups' messages one by one, each routed between the user's linked and
// cloud sessions, and returns how many groups it accepted, like SendGroups (an error with
// nothing accepted). A group the allowance runs out in the middle of keeps what it accepted.
func (ms *Messages) sendEach(ctx context.Context, uid, origin string, groups [][]storeevents.Outgoing) (int, error) {
	now := ms.e.now()
	for n, g := range groups {
		for i, o := range g {
			r := SendRequest{UserID: uid, Origin: origin, Message: o.Message}
			if o.SendAt.After(now) {
				r.SendAt = o.SendAt
			}
			if _, err := ms.Send(ctx, r); err != nil {
				switch {
				case n == 0 && i == 0:
					return 0, err
				case i == 0:
					return n, nil
				}
				return n + 1, nil
			}
		}
	}
	return len(groups), nil
}
