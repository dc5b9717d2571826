package httpapi

import (
	"bytes"
	"context"
	"encoding/base64"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-json"
	"github.com/skip2/go-qrcode"
	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/internal/jsonenc"
)

// sessionJSON is a session record of the admin list (SPEC.md section 2.2).
type sessionJSON struct {
	ID           string    `json:"id"`
	Kind         string    `json:"kind"`
	Name         string    `json:"name"`
	Status       string    `json:"status"`
	Phone        string    `json:"phone"`
	AssignedTo   *string   `json:"assignedTo"`
	ClientName   *string   `json:"clientName"`
	CreatedAt    timestamp `json:"createdAt"`
	LastActivity timestamp `json:"lastActivity"`
	reasonJSON
}

func (s *Server) listSessions(ctx *fasthttp.RequestCtx) error {
	list := func() ([]engine.SessionView, error) { return s.engine(ctx).Sessions.List(), nil }
	if s.cfg.Cluster != nil {
		list = s.cfg.Cluster.Records().Sessions
	}
	views, err := list()
	if err != nil {
		return err
	}
	out := make([]sessionJSON, len(views))
	for i, v := range views {
		out[i] = sessionJSON{ID: v.ID, Kind: v.KindName(), Name: v.Name, Status: v.Status, Phone: v.Phone,
			CreatedAt: timestamp(v.CreatedAt), LastActivity: timestamp(v.LastActivity), reasonJSON: reasonOf(v.Session)}
		if v.AssignedTo != "" {
			a, c := v.AssignedTo, v.ClientName
			out[i].AssignedTo, out[i].ClientName = &a, &c
		}
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}

type createSessionRequest struct {
	SessionName    *string `json:"sessionName"`
	AssignToUserID *string `json:"assignToUserId"`
}

type sessionBrief struct {
	ID     string `json:"id"`
	Name   string `json:"name"`
	Status string `json:"status"`
}

func (s *Server) createSession(ctx *fasthttp.RequestCtx) error {
	var req createSessionRequest
	if err := bind(ctx, &req, need("sessionName", &req.SessionName)); err != nil {
		return err
	}
	assign := ""
	if req.AssignToUserID != nil {
		assign = strings.TrimSpace(*req.AssignToUserID)
	}
	eng := s.engine(ctx)
	create := eng.Sessions.Create
	if who := principalOf(ctx); who != nil && who.SessionID != "" {
		// A cluster node chose the id, and with it the partition the session lives on.
		create = func(c context.Context, name, assign string) (engine.SessionView, error) {
			return eng.Sessions.CreateAs(c, who.SessionID, name, assign)
		}
	}
	v, err := create(s.reqContext(ctx), *req.SessionName, assign)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, struct {
		Success bool         `json:"success"`
		Session sessionBrief `json:"session"`
	}{true, sessionBrief{ID: v.ID, Name: v.Name, Status: v.Status}})
	return nil
}

type assignSessionRequest struct {
	SessionID *string `json:"sessionId"`
	UserID    *string `json:"userId"`
}

func (s *Server) assignSession(ctx *fasthttp.RequestCtx) error {
	var req assignSessionRequest
	if err := bind(ctx, &req, need("sessionId", &req.SessionID), need("userId", &req.UserID)); err != nil {
		return err
	}
	if err := s.engine(ctx).Sessions.Assign(s.reqContext(ctx), *req.SessionID, *req.UserID); err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, successJSON{Success: true})
	return nil
}

type statusJSON struct {
	ID     *string   `json:"id"`
	Status string    `json:"status"`
	Phone  *string   `json:"phone"`
	Queue  queueJSON `json:"queue"`
	reasonJSON
}

// reasonJSON says why a session is not connected, and what the network holds against it.
type reasonJSON struct {
	StatusReason *string    `json:"statusReason"`
	Until        *timestamp `json:"until"`
	// RestrictedUntil: the network's reach-out timelock holds first messages to new contacts
	// until then; TimelockUntil is its older name, kept one more release.
	RestrictedUntil *timestamp `json:"restrictedUntil"`
	TimelockUntil   *timestamp `json:"timelockUntil"`
	LogoutAt        *timestamp `json:"logoutAt"`
}

func reasonOf(st domain.Session) reasonJSON {
	var r reasonJSON
	if st.StatusReason != "" && st.Status != domain.StatusConnected {
		v := st.StatusReason
		r.StatusReason = &v
	}
	opt := func(t time.Time) *timestamp {
		if t.IsZero() {
			return nil
		}
		ts := timestamp(t)
		return &ts
	}
	r.Until, r.TimelockUntil, r.LogoutAt = opt(st.Until), opt(st.TimelockUntil), opt(st.LogoutAt)
	r.RestrictedUntil = r.TimelockUntil
	return r
}

