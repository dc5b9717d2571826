package engine

// Conversations (DESIGN.md section 16): replies and reactions that name another message, edits
// and revokes of the session's own messages (a queued one is cancelled instead), read marks,
// poll votes, and what happened to each message after it was written (its notes: reactions, the
// last edit, a revoke, the votes), kept beside it and published as events. Whoever did it, a
// contact on the network or the session itself, the same notes and the same events.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gateway/gateway/actors/session"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// notes serialises the changes to each message's notes (a read, a change, a write), so two
// reactions arriving together both count; the records themselves are NotesStore's.
type notes struct {
	store NotesStore
	locks [64]sync.Mutex
}

func (n *notes) lock(id string) *sync.Mutex {
	var h uint32 = 2166136261
	for i := 0; i < len(id); i++ {
		h = (h ^ uint32(id[i])) * 16777619
	}
	return &n.locks[h%uint32(len(n.locks))]
}

// get returns a message's notes (zero without a store, or when nothing happened to it).
func (n *notes) get(uid, id string) (domain.MessageNotes, error) {
	if n.store == nil {
		return domain.MessageNotes{}, nil
	}
	return n.store.Notes(uid, id)
}

// update applies change to a message's notes and writes them when it reports a change, after
// before (when set) returned nil: the change's event is durable (noteChange).
func (n *notes) update(ctx context.Context, uid, id string, change func(*domain.MessageNotes) bool, before func() error) (bool, error) {
	if n.store == nil {
		return false, nil
	}
	mu := n.lock(uid + "\x00" + id)
	mu.Lock()
	defer mu.Unlock()
	cur, err := n.store.Notes(uid, id)
	if err != nil {
		return false, err
	}
	if !change(&cur) {
		return false, nil
	}
	if before != nil {
		if err := before(); err != nil {
			return false, err
		}
	}
	return true, n.store.PutNotes(ctx, uid, id, cur)
}

// lidMap remembers the LIDs the network gave for numbers (sends, incoming messages, lookups),
// so an answer can name a contact's LID before the network is asked again. In memory, bounded:
// it starts again past lidMapMax numbers.
type lidMap struct {
	m sync.Map
	n atomic.Int64
}

const lidMapMax = 200_000

func (l *lidMap) put(phone, lid string) {
	if phone == "" || lid == "" || domain.IsGroup(phone) {
		return
	}
	if old, ok := l.m.Load(phone); ok && old == lid {
		return // known: a send to a number does not write its LID again (Swap allocates)
	}
	if old, ok := l.m.Swap(phone, lid); !ok || old != lid {
		if l.n.Add(1) > lidMapMax {
			l.m.Clear()
			l.n.Store(0)
		}
	}
}

func (l *lidMap) get(phone string) string {
	if v, ok := l.m.Load(phone); ok {
		return v.(string)
	}
	return ""
}

// LID is the LID the network last gave for a number ("" when none is known).
func (ms *Messages) LID(phone string) string { return ms.lids.get(phone) }

// refOf names one of the user's messages as a reply or a reaction does, with the session it
// went through or came in on and the chat it is in (chatOf): one the user sent (the outbox) or
// one a contact wrote (the history: the copy session sid got when two of the user's sessions got
// it, else the first session's). domain.ErrMessageNotFound when neither has it.
func (ms *Messages) refOf(uid, id, sid string) (ref domain.MessageRef, session, chat string, err error) {
	if e, err := ms.Get(uid, id); err == nil {
		ref := domain.MessageRef{ID: id, FromMe: true, Kind: e.Message.Kind, Text: e.Message.Preview()}
		if domain.IsGroup(e.Message.To) {
			ref.Group = e.Message.To
		}
		if n, err := ms.notes.get(uid, id); err == nil && n.Edit != nil {
			ref.Text = n.Edit.Text
		}
		return ref, e.SessionID, chatOf(ref, e.Message.To), nil
	}
	in, err := ms.history.InboundOf(uid, id, sid)
	if errors.Is(err, domain.ErrRecordNotFound) {
		return ref, "", "", fmt.Errorf("%w: %s is none of this account's messages of the last 7 days", domain.ErrMessageNotFound, id)
	}
	if err != nil {
		return ref, "", "", fmt.Errorf("%w: message history: %w", domain.ErrUnavailable, err)
	}
	ref = in.Ref()
	return ref, in.SessionID, chatOf(ref, ""), nil
}

