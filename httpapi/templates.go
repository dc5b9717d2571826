package httpapi

import (
	"strings"

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
}

func toTemplateJSON(v engine.TemplateView) templateJSON {
	return templateJSON{Topic: v.Topic, Text: v.Text, Enabled: v.Enabled, IsDefault: v.IsDefault}
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
	if req.Text == nil && req.Enabled == nil {
		return badInput("validation_failed", "text or enabled is required")
	}
	v, err := s.engine(ctx).Stores.PutTemplate(s.reqContext(ctx), u.ID, strings.TrimSpace(*req.Topic), req.Text, req.Enabled)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, templateSavedJSON{Success: true, Template: toTemplateJSON(v)})
	return nil
}
