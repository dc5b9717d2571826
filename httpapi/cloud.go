package httpapi

import (
	"errors"
	"strings"

	"github.com/goccy/go-json"
	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
)

// The official WhatsApp Cloud API as a second network (DESIGN.md section 17): connecting a
// Cloud API number, its templates, the account's routing, and Meta's webhooks.

type cloudConnectRequest struct {
	PhoneNumberID *string `json:"phoneNumberId"`
	WABAID        *string `json:"wabaId"`
	AccessToken   *string `json:"accessToken"`
	AppSecret     *string `json:"appSecret"`
	// UserID: an admin connects the number for this user.
	UserID string `json:"userId"`
}

// cloudNumberJSON is a cloud session as the client routes show it (never its token or secret).
type cloudNumberJSON struct {
	SessionID     string     `json:"sessionId"`
	Status        string     `json:"status"`
	StatusReason  *string    `json:"statusReason"`
	Phone         string     `json:"phone"`
	DisplayPhone  string     `json:"displayPhone"`
	VerifiedName  string     `json:"verifiedName"`
	Quality       string     `json:"quality"`
	PhoneNumberID string     `json:"phoneNumberId"`
	WABAID        string     `json:"wabaId"`
	Throughput    int        `json:"throughput"`
	ConnectedAt   *timestamp `json:"connectedAt"`
	WebhookURL    string     `json:"webhookUrl"`
	Queue         queueJSON  `json:"queue"`
}

func (s *Server) cloudNumber(eng *engine.Engine, v engine.SessionView) cloudNumberJSON {
	out := cloudNumberJSON{SessionID: v.ID, Status: v.ClientStatus(), Phone: v.Phone, WebhookURL: eng.Cloud.WebhookURL(v.ID),
		Queue: queueOf(v.Queue), StatusReason: reasonOf(v.Session).StatusReason}
	if n := v.Cloud; n != nil {
		out.DisplayPhone, out.VerifiedName, out.Quality, out.PhoneNumberID, out.WABAID, out.Throughput =
			n.DisplayPhone, n.VerifiedName, n.Quality, n.PhoneNumberID, n.WABAID, n.Throughput
		if !n.ConnectedAt.IsZero() {
			t := timestamp(n.ConnectedAt)
			out.ConnectedAt = &t
		}
	}
	return out
}

// clientCloudConnect is POST /api/client/cloud/connect: the number checked with the Graph API
// and made the caller's CONNECTED cloud session (an admin may name another user); the answer
// shows the webhook URL and, this once, the verify token to paste in Meta's app settings.
func (s *Server) clientCloudConnect(ctx *fasthttp.RequestCtx, u domain.User) error {
	var req cloudConnectRequest
	if err := bind(ctx, &req, need("phoneNumberId", &req.PhoneNumberID), need("wabaId", &req.WABAID),
		need("accessToken", &req.AccessToken), need("appSecret", &req.AppSecret)); err != nil {
		return err
	}
	uid := u.ID
	if req.UserID != "" && req.UserID != u.ID {
		if u.Role != engine.RoleAdmin {
			return errNotAdmin
		}
		uid = req.UserID
	}
	eng := s.engine(ctx)
	res, err := eng.Cloud.Connect(s.reqContext(ctx), uid, engine.CloudConnect{PhoneNumberID: *req.PhoneNumberID, WABAID: *req.WABAID,
		AccessToken: *req.AccessToken, AppSecret: *req.AppSecret})
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, struct {
		Success     bool            `json:"success"`
		Number      cloudNumberJSON `json:"number"`
		VerifyToken string          `json:"verifyToken"`
		Templates   int             `json:"templates"`
	}{true, s.cloudNumber(eng, res.Session), res.VerifyToken, res.Templates})
	return nil
}

// routingJSON is an account's routing.
type routingJSON struct {
	Mode         string              `json:"mode"`
	ColdTemplate *domain.TemplateRef `json:"coldTemplate"`
}

func routingOf(r domain.Routing) routingJSON {
	mode := r.Mode
	if mode == "" {
		mode = domain.RouteLinked
	}
	return routingJSON{Mode: mode, ColdTemplate: r.ColdTemplate}
}

// clientCloud is GET /api/client/cloud: the caller's Cloud API number (null when none) and the
// account's routing.
func (s *Server) clientCloud(ctx *fasthttp.RequestCtx, u domain.User) error {
	eng := s.engine(ctx)
	r, err := eng.Routing.Get(u.ID)
	if err != nil {
		return err
	}
	out := struct {
		Success bool             `json:"success"`
		Number  *cloudNumberJSON `json:"number"`
		Routing routingJSON      `json:"routing"`
		Waiting int              `json:"waiting"`
	}{Success: true, Routing: routingOf(r), Waiting: eng.Routing.WaitingFor(u.ID)}
	if v, err := eng.Cloud.Session(u.ID); err == nil {
		n := s.cloudNumber(eng, v)
		out.Number = &n
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}

// clientCloudDisconnect is DELETE /api/client/cloud: the cloud session deleted (its queued
// messages fail, session_deleted); the number stays registered at Meta.
func (s *Server) clientCloudDisconnect(ctx *fasthttp.RequestCtx, u domain.User) error {
	if err := s.engine(ctx).Cloud.Disconnect(s.reqContext(ctx), u.ID); err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, successJSON{Success: true})
	return nil
}