// chatOf is the chat a message named by ref is in, from the session's side: its group, or the
// contact (the session's own messages: their recipient, to).
func chatOf(ref domain.MessageRef, to string) string {
	switch {
	case ref.Group != "":
		return ref.Group
	case ref.FromMe:
		return to
	}
	return ref.From
}

// resolveRefs fills a send's reply and reaction target (given by id) from the messages they
// name: who sent them, where, what they said. A reaction goes to the target's chat, through the
// session it is in (unless the send names one); a reply through the session of what it quotes.
func (ms *Messages) resolveRefs(r *SendRequest) error {
	m := &r.Message
	if m.Target == nil && m.ReplyTo == nil {
		return nil
	}
	// Of a message two of the user's sessions got, the copy of the session the send names,
	// else the default session's (the one a send naming none goes through).
	via := r.SessionID
	if via == "" {
		via = ms.e.Sessions.Status(r.UserID).ID
	}
	if m.Target != nil && m.Kind == domain.KindReaction {
		ref, sid, chat, err := ms.refOf(r.UserID, m.Target.ID, via)
		if err != nil {
			return fmt.Errorf("messageId: %w", err)
		}
		if chat == "" {
			return fmt.Errorf("%w: messageId: the network did not say who wrote %s", domain.ErrValidation, ref.ID)
		}
		if m.To != "" && m.To != chat {
			return fmt.Errorf("%w: phone: message %s is in the conversation with %s", domain.ErrValidation, ref.ID, chat)
		}
		m.To, m.Target = chat, &ref
		if r.SessionID == "" {
			r.SessionID = sid
		}
	}
	if m.ReplyTo != nil {
		ref, sid, chat, err := ms.refOf(r.UserID, m.ReplyTo.ID, via)
		if err != nil {
			return fmt.Errorf("replyTo: %w", err)
		}
		// A reply quotes a message of its own chat (or, privately, a group member's message to
		// that member): quoting another customer's message would show it to this one.
		if m.To != "" && m.To != chat && (ref.Group == "" || ref.FromMe || ref.From != m.To) {
			return fmt.Errorf("%w: replyTo: message %s is in another conversation (%s)", domain.ErrValidation, ref.ID, chat)
		}
		m.ReplyTo = &ref
		if r.SessionID == "" {
			r.SessionID = sid
		}
	}
	return nil
}

// Edit changes the text of a message the user sent, within domain.EditWindow of its sending:
// an edit is queued on the message's session like a message (its own id, not charged), and
// the message's text changes (notes, message.edited) once the network took it. 409
// not_editable for anything else.
func (ms *Messages) Edit(ctx context.Context, uid, id, text string, r SendRequest) (domain.OutboxEntry, error) {
	orig, err := ms.Get(uid, id)
	if err != nil {
		return domain.OutboxEntry{}, err
	}
	switch {
	case orig.Message.Kind != domain.KindText:
		return domain.OutboxEntry{}, fmt.Errorf("%w: %s is a %s, not a text", domain.ErrNotEditable, id, orig.Message.Kind)
	case orig.Status == domain.MsgQueued || orig.Status == domain.MsgScheduled:
		return domain.OutboxEntry{}, fmt.Errorf("%w: %s is not sent yet (cancel it with DELETE and send the new text)", domain.ErrNotEditable, id)
	case orig.Status == domain.MsgFailed || orig.Status == domain.MsgCancelled:
		return domain.OutboxEntry{}, fmt.Errorf("%w: %s was never delivered (%s)", domain.ErrNotEditable, id, orig.Status)
	case ms.e.now().Sub(orig.SentAt.Time()) > domain.EditWindow:
		return domain.OutboxEntry{}, fmt.Errorf("%w: %s was sent more than 15 minutes ago", domain.ErrNotEditable, id)
	}
	if n, err := ms.notes.get(uid, id); err == nil && n.Revoked != nil {
		return domain.OutboxEntry{}, fmt.Errorf("%w: %s was revoked", domain.ErrNotEditable, id)
	}
	r.UserID, r.SessionID = uid, orig.SessionID
	r.Message.To, r.Message.Kind, r.Message.Text = orig.Message.To, domain.KindEdit, text
	r.Message.Target = &domain.MessageRef{ID: id, FromMe: true, Kind: domain.KindText, Text: orig.Message.Text}
	if domain.IsGroup(orig.Message.To) {
		r.Message.Target.Group = orig.Message.To
	}
	return ms.Send(ctx, r)
}

