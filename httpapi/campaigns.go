package httpapi

import (
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/gateway/gateway/domain"

	"github.com/goccy/go-json"
	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/engine"
)

// maxDelay is the longest pause between two sends of a bulk campaign (seconds).
const maxDelay = 3600

type bulkRequest struct {
	Numbers   json.RawMessage `json:"numbers"`
	Message   *string         `json:"message"`
	Delay     *float64        `json:"delay"`
	SessionID string          `json:"session_id"`
	Async     bool            `json:"async"`
	// SendAt starts the campaign later (RFC 3339; DESIGN.md section 18).
	SendAt *string `json:"sendAt"`
}

type detailJSON struct {
	Number    string `json:"number"`
	Success   bool   `json:"success"`
	MessageID string `json:"messageId"`
	Error     string `json:"error,omitempty"`
	// Status: sent, failed, or opted_out (the phone is on the suppression list: skipped,
	// nothing charged).
	Status string `json:"status,omitempty"`
}

// bulkResultJSON is SPEC.md section 2.5's result, with the campaign id added.
type bulkResultJSON struct {
	Success        bool         `json:"success"`
	CampaignID     string       `json:"campaign_id"`
	Status         string       `json:"status"`
	TotalRequested int          `json:"total_requested"`
	TotalProcessed int          `json:"total_processed"`
	Successful     int          `json:"successful"`
	Failed         int          `json:"failed"`
	OptedOut       int          `json:"opted_out"`
	Details        []detailJSON `json:"details"`
	Timestamp      timestamp    `json:"timestamp"`
	// SendAt: a campaign accepted for later starts then.
	SendAt *timestamp `json:"sendAt,omitempty"`
}

type campaignJSON struct {
	bulkResultJSON
	Name      string    `json:"name,omitempty"`
	Message   string    `json:"message"`
	Delay     float64   `json:"delay"`
	CreatedAt timestamp `json:"created_at"`
	UpdatedAt timestamp `json:"updated_at"`
}

type bulkAcceptedJSON struct {
	Success        bool       `json:"success"`
	CampaignID     string     `json:"campaign_id"`
	Status         string     `json:"status"`
	TotalRequested int        `json:"total_requested"`
	TotalProcessed int        `json:"total_processed"`
	StatusURL      string     `json:"status_url"`
	SendAt         *timestamp `json:"sendAt,omitempty"`
}

func bulkResult(s domain.Campaign) bulkResultJSON {
	details := make([]detailJSON, len(s.Details))
	for i, d := range s.Details {
		details[i] = detailJSON(d)
	}
	r := bulkResultJSON{
		Success: s.Status != domain.CampaignFailed, CampaignID: s.ID, Status: s.Status,
		TotalRequested: len(s.Numbers), TotalProcessed: s.Cursor, Successful: s.Successful, Failed: s.Failed,
		OptedOut: s.OptedOut, Details: details, Timestamp: timestamp(s.UpdatedAt),
	}
	if !s.StartAt.IsZero() {
		r.SendAt = tsPtr(&s.StartAt)
	}
	return r
}

func campaignView(s domain.Campaign) campaignJSON {
	return campaignJSON{bulkResultJSON: bulkResult(s), Name: s.Name, Message: s.Message, Delay: s.Delay,
		CreatedAt: timestamp(s.CreatedAt), UpdatedAt: timestamp(s.UpdatedAt)}
}

// v1SendBulk is POST /api/v1/messages/send-bulk (scope send_bulk): sync (the result when the
// campaign ends; it goes on if the caller leaves) or async (202 at once).
func (s *Server) v1SendBulk(ctx *fasthttp.RequestCtx) error {
	return s.v1Post(ctx, engine.ScopeBulk, func(key domain.Grant, idem *engine.Idem) error {
		var req bulkRequest
		if err := bind(ctx, &req); err != nil {
			return err
		}
		r, err := s.bulkCampaign(req)
		if err != nil {
			return err
		}
		r.UserID = key.Key.UserID
		if idem != nil {
			r.ID, r.Idem = idem.DerivedCampaign(), idem
		}
		st, err := s.engine(ctx).Campaigns.Start(s.reqContext(ctx), r)
		if err != nil {
			return err
		}
		return s.bulkAnswer(ctx, st, req.Async || req.SendAt != nil) // a campaign for later: answered at once
	}, func(uid string, rec domain.IdemRecord) error {
		// The same body as the first request: it tells whether that one was async.
		var req bulkRequest
		_ = json.Unmarshal(ctx.PostBody(), &req)
		st, err := s.engine(ctx).Campaigns.Replay(uid, rec.CampaignID)
		if err != nil {
			return err
		}
		return s.bulkAnswer(ctx, st, req.Async || req.SendAt != nil)
	})
}

