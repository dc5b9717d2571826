package persist

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/gateway/gateway/domain"
)

// ---- schema: the store loop (DESIGN.md section 18) ----
//
//	store_order/<shop>/<order id, 20 digits>  domain.StoreOrder (v1), TTL 30 days after its last
//	                                          change: an order's scheduled messages and confirmation
//	store_answer/<uid>/p/<phone>              domain.ConfirmRef (v1), TTL 7 days: the order a typed
//	store_answer/<uid>/m/<message id>         answer from that phone, or a vote on that poll, is for
//	store_writeback/<shop>/<order id>         empty (v1), no TTL: an answer not yet written back to
//	                                          the order (boot resumes these)
//	store_checkout/<shop>/t/<token>           domain.StoreCheckout (v1), TTL 31 days: an abandoned
//	store_checkout/<shop>/p/<phone>           checkout's reminder, by checkout token and by phone
//	optout/<uid>/<phone>                      domain.OptOut (v1), no TTL: the suppression list
//
// uid is path-escaped (url.PathEscape) so one user's prefix is never another's.

const storeLoopVersion = 1

// checkoutTTL: a reminder is due at most MaxTopicDelay after its checkout.
const checkoutTTL = domain.MaxTopicDelay + 24*time.Hour

// StoreLoop holds the store loop's records: orders, the answer index, pending write-backs,
// abandoned checkouts and the suppression lists.
type StoreLoop struct {
	kv         KV
	orders     *Table[domain.StoreOrder]
	answers    *Table[domain.ConfirmRef]
	writebacks *Table[struct{}]
	checkouts  *Table[domain.StoreCheckout]
	optouts    *Table[domain.OptOut]
	events     *Table[domain.StoreEvent]
}

// NewStoreLoop returns the store loop's tables on kv.
func NewStoreLoop(kv KV) *StoreLoop {
	return &StoreLoop{
		kv:         kv,
		orders:     NewTable[domain.StoreOrder](kv, "store_order", storeLoopVersion),
		answers:    NewTable[domain.ConfirmRef](kv, "store_answer", storeLoopVersion),
		writebacks: NewTable[struct{}](kv, "store_writeback", storeLoopVersion),
		checkouts:  NewTable[domain.StoreCheckout](kv, "store_checkout", storeLoopVersion),
		optouts:    NewTable[domain.OptOut](kv, "optout", storeLoopVersion),
		events:     NewTable[domain.StoreEvent](kv, "store_event", inboxVersion),
	}
}

func orderID(shop string, id int64) string { return fmt.Sprintf("%s/%020d", shop, id) }

func userPrefix(uid string) string { return url.PathEscape(uid) + "/" }

// Order reads an order's record; found is false when it has none.
func (s *StoreLoop) Order(shop string, id int64) (domain.StoreOrder, bool, error) {
	o, err := s.orders.Get(orderID(shop, id))
	if errors.Is(err, domain.ErrRecordNotFound) {
		return o, false, nil
	}
	return o, err == nil, err
}

// PutOrder commits one change of the store loop at once: an order's record, the answer index
// keys that name it ("p/<phone>", "m/<message id>"; drop: keys removed, an answered order takes
// no second answer), and its pending write-back mark (writeBack 1: set, -1: cleared, 0: left).
func (s *StoreLoop) PutOrder(ctx context.Context, o domain.StoreOrder, answers, drop []string, writeBack int) error {
	op, err := s.orders.PutTTLOp(orderID(o.Shop, o.OrderID), o, domain.StoreOrderRetention)
	if err != nil {
		return err
	}
	ops := []Op{op}
	for _, k := range drop {
		ops = append(ops, s.answers.DeleteOp(userPrefix(o.UserID)+k))
	}
	ref := domain.ConfirmRef{Shop: o.Shop, OrderID: o.OrderID}
	if c := o.Confirmation; c != nil {
		ref.AskedAt = c.AskedAt
	}
	for _, k := range answers {
		op, err := s.answers.PutTTLOp(userPrefix(o.UserID)+k, ref, domain.ConfirmAnswerWindow)
		if err != nil {
			return err
		}
		ops = append(ops, op)
	}
	switch writeBack {
	case 1:
		op, err := s.writebacks.PutOp(orderID(o.Shop, o.OrderID), struct{}{})
		if err != nil {
			return err
		}
		ops = append(ops, op)
	case -1:
		ops = append(ops, s.writebacks.DeleteOp(orderID(o.Shop, o.OrderID)))
	}
	return s.kv.Commit(ctx, ops...)
}

