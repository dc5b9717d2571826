package httpapi

import (
	"errors"
	"strings"

	"github.com/gateway/gateway/domain"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/internal/jsonenc"
)

// keyJSON is an API key record (SPEC.md section 2.1). UserID is omitted in the client view;
// RawKey appears only in the create response; the counters only in list responses.
type keyJSON struct {
	ID         string     `json:"id"`
	UserID     string     `json:"userId,omitempty"`
	ClientName string     `json:"clientName"`
	Name       string     `json:"name"`
	MaskedKey  string     `json:"maskedKey"`
	RawKey     string     `json:"rawKey,omitempty"`
	Status     string     `json:"status"`
	CreatedAt  timestamp  `json:"createdAt"`
	ExpiresAt  *timestamp `json:"expiresAt"`
	Scopes     []string   `json:"scopes"`
	RateLimit  *int64     `json:"rate_limit,omitempty"`
	Plan       string     `json:"plan,omitempty"`
	APICalls   *int64     `json:"api_calls,omitempty"`
}

func keyRecord(v engine.KeyView, withOwner, withCounters bool) keyJSON {
	k := &v.Key
	j := keyJSON{
		ID: k.ID, ClientName: v.ClientName, Name: k.Name, MaskedKey: engine.KeyPrefix + "***" + k.Last4,
		Status: k.Status, CreatedAt: timestamp(k.CreatedAt), ExpiresAt: tsPtr(k.ExpiresAt), Scopes: k.Scopes,
	}
	if withOwner {
		j.UserID = k.UserID
	}
	if withCounters {
		limit, calls := v.Limit, v.APICalls
		j.RateLimit, j.Plan, j.APICalls = &limit, v.Plan, &calls
	}
	return j
}

func keyList(views []engine.KeyView, withOwner bool) []keyJSON {
	out := make([]keyJSON, len(views))
	for i, v := range views {
		out[i] = keyRecord(v, withOwner, true)
	}
	return out
}

func (s *Server) listKeys(ctx *fasthttp.RequestCtx, _ domain.User) error {
	list := func() ([]engine.KeyView, error) { return s.engine(ctx).Keys.List("") }
	if s.cfg.Cluster != nil {
		list = s.cfg.Cluster.Records().Keys
	}
	views, err := list()
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, keyList(views, true))
	return nil
}

func (s *Server) clientKeys(ctx *fasthttp.RequestCtx, u domain.User) error {
	views, err := s.engine(ctx).Keys.List(u.ID)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, keyList(views, false))
	return nil
}

type createKeyRequest struct {
	UserID    *string  `json:"userId"`
	Name      *string  `json:"name"`
	ExpiresAt *string  `json:"expiresAt"`
	Scopes    []string `json:"scopes"`
}

func (s *Server) createKey(ctx *fasthttp.RequestCtx, _ domain.User) error {
	var req createKeyRequest
	if err := bind(ctx, &req, need("userId", &req.UserID), need("name", &req.Name)); err != nil {
		return err
	}
	kr := engine.KeyRequest{UserID: *req.UserID, Name: strings.TrimSpace(*req.Name), Scopes: req.Scopes}
	if req.ExpiresAt != nil && *req.ExpiresAt != "" {
		t, err := parseExpiry(*req.ExpiresAt)
		if err != nil {
			return err
		}
		kr.ExpiresAt = &t
	}
	if req.Scopes != nil && len(req.Scopes) == 0 {
		return badInput("validation_failed", "scopes must not be empty (any of %s)", strings.Join(engine.AllScopes, ", "))
	}
	view, raw, err := s.engine(ctx).Keys.Create(s.reqContext(ctx), kr)
	if err != nil {
		return err
	}
	out := keyRecord(view, true, false)
	out.RawKey = raw
	writeJSON(ctx, fasthttp.StatusCreated, out)
	return nil
}

type updateKeyRequest struct {
	ID     *string `json:"id"`
	Name   *string `json:"name"`
	Status *string `json:"status"`
}

type successJSON struct {
	Success bool `json:"success"`
}

func (s *Server) updateKey(ctx *fasthttp.RequestCtx, _ domain.User) error {
	var req updateKeyRequest
	if err := bind(ctx, &req, need("id", &req.ID)); err != nil {
		return err
	}
	if req.Name == nil && req.Status == nil {
		return badInput("validation_failed", "nothing to change: send name and/or status")
	}
	if req.Name != nil {
		n := strings.TrimSpace(*req.Name)
		req.Name = &n
	}
	if err := s.engine(ctx).Keys.Update(s.reqContext(ctx), *req.ID, req.Name, req.Status); err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, successJSON{Success: true})
	return nil
}

func (s *Server) deleteKey(ctx *fasthttp.RequestCtx, _ domain.User) error {
	id := string(ctx.QueryArgs().Peek("id"))
	if id == "" {
		return missing("id")
	}
	if err := s.engine(ctx).Keys.Delete(s.reqContext(ctx), id); err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, successJSON{Success: true})
	return nil
}