// queueJSON is a session's delivery queue (DESIGN.md section 9).
type queueJSON struct {
	Depth    int        `json:"depth"`
	OldestAt *timestamp `json:"oldestAt"`
}

func queueOf(q domain.QueueStats) queueJSON {
	out := queueJSON{Depth: q.Depth}
	if q.OldestAt != 0 {
		t := timestamp(q.OldestAt.Time())
		out.OldestAt = &t
	}
	return out
}

// clientStatus reports the live status of the caller's session (NOT_CREATED when none). The
// engine keeps the answer's parts rendered from the session's view and gives them again while
// the view is unchanged; only the queue's counters are written per call (a hot route: the
// strings of the view were cache misses under load).
func (s *Server) clientStatus(ctx *fasthttp.RequestCtx, u *domain.User, m *signedIn) error {
	var ref *engine.StatusRef // the session as found for this caller before, while the index is unchanged
	if m != nil {
		ref = &m.status
	}
	body, split, q, ok := s.engine(ctx).Sessions.StatusAnswerAt(ref, u.ID, appendStatus)
	if !ok {
		writeStatus(ctx, &domain.Session{Status: domain.StatusNotCreated})
		return nil
	}
	writeStatusParts(ctx, body, split, q)
	return nil
}

// statusOfSession is the status answer's JSON shape (writeStatus writes it by hand).
func statusOfSession(st domain.Session) statusJSON {
	out := statusJSON{Status: st.Status, Queue: queueOf(st.Queue), reasonJSON: reasonOf(st)}
	if st.ID != "" {
		id := st.ID
		out.ID = &id
	}
	if st.Phone != "" {
		p := st.Phone
		out.Phone = &p
	}
	return out
}

// writeStatus answers a session's status: statusOfSession as writeJSON writes it, by hand (a hot
// route: TestValidAndStatusAnswersAreWriteJSONs).
func writeStatus(ctx *fasthttp.RequestCtx, st *domain.Session) {
	var buf [512]byte
	b, split := appendStatus(buf[:0], st)
	writeStatusParts(ctx, b, split, st.Queue)
}

// writeStatusParts writes a status answer from appendStatus's parts and the queue's counters.
func writeStatusParts(ctx *fasthttp.RequestCtx, b []byte, split int, q domain.QueueStats) {
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.SetStatusCode(fasthttp.StatusOK)
	var buf [64]byte
	qb := strconv.AppendInt(buf[:0], int64(q.Depth), 10)
	qb = append(qb, `,"oldestAt":`...)
	if q.OldestAt != 0 {
		qb = appendTimestamp(qb, q.OldestAt.Time())
	} else {
		qb = append(qb, "null"...)
	}
	_, _ = ctx.Write(b[:split])
	_, _ = ctx.Write(qb)
	_, _ = ctx.Write(b[split:])
}

// appendStatus appends st's answer without the queue's counters (its depth and oldestAt, which
// go at split): the parts that follow from the session's view.
func appendStatus(b []byte, st *domain.Session) (_ []byte, split int) {
	b = append(b, `{"id":`...)
	b = appendOptString(b, st.ID)
	b = jsonenc.AppendString(append(b, `,"status":`...), st.Status)
	b = appendOptString(append(b, `,"phone":`...), st.Phone)
	b = append(b, `,"queue":{"depth":`...)
	split = len(b)
	reason := ""
	if st.Status != domain.StatusConnected {
		reason = st.StatusReason
	}
	b = appendOptString(append(b, `},"statusReason":`...), reason)
	b = appendOptTime(append(b, `,"until":`...), st.Until)
	b = appendOptTime(append(b, `,"restrictedUntil":`...), st.TimelockUntil)
	b = appendOptTime(append(b, `,"timelockUntil":`...), st.TimelockUntil)
	b = appendOptTime(append(b, `,"logoutAt":`...), st.LogoutAt)
	return append(b, "}\n"...), split
}

// appendOptString appends s, or null when it is empty.
func appendOptString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return jsonenc.AppendString(b, s)
}

// appendOptTime appends t, or null when it is zero.
func appendOptTime(b []byte, t time.Time) []byte {
	if t.IsZero() {
		return append(b, "null"...)
	}
	return appendTimestamp(b, t)
}

