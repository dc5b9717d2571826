package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gateway/gateway/actors/storeevents"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/ecom"
)

// The store loop, both ways (DESIGN.md section 18): what an order event sends beyond its
// template text. The storeevents actor asks Compose for every event's messages:
//
//   - an order topic's delay holds its message (scheduled, later.go); the order's record
//     (StoreOrder) names it, so the order's cancellation (its cancel webhook) skips it
//     (order_cancelled) while it waits;
//   - a confirmation question goes with the message (a poll on a linked session, reply
//     buttons on a cloud one inside the customer's window, else "reply 1 or 2":
//     presentation), indexed by the customer's phone and by the question's id, with one
//     follow-up scheduled after followUpAfter; the answer (answer.go) is written back to the
//     order (writeback.go);
//   - an abandoned checkout's reminder is scheduled after `after`; an order from the same
//     checkout (or phone) before then skips it (order_placed);
//   - a customer on the suppression list gets nothing (opted_out); campaign and store messages
//     wait out the user's quiet hours.
//
// Every record is written before the messages are accepted (the storeevents actor accepts them
// after Compose), so an answer or a cancellation always finds what it needs; a retried event
// composes the same messages under the same ids.

// StoreLoopStore is the store loop's storage (persist.StoreLoop).
type StoreLoopStore interface {
	OptOutStore
	Order(shop string, id int64) (domain.StoreOrder, bool, error)
	// PutOrder writes an order's record with its answer keys (and drops others), and sets (1)
	// or clears (-1) its pending write-back mark, in one commit.
	PutOrder(ctx context.Context, o domain.StoreOrder, answers, drop []string, writeBack int) error
	Orders(shop string, max int) ([]domain.StoreOrder, error)
	Answer(uid, key string) (domain.ConfirmRef, bool, error)
	PendingWriteBacks(fn func(shop string, orderID int64) error) error
	DropWriteBack(ctx context.Context, shop string, orderID int64) error
	PutCheckout(ctx context.Context, c domain.StoreCheckout) error
	Checkouts(shop, token, phone string) ([]domain.StoreCheckout, error)
	DeleteCheckout(ctx context.Context, c domain.StoreCheckout) error
	UpdateEvent(ctx context.Context, shop string, n int64, fn func(*domain.StoreEvent)) (bool, error)
}

// Confirmation presentations (Confirmation.Via).
const (
	viaPoll    = "poll"
	viaButtons = "buttons"
	viaText    = "text"
)

// orderLocks serialise the read-modify-write of one order's record (the event that writes it,
// an answer, a cancellation, its write-back).
type orderLocks struct{ l [64]sync.Mutex }

func (o *orderLocks) lock(shop string, id int64) func() {
	h := uint32(2166136261)
	for i := 0; i < len(shop); i++ {
		h = (h ^ uint32(shop[i])) * 16777619
	}
	h ^= uint32(id) ^ uint32(id>>32)
	m := &o.l[h%uint32(len(o.l))]
	m.Lock()
	return m.Unlock
}

// derivedID is the message id of one more message of an event (a poll after its text, a
// follow-up): derived from the event's own id, so a retried event uses the same ids.
func derivedID(base, what string) string {
	sum := sha256.Sum256([]byte(base + "/" + what))
	return "3EB0" + strings.ToUpper(hex.EncodeToString(sum[:10]))
}

