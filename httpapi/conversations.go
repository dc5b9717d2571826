package httpapi

// Conversations (DESIGN.md section 16): edits, revokes and cancellations, read marks, poll
// votes, the contact book and number lookups, groups; and the fields every message shows of its
// conversation (who, the message it quotes, its reactions, edit, revoke, a poll's results).

import (
	"strconv"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
)

// contentJSON is what a message says and what happened to it since: the contact (phone and
// LID, or the group), the content of its kind, the message it quotes, its reactions, its last
// edit, its revoke, a poll's results.
type contentJSON struct {
	Phone        string             `json:"phone,omitempty"`
	LID          string             `json:"lid,omitempty"`
	Group        string             `json:"group,omitempty"`
	Text         string             `json:"text,omitempty"`
	Caption      string             `json:"caption,omitempty"`
	MimeType     string             `json:"mimeType,omitempty"`
	FileName     string             `json:"fileName,omitempty"`
	PTT          bool               `json:"ptt,omitempty"`
	Lat          *float64           `json:"lat,omitempty"` // a location's, 0 included
	Lng          *float64           `json:"lng,omitempty"`
	Name         string             `json:"name,omitempty"`
	Address      string             `json:"address,omitempty"`
	ContactName  string             `json:"contactName,omitempty"`
	ContactPhone string             `json:"contactPhone,omitempty"`
	Emoji        *string            `json:"emoji,omitempty"`  // a reaction ("": taken back)
	Target       string             `json:"target,omitempty"` // what a reaction, edit or revoke is about
	ReplyTo      string             `json:"replyTo,omitempty"`
	Quoted       *domain.MessageRef `json:"quoted,omitempty"`
	Reactions    []reactionRow      `json:"reactions,omitempty"`
	Edited       bool               `json:"edited,omitempty"`
	EditedAt     *timestamp         `json:"editedAt,omitempty"`
	Revoked      bool               `json:"revoked,omitempty"`
	RevokedAt    *timestamp         `json:"revokedAt,omitempty"`
	Poll         *pollJSON          `json:"poll,omitempty"`
	// The Cloud API's kinds (cloudsend.go).
	Template *templateSendJSON    `json:"template,omitempty"`
	Buttons  []domain.Button      `json:"buttons,omitempty"`
	Button   string               `json:"button,omitempty"`
	Sections []domain.ListSection `json:"sections,omitempty"`
	Header   string               `json:"header,omitempty"`
	Footer   string               `json:"footer,omitempty"`
	ButtonID string               `json:"buttonId,omitempty"`
}

// reactionRow is one person's reaction to a message.
type reactionRow struct {
	From   string    `json:"from,omitempty"`
	LID    string    `json:"lid,omitempty"`
	FromMe bool      `json:"fromMe"`
	Emoji  string    `json:"emoji"`
	At     timestamp `json:"at"`
}

// pollJSON is a poll's question and results (GET /api/v1/messages/{id}/votes's shape).
type pollJSON struct {
	Question string             `json:"question"`
	Multiple bool               `json:"multiple"`
	Options  []domain.PollCount `json:"options"`
}

// contentOf is a message's content and notes as the API shows them (direction: peer is its
// recipient or sender).
func contentOf(m domain.Message, peer, lid string, n domain.MessageNotes) contentJSON {
	c := contentJSON{LID: lid, Text: m.Text, Caption: m.Caption, MimeType: m.MimeType, FileName: m.FileName, PTT: m.PTT,
		Name: m.LocationName, Address: m.Address, ContactName: m.ContactName, ContactPhone: m.ContactPhone}
	if m.Kind == domain.KindLocation || m.Lat != 0 || m.Lng != 0 {
		c.Lat, c.Lng = &m.Lat, &m.Lng
	}
	if domain.IsGroup(peer) {
		c.Group = peer
	} else {
		c.Phone = peer
	}
	if m.Kind == domain.KindReaction {
		e := m.Emoji
		c.Emoji = &e
	}
	if m.Target != nil {
		c.Target = m.Target.ID
	}
	if q := m.ReplyTo; q != nil && q.ID != "" {
		c.ReplyTo = q.ID
		c.Quoted = q
	}
	for _, r := range n.Reactions {
		c.Reactions = append(c.Reactions, reactionRow{From: r.From, LID: r.LID, FromMe: r.FromMe, Emoji: r.Emoji, At: timestamp(r.At.Time())})
	}
	if n.Edit != nil {
		at := timestamp(n.Edit.At.Time())
		c.Edited, c.EditedAt, c.Text = true, &at, n.Edit.Text
	}
	if n.Revoked != nil {
		at := timestamp(n.Revoked.At.Time())
		c.Revoked, c.RevokedAt = true, &at
	}
	if m.Kind == domain.KindPoll {
		c.Poll = &pollJSON{Question: m.Question, Multiple: m.Multiple, Options: domain.Tally(m.Options, n.Votes)}
	}
	cloudContent(&c, m)
	return c
}

