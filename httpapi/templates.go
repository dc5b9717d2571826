package httpapi

import (
	"strings"

	"github.com/goccy/go-json"

	"github.com/gateway/gateway/domain"

	"github.com/valyala/fasthttp"

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
}

func toTemplateJSON(v engine.TemplateView) templateJSON {
	j := templateJSON{Topic: v.Topic, Text: v.Text, Enabled: v.Enabled, IsDefault: v.IsDefault}
	if c := v.Cloud; c != nil {
		j.CloudTemplate = &templateSendJSON{Name: c.Name, Language: c.Language, Parameters: c.Params}
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
	Topic   *string `json:"topic"`
	Text    *string `json:"text"`
	Enabled *bool   `json:"enabled"`
	// CloudTemplate: {name, language, parameters} or null (removes it); absent leaves it.
	CloudTemplate json.RawMessage `json:"cloudTemplate"`
}

type templateSavedJSON struct {
	Success  bool         `json:"success"`
	Template templateJSON `json:"template"`
}

// putTemplate is PUT /api/client/templates: {topic, text?, enabled?}. An empty text goes back
// to the default; an absent field is left as it was.
func (s *Server) putTemplate(ctx *fasthttp.RequestCtx, u domain.User) error {
	var req putTemplateRequest
	if err := bind(ctx, &req, need("topic", &req.Topic)); err != nil {
		return err
	}
	if req.Text == nil && req.Enabled == nil && len(req.CloudTemplate) == 0 {
		return badInput("validation_failed", "text, enabled or cloudTemplate is required")
	}
	topic, stores := strings.TrimSpace(*req.Topic), s.engine(ctx).Stores
	var v engine.TemplateView
	var err error
	if req.Text != nil || req.Enabled != nil {
		if v, err = stores.PutTemplate(s.reqContext(ctx), u.ID, topic, req.Text, req.Enabled); err != nil {
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