// Compose implements storeevents.Composer.
func (s *storeService) Compose(ctx context.Context, c storeevents.Compose) (storeevents.Composed, error) {
	if s.loop == nil {
		return storeevents.Composed{}, errors.New("the engine was built without the store loop's records")
	}
	ev := c.Event
	skip := func(why string) (storeevents.Composed, error) { return storeevents.Composed{Skip: why}, nil }
	switch {
	case ev.Topic == ecom.TopicOrderCancelled:
		nothingSent, err := s.orderCancelled(ctx, c)
		if err != nil {
			return storeevents.Composed{}, err
		}
		if nothingSent {
			return skip(domain.SkipOrderCancelled + ": nothing was sent for the order before it was cancelled")
		}
	case ev.Topic == ecom.TopicOrderCreated || ev.Topic == ecom.TopicOrderPaid:
		if err := s.checkoutsDone(ctx, c.UserID, c.Shop, ev.CheckoutToken, ev.Phone, domain.SkipOrderPlaced,
			"an order came from the checkout before its reminder was due"); err != nil {
			return storeevents.Composed{}, err
		}
	case ev.Topic == ecom.TopicCheckoutAbandoned && ev.Completed:
		if err := s.checkoutsDone(ctx, c.UserID, c.Shop, ev.CheckoutToken, "", domain.SkipOrderPlaced,
			"the checkout became an order before its reminder was due"); err != nil {
			return storeevents.Composed{}, err
		}
		return skip("the checkout became an order")
	}
	if ev.SkipReason != "" {
		return skip(ev.SkipReason)
	}
	if s.e.OptOuts.Has(c.UserID, ev.Phone) {
		return skip(domain.SkipOptedOut + ": the customer opted out (replied STOP)")
	}
	t, err := s.template(c.UserID, ev.Topic)
	if err != nil {
		return storeevents.Composed{}, fmt.Errorf("read template: %w", err)
	}
	if !t.Enabled {
		return skip("template disabled")
	}
	name := s.storeName(c.Shop)
	text := ecom.Render(t.Text, ev, name)
	if text == "" {
		return skip("the template renders an empty message")
	}
	now := s.e.now()
	sendAt := time.Time{}
	if t.Delay > 0 {
		sendAt = c.ReceivedAt.Add(t.Delay)
	}
	if at := notBefore(sendAt, now); s.e.Users.afterQuiet(c.UserID, at).After(at) {
		sendAt = s.e.Users.afterQuiet(c.UserID, at) // a store message waits out quiet hours
	}
	if !sendAt.After(now) {
		sendAt = time.Time{}
	}
	out := []storeevents.Outgoing{{Message: domain.Message{ID: c.MessageID, To: ev.Phone, Kind: domain.KindText, Text: text,
		ColdTemplate: coldTemplate(t.Cloud, ev, name)}, SendAt: sendAt}}
	if ev.Topic == ecom.TopicCheckoutAbandoned {
		return s.composeCheckout(ctx, c, out)
	}
	return s.composeOrder(ctx, c, t, out, name)
}

// notBefore is t, or now when t is zero or past.
func notBefore(t, now time.Time) time.Time {
	if t.After(now) {
		return t
	}
	return now
}

// composeCheckout records an abandoned checkout's reminder before it is accepted: an order
// from the same checkout or phone skips it while it waits. A repeat of the checkout (Shopify's
// checkouts/update after checkouts/create) finds the reminder recorded and sends nothing more.
func (s *storeService) composeCheckout(ctx context.Context, c storeevents.Compose, out []storeevents.Outgoing) (storeevents.Composed, error) {
	ev := c.Event
	if ev.CheckoutToken == "" {
		return storeevents.Composed{Skip: "the checkout has no token"}, nil
	}
	have, err := s.loop.Checkouts(c.Shop, ev.CheckoutToken, "")
	if err != nil {
		return storeevents.Composed{}, fmt.Errorf("read checkouts: %w", err)
	}
	for _, h := range have {
		if h.Token == ev.CheckoutToken && h.MessageID != c.MessageID {
			return storeevents.Composed{Skip: "already sent: a reminder for this checkout is on its way"}, nil
		}
	}
	at := out[0].SendAt
	if at.IsZero() {
		at = s.e.now()
	}
	rec := domain.StoreCheckout{Shop: c.Shop, Token: ev.CheckoutToken, Phone: ev.Phone, MessageID: c.MessageID, EventN: c.N, SendAt: at.UTC()}
	if err := s.loop.PutCheckout(ctx, rec); err != nil {
		return storeevents.Composed{}, fmt.Errorf("record the checkout: %w", err)
	}
	return storeevents.Composed{Out: out}, nil
}

// checkoutsDone skips the reminders of the shop's abandoned checkouts with this token or phone
// that have not gone yet, and forgets the checkouts.
func (s *storeService) checkoutsDone(ctx context.Context, uid, shop, token, phone, code, why string) error {
	if token == "" && phone == "" {
		return nil
	}
	cs, err := s.loop.Checkouts(shop, token, phone)
	if err != nil {
		return fmt.Errorf("read checkouts: %w", err)
	}
	for _, ch := range cs {
		if _, cancelled, err := s.e.Messages.CancelScheduled(uid, ch.MessageID, code, why); err != nil && !errors.Is(err, domain.ErrMessageNotFound) {
			return err
		} else if cancelled {
			s.skipped(ctx, uid, shop, ch.EventN, code, why)
		}
		if err := s.loop.DeleteCheckout(ctx, ch); err != nil {
			return fmt.Errorf("forget the checkout: %w", err)
		}
	}
	return nil
}

