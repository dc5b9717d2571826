package engine

// What people do on the sessions' numbers (session.Inbound): the messages they write, kept
// (message.received) and read by the store loop in their contact's lane, and their reactions,
// edits, revokes and votes (conversations.go keeps the notes). A network that answers its
// sender only once what it reported is durable (the Cloud API's webhook) is told so through
// the event's Done (network.Done).

import (
	"context"
	"errors"
	"fmt"

	"github.com/gateway/gateway/actors/session"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// inbound takes what people do on the sessions' numbers (session.Inbound): the messages they
// write (kept, message.received), their reactions, edits, revokes and votes (the notes of the
// message they are about, and their events). In the background: a session actor never waits
// on storage.
type inbound struct{ e *Engine }

var _ session.Inbound = inbound{}

func (in inbound) Inbound(s domain.Session, ev network.Event) {
	e := in.e
	uid := s.AssignedTo
	if uid == "" {
		network.DoneOf(ev).Call(nil) // nobody's session: nothing keeps it
		return
	}
	ms := e.Messages
	switch ev := ev.(type) {
	case network.Incoming:
		ms.lids.put(ev.From, ev.FromLID)
		direct := ev.From != "" && ev.Group == ""
		keep := e.cfg.Events != nil
		var m domain.InboundMessage
		if keep {
			m = inboundMessage(uid, s.ID, ev)
		}
		// The network's Done (the Cloud API answers Meta's webhook on it) once the message is
		// kept and the store loop has read it.
		done := ev.Done
		if keep {
			done = network.Join(done, 2)
		}
		keepIt := func() {
			err := e.cfg.Events.ReceiveMessage(context.Background(), m)
			if err != nil {
				e.log.Warn("incoming message not kept", "session_id", s.ID, "err", err)
			}
			done.Call(err)
		}
		started := e.inContactLane(s.ID+"|"+ev.From+"|"+ev.Group, func(ctx context.Context) {
			var err error
			if direct {
				err = e.Routing.wrote(s, ev.From, ev.At) // first: a message kept (listed in the history) has its contact's window open
			}
			if keep {
				go keepIt()
			}
			// A stop word, START, a confirmation's answer: one not recorded fails the Done, so
			// the network delivers the message again (the history keeps it once; an answer or
			// an opt-out recorded twice is a no-op).
			loopErr := e.storeLoopIncoming(ctx, s, ev)
			if direct {
				// The messages waiting for them go once what they wrote was read as a possible
				// answer: an answer cancels an order's follow-up waiting for them, never sent.
				e.Routing.contactWrote(s, ev.From)
			}
			done.Call(errors.Join(err, loopErr, ctx.Err()))
		})
		if !started {
			if keep {
				go keepIt() // the engine stops: the message is still kept, as it came
			}
			done.Call(fmt.Errorf("%w: the gateway is stopping", domain.ErrUnavailable))
		}
	case network.Reaction:
		e.noteLater(noteLane(uid, ev.Target), ev.Done, func() error {
			return ms.noteChange(uid, s.ID, ev.Target, ev.Origin, false, domain.Message{Kind: domain.KindReaction, Emoji: ev.Emoji})
		})
	case network.Edited:
		m := ev.Message
		m.Kind = domain.KindEdit
		if m.Text == "" {
			m.Text = ev.Message.Preview()
		}
		e.noteLater(noteLane(uid, ev.Target), ev.Done, func() error { return ms.noteChange(uid, s.ID, ev.Target, ev.Origin, false, m) })
	case network.Revoked:
		e.noteLater(noteLane(uid, ev.Target), ev.Done, func() error {
			return ms.noteChange(uid, s.ID, ev.Target, ev.Origin, false, domain.Message{Kind: domain.KindRevoke})
		})
	case network.PollVote:
		// Told once the vote is on its poll and read as a confirmation's answer it may be.
		done := network.Join(ev.Done, 2)
		e.noteLater(noteLane(uid, ev.Poll), done, func() error {
			return ms.noteChange(uid, s.ID, ev.Poll, ev.Origin, false, domain.Message{Kind: domain.KindPoll, Options: ev.Options})
		})
		e.storeLoopVote(s, ev, done) // a vote on an order's confirmation
	}
}

// noteLater records an incoming change (a reaction, an edit, a revoke, a vote) off the session's
// goroutine in the engine's background, which Stop waits for; once the engine stops, the
// change's Done is told unavailable and the network sends it again. The changes to one message
// run on its lane (noteLane), one at a time in the order the network reported them: on a
// goroutine each, a voter's second choice could be recorded before the first, which then
// either had no event (older than what was on record) or, cast in the same second (WhatsApp's
// timestamps are seconds), replaced the voter's last choice.
func (e *Engine) noteLater(lane string, done network.Done, note func() error) {
	if !e.inContactLane(lane, func(context.Context) { done.Call(note()) }) {
		done.Call(fmt.Errorf("%w: the gateway is stopping", domain.ErrUnavailable))
	}
}

// noteLane is the lane of the changes to user uid's message id (the session's own reactions,
// edits and revokes too: conversations.go, sentOp). Beside the contacts' lanes (their session
// and contact, never starting "note|").
func noteLane(uid, id string) string { return "note|" + uid + "|" + id }

// inboundMessage is an incoming message as it is kept and published (message.received).
func inboundMessage(uid, sessionID string, ev network.Incoming) domain.InboundMessage {
	c := ev.Message
	m := domain.InboundMessage{
		ID: ev.ID, UserID: uid, SessionID: sessionID, From: ev.From, Phone: ev.From, LID: ev.FromLID, Name: ev.PushName,
		Group: ev.Group, Type: string(c.Kind), Kind: string(c.Kind), Text: c.Text, Caption: c.Caption, MimeType: c.MimeType,
		FileName: c.FileName, Bytes: c.Size, PTT: c.PTT, Lat: c.Lat, Lng: c.Lng, Address: c.Address,
		ContactName: c.ContactName, ContactPhone: c.ContactPhone, Question: c.Question, Options: c.Options,
		Multiple: c.Multiple, ButtonID: c.ButtonID, Timestamp: ev.At,
	}
	if c.Kind == domain.KindLocation && m.Text == "" {
		m.Text = c.LocationName // what type location carried as text before
	}
	if c.ReplyTo != nil && c.ReplyTo.ID != "" {
		q := *c.ReplyTo
		m.ReplyTo, m.Quoted = q.ID, &q
	}
	return m
}