// messageID is the route's {id}.
func messageID(ctx *fasthttp.RequestCtx) string {
	id, _ := ctx.UserValue("id").(string)
	return id
}

type editRequest struct {
	Message       *string `json:"message"`
	Text          *string `json:"text"`
	message, text string  // what Message and Text point to, when the fast decoder read them
}

// v1Edit is POST /api/v1/messages/{id}/edit (scope send_text): a text the key's owner sent,
// within 15 minutes (409 not_editable otherwise); answered like a send, of the edit.
func (s *Server) v1Edit(ctx *fasthttp.RequestCtx) error {
	return s.v1Post(ctx, engine.ScopeText, func(key domain.Grant, idem *engine.Idem) error {
		var req editRequest
		if err := decodeEdit(ctx, &req); err != nil {
			return err
		}
		if req.Message == nil {
			req.Message = req.Text
		}
		text, err := requireText("message", req.Message)
		if err != nil {
			return err
		}
		r, err := s.sendRequest(ctx, idem)
		if err != nil {
			return err
		}
		r.Origin = "api"
		e, err := s.engine(ctx).Messages.Edit(s.reqContext(ctx), key.Key.UserID, messageID(ctx), text, r)
		if err != nil {
			return err
		}
		writeSent(ctx, &e)
		return nil
	}, func(uid string, rec domain.IdemRecord) error { return s.replayMessage(ctx, uid, rec) })
}

// v1Delete is DELETE /api/v1/messages/{id} (scope send_text): a queued message is cancelled
// (its allowance released), a sent one revoked for everyone within 48 hours (409 not_revocable
// otherwise).
func (s *Server) v1Delete(ctx *fasthttp.RequestCtx) error {
	return s.v1Post(ctx, engine.ScopeText, func(key domain.Grant, idem *engine.Idem) error {
		r, err := s.sendRequest(ctx, idem)
		if err != nil {
			return err
		}
		r.Origin = "api"
		id := messageID(ctx)
		res, err := s.engine(ctx).Messages.Delete(s.reqContext(ctx), key.Key.UserID, id, r)
		if err != nil {
			return err
		}
		j := sentResponse(&res.Entry)
		if !res.Revoke {
			j.Type, j.Target = "cancel", id
		}
		writeSentJSON(ctx, &j)
		return nil
	}, func(uid string, rec domain.IdemRecord) error { return s.replayMessage(ctx, uid, rec) })
}

// sendRequest is what an edit or a revoke shares with a send: the wait for the network's
// outcome and the Idempotency-Key's record.
func (s *Server) sendRequest(ctx *fasthttp.RequestCtx, idem *engine.Idem) (engine.SendRequest, error) {
	wait, err := waitOf(ctx, 0)
	if err != nil {
		return engine.SendRequest{}, err
	}
	r := engine.SendRequest{Wait: wait}
	if idem != nil {
		r.Message.ID, r.IdemID, r.Idem = idem.Derived(), idem.ID(), domain.IdemRecord{BodyHash: idem.BodyHash}
	}
	return r, nil
}

