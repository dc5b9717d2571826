package httpapi

import (
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/domain"
)

// The simulated network's dev controls (DESIGN.md section 6), registered only with
// --network sim. They stand for what a person does on the phone, and for the outside world's
// conditions (unregistered numbers, latency, dropped links).

type simScanRequest struct {
	SessionID *string `json:"sessionId"`
	Phone     *string `json:"phone"`
}

func (s *Server) simScan(ctx *fasthttp.RequestCtx) error {
	var req simScanRequest
	if err := bind(ctx, &req, need("sessionId", &req.SessionID), need("phone", &req.Phone)); err != nil {
		return err
	}
	return simResult(ctx, s.cfg.Sim.Scan(*req.SessionID, *req.Phone))
}

type simPairRequest struct {
	SessionID *string `json:"sessionId"`
	Code      *string `json:"code"`
}

func (s *Server) simPair(ctx *fasthttp.RequestCtx) error {
	var req simPairRequest
	if err := bind(ctx, &req, need("sessionId", &req.SessionID), need("code", &req.Code)); err != nil {
		return err
	}
	return simResult(ctx, s.cfg.Sim.Pair(*req.SessionID, *req.Code))
}

func (s *Server) simMessages(ctx *fasthttp.RequestCtx) error {
	to := string(ctx.QueryArgs().Peek("to"))
	if to == "" {
		return missing("to")
	}
	writeJSON(ctx, fasthttp.StatusOK, struct {
		Messages []domain.Delivered `json:"messages"`
	}{s.cfg.Sim.Messages(to)})
	return nil
}

type simUnregisteredRequest struct {
	Numbers []string `json:"numbers"`
}

func (s *Server) simUnregistered(ctx *fasthttp.RequestCtx) error {
	var req simUnregisteredRequest
	if err := bind(ctx, &req); err != nil {
		return err
	}
	if req.Numbers == nil {
		return missing("numbers")
	}
	s.cfg.Sim.SetUnregistered(req.Numbers)
	writeJSON(ctx, fasthttp.StatusOK, successJSON{Success: true})
	return nil
}

type simDropRequest struct {
	SessionID *string `json:"sessionId"`
	Logout    bool    `json:"logout"`
}

func (s *Server) simDrop(ctx *fasthttp.RequestCtx) error {
	var req simDropRequest
	if err := bind(ctx, &req, need("sessionId", &req.SessionID)); err != nil {
		return err
	}
	return simResult(ctx, s.cfg.Sim.Drop(*req.SessionID, req.Logout))
}

type simLatencyRequest struct {
	MS *float64 `json:"ms"`
}

func (s *Server) simLatency(ctx *fasthttp.RequestCtx) error {
	var req simLatencyRequest
	if err := bind(ctx, &req); err != nil {
		return err
	}
	if req.MS == nil || *req.MS < 0 || *req.MS > 3_600_000 {
		return badInput("validation_failed", "ms must be a number from 0 to 3600000")
	}
	s.cfg.Sim.SetLatency(time.Duration(*req.MS * float64(time.Millisecond)))
	writeJSON(ctx, fasthttp.StatusOK, successJSON{Success: true})
	return nil
}

func simResult(ctx *fasthttp.RequestCtx, err error) error {
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, successJSON{Success: true})
	return nil
}

// SimControls are the simulated network's dev controls (node passes the sim).
type SimControls interface {
	Scan(sessionID, phone string) error
	Pair(sessionID, code string) error
	Messages(to string) []domain.Delivered
	SetUnregistered(numbers []string)
	Drop(sessionID string, logout bool) error
	SetLatency(d time.Duration)
	Read(messageID string) error
	// Act is a phone acting on a session (POST /api/dev/sim/inbound): writing, reacting,
	// voting, editing or revoking.
	Act(sessionID string, in domain.SimInbound) (string, error)
	// Groups lists the groups a session's phone is in; Reads the ids of a number's messages
	// that sessions marked read.
	Groups(sessionID string) ([]domain.Group, error)
	Reads(from string) []string
	SimRules
}

type simReadRequest struct {
	MessageID *string `json:"messageId"`
}