// Orders lists a shop's order records (at most max, any order; 0 = all).
func (s *StoreLoop) Orders(shop string, max int) ([]domain.StoreOrder, error) {
	var out []domain.StoreOrder
	errStop := errors.New("stop")
	err := s.orders.Scan(shop+"/", func(_ string, o domain.StoreOrder) error {
		out = append(out, o)
		if max > 0 && len(out) >= max {
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		err = nil
	}
	return out, err
}

// Answer finds the order a key ("p/<phone>", "m/<message id>") of the user answers.
func (s *StoreLoop) Answer(uid, key string) (domain.ConfirmRef, bool, error) {
	r, err := s.answers.Get(userPrefix(uid) + key)
	if errors.Is(err, domain.ErrRecordNotFound) {
		return r, false, nil
	}
	return r, err == nil, err
}

// PendingWriteBacks calls fn for every order with an answer not yet written back.
func (s *StoreLoop) PendingWriteBacks(fn func(shop string, orderID int64) error) error {
	return s.writebacks.Scan("", func(id string, _ struct{}) error {
		var shop string
		var n int64
		for i := len(id) - 1; i >= 0; i-- {
			if id[i] == '/' {
				shop = id[:i]
				if _, err := fmt.Sscanf(id[i+1:], "%d", &n); err != nil {
					return nil // not ours
				}
				break
			}
		}
		if shop == "" {
			return nil
		}
		return fn(shop, n)
	})
}

// DropWriteBack clears an order's write-back mark alone (its record expired).
func (s *StoreLoop) DropWriteBack(ctx context.Context, shop string, id int64) error {
	return s.kv.Commit(ctx, s.writebacks.DeleteOp(orderID(shop, id)))
}

// PutCheckout records an abandoned checkout under its token and its phone.
func (s *StoreLoop) PutCheckout(ctx context.Context, c domain.StoreCheckout) error {
	var ops []Op
	for _, k := range checkoutKeys(c.Shop, c.Token, c.Phone) {
		op, err := s.checkouts.PutTTLOp(k, c, checkoutTTL)
		if err != nil {
			return err
		}
		ops = append(ops, op)
	}
	return s.kv.Commit(ctx, ops...)
}

// Checkouts finds the shop's abandoned checkouts with this token or phone ("" = not looked for).
func (s *StoreLoop) Checkouts(shop, token, phone string) ([]domain.StoreCheckout, error) {
	var out []domain.StoreCheckout
	for _, k := range checkoutKeys(shop, token, phone) {
		c, err := s.checkouts.Get(k)
		if errors.Is(err, domain.ErrRecordNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		dup := false
		for _, o := range out {
			dup = dup || o.Token == c.Token
		}
		if !dup {
			out = append(out, c)
		}
	}
	return out, nil
}

// DeleteCheckout removes a checkout's records.
func (s *StoreLoop) DeleteCheckout(ctx context.Context, c domain.StoreCheckout) error {
	var ops []Op
	for _, k := range checkoutKeys(c.Shop, c.Token, c.Phone) {
		ops = append(ops, s.checkouts.DeleteOp(k))
	}
	return s.kv.Commit(ctx, ops...)
}

func checkoutKeys(shop, token, phone string) []string {
	var ks []string
	if token != "" {
		ks = append(ks, shop+"/t/"+url.PathEscape(token))
	}
	if phone != "" {
		ks = append(ks, shop+"/p/"+phone)
	}
	return ks
}

// UpdateEvent rewrites a store event's record (its ring slot) when the slot still holds record
// n; fn changes it. It reports whether it wrote.
func (s *StoreLoop) UpdateEvent(ctx context.Context, shop string, n int64, fn func(*domain.StoreEvent)) (bool, error) {
	slot := eventSlot(shop, n)
	r, err := s.events.Get(slot)
	if errors.Is(err, domain.ErrRecordNotFound) {
		return false, nil
	}
	if err != nil || r.N != n {
		return false, err
	}
	fn(&r)
	op, err := s.events.PutTTLOp(slot, r, StoreEventTTL)
	if err != nil {
		return false, err
	}
	return true, s.kv.Commit(ctx, op)
}

// ---- the suppression list ----

// PutOptOuts adds phones to the user's suppression list in one commit.
func (s *StoreLoop) PutOptOuts(ctx context.Context, uid string, os []domain.OptOut) error {
	if len(os) == 0 {
		return nil
	}
	ops := make([]Op, 0, len(os))
	for _, o := range os {
		op, err := s.optouts.PutOp(userPrefix(uid)+o.Phone, o)
		if err != nil {
			return err
		}
		ops = append(ops, op)
	}
	return s.kv.Commit(ctx, ops...)
}

// DeleteOptOuts takes phones off the user's suppression list.
func (s *StoreLoop) DeleteOptOuts(ctx context.Context, uid string, phones []string) error {
	if len(phones) == 0 {
		return nil
	}
	ops := make([]Op, 0, len(phones))
	for _, p := range phones {
		ops = append(ops, s.optouts.DeleteOp(userPrefix(uid)+p))
	}
	return s.kv.Commit(ctx, ops...)
}

// OptOuts lists the user's suppression list, in phone order.
func (s *StoreLoop) OptOuts(uid string) ([]domain.OptOut, error) {
	var out []domain.OptOut
	err := s.optouts.Scan(userPrefix(uid), func(_ string, o domain.OptOut) error {
		out = append(out, o)
		return nil
	})
	return out, err
}
