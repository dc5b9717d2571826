package httpapi

import (
	"strings"
	"time"

	"github.com/goccy/go-json"
	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
)

// Message templates per store topic (SPEC.md section 6; DESIGN.md section 5).

type templateJSON struct {
	Topic     string `json:"topic"`
	Text      string `json:"text"`
	Enabled   bool   `json:"enabled"`
	IsDefault bool   `json:"isDefault"`
	// CloudTemplate: the Cloud API template a cold contact gets the topic's message as.
	CloudTemplate *templateSendJSON `json:"cloudTemplate,omitempty"`
	// Delay (order topics) and After (checkout_abandoned): how long the message waits.
	Delay   string       `json:"delay,omitempty"`
	After   string       `json:"after,omitempty"`
	Confirm *confirmJSON `json:"confirm,omitempty"`
}

// confirmJSON is a topic's confirmation question (DESIGN.md section 18).
type confirmJSON struct {
	Question      string `json:"question"`
	Yes           string `json:"yes"`
	No            string `json:"no"`
	FollowUpAfter string `json:"followUpAfter"`
	TagYes        string `json:"tagYes"`
	TagNo         string `json:"tagNo"`
	CancelOnNo    bool   `json:"cancelOnNo"`
}

func toTemplateJSON(v engine.TemplateView) templateJSON {
	j := templateJSON{Topic: v.Topic, Text: v.Text, Enabled: v.Enabled, IsDefault: v.IsDefault}
	if c := v.Cloud; c != nil {
		j.CloudTemplate = &templateSendJSON{Name: c.Name, Language: c.Language, Parameters: c.Params}
	}
	if v.Topic == domain.TopicCheckoutAbandoned {
		j.After = fmtDuration(v.Delay)
	} else {
		j.Delay = fmtDuration(v.Delay) // an order topic's
	}
	if c := v.Confirm; c != nil {
		j.Confirm = &confirmJSON{Question: c.Question, Yes: c.Yes, No: c.No, FollowUpAfter: fmtDuration(c.FollowUpAfter),
			TagYes: c.TagYes, TagNo: c.TagNo, CancelOnNo: c.CancelOnNo}
	}
	return j
}

type templatesJSON struct {
	Success      bool           `json:"success"`
	Templates    []templateJSON `json:"templates"`
	Placeholders []string       `json:"placeholders"`
}

// clientTemplates is GET /api/client/templates: the five topics' templates and the placeholders
// they may use.
func (s *Server) clientTemplates(ctx *fasthttp.RequestCtx, u domain.User) error {
	list, err := s.engine(ctx).Stores.Templates(u.ID)
	if err != nil {
		return err
	}
	out := templatesJSON{Success: true, Templates: make([]templateJSON, 0, len(list)), Placeholders: engine.TemplatePlaceholders()}
	for _, v := range list {
		out.Templates = append(out.Templates, toTemplateJSON(v))
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}

type putTemplateRequest struct {
	Topic   *string         `json:"topic"`
	Text    *string         `json:"text"`
	Enabled *bool           `json:"enabled"`
	Delay   json.RawMessage `json:"delay"`
	After   json.RawMessage `json:"after"`
	// Confirm: an object sets the question (its absent fields take their defaults), null
	// removes it.
	Confirm json.RawMessage `json:"confirm"`
	// CloudTemplate: {name, language, parameters} or null (removes it); absent leaves it.
	CloudTemplate json.RawMessage `json:"cloudTemplate"`
}

type confirmRequest struct {
	Question      string          `json:"question"`
	Yes           string          `json:"yes"`
	No            string          `json:"no"`
	FollowUpAfter json.RawMessage `json:"followUpAfter"`
	TagYes        *string         `json:"tagYes"`
	TagNo         *string         `json:"tagNo"`
	CancelOnNo    bool            `json:"cancelOnNo"`
}

type templateSavedJSON struct {
	Success  bool         `json:"success"`
	Template templateJSON `json:"template"`
}

// putTemplate is PUT /api/client/templates: {topic, text?, enabled?, delay?, after?, confirm?,
// cloudTemplate?}.
// An empty text goes back to the default; an absent field is left as it was; delay or after
// null goes back to the topic's default; confirm null removes the question.
func (s *Server) putTemplate(ctx *fasthttp.RequestCtx, u domain.User) error {
	var req putTemplateRequest
	if err := bind(ctx, &req, need("topic", &req.Topic)); err != nil {
		return err
	}
	p := engine.TemplatePatch{Text: req.Text, Enabled: req.Enabled}
	for _, d := range []struct {
		name string
		raw  json.RawMessage
	}{{"delay", req.Delay}, {"after", req.After}} {
		if len(d.raw) == 0 {
			continue
		}
		if string(d.raw) == "null" {
			reset := time.Duration(-1)
			p.Delay = &reset
			continue
		}
		v, err := parseDuration(d.name, d.raw)
		if err != nil {
			return err
		}
		p.Delay = v
	}
	switch {
	case len(req.Confirm) == 0:
	case string(req.Confirm) == "null":
		p.ClearConfirm = true
	default:
		var c confirmRequest
		if err := json.Unmarshal(req.Confirm, &c); err != nil {
			return badInput("validation_failed", "confirm must be an object {question, yes, no, followUpAfter, tagYes, tagNo, cancelOnNo} or null")
		}
		conf := domain.Confirm{Question: c.Question, Yes: c.Yes, No: c.No, CancelOnNo: c.CancelOnNo,
			TagYes: domain.DefaultTagYes, TagNo: domain.DefaultTagNo, FollowUpAfter: -1}
		if c.TagYes != nil {
			conf.TagYes = *c.TagYes
		}
		if c.TagNo != nil {
			conf.TagNo = *c.TagNo
		}
		f, err := parseDuration("confirm.followUpAfter", c.FollowUpAfter)
		if err != nil {
			return err
		}
		if f != nil {
			conf.FollowUpAfter = *f
		}
		p.Confirm = &conf
	}
	patch := p.Text != nil || p.Enabled != nil || p.Delay != nil || p.Confirm != nil || p.ClearConfirm
	if !patch && len(req.CloudTemplate) == 0 {
		return badInput("validation_failed", "text, enabled, delay, after, confirm or cloudTemplate is required")
	}
	topic, stores := strings.TrimSpace(*req.Topic), s.engine(ctx).Stores
	var v engine.TemplateView
	var err error
	if patch {
		if v, err = stores.PutTemplate(s.reqContext(ctx), u.ID, topic, p); err != nil {
			return err
		}
	}
	if len(req.CloudTemplate) > 0 {
		var t *domain.TemplateSend
		if string(req.CloudTemplate) != "null" {
			var tr templateRequest
			if err := json.Unmarshal(req.CloudTemplate, &tr); err != nil || tr.Name == "" || tr.Language == "" {
				return badInput("validation_failed", "cloudTemplate: {name, language, parameters} or null")
			}
			t = &domain.TemplateSend{Name: strings.TrimSpace(tr.Name), Language: strings.TrimSpace(tr.Language), Params: tr.Parameters}
		}
		if v, err = stores.PutCloudTemplate(s.reqContext(ctx), u.ID, topic, t); err != nil {
			return err
		}
	}
	writeJSON(ctx, fasthttp.StatusOK, templateSavedJSON{Success: true, Template: toTemplateJSON(v)})
	return nil
}