// simRead is POST /api/dev/sim/read: the recipient reads a delivered message (a read receipt).
func (s *Server) simRead(ctx *fasthttp.RequestCtx) error {
	var req simReadRequest
	if err := bind(ctx, &req, need("messageId", &req.MessageID)); err != nil {
		return err
	}
	return simResult(ctx, s.cfg.Sim.Read(*req.MessageID))
}

type simInboundRequest struct {
	SessionID *string `json:"sessionId"`
	domain.SimInbound
}

// simInbound is POST /api/dev/sim/inbound: a customer writes to the session's number (type
// text, the default, quoting replyTo), reacts, votes in a poll, edits or revokes a message it
// wrote (DESIGN.md section 16).
func (s *Server) simInbound(ctx *fasthttp.RequestCtx) error {
	var req simInboundRequest
	if err := bind(ctx, &req, need("sessionId", &req.SessionID)); err != nil {
		return err
	}
	if strings.TrimSpace(req.From) == "" {
		return missing("from")
	}
	id, err := s.cfg.Sim.Act(*req.SessionID, req.SimInbound)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, struct {
		Success bool   `json:"success"`
		ID      string `json:"id"`
	}{true, id})
	return nil
}

// SimRules are the simulated network's refusals, timelocks and bans (DESIGN.md section 14).
type SimRules interface {
	Refuse(to string, code, times int) error
	Timelock(sessionID string, until time.Time) error
	Ban(sessionID string, until time.Time) error
}

type simRefuseRequest struct {
	To    *string `json:"to"`
	Code  *int    `json:"code"`
	Times int     `json:"times"`
}

// simRefuse is POST /api/dev/sim/refuse: a recipient refuses the next messages (463, 479, 429).
func (s *Server) simRefuse(ctx *fasthttp.RequestCtx) error {
	var req simRefuseRequest
	if err := bind(ctx, &req, need("to", &req.To)); err != nil {
		return err
	}
	if req.Code == nil {
		return missing("code")
	}
	return simResult(ctx, s.cfg.Sim.Refuse(*req.To, *req.Code, req.Times))
}

type simUntilRequest struct {
	SessionID *string `json:"sessionId"`
	Until     *string `json:"until"`
}

// until reads the request's end (RFC 3339; "" or a past time lifts what it sets).
func (r simUntilRequest) until() (time.Time, error) {
	if r.Until == nil || *r.Until == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339, *r.Until)
	if err != nil {
		return time.Time{}, badInput("validation_failed", "until must be an RFC 3339 time")
	}
	return t, nil
}

// simTimelock is POST /api/dev/sim/timelock: the network's account-wide reach-out timelock.
func (s *Server) simTimelock(ctx *fasthttp.RequestCtx) error {
	return s.simUntil(ctx, s.cfg.Sim.Timelock)
}

// simBan is POST /api/dev/sim/ban: a temporary ban of the session's account.
func (s *Server) simBan(ctx *fasthttp.RequestCtx) error {
	return s.simUntil(ctx, s.cfg.Sim.Ban)
}

// simUntil applies a {sessionId, until} control.
func (s *Server) simUntil(ctx *fasthttp.RequestCtx, set func(sessionID string, until time.Time) error) error {
	var req simUntilRequest
	if err := bind(ctx, &req, need("sessionId", &req.SessionID)); err != nil {
		return err
	}
	until, err := req.until()
	if err != nil {
		return err
	}
	return simResult(ctx, set(*req.SessionID, until))
}

// simGroups is GET /api/dev/sim/groups?sessionId=: the groups a session's phone is in.
func (s *Server) simGroups(ctx *fasthttp.RequestCtx) error {
	sid := string(ctx.QueryArgs().Peek("sessionId"))
	if sid == "" {
		return missing("sessionId")
	}
	gs, err := s.cfg.Sim.Groups(sid)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, struct {
		Groups []domain.Group `json:"groups"`
	}{gs})
	return nil
}

// simReads is GET /api/dev/sim/read?from=DIGITS: the ids of the messages from a number that the
// sessions marked read (what its phone shows as blue ticks).
func (s *Server) simReads(ctx *fasthttp.RequestCtx) error {
	from := string(ctx.QueryArgs().Peek("from"))
	if from == "" {
		return missing("from")
	}
	writeJSON(ctx, fasthttp.StatusOK, struct {
		Read []string `json:"read"`
	}{s.cfg.Sim.Reads(from)})
	return nil
}