// bulkAnswer writes a bulk send's answer: 202 at once (async), or the result once the campaign
// has ended (it goes on if the caller leaves).
func (s *Server) bulkAnswer(ctx *fasthttp.RequestCtx, st domain.Campaign, async bool) error {
	if async {
		a := bulkAcceptedJSON{
			Success: true, CampaignID: st.ID, Status: st.Status, TotalRequested: len(st.Numbers),
			TotalProcessed: st.Cursor, StatusURL: "/api/v1/campaigns/" + st.ID,
		}
		if !st.StartAt.IsZero() {
			a.SendAt = tsPtr(&st.StartAt)
		}
		writeJSON(ctx, fasthttp.StatusAccepted, a)
		return nil
	}
	st, err := s.engine(ctx).Campaigns.Wait(s.reqContext(ctx), st.ID)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, bulkResult(st))
	return nil
}

// bulkCampaign validates a bulk request.
func (s *Server) bulkCampaign(req bulkRequest) (engine.CampaignRequest, error) {
	var r engine.CampaignRequest
	if len(req.Numbers) == 0 || string(req.Numbers) == "null" {
		return r, missing("numbers")
	}
	var numbers []*string // a null entry is no string either (as a []string it reads as "")
	if err := json.Unmarshal(req.Numbers, &numbers); err != nil || slices.Contains(numbers, nil) {
		return r, badInput("validation_failed", "numbers must be an array of strings")
	}
	r.Numbers = make([]string, len(numbers))
	for i, n := range numbers {
		r.Numbers[i] = *n
	}
	if len(r.Numbers) == 0 {
		return r, badInput("validation_failed", "numbers must not be empty")
	}
	if len(r.Numbers) > s.cfg.BulkMaxRecipients {
		return r, badInput("validation_failed", "numbers has %d entries; at most %d are allowed", len(r.Numbers), s.cfg.BulkMaxRecipients)
	}
	text, err := requireText("message", req.Message)
	if err != nil {
		return r, err
	}
	r.Message = text
	r.Delay = 5
	if req.Delay != nil {
		if *req.Delay < 0 || *req.Delay > maxDelay {
			return r, badInput("validation_failed", "delay must be 0 to %d seconds", maxDelay)
		}
		r.Delay = *req.Delay
	}
	r.SessionID = strings.TrimSpace(req.SessionID)
	if r.SendAt, err = parseSendAt(req.SendAt); err != nil {
		return r, err
	}
	return r, nil
}

func (s *Server) v1Campaign(ctx *fasthttp.RequestCtx) error {
	key, err := s.apiKey(ctx, "")
	if err != nil {
		return err
	}
	id, _ := ctx.UserValue("id").(string)
	st, err := s.engine(ctx).Campaigns.Get(key.Key.UserID, id)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, campaignView(st))
	return nil
}

func (s *Server) v1CancelCampaign(ctx *fasthttp.RequestCtx) error {
	key, err := s.apiKey(ctx, "")
	if err != nil {
		return err
	}
	id, _ := ctx.UserValue("id").(string)
	st, err := s.engine(ctx).Campaigns.Cancel(s.reqContext(ctx), key.Key.UserID, id)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, campaignView(st))
	return nil
}

type campaignListJSON struct {
	Campaigns []campaignJSON `json:"campaigns"`
}

