package engine

import (
	"context"
	"errors"
	"time"

	"github.com/gateway/gateway/domain"
)

// A customer's answer to an order's confirmation (DESIGN.md section 18): a vote on its poll, a
// button (cloud sessions), or a typed "1", "2" or an answer's word. The answer index finds the
// order (by the phone that wrote, or by the poll voted on); the first answer is the one that
// counts. It is recorded with a write-back mark in one commit, the follow-up still waiting is
// skipped (answered), order.confirmed or order.cancelled is published, and the write-back to
// the order starts (writeback.go).

// presentation is how a confirmation is asked through the user's session: as a poll on a
// linked session (its vote is the answer), as buttons on a cloud session, or as text with
// "reply 1 or 2" where the session's kind can carry neither. One function decides, so buttons
// slot in with the Cloud API's sessions.
//
// Every session today is a linked device, which carries polls; a cloud session (the Cloud API's
// own issue) answers viaButtons here, and a kind that carries neither viaText.
func (s *storeService) presentation(string) string { return viaPoll }

// pollMessage is a confirmation asked as a poll: the question with the two answers, one choice.
func pollMessage(id, to, question string, c domain.Confirm) domain.Message {
	return domain.Message{ID: id, To: to, Kind: domain.KindPoll, Question: question, Options: []string{c.Yes, c.No}}
}

// incomingAnswer takes a typed message from phone to one of the user's sessions: when the text
// is an answer, it answers the question it quotes (quoted, a message id, when the customer
// replied to one), else the latest question asked of that phone. A quoted question answers its
// own order only: a customer with two orders replying to the first one's question never answers
// the second. A button's tap (the Cloud API's, whose reply names the buttons' message) will come
// this way as well.
func (s *storeService) incomingAnswer(ctx context.Context, uid, phone, text, quoted string) bool {
	recognize := func(c domain.Confirm) (string, bool) { return c.AnswerOf(text) }
	if quoted != "" && s.loop != nil {
		if _, found, err := s.loop.Answer(uid, "m/"+quoted); err == nil && found {
			return s.answer(ctx, uid, "m/"+quoted, phone, "text", text, recognize)
		}
	}
	return s.answer(ctx, uid, "p/"+phone, phone, "text", text, recognize)
}

// voteAnswer takes a vote on a poll: when the poll asks an order's confirmation, the option
// chosen answers it.
func (s *storeService) voteAnswer(ctx context.Context, uid, pollID, voter string, options []string) bool {
	text := ""
	if len(options) == 1 {
		text = options[0]
	}
	return s.answer(ctx, uid, "m/"+pollID, voter, "vote", text, func(c domain.Confirm) (string, bool) { return c.VoteOf(options) })
}

// answer records an answer found under key (the answer index) from phone, when recognize reads
// one.
func (s *storeService) answer(ctx context.Context, uid, key, phone, by, text string, recognize func(domain.Confirm) (string, bool)) bool {
	if s.loop == nil {
		return false // an engine built without the store loop's records (tests)
	}
	ref, found, err := s.loop.Answer(uid, key)
	if err != nil {
		s.e.log.Warn("confirmation answer not read", "user_id", uid, "err", err)
		return false
	}
	if !found {
		return false
	}
	unlock := s.orders.lock(ref.Shop, ref.OrderID)
	o, found, err := s.loop.Order(ref.Shop, ref.OrderID)
	if err != nil || !found || o.UserID != uid || o.Confirmation == nil {
		unlock()
		return false
	}
	c := o.Confirmation
	if c.State != domain.ConfirmAwaiting || (phone != "" && o.Phone != "" && phone != o.Phone) || s.e.now().Before(c.AskedAt) {
		unlock()
		return false // answered already (the first answer counts), not the customer's phone, or not asked yet (a delayed question)
	}
	answer, ok := recognize(c.Confirm)
	if !ok {
		unlock()
		return false
	}
	now := s.e.now().UTC()
	c.Answer, c.AnsweredBy, c.AnsweredAt, c.AnswerText = answer, by, now, text
	c.State = domain.ConfirmConfirmed
	if answer == domain.AnswerNo {
		c.State = domain.ConfirmCancelled
	}
	c.WriteBack = domain.WriteBackPending
	o.UpdatedAt = now
	// The question's own keys go; the phone's ("p/") stays: it may name a later order's question
	// by now, and it finds this one answered otherwise (it expires with the answer window).
	drop := []string{"m/" + c.MessageID}
	if c.FollowUpID != "" {
		drop = append(drop, "m/"+c.FollowUpID)
		// The follow-up still waiting is pointless now.
		_, cancelled, err := s.e.Messages.CancelScheduled(uid, c.FollowUpID, domain.SkipAnswered, "the customer answered before the follow-up was due")
		if err != nil && !errors.Is(err, domain.ErrMessageNotFound) {
			s.e.log.Warn("follow-up not cancelled", "message_id", c.FollowUpID, "err", err)
		}
		for i := range o.Messages {
			if cancelled && o.Messages[i].MessageID == c.FollowUpID {
				o.Messages[i].Skipped = domain.SkipAnswered
			}
		}
	}
	if err := s.loop.PutOrder(ctx, o, nil, drop, 1); err != nil {
		unlock()
		s.e.log.Warn("confirmation answer not recorded", "user_id", uid, "shop", o.Shop, "order_id", o.OrderID, "err", err)
		return false
	}
	unlock()
	if s.pub != nil {
		t := domain.EventOrderConfirmed
		if answer == domain.AnswerNo {
			t = domain.EventOrderCancelled
		}
		s.pub.publish(uid, domain.Event{Type: t, At: now, Data: domain.OrderAnswerData{
			Store: o.Shop, Order: o.OrderName, OrderID: o.OrderID, Phone: o.Phone, Answer: answer, Text: text,
			Via: by, MessageID: c.MessageID, At: domain.EventTime(now),
		}})
	}
	s.e.log.Info("order confirmation answered", "user_id", uid, "shop", o.Shop, "order_id", o.OrderID, "answer", answer, "via", by)
	s.startWriteBack(uid, o.Shop, o.OrderID)
	return true
}

// answerRetention is how long an answer is kept being written back before it is given up.
const answerRetention = 24 * time.Hour
