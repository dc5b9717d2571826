package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/gateway/gateway/actors/storeevents"
	"github.com/gateway/gateway/domain"
)

// What the storeevents actors consume, implemented by the engine: their storage (the inbox,
// with the outcomes counted and published), order fetches, views and the message sender.

// storeEventsStore is the storeevents actors' storage: the inbox, with the outcomes counted.
type storeEventsStore struct {
	InboxStore
	s *storeService
}

// AlreadySent implements storeevents.Store: the sent marks of keys, in one read.
func (st storeEventsStore) AlreadySent(shop string, keys []string) ([]bool, error) {
	return st.AlreadySentMany(shop, keys)
}

// FinishEvents implements storeevents.Store: the outcomes in one commit, then counted and
// published.
func (st storeEventsStore) FinishEvents(ctx context.Context, shop string, fs []storeevents.Finished) error {
	pf := make([]domain.FinishedEvent, len(fs))
	for i, f := range fs {
		pf[i] = domain.FinishedEvent{Seq: f.Seq, Record: f.Record, SentKey: f.SentKey}
	}
	err := st.FinishMany(ctx, shop, pf)
	if errors.Is(err, domain.ErrRecordNotFound) {
		return nil // removed meanwhile: the store was disconnected
	}
	if err != nil {
		return err
	}
	s := st.s
	ent := s.byShop(shop)
	for _, f := range fs {
		if f.Seq == "" {
			continue
		}
		rec := f.Record
		s.pending.Add(-1)
		if ent != nil && s.pub != nil {
			s.pub.publish(ent.rec.UserID, domain.Event{Type: domain.EventStoreEvent, Data: domain.StoreEventData{
				Shop: shop, Topic: rec.Topic, OrderID: rec.OrderID, OrderName: rec.OrderName,
				Outcome: rec.Status, Reason: rec.Reason, MessageID: rec.MessageID,
			}})
		}
		switch rec.Status {
		case domain.StoreEventSent:
			s.sentN.Add(1)
		case domain.StoreEventSkipped:
			s.skippedN.Add(1)
		default:
			s.failedN.Add(1)
		}
	}
	return nil
}

// What the storeevents actors consume (storeevents.Deps). The store's current entry is
// looked up on every call, not the one the actor was spawned for: a reconnect of the same shop
// (new credentials) keeps its actor.

// FetchOrder implements storeevents.OrderFetcher with the store's current token.
func (s *storeService) FetchOrder(ctx context.Context, shop string, orderID int64) ([]byte, error) {
	cur := s.byShop(shop)
	if cur == nil {
		return nil, fmt.Errorf("%w: %s", domain.ErrStoreNotFound, shop)
	}
	if cur.token == "" {
		return nil, storeevents.ErrNoStoreToken
	}
	return s.client.FetchOrder(ctx, shop, cur.token, orderID)
}

// storeViews publishes a store actor's queue view on the shop's current entry
// (storeevents.Publisher).
type storeViews struct {
	s    *storeService
	shop string
}

func (v storeViews) Publish(view storeevents.View) {
	if cur := v.s.byShop(v.shop); cur != nil {
		cur.view.Store(&view)
	}
}

// storeSender sends store events' messages through the engine.
type storeSender struct{ e *Engine }

// SendGroups accepts a store's messages through the owner's default session in one commit.
func (ss storeSender) SendGroups(ctx context.Context, uid, origin string, groups [][]storeevents.Outgoing) (int, error) {
	return ss.e.Messages.SendGroups(ctx, uid, origin, groups)
}

// SessionReady tells whether the user's default session is connected (or their Cloud API
// number is, which routing may send through).
func (ss storeSender) SessionReady(uid string) bool {
	if _, err := ss.e.Sessions.forSend(uid, ""); err == nil {
		return true
	}
	return ss.e.Sessions.idx.cloudOf(uid) != nil
}

// Outcome looks a message up in the outbox.
func (ss storeSender) Outcome(msgID string) (domain.OutboxEntry, bool) {
	return ss.e.Messages.stored(msgID)
}

// Interface guards.
var (
	_ storeevents.Store        = storeEventsStore{}
	_ storeevents.OrderFetcher = (*storeService)(nil)
	_ storeevents.Composer     = (*storeService)(nil)
	_ storeevents.Sender       = storeSender{}
	_ storeevents.Outbox       = storeSender{}
	_ storeevents.Publisher    = storeViews{}
)
