package engine

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/ecom"
)

// Writing a confirmation's answer back to the order (DESIGN.md section 18), through the
// platform's API (ecom.OrderWriter): the Shopify type tags the order (tagYes or tagNo), adds a
// line to its note and, for a no with cancelOnNo, cancels it; the WooCommerce type adds an order
// note and sets its status (processing, or cancelled for a no with cancelOnNo).
//
// The answer and a write-back mark are committed together (answer.go); a worker goroutine per
// order then writes it, at once (the fake platform of the tests holds it within a second), and
// again after a failure the platform may get over (1 s doubling to 5 min) for 24 h. The mark is
// cleared with the outcome (done, failed with why, or none when the store has no API access);
// the engine's boot (or a cluster partition's next owner) starts a worker for every mark left.
// Every write is safe to run twice (ecom/writeback.go).

// writeBackTimeout bounds one attempt.
const writeBackTimeout = 20 * time.Second

// startWriteBack runs the write-back of an order's answer unless one runs already.
func (s *storeService) startWriteBack(uid, shop string, id int64) {
	key := shop + "/" + strconv.FormatInt(id, 10)
	if _, running := s.writing.LoadOrStore(key, struct{}{}); running {
		return
	}
	started := s.e.goBackground(func() {
		defer s.writing.Delete(key)
		backoff := time.Second
		for !s.writeBackOnce(shop, id) {
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-s.e.stopCtx.Done():
				t.Stop()
				return // the mark stays: the next boot goes on
			}
			backoff = min(2*backoff, 5*time.Minute)
		}
	})
	if !started {
		s.writing.Delete(key) // the engine stops: the mark stays, the next boot goes on
	}
}

// writeBackRef is one answer left with a write-back mark: its shop and order.
type writeBackRef struct {
	shop string
	id   int64
}

// pendingWriteBacks reads the answers left with a write-back mark (boot reads them with the
// stores' other records).
func (s *storeService) pendingWriteBacks() ([]writeBackRef, error) {
	var ps []writeBackRef
	if err := s.loop.PendingWriteBacks(func(shop string, id int64) error {
		ps = append(ps, writeBackRef{shop, id})
		return nil
	}); err != nil {
		return nil, fmt.Errorf("engine: pending write-backs: %w", err)
	}
	return ps, nil
}

// resumeWriteBacks starts the write-back of every answer left with a mark (boot; read by
// pendingWriteBacks).
func (s *storeService) resumeWriteBacks(ps []writeBackRef) (int, error) {
	for _, p := range ps {
		o, found, err := s.loop.Order(p.shop, p.id)
		if err != nil {
			return 0, fmt.Errorf("engine: pending write-back of %s %d: %w", p.shop, p.id, err)
		}
		if found {
			s.startWriteBack(o.UserID, p.shop, p.id)
		}
	}
	return len(ps), nil
}

// writeBackOnce makes one attempt; it reports whether there is nothing more to try.
func (s *storeService) writeBackOnce(shop string, id int64) bool {
	o, found, err := s.loop.Order(shop, id)
	if err != nil {
		s.e.log.Warn("write-back: order not read", "shop", shop, "order_id", id, "err", err)
		return false
	}
	if !found || o.Confirmation == nil || o.Confirmation.WriteBack != domain.WriteBackPending {
		return s.finishWriteBack(shop, id, "", "") // nothing to write (the mark goes)
	}
	c := o.Confirmation
	ent := s.byShop(shop)
	if ent == nil || ent.rec.UserID != o.UserID {
		return s.finishWriteBack(shop, id, domain.WriteBackFailed, "the store was disconnected")
	}
	p, _ := ecom.Lookup(ent.rec.Platform)
	w, ok := p.(ecom.OrderWriter)
	cr := ecom.Credentials{Shop: shop, Token: ent.token, Key: ent.restKey, Secret: ent.restSecret}
	if !ok || !w.CanWrite(cr) {
		return s.finishWriteBack(shop, id, domain.WriteBackNone, "")
	}
	a := ecom.Answer{OrderID: id, Yes: c.Answer == domain.AnswerYes, Note: answerNote(c)}
	if a.Yes {
		a.Tag = c.Confirm.TagYes
	} else {
		a.Tag, a.Cancel = c.Confirm.TagNo, c.Confirm.CancelOnNo
	}
	ctx, cancel := context.WithTimeout(s.e.stopCtx, writeBackTimeout)
	err = w.WriteAnswer(ctx, s.client, cr, a)
	cancel()
	switch {
	case err == nil:
		s.e.log.Info("confirmation written back to the order", "shop", shop, "order_id", id, "answer", c.Answer)
		return s.finishWriteBack(shop, id, domain.WriteBackDone, "")
	case ecom.Permanent(err) || s.e.now().Sub(c.AnsweredAt) > answerRetention:
		s.e.log.Warn("confirmation not written back: given up", "shop", shop, "order_id", id, "err", err)
		return s.finishWriteBack(shop, id, domain.WriteBackFailed, err.Error())
	case s.e.stopCtx.Err() != nil:
		return false
	}
	unlock := s.orders.lock(shop, id)
	defer unlock()
	if cur, found, rerr := s.loop.Order(shop, id); rerr == nil && found && cur.Confirmation != nil {
		cur.Confirmation.Attempts++
		cur.Confirmation.WriteError = err.Error()
		if perr := s.loop.PutOrder(context.Background(), cur, nil, nil, 0); perr != nil {
			s.e.log.Warn("write-back: attempt not recorded", "shop", shop, "order_id", id, "err", perr)
		}
	}
	s.e.log.Info("confirmation write-back will be tried again", "shop", shop, "order_id", id, "err", err)
	return false
}

// finishWriteBack records the write-back's outcome ("" leaves the record) and clears the mark.
// It reports false when storage refused (the worker tries again).
func (s *storeService) finishWriteBack(shop string, id int64, state, why string) bool {
	unlock := s.orders.lock(shop, id)
	defer unlock()
	o, found, err := s.loop.Order(shop, id)
	if err != nil {
		return false
	}
	if !found {
		// The record expired: only the mark is left to clear.
		if err := s.loop.DropWriteBack(context.Background(), shop, id); err != nil {
			return false
		}
		return true
	}
	if c := o.Confirmation; c != nil && state != "" {
		c.WriteBack, c.WriteError = state, why
		if state == domain.WriteBackDone {
			c.WrittenAt, c.WriteError = s.e.now().UTC(), ""
		}
		c.Attempts++
		o.UpdatedAt = s.e.now().UTC()
	}
	if err := s.loop.PutOrder(context.Background(), o, nil, nil, -1); err != nil {
		s.e.log.Warn("write-back outcome not recorded", "shop", shop, "order_id", id, "err", err)
		return false
	}
	return true
}

// answerNote is the line the order gets: what the customer answered, how and when (the time
// makes it the answer's own line, so a retried write finds it on the order).
func answerNote(c *domain.Confirmation) string {
	verb := "confirmed"
	if c.Answer == domain.AnswerNo {
		verb = "declined"
	}
	what := c.AnswerText
	if what == "" {
		what = map[bool]string{true: c.Confirm.Yes, false: c.Confirm.No}[c.Answer == domain.AnswerYes]
	}
	return fmt.Sprintf("WhatsApp: the customer %s the order (%s %q, %s)", verb, map[string]string{"vote": "voted", "button": "pressed", "text": "replied"}[c.AnsweredBy],
		what, c.AnsweredAt.UTC().Format("2006-01-02 15:04 MST"))
}