// DeleteResult is what DELETE /api/v1/messages/{id} did: Revoke, the revoke queued for a sent
// message (Entry is the revoke); else Entry is the message, cancelled before it was sent.
type DeleteResult struct {
	Entry  domain.OutboxEntry
	Revoke bool
}

// cancelTries bounds how often a cancellation finds its message with the session's sender
// and waits for it.
const cancelTries = 3

// Delete takes a message back: one still queued is cancelled (status cancelled, its allowance
// released, never sent); one sent within domain.RevokeWindow is revoked for everyone (a revoke
// queued on its session like a message, not charged; its notes and message.revoked once the
// network took it). 409 not_revocable for anything else.
func (ms *Messages) Delete(ctx context.Context, uid, id string, r SendRequest) (DeleteResult, error) {
	orig, err := ms.Get(uid, id)
	if err != nil {
		return DeleteResult{}, err
	}
	if !orig.Message.Kind.Charged() || orig.Message.Kind == domain.KindReaction {
		return DeleteResult{}, fmt.Errorf("%w: %s is a %s, not a message", domain.ErrNotRevocable, id, orig.Message.Kind)
	}
	if orig.Status == domain.MsgScheduled {
		// Accepted for later and its time not come: taken off the schedule (DESIGN.md section 18).
		e, cancelled, err := ms.CancelScheduled(uid, id, domain.SkipCancelled, "cancelled before its time")
		if err != nil {
			return DeleteResult{}, err
		}
		if cancelled {
			return DeleteResult{Entry: e}, nil
		}
		if orig, err = ms.Get(uid, id); err != nil { // handed to its session meanwhile: queued
			return DeleteResult{}, err
		}
	}
	if orig.Status == domain.MsgQueued && orig.Waiting {
		if e, ok, err := ms.e.Routing.cancel(uid, id, domain.ErrCancelled.Code, domain.ErrCancelled.Msg); ok {
			if err != nil {
				return DeleteResult{}, err
			}
			return DeleteResult{Entry: e}, nil // it waited for its contact: never sent
		}
	}
	if e, ok, err := ms.msgs.cancelling(id); ok { // taken back by another call: as it answers
		if err != nil {
			return DeleteResult{}, err
		}
		return DeleteResult{Entry: e}, nil
	}
	if orig.Status == domain.MsgCancelled {
		// Taken back before: answered as it stands, as a DELETE racing the one that cancelled
		// it is (cancelling, above), so a DELETE sent again gets the same answer whenever it
		// comes (README: a cancel is idempotent).
		return DeleteResult{Entry: orig}, nil
	}
	if ms.msgs.unrecordedFailure(id) { // told failed, its record tried again (recordAgain)
		return DeleteResult{}, fmt.Errorf("%w: the failure of %s is not recorded yet; try again", domain.ErrUnavailable, id)
	}
	if ent := ms.e.Sessions.idx.get(orig.SessionID); ent != nil && ent.view.Load().IsCloud() && orig.Status != domain.MsgQueued {
		return DeleteResult{}, fmt.Errorf("%w: the Cloud API cannot delete a message once sent", domain.ErrNotOnCloud)
	}
	for try := 0; orig.Status == domain.MsgQueued && try < cancelTries; try++ {
		ent := ms.e.Sessions.idx.get(orig.SessionID)
		if ent == nil {
			return DeleteResult{}, fmt.Errorf("%w: session %s", domain.ErrSessionNotFound, orig.SessionID)
		}
		msg := &session.Cancel{ID: id, Reply: make(chan session.Reply, 1)}
		reply, err := ms.e.Sessions.ask(ctx, ent, msg, msg.Reply)
		if err != nil {
			return DeleteResult{}, err
		}
		wait := ms.e.cfg.SendTimeout + 5*time.Second // with the sender now: until its outcome
		if reply.Found {
			wait = ms.e.cfg.AskTimeout // cancelled: until it is reported
		}
		if orig, err = ms.msgs.wait(ctx, orig, wait); err != nil && orig.Status != domain.MsgFailed {
			return DeleteResult{}, err
		}
	}
	switch {
	case orig.Status == domain.MsgCancelled:
		return DeleteResult{Entry: orig}, nil
	case orig.Status == domain.MsgQueued:
		return DeleteResult{}, fmt.Errorf("%w: %s is being sent; try again", domain.ErrUnavailable, id)
	case orig.Status == domain.MsgFailed:
		return DeleteResult{}, fmt.Errorf("%w: %s failed: nothing was delivered", domain.ErrNotRevocable, id)
	case ms.e.now().Sub(orig.SentAt.Time()) > domain.RevokeWindow:
		return DeleteResult{}, fmt.Errorf("%w: %s was sent more than 48 hours ago", domain.ErrNotRevocable, id)
	}
	if n, err := ms.notes.get(uid, id); err == nil && n.Revoked != nil {
		return DeleteResult{}, fmt.Errorf("%w: %s was revoked already", domain.ErrNotRevocable, id)
	}
	// One revoke a message: its id is derived from the message's, so a second DELETE (or one
	// racing this one, held off by the lock) finds it queued or sent and is refused, instead of
	// a second revoke going to the network. One that failed may be tried again, under a new id.
	key := uid + "\x00" + id
	if _, busy := ms.revoking.LoadOrStore(key, struct{}{}); busy {
		return DeleteResult{}, fmt.Errorf("%w: %s is being revoked by another call", domain.ErrNotRevocable, id)
	}
	defer ms.revoking.Delete(key)
	r.Message.ID = revokeID(id)
	switch prev, err := ms.Get(uid, r.Message.ID); {
	case err == nil && prev.Status != domain.MsgFailed && prev.Status != domain.MsgCancelled:
		return DeleteResult{}, fmt.Errorf("%w: %s is revoked already (revoke %s, %s)", domain.ErrNotRevocable, id, prev.ID, prev.Status)
	case err == nil:
		r.Message.ID = "" // the last revoke failed: a new one
	case !errors.Is(err, domain.ErrMessageNotFound):
		return DeleteResult{}, err
	}
	r.UserID, r.SessionID = uid, orig.SessionID
	r.Message.To, r.Message.Kind = orig.Message.To, domain.KindRevoke
	r.Message.Target = &domain.MessageRef{ID: id, FromMe: true, Kind: orig.Message.Kind}
	if domain.IsGroup(orig.Message.To) {
		r.Message.Target.Group = orig.Message.To
	}
	e, err := ms.Send(ctx, r)
	return DeleteResult{Entry: e, Revoke: true}, err
}