// skipped rewrites the record of the store event whose message was cancelled while it waited
// (its ring slot still holds it) and publishes the new outcome.
func (s *storeService) skipped(ctx context.Context, uid, shop string, n int64, code, why string) {
	var rec domain.StoreEvent
	ok, err := s.loop.UpdateEvent(ctx, shop, n, func(r *domain.StoreEvent) {
		r.Status, r.Reason = domain.StoreEventSkipped, code+": "+why
		rec = *r
	})
	if err != nil {
		s.e.log.Warn("store event record not updated", "shop", shop, "n", n, "err", err)
	}
	if !ok {
		return
	}
	s.sentN.Add(-1)
	s.skippedN.Add(1)
	if s.pub != nil {
		s.pub.publish(uid, domain.Event{Type: domain.EventStoreEvent, Data: domain.StoreEventData{
			Shop: shop, Topic: rec.Topic, OrderID: rec.OrderID, OrderName: rec.OrderName,
			Outcome: rec.Status, Reason: rec.Reason, MessageID: rec.MessageID,
		}})
	}
}

// composeOrder adds an order topic's confirmation to its message and records the order when it
// has something waiting or a question: before the messages are accepted.
func (s *storeService) composeOrder(ctx context.Context, c storeevents.Compose, t TemplateView, out []storeevents.Outgoing, storeName string) (storeevents.Composed, error) {
	ev := c.Event
	confirm := t.Confirm
	if ev.Topic == ecom.TopicOrderCancelled || ev.Topic == ecom.TopicRefundCreated {
		confirm = nil // nothing to confirm once it is cancelled or refunded
	}
	if confirm == nil && out[0].SendAt.IsZero() {
		return storeevents.Composed{Out: out}, nil // nothing to wait for, nothing to ask: no record
	}
	unlock := s.orders.lock(c.Shop, ev.OrderID)
	defer unlock()
	o, found, err := s.loop.Order(c.Shop, ev.OrderID)
	if err != nil {
		return storeevents.Composed{}, fmt.Errorf("read the order's record: %w", err)
	}
	now := s.e.now().UTC()
	if !found {
		o = domain.StoreOrder{Shop: c.Shop, UserID: c.UserID, Platform: ev.Platform, OrderID: ev.OrderID, CreatedAt: now}
	}
	for _, m := range o.Messages {
		if m.Topic == ev.Topic && m.MessageID != c.MessageID {
			return storeevents.Composed{Skip: "already sent: the store repeated this event"}, nil
		}
	}
	if o.Cancelled && !out[0].SendAt.IsZero() {
		return storeevents.Composed{Skip: domain.SkipOrderCancelled + ": the order was cancelled before its message was due"}, nil
	}
	o.OrderName, o.Phone, o.UpdatedAt = ev.OrderName, ev.Phone, now
	var answers []string
	// One question per order: a later topic's confirmation (orders/paid after orders/create)
	// is not asked again; this event's own, retried, is composed again the same.
	if cf := o.Confirmation; confirm != nil && (cf == nil || cf.MessageID == c.MessageID || cf.MessageID == derivedID(c.MessageID, "poll")) {
		how := func(at time.Time) string { return s.presentation(c.UserID, ev.Phone, at) }
		out, o.Confirmation, answers = confirmation(c, *confirm, how, out, storeName, now)
	}
	if !hasMessage(o.Messages, c.MessageID) {
		for _, m := range out {
			o.Messages = append(o.Messages, domain.OrderMessage{Topic: ev.Topic, MessageID: m.Message.ID, SendAt: m.SendAt.UTC(), EventN: c.N})
		}
	}
	if err := s.loop.PutOrder(ctx, o, answers, nil, 0); err != nil {
		return storeevents.Composed{}, fmt.Errorf("record the order: %w", err)
	}
	return storeevents.Composed{Out: out}, nil
}

func hasMessage(ms []domain.OrderMessage, id string) bool {
	for _, m := range ms {
		if m.MessageID == id {
			return true
		}
	}
	return false
}

