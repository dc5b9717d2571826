package httpapi

// The message history (DESIGN.md section 15): GET /api/v1/messages (API key, scope
// read_messages) and GET /api/client/messages (ID token), both directions, one page at a time.

import (
	"cmp"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
)

// outgoingJSON is an outgoing message in the history: GET /api/v1/messages/{id}'s fields without
// the history, with its direction and content.
type outgoingJSON struct {
	routeJSON
	Direction string     `json:"direction"`
	ID        string     `json:"id"`
	MessageID string     `json:"message_id"`
	Status    string     `json:"status"`
	To        string     `json:"to"`
	Session   string     `json:"session"`
	Type      string     `json:"type"`
	CreatedAt timestamp  `json:"created_at"`
	SentAt    *timestamp `json:"sent_at"`
	Code      string     `json:"code,omitempty"`
	Error     string     `json:"error,omitempty"`
	Attempts  int        `json:"attempts"`
	contentJSON
}

// incomingJSON is an incoming message: the message.received event's data, with its direction
// and what happened to it since (reactions, an edit, a revoke).
type incomingJSON struct {
	Direction string    `json:"direction"`
	ID        string    `json:"id"`
	Session   string    `json:"session"`
	From      string    `json:"from"`
	Name      string    `json:"name,omitempty"`
	Type      string    `json:"type"`
	Kind      string    `json:"kind"`
	Bytes     int64     `json:"bytes,omitempty"`
	Timestamp timestamp `json:"timestamp"`
	contentJSON
}

type historyJSONPage struct {
	Success   bool   `json:"success"`
	Direction string `json:"direction,omitempty"`
	Messages  []any  `json:"messages"`
	Next      string `json:"next,omitempty"`
}

// v1Messages is GET /api/v1/messages (scope read_messages): the key owner's messages.
func (s *Server) v1Messages(ctx *fasthttp.RequestCtx) error {
	key, err := s.apiKey(ctx, engine.ScopeRead)
	if err != nil {
		return err
	}
	return s.history(ctx, key.Key.UserID)
}

// clientMessages is GET /api/client/messages: the signed-in user's messages (the dashboard).
func (s *Server) clientMessages(ctx *fasthttp.RequestCtx, u domain.User) error {
	return s.history(ctx, u.ID)
}

func (s *Server) history(ctx *fasthttp.RequestCtx, uid string) error {
	q, err := historyQuery(ctx.QueryArgs())
	if err != nil {
		return err
	}
	items, next, err := s.engine(ctx).Messages.History(uid, q)
	if err != nil {
		return err
	}
	out := historyJSONPage{Success: true, Direction: q.Direction, Messages: make([]any, 0, len(items)), Next: next}
	for _, it := range items {
		if it.Dir == domain.DirIn {
			out.Messages = append(out.Messages, incomingItem(it.In, it.Notes))
			continue
		}
		m := it.Out
		out.Messages = append(out.Messages, outgoingJSON{Direction: domain.DirOut, ID: m.ID, MessageID: m.ID, Status: m.Status,
			To: m.Message.To, Session: m.SessionID, Type: string(m.Message.Kind), CreatedAt: timestamp(m.CreatedAt.Time()),
			SentAt: sentAt(m.SentAt), Code: cmp.Or(m.Code, waitingCode(m)), Error: m.Error, Attempts: m.Attempts,
			contentJSON: contentOf(m.Message, m.Message.To, m.LID, it.Notes), routeJSON: routeOf(m)})
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}

// incomingItem is an incoming message in the history.
func incomingItem(m domain.InboundMessage, n domain.MessageNotes) incomingJSON {
	kind := m.Kind
	if kind == "" {
		kind = m.Type // kept before kinds were named apart
	}
	c := m.Content()
	c.Kind = domain.Kind(kind)
	c.ReplyTo = m.Quoted
	if c.ReplyTo == nil && m.ReplyTo != "" {
		c.ReplyTo = &domain.MessageRef{ID: m.ReplyTo}
	}
	j := incomingJSON{Direction: domain.DirIn, ID: m.ID, Session: m.SessionID, From: m.From, Name: m.Name, Type: kind, Kind: kind,
		Bytes: m.Bytes, Timestamp: timestamp(m.Timestamp), contentJSON: contentOf(c, m.From, m.LID, n)}
	if m.Group != "" {
		j.Phone, j.Group = m.From, m.Group
	}
	return j
}

var messageStatuses = map[string]bool{domain.MsgScheduled: true, domain.MsgQueued: true, domain.MsgSent: true, domain.MsgDelivered: true,
	domain.MsgRead: true, domain.MsgFailed: true, domain.MsgCancelled: true}

// historyQuery reads the listing's query parameters.
func historyQuery(args *fasthttp.Args) (engine.HistoryQuery, error) {
	var q engine.HistoryQuery
	switch d := string(args.Peek("direction")); d {
	case "", domain.DirOut, domain.DirIn:
		q.Direction = d
	default:
		return q, badInput("validation_failed", "direction must be \"out\" or \"in\"")
	}
	if st := string(args.Peek("status")); st != "" {
		if !messageStatuses[st] {
			return q, badInput("validation_failed", "status must be scheduled, queued, sent, delivered, read, failed or cancelled")
		}
		q.Status = st
	}
	for _, p := range []struct {
		name string
		to   *string
	}{{"to", &q.To}, {"from", &q.From}} {
		if v := string(args.Peek(p.name)); v != "" {
			n, err := engine.NormalizeRecipient(v)
			if err != nil {
				return q, badInput("validation_failed", "%s must be a phone number with its country code, or a group id", p.name)
			}
			*p.to = n
		}
	}
	if v := string(args.Peek("since")); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			return q, badInput("validation_failed", "since must be an RFC 3339 timestamp")
		}
		if epoch := time.Unix(0, 0).UTC(); t.Before(epoch) {
			t = epoch // every message is after it; the zero time would read as no since at all
		}
		q.Since = t
	}
	q.Limit = 100
	if v := string(args.Peek("limit")); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > engine.HistoryMaxLimit {
			return q, badInput("validation_failed", "limit must be 1 to %d", engine.HistoryMaxLimit)
		}
		q.Limit = n
	}
	q.Cursor = string(args.Peek("cursor"))
	return q, nil
}