func (s *Server) clientStart(ctx *fasthttp.RequestCtx, u domain.User) error {
	if _, err := s.engine(ctx).Sessions.Start(s.reqContext(ctx), u); err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, successJSON{Success: true})
	return nil
}

type qrJSON struct {
	QR        string `json:"qr"`
	SessionID string `json:"sessionId"`
}

// clientQR returns the QR code to scan as a PNG data URI, creating and starting the caller's
// session when needed.
func (s *Server) clientQR(ctx *fasthttp.RequestCtx, u domain.User) error {
	st, err := s.engine(ctx).Sessions.QR(s.reqContext(ctx), u)
	if err != nil {
		return err
	}
	png, err := qrcode.Encode(st.QR, qrcode.Medium, 256)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, qrJSON{QR: "data:image/png;base64," + base64.StdEncoding.EncodeToString(png), SessionID: st.ID})
	return nil
}

type pairCodeRequest struct {
	Phone *string `json:"phone"`
}

// clientPairCode links by phone number instead of QR: the user types the code on the phone.
func (s *Server) clientPairCode(ctx *fasthttp.RequestCtx, u domain.User) error {
	var req pairCodeRequest
	if err := bind(ctx, &req, need("phone", &req.Phone)); err != nil {
		return err
	}
	phone, err := engine.NormalizePhone(*req.Phone)
	if err != nil {
		return err
	}
	st, code, err := s.engine(ctx).Sessions.PairCode(s.reqContext(ctx), u, phone)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, struct {
		Success   bool   `json:"success"`
		Code      string `json:"code"`
		SessionID string `json:"sessionId"`
	}{true, code, st.ID})
	return nil
}

type sessionPacingRequest struct {
	ID     *string         `json:"id"`
	Pacing json.RawMessage `json:"pacing"`
	Proxy  *string         `json:"proxy"`
}

type pacingJSON struct {
	Success bool           `json:"success"`
	ID      string         `json:"id"`
	Own     *domain.Pacing `json:"pacing"`
	Applied domain.Pacing  `json:"applied"`
	Proxy   string         `json:"proxy"`
}

// setSessionPacing is PATCH /api/admin/sessions {id, pacing?, proxy?}: a session's own pacing
// override (null removes it; absent leaves it) and its proxy; the answer shows the override,
// the pacing in force and the proxy (its password masked).
func (s *Server) setSessionPacing(ctx *fasthttp.RequestCtx, _ domain.User) error {
	var req sessionPacingRequest
	if err := bind(ctx, &req, need("id", &req.ID)); err != nil {
		return err
	}
	u := engine.SessionUpdate{Proxy: req.Proxy}
	if len(req.Pacing) > 0 {
		u.SetPacing = true
		if string(req.Pacing) != "null" {
			u.Pacing = new(domain.Pacing)
			dec := json.NewDecoder(bytes.NewReader(req.Pacing))
			dec.DisallowUnknownFields()
			if err := dec.Decode(u.Pacing); err != nil {
				return badInput("validation_failed", "pacing: %v", err)
			}
		}
	}
	v, err := s.engine(ctx).Sessions.Update(s.reqContext(ctx), *req.ID, u)
	if err != nil {
		return err
	}
	applied, err := s.engine(ctx).Sessions.Pacing(v.ID)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, pacingJSON{Success: true, ID: v.ID, Own: v.Pacing, Applied: applied, Proxy: maskProxy(v.Proxy)})
	return nil
}

// maskProxy hides a proxy URL's password.
func maskProxy(p string) string {
	u, err := url.Parse(p)
	if err != nil || u.User == nil {
		return p
	}
	if _, has := u.User.Password(); has {
		u.User = url.UserPassword(u.User.Username(), "xxxxx")
	}
	return u.String()
}

// clientLogout is POST /api/client/logout: unlink the caller's session from their phone.
func (s *Server) clientLogout(ctx *fasthttp.RequestCtx, u domain.User) error {
	if err := s.engine(ctx).Sessions.Logout(s.reqContext(ctx), u.ID); err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, successJSON{Success: true})
	return nil
}

// deleteSession is DELETE /api/admin/sessions?id=: unlink, stop and delete a session.
func (s *Server) deleteSession(ctx *fasthttp.RequestCtx, _ domain.User) error {
	id := strings.TrimSpace(string(ctx.QueryArgs().Peek("id")))
	if id == "" {
		return missing("id")
	}
	if err := s.engine(ctx).Sessions.Delete(s.reqContext(ctx), id); err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, successJSON{Success: true})
	return nil
}