// cloudTemplateJSON is one template of the WABA.
type cloudTemplateJSON struct {
	Name       string `json:"name"`
	Language   string `json:"language"`
	Category   string `json:"category"`
	Status     string `json:"status"`
	Body       string `json:"body"`
	Parameters int    `json:"parameters"`
	Components any    `json:"components"`
}

// clientCloudTemplates is GET /api/client/cloud/templates: synced from the WABA now (the last
// sync when Meta cannot be reached).
func (s *Server) clientCloudTemplates(ctx *fasthttp.RequestCtx, u domain.User) error {
	set, err := s.engine(ctx).Cloud.Templates(s.reqContext(ctx), u.ID)
	if err != nil {
		return err
	}
	out := struct {
		Success   bool                `json:"success"`
		SyncedAt  timestamp           `json:"syncedAt"`
		Templates []cloudTemplateJSON `json:"templates"`
	}{Success: true, SyncedAt: timestamp(set.SyncedAt), Templates: make([]cloudTemplateJSON, 0, len(set.Templates))}
	for _, t := range set.Templates {
		var comps any = []any{}
		if len(t.Components) > 0 && string(t.Components) != "null" {
			comps = json.RawMessage(t.Components)
		}
		out.Templates = append(out.Templates, cloudTemplateJSON{Name: t.Name, Language: t.Language, Category: t.Category,
			Status: t.Status, Body: t.Body, Parameters: t.BodyParams(), Components: comps})
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}

type routingRequest struct {
	Mode         *string         `json:"mode"`
	ColdTemplate json.RawMessage `json:"coldTemplate"`
}

// clientRouting is GET /api/client/routing.
func (s *Server) clientRouting(ctx *fasthttp.RequestCtx, u domain.User) error {
	r, err := s.engine(ctx).Routing.Get(u.ID)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, routingOf(r))
	return nil
}

// patchRouting is PATCH /api/client/routing {mode, coldTemplate}: coldTemplate null removes it,
// absent leaves it.
func (s *Server) patchRouting(ctx *fasthttp.RequestCtx, u domain.User) error {
	var req routingRequest
	if err := bind(ctx, &req); err != nil {
		return err
	}
	upd := engine.RoutingUpdate{Mode: req.Mode}
	if len(req.ColdTemplate) > 0 { // null (remove it) arrives as the raw "null"
		upd.SetCold = true
		if string(req.ColdTemplate) != "null" {
			upd.ColdTemplate = new(domain.TemplateRef)
			if err := json.Unmarshal(req.ColdTemplate, upd.ColdTemplate); err != nil {
				return badInput("validation_failed", "coldTemplate: {name, language} or null")
			}
		}
	}
	if req.Mode == nil && !upd.SetCold {
		return badInput("validation_failed", "nothing to change: give mode or coldTemplate")
	}
	r, err := s.engine(ctx).Routing.Set(s.reqContext(ctx), u.ID, upd)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, routingOf(r))
	return nil
}

// cloudWebhookVerify is GET /api/cloud/webhook: Meta's subscription check (hub.mode=subscribe,
// hub.verify_token, hub.challenge): the challenge as the body when the token is one shown at
// connect, else 403.
func (s *Server) cloudWebhookVerify(ctx *fasthttp.RequestCtx) error {
	q := ctx.QueryArgs()
	challenge, err := s.engine(ctx).Cloud.Verify(string(q.Peek("session")), string(q.Peek("hub.mode")),
		string(q.Peek("hub.verify_token")), string(q.Peek("hub.challenge")))
	if err != nil {
		return err
	}
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetBodyString(challenge)
	return nil
}

// cloudWebhook is POST /api/cloud/webhook: Meta's statuses and incoming messages. The
// X-Hub-Signature-256 is checked on the raw body before anything else (401 otherwise, and
// nothing changed); 503 when the number's session is not open here (Meta tries again).
func (s *Server) cloudWebhook(ctx *fasthttp.RequestCtx) error {
	sig := string(ctx.Request.Header.Peek("X-Hub-Signature-256"))
	if err := s.engine(ctx).Cloud.Webhook(ctx.PostBody(), sig); err != nil {
		if errors.Is(err, domain.ErrUnavailable) {
			ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, "5")
		}
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, successJSON{Success: true})
	return nil
}

// byCloudWebhook: the partition of the session the webhook URL names (?session=); without
// one, the partition its other query falls in, whose owner answers as a single node would.
var byCloudWebhook = &partitionOf{"byCloudWebhook", func(s *Server, ctx *fasthttp.RequestCtx) (int, *principal, error) {
	id := strings.TrimSpace(string(ctx.QueryArgs().Peek("session")))
	if id == "" {
		return s.cfg.Cluster.PartitionOf(string(ctx.QueryArgs().Peek("hub.verify_token"))), nil, nil
	}
	p, err := s.recordPartition("session", id)
	return p, nil, err
}}

// byCloudConnect: an admin connecting for a user (body userId) acts on that user's partition;
// anyone else on their own.
var byCloudConnect = &partitionOf{"byCloudConnect", func(s *Server, ctx *fasthttp.RequestCtx) (int, *principal, error) {
	if bodyField(ctx, "userId") != "" {
		return adminOn(bodyUser("userId"))(s, ctx)
	}
	return signedInCaller(s, ctx)
}}