// v1Read is POST /api/v1/messages/{id}/read (scope send_text): an incoming message marked read
// (its sender sees the blue ticks).
func (s *Server) v1Read(ctx *fasthttp.RequestCtx) error {
	key, err := s.apiKey(ctx, engine.ScopeText)
	if err != nil {
		return err
	}
	in, err := s.engine(ctx).Messages.MarkRead(s.reqContext(ctx), key.Key.UserID, messageID(ctx))
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, struct {
		Success   bool   `json:"success"`
		MessageID string `json:"message_id"`
		Session   string `json:"session"`
		Status    string `json:"status"`
	}{true, in.ID, in.SessionID, domain.MsgRead})
	return nil
}

// v1Votes is GET /api/v1/messages/{id}/votes (scope read_messages): a poll's results.
func (s *Server) v1Votes(ctx *fasthttp.RequestCtx) error {
	key, err := s.apiKey(ctx, engine.ScopeRead)
	if err != nil {
		return err
	}
	p, err := s.engine(ctx).Messages.Votes(key.Key.UserID, messageID(ctx))
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, struct {
		Success   bool   `json:"success"`
		MessageID string `json:"message_id"`
		pollJSON
	}{true, messageID(ctx), pollJSON{Question: p.Question, Multiple: p.Multiple, Options: p.Options}})
	return nil
}

// contactJSON is one number of the contact book.
type contactJSON struct {
	Phone        string     `json:"phone"`
	LID          string     `json:"lid,omitempty"`
	Name         string     `json:"name,omitempty"`
	FirstSeen    *timestamp `json:"firstSeen"`
	LastInbound  *timestamp `json:"lastInbound"`
	LastOutbound *timestamp `json:"lastOutbound"`
}

func millisTS(m domain.Millis) *timestamp {
	if m == 0 {
		return nil
	}
	t := timestamp(m.Time())
	return &t
}

// v1Contacts is GET /api/v1/contacts?cursor=&limit=&session_id= (scope read_messages): the
// contact book of the key owner's session, in number order.
func (s *Server) v1Contacts(ctx *fasthttp.RequestCtx) error {
	key, err := s.apiKey(ctx, engine.ScopeRead)
	if err != nil {
		return err
	}
	args := ctx.QueryArgs()
	limit := 100
	if v := string(args.Peek("limit")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > engine.ContactsMaxLimit {
			return badInput("validation_failed", "limit must be 1 to %d", engine.ContactsMaxLimit)
		}
		limit = n
	}
	page, next, err := s.engine(ctx).Contacts.List(key.Key.UserID, string(args.Peek("session_id")), string(args.Peek("cursor")), limit)
	if err != nil {
		return err
	}
	out := make([]contactJSON, len(page))
	for i, c := range page {
		// Contacts booked before the book kept times: the first day written to, or when they wrote.
		first := c.First
		for _, t := range []domain.Millis{c.Wrote, domain.MillisOf(domain.DayStart(c.SentDay))} {
			if first == 0 || (t > 0 && t < first) {
				first = t
			}
		}
		if c.SentDay == 0 && c.First == 0 {
			first = c.Wrote
		}
		out[i] = contactJSON{Phone: c.Number, LID: c.LID, Name: c.Name, FirstSeen: millisTS(first),
			LastInbound: millisTS(max(c.LastIn, c.Wrote)), LastOutbound: millisTS(c.LastOut)}
	}
	writeJSON(ctx, fasthttp.StatusOK, struct {
		Success  bool          `json:"success"`
		Contacts []contactJSON `json:"contacts"`
		Next     string        `json:"next,omitempty"`
	}{true, out, next})
	return nil
}

type checkRequest struct {
	Phones    []string `json:"phones"`
	SessionID string   `json:"session_id"`
}

// v1ContactsCheck is POST /api/v1/contacts/check (scope read_messages): which numbers have an
// account on the network, at most 50 a request and 200 a day per session.
func (s *Server) v1ContactsCheck(ctx *fasthttp.RequestCtx) error {
	key, err := s.apiKey(ctx, engine.ScopeRead)
	if err != nil {
		return err
	}
	var req checkRequest
	if err := bind(ctx, &req); err != nil {
		return err
	}
	res, err := s.engine(ctx).Contacts.Check(s.reqContext(ctx), key.Key.UserID, req.SessionID, req.Phones)
	if err != nil {
		if domain.CodeOf(err) == domain.ErrCheckLimit.Code {
			now := time.Now().UTC()
			err = retryAfter(err, max(int64(domain.DayStart(domain.DayOf(now)+1).Sub(now).Seconds()), 1))
		}
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, struct {
		Success bool                 `json:"success"`
		Results []domain.NumberCheck `json:"results"`
	}{true, res})
	return nil
}

