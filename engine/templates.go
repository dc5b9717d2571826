package engine

import (
	"context"
	"fmt"
	"strings"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/ecom"
)

// Message templates per store topic (SPEC.md section 6).

// TemplateView is one topic's message template.
type TemplateView struct {
	Topic     string
	Text      string
	Enabled   bool
	IsDefault bool // the user has not written their own text
	// Cloud is the topic's Cloud API template (cloud_store.go; nil: the account's cold one).
	Cloud *domain.TemplateSend
}

// Template implements storeevents.Templates: the user's template for a topic.
func (s *storeService) Template(uid, topic string) (string, bool, error) {
	all, err := s.records.Templates(uid)
	if err != nil {
		return "", false, err
	}
	v := templateView(topic, all)
	return v.Text, v.Enabled, nil
}

func templateView(topic string, all map[string]domain.Template) TemplateView {
	t, ok := all[topic]
	if !ok {
		t.Enabled = true
	}
	v := TemplateView{Topic: topic, Text: t.Text, Enabled: t.Enabled, Cloud: t.Cloud}
	if v.Text == "" {
		v.Text, v.IsDefault = ecom.DefaultTemplate(topic), true
	}
	return v
}

// StoreName implements storeevents.Templates: the shop's name, for {store_name} (the current
// entry's: a reconnect may have renamed it).
func (s *storeService) StoreName(shop string) string {
	if cur := s.byShop(shop); cur != nil {
		return cur.storeName
	}
	return shop
}

// Templates lists the user's five templates, in the platform's topic order.
func (st *Stores) Templates(uid string) ([]TemplateView, error) {
	all, err := st.s.records.Templates(uid)
	if err != nil {
		return nil, fmt.Errorf("%w: read templates: %w", domain.ErrUnavailable, err)
	}
	out := make([]TemplateView, 0, 5)
	for _, t := range ecom.Topics() {
		out = append(out, templateView(t, all))
	}
	return out, nil
}

// PutTemplate changes one topic's template: text (nil = unchanged, "" = back to the default)
// and enabled (nil = unchanged).
func (st *Stores) PutTemplate(ctx context.Context, uid, topic string, text *string, enabled *bool) (TemplateView, error) {
	if !ecom.ValidTopic(topic) {
		return TemplateView{}, fmt.Errorf("%w: topic must be one of %s", domain.ErrValidation, strings.Join(ecom.Topics(), ", "))
	}
	if text != nil && len(*text) > maxTemplateText {
		return TemplateView{}, fmt.Errorf("%w: text must be at most %d bytes", domain.ErrValidation, maxTemplateText)
	}
	return st.changeTemplate(ctx, uid, topic, func(t *domain.Template) {
		if text != nil {
			t.Text = strings.TrimSpace(*text)
		}
		if enabled != nil {
			t.Enabled = *enabled
		}
	})
}

// changeTemplate applies change to one topic's template (a new one starts enabled) and saves
// the user's templates, serialised with every other change.
func (st *Stores) changeTemplate(ctx context.Context, uid, topic string, change func(*domain.Template)) (TemplateView, error) {
	s := st.s
	s.tmplMu.Lock()
	defer s.tmplMu.Unlock()
	all, err := s.records.Templates(uid)
	if err != nil {
		return TemplateView{}, fmt.Errorf("%w: read templates: %w", domain.ErrUnavailable, err)
	}
	if all == nil {
		all = map[string]domain.Template{}
	}
	t, ok := all[topic]
	if !ok {
		t.Enabled = true
	}
	change(&t)
	all[topic] = t
	if err := s.records.PutTemplates(ctx, uid, all); err != nil {
		return TemplateView{}, fmt.Errorf("%w: save template: %w", domain.ErrUnavailable, err)
	}
	return templateView(topic, all), nil
}

// TemplatePlaceholders lists every placeholder a template may use, written as a user types it.
func TemplatePlaceholders() []string { return ecom.Placeholders() }
