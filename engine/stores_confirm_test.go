package engine

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gateway/gateway/actors/storeevents"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/ecom"
)

// A confirmation is asked as its presentation says: one poll of the order message and the
// question (or the message, then the poll, when they overflow a poll's name), reply buttons
// the same way within Meta's limits (a cloud session's), or the question
// in the message's text with "reply 1 or 2" where the session's kind carries no poll; the
// follow-up is asked the same way; every question's id and the phone find the order.
func TestConfirmationAsItsPresentationAsks(t *testing.T) {
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	confirm := domain.Confirm{Question: "Please confirm your order {order_number}", Yes: "Yes, confirm", No: "No, cancel", FollowUpAfter: 2 * time.Hour}
	compose := func(text string) (storeevents.Compose, []storeevents.Outgoing) {
		c := storeevents.Compose{UserID: "alice", Shop: "acme.myshopify.com", MessageID: "3EB0AAAA", ReceivedAt: now,
			Event: ecom.Event{Topic: ecom.TopicOrderCreated, OrderID: 1001, OrderName: "#1001", Phone: "13125550100"}}
		return c, []storeevents.Outgoing{{Message: domain.Message{ID: c.MessageID, To: "13125550100", Kind: domain.KindText, Text: text}, SendAt: now}}
	}
	asks := func(via string) func(time.Time) string { return func(time.Time) string { return via } }
	keys := func(t *testing.T, got []string, want ...string) {
		t.Helper()
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Fatalf("answer keys %v, want %v", got, want)
		}
	}

	t.Run("poll", func(t *testing.T) {
		c, out := compose("Thank you for your order #1001.")
		msgs, cf, answers := confirmation(c, confirm, asks(viaPoll), out, "Acme", now)
		if len(msgs) != 2 || cf.Via != viaPoll || cf.State != domain.ConfirmAwaiting || !cf.AskedAt.Equal(now) {
			t.Fatalf("%d messages, confirmation %+v", len(msgs), cf)
		}
		q, f := msgs[0].Message, msgs[1]
		if q.ID != c.MessageID || q.Kind != domain.KindPoll || q.Question != "Thank you for your order #1001.\n\nPlease confirm your order #1001" ||
			!slices.Equal(q.Options, []string{"Yes, confirm", "No, cancel"}) || cf.MessageID != q.ID {
			t.Fatalf("the question %+v", q)
		}
		if f.Message.Kind != domain.KindPoll || f.Message.Question != "Reminder: Please confirm your order #1001" || !f.SendAt.Equal(now.Add(2*time.Hour)) || f.Message.ID != cf.FollowUpID {
			t.Fatalf("the follow-up %+v", f)
		}
		keys(t, answers, "p/13125550100", "m/"+q.ID, "m/"+cf.FollowUpID)
	})

	t.Run("poll after a message too long for a poll's name", func(t *testing.T) {
		c, out := compose(strings.Repeat("a", domain.ConfirmTextMax))
		msgs, cf, _ := confirmation(c, confirm, asks(viaPoll), out, "Acme", now)
		if len(msgs) != 3 || msgs[0].Message.Kind != domain.KindText || msgs[1].Message.Kind != domain.KindPoll ||
			msgs[1].Message.Question != "Please confirm your order #1001" || cf.MessageID != msgs[1].Message.ID || msgs[1].Message.ID == c.MessageID {
			t.Fatalf("messages %+v, confirmation %+v", msgs, cf)
		}
	})

	t.Run("text: reply 1 or 2", func(t *testing.T) {
		c, out := compose("Thank you for your order #1001.")
		msgs, cf, answers := confirmation(c, confirm, asks(viaText), out, "Acme", now)
		if len(msgs) != 2 || cf.Via != viaText {
			t.Fatalf("%d messages, confirmation %+v", len(msgs), cf)
		}
		q, f := msgs[0].Message, msgs[1].Message
		const ask = "Please confirm your order #1001\n\n1. Yes, confirm\n2. No, cancel\n\nReply 1 or 2."
		if q.Kind != domain.KindText || q.Text != "Thank you for your order #1001.\n\n"+ask || cf.MessageID != c.MessageID {
			t.Fatalf("the question %+v", q)
		}
		if f.Kind != domain.KindText || f.Text != "Reminder: "+ask {
			t.Fatalf("the follow-up %+v", f)
		}
		keys(t, answers, "p/13125550100", "m/"+q.ID, "m/"+cf.FollowUpID) // a reply quoting either finds the order
		for text, want := range map[string]string{"1": domain.AnswerYes, " 2. ": domain.AnswerNo, "no": domain.AnswerNo, "YES, CONFIRM!": domain.AnswerYes} {
			if got, ok := cf.Confirm.AnswerOf(text); !ok || got != want {
				t.Errorf("%q reads %q %v, want %q", text, got, ok, want)
			}
		}
	})

	t.Run("buttons", func(t *testing.T) {
		c, out := compose("Thank you for your order #1001.")
		msgs, cf, answers := confirmation(c, confirm, asks(viaButtons), out, "Acme", now)
		if len(msgs) != 2 || cf.Via != viaButtons {
			t.Fatalf("%d messages, confirmation %+v", len(msgs), cf)
		}
		q, f := msgs[0].Message, msgs[1]
		want := []domain.Button{{ID: "yes", Title: "Yes, confirm"}, {ID: "no", Title: "No, cancel"}}
		if q.ID != c.MessageID || q.Kind != domain.KindButtons || q.Text != "Thank you for your order #1001.\n\nPlease confirm your order #1001" ||
			!slices.Equal(q.Buttons, want) || cf.MessageID != q.ID {
			t.Fatalf("the question %+v", q)
		}
		if f.Message.Kind != domain.KindButtons || f.Message.Text != "Reminder: Please confirm your order #1001" || !slices.Equal(f.Message.Buttons, want) ||
			!f.SendAt.Equal(now.Add(2*time.Hour)) || f.Message.ID != cf.FollowUpID {
			t.Fatalf("the follow-up %+v", f)
		}
		keys(t, answers, "p/13125550100", "m/"+q.ID, "m/"+cf.FollowUpID)
		for id, want := range map[string]string{"yes": domain.AnswerYes, "no": domain.AnswerNo} {
			if got, ok := tappedAnswer(id); !ok || got != want {
				t.Errorf("button %q reads %q %v", id, got, ok)
			}
		}
		if _, ok := tappedAnswer("confirm-1001"); ok {
			t.Error("another button's id read as an answer")
		}
	})

	t.Run("buttons, the follow-up after the window's end as text", func(t *testing.T) {
		c, out := compose("Thank you for your order #1001.")
		closes := now.Add(time.Hour) // the customer wrote 23 hours ago
		how := func(at time.Time) string {
			if at.Before(closes) {
				return viaButtons
			}
			return viaText
		}
		msgs, cf, _ := confirmation(c, confirm, how, out, "Acme", now)
		if len(msgs) != 2 || cf.Via != viaButtons || msgs[0].Message.Kind != domain.KindButtons {
			t.Fatalf("messages %+v, confirmation %+v", msgs, cf)
		}
		if f := msgs[1].Message; f.Kind != domain.KindText || f.Text != "Reminder: Please confirm your order #1001\n\n1. Yes, confirm\n2. No, cancel\n\nReply 1 or 2." {
			t.Fatalf("the follow-up %+v", f)
		}
	})

	t.Run("buttons within Meta's limits", func(t *testing.T) {
		// A body over 1024 characters: the message, then the buttons; titles cut to 20.
		c, out := compose(strings.Repeat("a", domain.InteractiveBody))
		long := confirm
		long.Yes, long.No = "Yes, please ship it to me today", "No, I changed my mind"
		msgs, cf, _ := confirmation(c, long, asks(viaButtons), out, "Acme", now)
		if len(msgs) != 3 || msgs[0].Message.Kind != domain.KindText || msgs[1].Message.Kind != domain.KindButtons ||
			msgs[1].Message.Text != "Please confirm your order #1001" || cf.MessageID != msgs[1].Message.ID || msgs[1].Message.ID == c.MessageID {
			t.Fatalf("messages %+v, confirmation %+v", msgs, cf)
		}
		for _, b := range msgs[1].Message.Buttons {
			if n := len([]rune(b.Title)); n > domain.ButtonTitleMax || n < domain.ButtonTitleMax-1 {
				t.Fatalf("button title %q (%d characters)", b.Title, n)
			}
		}
		// Two answers alike in their first 20 characters cannot be buttons: asked as text.
		c, out = compose("Thank you.")
		alike := confirm
		alike.Yes, alike.No = "I confirm the order, yes", "I confirm the order, no"
		msgs, cf, _ = confirmation(c, alike, asks(viaButtons), out, "Acme", now)
		if cf.Via != viaText || msgs[0].Message.Kind != domain.KindText || !strings.Contains(msgs[0].Message.Text, "Reply 1 or 2.") || msgs[1].Message.Kind != domain.KindText {
			t.Fatalf("messages %+v, confirmation %+v", msgs, cf)
		}
	})

	t.Run("no follow-up", func(t *testing.T) {
		c, out := compose("Thank you.")
		once := confirm
		once.FollowUpAfter = 0
		msgs, cf, answers := confirmation(c, once, asks(viaPoll), out, "Acme", now)
		if len(msgs) != 1 || cf.FollowUpID != "" {
			t.Fatalf("messages %+v, confirmation %+v", msgs, cf)
		}
		keys(t, answers, "p/13125550100", "m/"+c.MessageID)
	})
}