// groupID is the route's {id}: a group id (its @g.us may be left out).
func groupID(ctx *fasthttp.RequestCtx) string {
	id, _ := ctx.UserValue("id").(string)
	if id != "" && !strings.Contains(id, "@") {
		id += domain.GroupSuffix
	}
	return id
}

// v1Groups is GET /api/v1/groups?session_id= (scope read_messages): the groups of the key
// owner's session.
func (s *Server) v1Groups(ctx *fasthttp.RequestCtx) error {
	key, err := s.apiKey(ctx, engine.ScopeRead)
	if err != nil {
		return err
	}
	return s.groups(ctx, key.Key.UserID)
}

// clientGroups is GET /api/client/groups: the signed-in user's groups (the dashboard's picker).
func (s *Server) clientGroups(ctx *fasthttp.RequestCtx, u domain.User) error {
	return s.groups(ctx, u.ID)
}

func (s *Server) groups(ctx *fasthttp.RequestCtx, uid string) error {
	gs, err := s.engine(ctx).Groups.List(s.reqContext(ctx), uid, string(ctx.QueryArgs().Peek("session_id")))
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, struct {
		Success bool           `json:"success"`
		Groups  []domain.Group `json:"groups"`
	}{true, gs})
	return nil
}

type createGroupRequest struct {
	Name         *string  `json:"name"`
	Participants []string `json:"participants"`
	SessionID    string   `json:"session_id"`
}

type groupAnswer struct {
	Success bool `json:"success"`
	domain.Group
}

// v1CreateGroup is POST /api/v1/groups (scope send_text): a group with the session's phone as
// its admin; 201 with the group.
func (s *Server) v1CreateGroup(ctx *fasthttp.RequestCtx) error {
	key, err := s.apiKey(ctx, engine.ScopeText)
	if err != nil {
		return err
	}
	var req createGroupRequest
	if err := bind(ctx, &req, need("name", &req.Name)); err != nil {
		return err
	}
	g, err := s.engine(ctx).Groups.Create(s.reqContext(ctx), key.Key.UserID, req.SessionID, *req.Name, req.Participants)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusCreated, groupAnswer{true, g})
	return nil
}

type participantsRequest struct {
	Add       []string `json:"add"`
	Remove    []string `json:"remove"`
	SessionID string   `json:"session_id"`
}

// v1GroupParticipants is POST /api/v1/groups/{id}/participants (scope send_text): participants
// added and removed; the group as it stands.
func (s *Server) v1GroupParticipants(ctx *fasthttp.RequestCtx) error {
	key, err := s.apiKey(ctx, engine.ScopeText)
	if err != nil {
		return err
	}
	var req participantsRequest
	if err := bind(ctx, &req); err != nil {
		return err
	}
	g, err := s.engine(ctx).Groups.Participants(s.reqContext(ctx), key.Key.UserID, req.SessionID, groupID(ctx), req.Add, req.Remove)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, groupAnswer{true, g})
	return nil
}

// v1GroupInvite is GET /api/v1/groups/{id}/invite?session_id= (scope read_messages): the link
// that joins the group.
func (s *Server) v1GroupInvite(ctx *fasthttp.RequestCtx) error {
	key, err := s.apiKey(ctx, engine.ScopeRead)
	if err != nil {
		return err
	}
	link, err := s.engine(ctx).Groups.Invite(s.reqContext(ctx), key.Key.UserID, string(ctx.QueryArgs().Peek("session_id")), groupID(ctx))
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, struct {
		Success bool   `json:"success"`
		Group   string `json:"group"`
		Link    string `json:"link"`
	}{true, groupID(ctx), link})
	return nil
}
