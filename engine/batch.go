package engine

import (
	"context"
	"fmt"

	"github.com/gateway/gateway/domain"
)

// SendBatch accepts messages of one user, in order, through the user's default session, in ONE
// commit: what a store's queued events make (one commit per batch instead of one per event).
// Their ids must be new (never accepted before: no outbox lookup is made for them).
//
// It returns the entries it accepted: a prefix of msgs, shorter when the month's allowance is
// short of the whole batch (the rest is for the caller to try again, which then meets
// ErrQuotaExceeded on its first message). An error means nothing was accepted: no session, no
// allowance left, storage unavailable.
func (ms *Messages) SendBatch(ctx context.Context, uid, origin string, msgs []domain.Message) ([]domain.OutboxEntry, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	e := ms.e
	if e.Sessions.idx.cloudOf(uid) != nil {
		return ms.sendEach(ctx, uid, origin, msgs) // routed one by one (routing.go)
	}
	ent, err := e.Sessions.forSend(uid, "")
	if err != nil {
		return nil, err
	}
	res, err := ms.reserve(ctx, uid, int64(len(msgs)), ReserveOpts{})
	if err != nil {
		return nil, err
	}
	n := min(int(res.Granted()), len(msgs))
	if n == 0 {
		res.Release()
		return nil, domain.ErrQuotaExceeded
	}
	now := e.now().UTC()
	view := ent.view.Load()
	entries := make([]domain.OutboxEntry, n)
	for i, m := range msgs[:n] {
		entries[i] = queuedEntry(m, view, uid, origin, now)
	}
	if err := ms.msgs.outbox.AcceptMany(ctx, entries); err != nil {
		res.Release()
		return nil, fmt.Errorf("%w: outbox: %w", domain.ErrUnavailable, err)
	}
	for _, entry := range entries {
		ms.enqueue(ent, entry, res.Take(1), nil, now)
	}
	return entries, nil
}

// sendEach accepts messages one by one, each routed between the user's linked and cloud
// sessions: a prefix of msgs, like SendBatch (an error with nothing accepted).
func (ms *Messages) sendEach(ctx context.Context, uid, origin string, msgs []domain.Message) ([]domain.OutboxEntry, error) {
	out := make([]domain.OutboxEntry, 0, len(msgs))
	for _, m := range msgs {
		e, err := ms.Send(ctx, SendRequest{UserID: uid, Origin: origin, Message: m})
		if err != nil {
			if len(out) == 0 {
				return nil, err
			}
			return out, nil
		}
		out = append(out, e)
	}
	return out, nil
}
