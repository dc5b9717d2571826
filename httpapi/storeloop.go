package httpapi

// The store loop's routes (DESIGN.md section 18): the suppression list (GET/POST/DELETE
// /api/client/optouts and /api/v1/optouts), the user's settings on PATCH /api/client/me (time
// zone, quiet hours, stop words and replies), and what every send takes: sendAt (send later)
// and transactional (send to a phone that opted out, because it asked for this message).

import (
	"strconv"
	"strings"
	"time"

	"github.com/goccy/go-json"
	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
)

// sendOptions are the fields every send takes beside its message (embedded in each request).
type sendOptions struct {
	SendAt        *string `json:"sendAt"`
	Transactional bool    `json:"transactional"`
}

// apply parses the options into r: sendAt an RFC 3339 time (at most 90 days ahead; a past one
// up to an hour is now).
func (o sendOptions) apply(r *engine.SendRequest) error {
	at, err := parseSendAt(o.SendAt)
	if err != nil {
		return err
	}
	r.SendAt, r.Transactional = at, o.Transactional
	return nil
}

// parseSendAt reads sendAt (absent or "": now).
func parseSendAt(v *string) (time.Time, error) {
	if v == nil || strings.TrimSpace(*v) == "" {
		return time.Time{}, nil
	}
	t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(*v))
	if err != nil {
		return time.Time{}, badInput("validation_failed", "sendAt must be an RFC 3339 time (2026-12-24T09:00:00+01:00)")
	}
	return t, nil
}

// ---- the suppression list ----

type optOutJSON struct {
	Phone  string    `json:"phone"`
	At     timestamp `json:"at"`
	Source string    `json:"source"`
	Word   string    `json:"word,omitempty"`
}

type optOutsJSON struct {
	Success bool         `json:"success"`
	OptOuts []optOutJSON `json:"optouts"`
	// StopWords are the words that opt a customer out: the defaults, then the account's own.
	StopWords []string `json:"stopWords"`
}

type optOutsChangedJSON struct {
	Success bool         `json:"success"`
	Added   []optOutJSON `json:"added,omitempty"`
	Removed *int         `json:"removed,omitempty"`
}

type optOutRequest struct {
	Phone  *string  `json:"phone"`
	Phones []string `json:"phones"`
}

// maxOptOutBatch bounds the phones of one POST or DELETE.
const maxOptOutBatch = 1000

// clientOptOuts is GET /api/client/optouts.
func (s *Server) clientOptOuts(ctx *fasthttp.RequestCtx, u domain.User) error {
	return s.listOptOuts(ctx, u.ID)
}

// addClientOptOuts is POST /api/client/optouts {phone} or {phones: [...]}.
func (s *Server) addClientOptOuts(ctx *fasthttp.RequestCtx, u domain.User) error {
	return s.addOptOuts(ctx, u.ID, domain.OptOutDashboard)
}

// deleteClientOptOuts is DELETE /api/client/optouts?phone= (or a body {phones: [...]}).
func (s *Server) deleteClientOptOuts(ctx *fasthttp.RequestCtx, u domain.User) error {
	return s.removeOptOuts(ctx, u.ID)
}

// v1OptOuts is GET /api/v1/optouts (scope read_messages).
func (s *Server) v1OptOuts(ctx *fasthttp.RequestCtx) error {
	key, err := s.apiKey(ctx, engine.ScopeRead)
	if err != nil {
		return err
	}
	return s.listOptOuts(ctx, key.Key.UserID)
}

// v1AddOptOuts is POST /api/v1/optouts (scope send_text: a key that sends manages who it must
// not send to).
func (s *Server) v1AddOptOuts(ctx *fasthttp.RequestCtx) error {
	key, err := s.apiKey(ctx, engine.ScopeText)
	if err != nil {
		return err
	}
	return s.addOptOuts(ctx, key.Key.UserID, domain.OptOutAPI)
}

// v1DeleteOptOuts is DELETE /api/v1/optouts (scope send_text).
func (s *Server) v1DeleteOptOuts(ctx *fasthttp.RequestCtx) error {
	key, err := s.apiKey(ctx, engine.ScopeText)
	if err != nil {
		return err
	}
	return s.removeOptOuts(ctx, key.Key.UserID)
}

