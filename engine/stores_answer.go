package engine

import (
	"context"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gateway/gateway/domain"
)

// A customer's answer to an order's confirmation (DESIGN.md section 18): a vote on its poll, a
// button (cloud sessions), or a typed "1", "2" or an answer's word. The answer index finds the
// order (by the phone that wrote, or by the poll voted on); the first answer is the one that
// counts. It is recorded with a write-back mark in one commit, the follow-up still waiting is
// skipped (answered), order.confirmed or order.cancelled is published, and the write-back to
// the order starts (writeback.go).

// presentation is how a confirmation to phone, asked at (now, or the order message's later
// time), goes through the user's sessions, decided here only: the order message's way
// (routing's, as it will send it) says. Over a linked session, as a poll (its vote is the
// answer); over a cloud session inside the contact's 24-hour service window at that time, as
// reply buttons (a tap is the answer); over a cloud session outside it, where Meta takes
// templates only, as text with "reply 1 or 2" (the order message goes as the topic's or the
// account's cold template with the question in it).
func (s *storeService) presentation(uid, phone string, at time.Time) string {
	w, err := s.e.Messages.way(uid, domain.Message{Kind: domain.KindText, To: phone})
	if err != nil {
		s.e.log.Warn("confirmation: the order message's way not known; asked as text", "user_id", uid, "err", err)
		return viaText
	}
	if w.cloud == nil {
		return viaPoll
	}
	open, err := s.e.Cloud.windowOpen(w.cloud.view.Load().ID, phone, at)
	if err != nil || !open {
		return viaText
	}
	return viaButtons
}

// pollMessage is a confirmation asked as a poll: the question with the two answers, one choice.
func pollMessage(id, to, question string, c domain.Confirm) domain.Message {
	return domain.Message{ID: id, To: to, Kind: domain.KindPoll, Question: question, Options: []string{c.Yes, c.No}}
}

// The ids of a confirmation's reply buttons: a tap names one (its title is the answer's text,
// which may be cut to Meta's 20 characters).
const (
	buttonYes = "yes"
	buttonNo  = "no"
)

// buttonsMessage is a confirmation asked as reply buttons (the Cloud API's interactive
// "button"): body the question, two buttons whose titles are the answers (cut to Meta's 20
// characters). ok is false when the two titles cut are the same (Meta refuses that).
func buttonsMessage(id, to, body string, c domain.Confirm) (domain.Message, bool) {
	yes, no := buttonTitle(c.Yes), buttonTitle(c.No)
	return domain.Message{ID: id, To: to, Kind: domain.KindButtons, Text: body,
		Buttons: []domain.Button{{ID: buttonYes, Title: yes}, {ID: buttonNo, Title: no}}}, yes != no
}

// buttonsQuestion asks a confirmation as reply buttons after the order message first: one
// buttons message whose body is the message and the question when they fit Meta's 1024
// characters of a body, else the message and then the buttons (under the id a poll's own
// message would have). Nil when the answers cannot be buttons.
func buttonsQuestion(first domain.Message, question string, c domain.Confirm) []domain.Message {
	combined := first.Text + "\n\n" + question
	q, ok := buttonsMessage(first.ID, first.To, combined, c)
	switch {
	case !ok || utf8.RuneCountInString(question) > domain.InteractiveBody:
		return nil // two answers alike in their first 20 characters, or a question too long for a body
	case utf8.RuneCountInString(combined) <= domain.InteractiveBody:
		return []domain.Message{q}
	}
	q, _ = buttonsMessage(derivedID(first.ID, "poll"), first.To, question, c)
	return []domain.Message{first, q}
}

// buttonTitle is an answer as a button's title: at most domain.ButtonTitleMax characters.
func buttonTitle(s string) string {
	if utf8.RuneCountInString(s) <= domain.ButtonTitleMax {
		return s
	}
	r := []rune(s)
	return strings.TrimSpace(string(r[:domain.ButtonTitleMax-1])) + "…"
}

// tappedAnswer reads a tapped button of a confirmation: its id.
func tappedAnswer(id string) (string, bool) {
	switch id {
	case buttonYes:
		return domain.AnswerYes, true
	case buttonNo:
		return domain.AnswerNo, true
	}
	return "", false
}

// incomingAnswer takes a typed message from phone to one of the user's sessions: when the text
// is an answer, it answers the question it quotes (quoted, a message id, when the customer
// replied to one), else the latest question asked of that phone. A quoted question answers its
// own order only: a customer with two orders replying to the first one's question never answers
// the second.
func (s *storeService) incomingAnswer(ctx context.Context, uid, phone, text, quoted string) (bool, error) {
	recognize := func(c domain.Confirm) (string, bool) { return c.AnswerOf(text) }
	if quoted != "" && s.loop != nil {
		if _, found, err := s.loop.Answer(uid, "m/"+quoted); err == nil && found {
			return s.answer(ctx, uid, "m/"+quoted, phone, "text", text, recognize)
		}
	}
	return s.answer(ctx, uid, "p/"+phone, phone, "text", text, recognize)
}

// buttonAnswer takes a tapped reply button (the Cloud API's button reply, whose context names
// the buttons' message: quoted, our id of it): when that message asks an order's
// confirmation, the button's id answers it. A tap on any other message's buttons is no
// answer, whatever its id.
func (s *storeService) buttonAnswer(ctx context.Context, uid, phone, buttonID, title, quoted string) (bool, error) {
	if quoted == "" {
		return false, nil
	}
	return s.answer(ctx, uid, "m/"+quoted, phone, "button", title, func(domain.Confirm) (string, bool) { return tappedAnswer(buttonID) })
}

// voteAnswer takes a vote on a poll: when the poll asks an order's confirmation, the option
// chosen answers it.
func (s *storeService) voteAnswer(ctx context.Context, uid, pollID, voter string, options []string) (bool, error) {
	text := ""
	if len(options) == 1 {
		text = options[0]
	}
	return s.answer(ctx, uid, "m/"+pollID, voter, "vote", text, func(c domain.Confirm) (string, bool) { return c.VoteOf(options) })
}

// answer records an answer found under key (the answer index) from phone, when recognize reads
// one. The error is a read or write that failed (the message must be read again: the network
// is not told it was taken).
func (s *storeService) answer(ctx context.Context, uid, key, phone, by, text string, recognize func(domain.Confirm) (string, bool)) (bool, error) {
	if s.loop == nil {
		return false, nil // an engine built without the store loop's records (tests)
	}
	ref, found, err := s.loop.Answer(uid, key)
	if err != nil {
		s.e.log.Warn("confirmation answer not read", "user_id", uid, "err", err)
		return false, err
	}
	if !found {
		return false, nil
	}
	unlock := s.orders.lock(ref.Shop, ref.OrderID)
	o, found, err := s.loop.Order(ref.Shop, ref.OrderID)
	if err != nil || !found || o.UserID != uid || o.Confirmation == nil {
		unlock()
		return false, err
	}
	c := o.Confirmation
	if c.State != domain.ConfirmAwaiting || (phone != "" && o.Phone != "" && phone != o.Phone) || s.e.now().Before(c.AskedAt) {
		unlock()
		return false, nil // answered already (the first answer counts), not the customer's phone, or not asked yet (a delayed question)
	}
	answer, ok := recognize(c.Confirm)
	if !ok {
		unlock()
		return false, nil
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
		return false, err
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
	return true, nil
}

// answerRetention is how long an answer is kept being written back before it is given up.
const answerRetention = 24 * time.Hour
