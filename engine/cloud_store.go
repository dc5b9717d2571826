package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/ecom"
)

// A store topic's Cloud API template (DESIGN.md section 17): the template an order message of
// that topic goes as when it must reach a cold contact over the owner's cloud number, instead
// of the account's cold template.

// coldTemplate is a topic's Cloud API template t for event ev (nil: none), its parameters
// rendered like the text.
func coldTemplate(t *domain.TemplateSend, ev ecom.Event, storeName string) *domain.TemplateSend {
	if t == nil {
		return nil
	}
	cold := *t
	cold.Params = make([]string, len(t.Params))
	for i, param := range t.Params {
		cold.Params[i] = ecom.Render(param, ev, storeName)
	}
	return &cold
}

// PutCloudTemplate names a topic's Cloud API template (nil removes it): one of the owner's
// cloud number's APPROVED templates, whose body takes as many parameters as given (none given:
// one, the rendered text). Parameters are placeholders like the text's ({order_number}...).
func (st *Stores) PutCloudTemplate(ctx context.Context, uid, topic string, t *domain.TemplateSend) (TemplateView, error) {
	if !ecom.ValidTemplateTopic(topic) {
		return TemplateView{}, fmt.Errorf("%w: topic must be one of %s", domain.ErrValidation, strings.Join(ecom.TemplateTopics(), ", "))
	}
	if t != nil {
		for i, param := range t.Params {
			// Render leaves an unknown name as written: Meta would get "{bogus}" in a template
			// it charges for.
			if unknown := ecom.UnknownPlaceholders(param); len(unknown) > 0 {
				return TemplateView{}, fmt.Errorf("%w: cloudTemplate.parameters[%d]: %s is no placeholder (GET /api/client/templates lists them)",
					domain.ErrValidation, i, strings.Join(unknown, ", "))
			}
		}
		ent := st.e.Sessions.idx.cloudOf(uid)
		if ent == nil {
			return TemplateView{}, fmt.Errorf("%w: a topic's cloud template is one of the Cloud API number's; connect one first", domain.ErrNeedsCloud)
		}
		check := *t
		if len(check.Params) == 0 {
			check.Params = []string{"the text"}
		}
		if err := st.e.Routing.fillTemplate(ctx, ent, &check, nil); err != nil {
			return TemplateView{}, err
		}
		t = &domain.TemplateSend{Name: check.Name, Language: check.Language, Params: t.Params}
	}
	return st.changeTemplate(ctx, uid, topic, func(cur *domain.Template) { cur.Cloud = t })
}