func (s *Server) listOptOuts(ctx *fasthttp.RequestCtx, uid string) error {
	e := s.engine(ctx)
	list, err := e.OptOuts.List(uid)
	if err != nil {
		return err
	}
	u, _ := e.Users.Get(uid)
	out := optOutsJSON{Success: true, OptOuts: make([]optOutJSON, len(list)),
		StopWords: append(append([]string{}, domain.DefaultStopWords...), u.Settings.StopWords...)}
	for i, o := range list {
		out.OptOuts[i] = optOutJSON{Phone: o.Phone, At: timestamp(o.At), Source: o.Source, Word: o.Word}
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}

// optOutPhones reads the phones of a POST or DELETE: the body's phone or phones, else the query's
// phone (DELETE ?phone=).
func optOutPhones(ctx *fasthttp.RequestCtx) ([]string, error) {
	var req optOutRequest
	if len(ctx.PostBody()) > 0 {
		if err := bind(ctx, &req); err != nil {
			return nil, err
		}
	} else if p := string(ctx.QueryArgs().Peek("phone")); p != "" {
		req.Phone = &p
	}
	raw := req.Phones
	if req.Phone != nil {
		raw = append(raw, *req.Phone)
	}
	if len(raw) == 0 {
		return nil, missing("phone")
	}
	if len(raw) > maxOptOutBatch {
		return nil, badInput("validation_failed", "at most %d phones at a time", maxOptOutBatch)
	}
	phones := make([]string, len(raw))
	for i := range raw {
		p, err := requirePhone("phones["+strconv.Itoa(i)+"]", &raw[i])
		if err != nil {
			return nil, err
		}
		phones[i] = p
	}
	return phones, nil
}

func (s *Server) addOptOuts(ctx *fasthttp.RequestCtx, uid, source string) error {
	phones, err := optOutPhones(ctx)
	if err != nil {
		return err
	}
	added, err := s.engine(ctx).OptOuts.Add(s.reqContext(ctx), uid, phones, source, "")
	if err != nil {
		return err
	}
	out := optOutsChangedJSON{Success: true, Added: make([]optOutJSON, len(added))}
	for i, o := range added {
		out.Added[i] = optOutJSON{Phone: o.Phone, At: timestamp(o.At), Source: o.Source}
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}

func (s *Server) removeOptOuts(ctx *fasthttp.RequestCtx, uid string) error {
	phones, err := optOutPhones(ctx)
	if err != nil {
		return err
	}
	n, err := s.engine(ctx).OptOuts.Remove(s.reqContext(ctx), uid, phones)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, optOutsChangedJSON{Success: true, Removed: &n})
	return nil
}

// ---- the user's settings ----

type settingsJSON struct {
	Timezone   string             `json:"timezone"`
	QuietHours *domain.QuietHours `json:"quietHours"`
	StopWords  []string           `json:"stopWords"`
	StopReply  string             `json:"stopReply"`
	StartReply string             `json:"startReply"`
	// DefaultStopWords opt a customer out whatever the account adds; the replies' defaults are
	// sent when the account wrote none.
	DefaultStopWords  []string `json:"defaultStopWords"`
	DefaultStopReply  string   `json:"defaultStopReply"`
	DefaultStartReply string   `json:"defaultStartReply"`
}

type meJSON struct {
	userJSON
	Settings settingsJSON `json:"settings"`
}

func meRecord(u domain.User) meJSON {
	st := u.Settings
	tz := st.Timezone
	if tz == "" {
		tz = "UTC"
	}
	return meJSON{userJSON: userRecord(u), Settings: settingsJSON{
		Timezone: tz, QuietHours: st.QuietHours, StopWords: nonNil(st.StopWords), StopReply: st.StopReply, StartReply: st.StartReply,
		DefaultStopWords: domain.DefaultStopWords, DefaultStopReply: domain.DefaultStopReply, DefaultStartReply: domain.DefaultStartReply,
	}}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

type patchMeRequest struct {
	Timezone   *string         `json:"timezone"`
	QuietHours json.RawMessage `json:"quietHours"`
	StopWords  *[]string       `json:"stopWords"`
	StopReply  *string         `json:"stopReply"`
	StartReply *string         `json:"startReply"`
}

// patchMe is PATCH /api/client/me {timezone?, quietHours?: {from, to} | null, stopWords?,
// stopReply?, startReply?}: the signed-in user's store-loop settings.
func (s *Server) patchMe(ctx *fasthttp.RequestCtx, u domain.User) error {
	var req patchMeRequest
	if err := bind(ctx, &req); err != nil {
		return err
	}
	p := engine.SettingsPatch{Timezone: req.Timezone, StopWords: req.StopWords, StopReply: req.StopReply, StartReply: req.StartReply}
	if len(req.QuietHours) > 0 {
		var q *domain.QuietHours
		if string(req.QuietHours) != "null" {
			q = new(domain.QuietHours)
			if err := json.Unmarshal(req.QuietHours, q); err != nil {
				return badInput("validation_failed", "quietHours must be {from: \"21:00\", to: \"08:00\"} or null")
			}
		}
		p.QuietHours = &q
	}
	if p == (engine.SettingsPatch{}) {
		return badInput("validation_failed", "nothing to change: timezone, quietHours, stopWords, stopReply or startReply")
	}
	nu, err := s.engine(ctx).Users.UpdateSettings(s.reqContext(ctx), u.ID, p)
	if err != nil {
		return err
	}
	nu.Role = u.Role // the effective role of this call (admin uids, dev tokens)
	writeJSON(ctx, fasthttp.StatusOK, meRecord(nu))
	return nil
}

// ---- durations in templates: "10m", "2h", "1h30m", "0" (or a number of seconds) ----

// parseDuration reads a JSON duration: a string Go-style ("10m", "2h", "1h30m", "0") or a
// number of seconds. Absent is nil.
func parseDuration(field string, raw json.RawMessage) (*time.Duration, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var d time.Duration
	var secs float64
	var text string
	switch {
	case json.Unmarshal(raw, &secs) == nil:
		d = time.Duration(secs * float64(time.Second))
	case json.Unmarshal(raw, &text) == nil:
		text = strings.TrimSpace(text)
		if text == "0" || text == "" {
			d = 0
			break
		}
		v, err := time.ParseDuration(text)
		if err != nil {
			return nil, badInput("validation_failed", "%s must be a duration such as \"10m\", \"2h\" or \"1h30m\" (or seconds)", field)
		}
		d = v
	default:
		return nil, badInput("validation_failed", "%s must be a duration such as \"10m\" or a number of seconds", field)
	}
	if d < 0 {
		return nil, badInput("validation_failed", "%s must not be negative", field)
	}
	return &d, nil
}

// fmtDuration writes d the way a person does: "2h", "10m", "1h30m", "45s", "0".
func fmtDuration(d time.Duration) string {
	if d <= 0 {
		return "0"
	}
	s := d.Round(time.Second).String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