// MarkRead marks an incoming message read (blue ticks for its sender, with the messages before
// it), through the session it came in on: of a message two of the user's sessions got, the
// default session's copy when it got one.
func (ms *Messages) MarkRead(ctx context.Context, uid, id string) (domain.InboundMessage, error) {
	in, err := ms.history.InboundOf(uid, id, ms.e.Sessions.Status(uid).ID)
	if errors.Is(err, domain.ErrRecordNotFound) {
		return in, fmt.Errorf("%w: no incoming message %s in the last 7 days", domain.ErrMessageNotFound, id)
	}
	if err != nil {
		return in, fmt.Errorf("%w: message history: %w", domain.ErrUnavailable, err)
	}
	err = ms.e.Sessions.call(ctx, uid, in.SessionID, 0, func(ctx context.Context, c network.Client) error {
		return c.MarkRead(ctx, in.Ref())
	})
	return in, err
}

// Poll is a poll's results (GET /api/v1/messages/{id}/votes).
type Poll struct {
	Question string
	Multiple bool
	Options  []domain.PollCount
}

// Votes counts a poll's votes (a voter's later vote replaces the earlier one): one the user
// sent, or one a contact sent.
func (ms *Messages) Votes(uid, id string) (Poll, error) {
	var m domain.Message
	if e, err := ms.Get(uid, id); err == nil {
		m = e.Message
	} else if in, err := ms.history.InboundOf(uid, id, ""); err == nil {
		m = in.Content()
	} else if !errors.Is(err, domain.ErrRecordNotFound) {
		return Poll{}, fmt.Errorf("%w: message history: %w", domain.ErrUnavailable, err)
	}
	if m.Kind != domain.KindPoll {
		return Poll{}, fmt.Errorf("%w: no poll %s in the last 7 days", domain.ErrMessageNotFound, id)
	}
	n, err := ms.notes.get(uid, id)
	if err != nil {
		return Poll{}, fmt.Errorf("%w: votes: %w", domain.ErrUnavailable, err)
	}
	return Poll{Question: m.Question, Multiple: m.Multiple, Options: domain.Tally(m.Options, n.Votes)}, nil
}

// Notes returns what happened to one of the user's messages (reactions, an edit, a revoke,
// votes).
func (ms *Messages) Notes(uid, id string) (domain.MessageNotes, error) {
	n, err := ms.notes.get(uid, id)
	if err != nil {
		return n, fmt.Errorf("%w: message notes: %w", domain.ErrUnavailable, err)
	}
	return n, nil
}