// clientCampaigns is GET /api/client/campaigns: the signed-in user's campaigns, newest first
// (the dashboard's list; details are read one campaign at a time).
func (s *Server) clientCampaigns(ctx *fasthttp.RequestCtx, u domain.User) error {
	list, err := s.engine(ctx).Campaigns.List(u.ID, 100)
	if err != nil {
		return err
	}
	out := campaignListJSON{Campaigns: make([]campaignJSON, len(list))}
	for i, c := range list {
		out.Campaigns[i] = campaignView(c)
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}

// cancelClientCampaign is DELETE /api/client/campaigns?id=: the dashboard's cancel.
func (s *Server) cancelClientCampaign(ctx *fasthttp.RequestCtx, u domain.User) error {
	id := string(ctx.QueryArgs().Peek("id"))
	if id == "" {
		return missing("id")
	}
	st, err := s.engine(ctx).Campaigns.Cancel(s.reqContext(ctx), u.ID, id)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, campaignView(st))
	return nil
}

// Dashboard campaigns: names and per-number {name} values.
const (
	maxCampaignName  = 100
	maxRecipientName = 100
)

type clientCampaignRequest struct {
	Name      *string           `json:"name"`
	Message   *string           `json:"message"`
	Numbers   []json.RawMessage `json:"numbers"`
	Delay     *float64          `json:"delay"`
	SessionID string            `json:"session_id"`
	SendAt    *string           `json:"sendAt"`
}

type recipientJSON struct {
	Phone string `json:"phone"`
	Name  string `json:"name"`
}

// startClientCampaign is POST /api/client/campaigns {name, message, numbers, delay}: an async
// bulk send from the dashboard, named; each number is a string or {phone, name}, and {name} in
// the message becomes that number's name.
func (s *Server) startClientCampaign(ctx *fasthttp.RequestCtx, u domain.User) error {
	var req clientCampaignRequest
	if err := bind(ctx, &req, need("name", &req.Name)); err != nil {
		return err
	}
	name := strings.TrimSpace(*req.Name)
	if len(name) > maxCampaignName || !utf8.ValidString(name) {
		return badInput("validation_failed", "name must be at most %d bytes of UTF-8", maxCampaignName)
	}
	if len(req.Numbers) == 0 {
		return missing("numbers")
	}
	if len(req.Numbers) > s.cfg.BulkMaxRecipients {
		return badInput("validation_failed", "numbers has %d entries; at most %d are allowed", len(req.Numbers), s.cfg.BulkMaxRecipients)
	}
	numbers, names := make([]string, len(req.Numbers)), make([]string, len(req.Numbers))
	named := false
	for i, raw := range req.Numbers {
		var r recipientJSON
		if err := json.Unmarshal(raw, &r.Phone); err != nil {
			if err := json.Unmarshal(raw, &r); err != nil || r.Phone == "" {
				return badInput("validation_failed", "numbers[%d] must be a phone number or {phone, name}", i)
			}
		}
		r.Name = strings.TrimSpace(r.Name)
		if len(r.Name) > maxRecipientName || !utf8.ValidString(r.Name) {
			return badInput("validation_failed", "numbers[%d].name must be at most %d bytes of UTF-8", i, maxRecipientName)
		}
		numbers[i], names[i], named = r.Phone, r.Name, named || r.Name != ""
	}
	body, _ := json.Marshal(numbers)
	r, err := s.bulkCampaign(bulkRequest{Numbers: body, Message: req.Message, Delay: req.Delay, SessionID: req.SessionID, SendAt: req.SendAt})
	if err != nil {
		return err
	}
	r.UserID, r.Name = u.ID, name
	if named {
		r.Names = names
	}
	st, err := s.engine(ctx).Campaigns.Start(s.reqContext(ctx), r)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusCreated, campaignView(st))
	return nil
}

// clientCampaign is GET /api/client/campaigns/details?id=: one of the user's campaigns with
// its per-number results.
func (s *Server) clientCampaign(ctx *fasthttp.RequestCtx, u domain.User) error {
	id := string(ctx.QueryArgs().Peek("id"))
	if id == "" {
		return missing("id")
	}
	st, err := s.engine(ctx).Campaigns.Get(u.ID, id)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, campaignView(st))
	return nil
}