// confirmation builds an order message with its question, as how (the presentation the user's
// session can carry at a time) asks it, its follow-up, and the answer keys that will find the
// order.
func confirmation(c storeevents.Compose, confirm domain.Confirm, how func(at time.Time) string, out []storeevents.Outgoing, storeName string, now time.Time) ([]storeevents.Outgoing, *domain.Confirmation, []string) {
	ev := c.Event
	question := ecom.Render(confirm.Question, ev, storeName)
	at := out[0].SendAt
	asked := notBefore(at, now).UTC()
	via := how(asked)
	first := out[0].Message
	var msgs []domain.Message
	if via == viaButtons {
		if msgs = buttonsQuestion(first, question, confirm); msgs == nil {
			via = viaText
		}
	}
	switch via {
	case viaButtons:
	case viaPoll:
		combined := first.Text + "\n\n" + question
		if utf8.RuneCountInString(combined) <= domain.ConfirmTextMax {
			msgs = []domain.Message{pollMessage(first.ID, first.To, combined, confirm)}
		} else {
			msgs = []domain.Message{first, pollMessage(derivedID(first.ID, "poll"), first.To, question, confirm)}
		}
	default:
		first.Text += "\n\n" + replyPrompt(question, confirm)
		msgs = []domain.Message{first}
	}
	out = out[:0]
	for _, m := range msgs {
		out = append(out, storeevents.Outgoing{Message: m, SendAt: at})
	}
	cf := &domain.Confirmation{State: domain.ConfirmAwaiting, Via: via, Confirm: confirm, AskedAt: asked, MessageID: msgs[len(msgs)-1].ID}
	answers := []string{"p/" + ev.Phone, "m/" + cf.MessageID}
	if confirm.FollowUpAfter > 0 {
		cf.FollowUpID, cf.FollowUpAt = derivedID(first.ID, "follow-up"), asked.Add(confirm.FollowUpAfter)
		reminder := "Reminder: " + question
		answers = append(answers, "m/"+cf.FollowUpID) // its vote, or a reply quoting it
		var f domain.Message
		switch {
		case via == viaPoll:
			f = pollMessage(cf.FollowUpID, first.To, reminder, confirm)
		case via == viaButtons && how(cf.FollowUpAt) == viaButtons:
			f, _ = buttonsMessage(cf.FollowUpID, first.To, reminder, confirm)
		default:
			// As text: also buttons whose customer's window will have closed by then (Meta
			// takes no buttons there; the reminder goes in the cold template).
			f = domain.Message{ID: cf.FollowUpID, To: first.To, Kind: domain.KindText, Text: replyPrompt(reminder, confirm)}
		}
		out = append(out, storeevents.Outgoing{Message: f, SendAt: cf.FollowUpAt})
	}
	return out, cf, answers
}

// replyPrompt is a question asked as text: the two answers numbered, "reply 1 or 2".
func replyPrompt(question string, c domain.Confirm) string {
	return question + "\n\n1. " + c.Yes + "\n2. " + c.No + "\n\nReply 1 or 2."
}

// orderCancelled takes an order's cancellation: every message of the order still waiting for
// its time is skipped (order_cancelled), and so is the confirmation's follow-up. It reports
// whether nothing at all was sent for the order (its cancellation message then goes neither).
func (s *storeService) orderCancelled(ctx context.Context, c storeevents.Compose) (nothingSent bool, err error) {
	ev := c.Event
	unlock := s.orders.lock(c.Shop, ev.OrderID)
	defer unlock()
	o, found, err := s.loop.Order(c.Shop, ev.OrderID)
	if err != nil {
		return false, fmt.Errorf("read the order's record: %w", err)
	}
	if !found {
		return false, nil // nothing waited for it (messages sent at once leave no record)
	}
	const why = "the order was cancelled before its message was due"
	sent := 0
	for i := range o.Messages {
		m := &o.Messages[i]
		if m.Skipped == "" && m.Topic != ecom.TopicOrderCancelled {
			_, cancelled, err := s.e.Messages.CancelScheduled(c.UserID, m.MessageID, domain.SkipOrderCancelled, why)
			switch {
			case err != nil && !errors.Is(err, domain.ErrMessageNotFound):
				return false, err
			case cancelled:
				m.Skipped = domain.SkipOrderCancelled
				s.skipped(ctx, c.UserID, c.Shop, m.EventN, domain.SkipOrderCancelled, why)
			}
		}
		if m.Skipped == "" {
			sent++
		}
	}
	if cf := o.Confirmation; cf != nil && cf.FollowUpID != "" {
		if _, _, err := s.e.Messages.CancelScheduled(c.UserID, cf.FollowUpID, domain.SkipOrderCancelled, why); err != nil && !errors.Is(err, domain.ErrMessageNotFound) {
			return false, err
		}
	}
	o.Cancelled, o.UpdatedAt = true, s.e.now().UTC()
	if err := s.loop.PutOrder(ctx, o, nil, nil, 0); err != nil {
		return false, fmt.Errorf("record the order: %w", err)
	}
	return sent == 0, nil
}

// Orders lists the user's store's orders that the store loop keeps (a question, a message that
// waited), most recently changed first, at most max.
func (st *Stores) Orders(uid string, max int) ([]domain.StoreOrder, error) {
	ent := st.s.idx.ofUser(uid)
	if ent == nil {
		return nil, fmt.Errorf("%w: no store is connected to this account", domain.ErrStoreNotFound)
	}
	os, err := st.s.loop.Orders(ent.rec.Shop, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: read orders: %w", domain.ErrUnavailable, err)
	}
	sortOrders(os)
	if max > 0 && len(os) > max {
		os = os[:max]
	}
	return os, nil
}

func sortOrders(os []domain.StoreOrder) {
	for i := 1; i < len(os); i++ { // newest first; few records
		for j := i; j > 0 && os[j].UpdatedAt.After(os[j-1].UpdatedAt); j-- {
			os[j], os[j-1] = os[j-1], os[j]
		}
	}
}