// sentOp records what the session's own reaction, edit or revoke did, once the network took
// it: the target's notes, and the event (fromMe). In the background: the deliverer does not
// wait on storage.
func (ms *Messages) sentOp(e *domain.OutboxEntry) {
	m := e.Message
	if m.Target == nil || (m.Kind != domain.KindReaction && m.Kind != domain.KindEdit && m.Kind != domain.KindRevoke) {
		return
	}
	at := e.SentAt
	if at == 0 {
		at = domain.MillisOf(ms.e.now())
	}
	o := network.Origin{From: e.From, At: at.Time()}
	if domain.IsGroup(m.To) {
		o.Group = m.To
	}
	ms.noteInBackground(e.UserID, e.SessionID, o, m)
}

// noteInBackground records the session's own change as noteLater records an incoming one, on
// the lane of the message it changes (after the changes to it taken before, a reaction's
// removal after the reaction); no one waits for it (a stopping engine drops it). Apart from
// sentOp so that a plain message's entry, which sentOp only looks at, is not moved to the heap
// for the closure.
func (ms *Messages) noteInBackground(uid, sessionID string, o network.Origin, m domain.Message) {
	ms.e.noteLater(noteLane(uid, m.Target.ID), nil, func() error {
		return ms.noteChange(uid, sessionID, m.Target.ID, o, true, m) // logged
	})
}

// noteChange records one reaction, edit, revoke or vote (m's kind: reaction, edit, revoke or
// poll for a vote) on message target, and publishes its event: committed before the record
// (notes.update's before). The error is the record's or its event's (logged here).
func (ms *Messages) noteChange(uid, sessionID, target string, o network.Origin, fromMe bool, m domain.Message) error {
	ctx, cancel := context.WithTimeout(ms.e.stopCtx, ms.e.cfg.AskTimeout)
	defer cancel()
	at := domain.MillisOf(o.At)
	from := o.From
	if from == "" && !fromMe {
		from = o.FromLID // a sender the network hides: named by its LID
	}
	change := domain.MessageChange{MessageID: target, SessionID: sessionID, From: from, Phone: o.From, LID: o.FromLID,
		FromMe: fromMe, Group: o.Group, At: o.At.UTC()}
	var ev domain.Event
	_, err := ms.notes.update(ctx, uid, target, func(n *domain.MessageNotes) bool {
		switch m.Kind {
		case domain.KindReaction:
			ev = domain.Event{Type: domain.EventMessageReaction, Data: domain.ReactionData{MessageChange: change, Emoji: m.Emoji}}
			return n.React(domain.Reaction{From: from, LID: o.FromLID, FromMe: fromMe, Emoji: m.Emoji, At: at})
		case domain.KindEdit:
			ev = domain.Event{Type: domain.EventMessageEdited, Data: domain.EditedData{MessageChange: change, Text: m.Preview()}}
			return n.SetEdit(domain.Edit{Text: m.Preview(), FromMe: fromMe, At: at})
		case domain.KindRevoke:
			ev = domain.Event{Type: domain.EventMessageRevoked, Data: domain.RevokedData{MessageChange: change}}
			return n.Revoke(domain.Revocation{FromMe: fromMe, At: at})
		case domain.KindPoll:
			options := append([]string{}, m.Options...)
			ev = domain.Event{Type: domain.EventPollVote, Data: domain.PollVoteData{MessageID: target, SessionID: sessionID,
				Voter: from, Phone: o.From, LID: o.FromLID, Group: o.Group, Options: options, At: o.At.UTC()}}
			return n.SetVote(domain.Vote{Voter: from, LID: o.FromLID, Options: options, At: at})
		}
		return false
	}, func() error {
		// The event first, then the record: written before its event, a kill -9 between the
		// two kept the note and lost the event for good (the network sending the reaction
		// again finds nothing changed). This way the worst is the event twice.
		ev.At = o.At
		committed := make(chan error, 1)
		ms.e.pub.publishThen(uid, ev, func(err error) { committed <- err })
		select {
		case err := <-committed:
			return err
		case <-ctx.Done():
			return fmt.Errorf("%w: the %s's event: %w", domain.ErrUnavailable, m.Kind, ctx.Err())
		}
	})
	if err != nil {
		ms.e.log.Warn("message notes not kept", "message_id", target, "kind", m.Kind, "err", err)
		return err
	}
	return nil
}