type validateRequest struct {
	RawKey *string `json:"rawKey"`
}

type validateJSON struct {
	Valid      bool       `json:"valid"`
	ID         string     `json:"id,omitempty"`
	Name       string     `json:"name,omitempty"`
	UserID     string     `json:"userId,omitempty"`
	ClientName string     `json:"clientName,omitempty"`
	CreatedAt  *timestamp `json:"createdAt,omitempty"`
	ExpiresAt  *timestamp `json:"expiresAt"`
	Scopes     []string   `json:"scopes,omitempty"`
	Error      string     `json:"error,omitempty"`
}

// validate answers SPEC.md's own shapes: {valid: true, ...} or 401 {valid: false, error}.
func (s *Server) validate(ctx *fasthttp.RequestCtx) error {
	raw, err := decodeValidate(ctx)
	if err != nil {
		return err
	}
	answer, err := s.engine(ctx).Keys.ValidAnswer(unsafeBytes(raw), appendValid)
	if err != nil {
		if !errors.Is(err, domain.ErrUnknownKey) && !errors.Is(err, domain.ErrKeyRevoked) && !errors.Is(err, domain.ErrKeyExpired) {
			return err
		}
		writeJSON(ctx, fasthttp.StatusUnauthorized, invalidKeyJSON{Valid: false, Error: err.Error()})
		return nil
	}
	// The engine keeps the answer with the key and gives it again while the key and its
	// owner's profile are unchanged: the route's answer is rendered once per key, not per call.
	// It is never modified (ValidAnswer's contract), so the response points at it, as bare's
	// does at its own (SetBodyRaw: no body buffer from fasthttp's pool, no copy).
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.SetBodyRaw(answer)
	return nil
}

// appendValid appends a valid key's answer: validateJSON as writeJSON writes it, by hand.
func appendValid(b []byte, v *engine.KeyView) []byte {
	k := &v.Key
	b = append(b, `{"valid":true`...)
	b = jsonenc.AppendField(b, `,"id":`, k.ID)
	b = jsonenc.AppendField(b, `,"name":`, k.Name)
	b = jsonenc.AppendField(b, `,"userId":`, k.UserID)
	b = jsonenc.AppendField(b, `,"clientName":`, v.ClientName)
	b = appendTimestamp(append(b, `,"createdAt":`...), k.CreatedAt)
	if k.ExpiresAt == nil {
		b = append(b, `,"expiresAt":null`...)
	} else {
		b = appendTimestamp(append(b, `,"expiresAt":`...), *k.ExpiresAt)
	}
	if len(k.Scopes) > 0 {
		b = append(b, `,"scopes":[`...)
		for i, sc := range k.Scopes {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonenc.AppendString(b, sc)
		}
		b = append(b, ']')
	}
	return append(b, "}\n"...)
}

type invalidKeyJSON struct {
	Valid bool   `json:"valid"`
	Error string `json:"error"`
}

type accountJSON struct {
	KeyID          string    `json:"keyId"`
	Name           string    `json:"name"`
	UserID         string    `json:"userId"`
	Scopes         []string  `json:"scopes"`
	Plan           string    `json:"plan"`
	RateLimit      int64     `json:"rate_limit"`
	RemainingToday *int64    `json:"remaining_today"`
	Reset          timestamp `json:"reset"`
	APICalls       int64     `json:"api_calls"`
	MessagesSent   int64     `json:"messagesSent"`
	MonthlyLimit   int64     `json:"monthly_limit"`
	RemainingMonth *int64    `json:"remaining_month"`
}

// account is GET /api/v1/account: the calling key's own view. It counts like every v1 call.
// remaining_today is null for a plan without a daily cap.
func (s *Server) account(ctx *fasthttp.RequestCtx) error {
	r, err := s.apiKey(ctx, "")
	if err != nil {
		return err
	}
	a := accountOf(r)
	acct, err := s.engine(ctx).Messages.Allowance(s.reqContext(ctx), r.Key.UserID)
	if err != nil {
		return err
	}
	a.MessagesSent, a.MonthlyLimit = acct.Sent, acct.Limit
	if acct.Limit > 0 {
		rem := acct.Remaining
		a.RemainingMonth = &rem
	}
	writeJSON(ctx, fasthttp.StatusOK, a)
	return nil
}

func accountOf(r domain.Grant) accountJSON {
	a := accountJSON{
		KeyID: r.Key.ID, Name: r.Key.Name, UserID: r.Key.UserID, Scopes: r.Key.Scopes, Plan: r.Plan,
		RateLimit: r.Limit, Reset: timestamp(r.Reset), APICalls: r.APICalls,
	}
	if r.Limit > 0 {
		rem := r.Remaining
		a.RemainingToday = &rem
	}
	return a
}
