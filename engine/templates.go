package engine

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/ecom"
)

// Message templates per store topic (SPEC.md section 6), with the store loop's settings
// (DESIGN.md section 18): an order topic's delay and confirmation question, an abandoned
// checkout's after.

// TemplateView is one topic's message template.
type TemplateView struct {
	Topic     string
	Text      string
	Enabled   bool
	IsDefault bool // the user has not written their own text
	// Cloud is the topic's Cloud API template (cloud_store.go; nil: the account's cold one).
	Cloud *domain.TemplateSend
	// Delay holds the topic's message this long after the event (an order topic's delay, a
	// checkout_abandoned's after; its default when unset).
	Delay time.Duration
	// Confirm is the order topic's confirmation question (nil: none), its defaults filled.
	Confirm *domain.Confirm
}

// template reads the user's template for a topic (the default when they wrote none).
func (s *storeService) template(uid, topic string) (TemplateView, error) {
	all, err := s.records.Templates(uid)
	if err != nil {
		return TemplateView{}, err
	}
	return templateView(topic, all), nil
}

func templateView(topic string, all map[string]domain.Template) TemplateView {
	t, ok := all[topic]
	if !ok {
		t.Enabled = true
	}
	v := TemplateView{Topic: topic, Text: t.Text, Enabled: t.Enabled, Cloud: t.Cloud, Confirm: t.Confirm}
	if v.Text == "" {
		v.Text, v.IsDefault = ecom.DefaultTemplate(topic), true
	}
	switch {
	case t.Delay != nil:
		v.Delay = *t.Delay
	case topic == ecom.TopicCheckoutAbandoned:
		v.Delay = domain.DefaultCheckoutAfter
	}
	return v
}

// storeName is the shop's name, for {store_name} (the current entry's: a reconnect may have
// renamed it).
func (s *storeService) storeName(shop string) string {
	if cur := s.byShop(shop); cur != nil {
		return cur.storeName
	}
	return shop
}

// Templates lists the user's templates: the five SPEC topics in the platform's order, then
// checkout_abandoned.
func (st *Stores) Templates(uid string) ([]TemplateView, error) {
	all, err := st.s.records.Templates(uid)
	if err != nil {
		return nil, fmt.Errorf("%w: read templates: %w", domain.ErrUnavailable, err)
	}
	topics := ecom.TemplateTopics()
	out := make([]TemplateView, 0, len(topics))
	for _, t := range topics {
		out = append(out, templateView(t, all))
	}
	return out, nil
}

// TemplatePatch changes one topic's template; nil fields are unchanged.
type TemplatePatch struct {
	// Text: "" goes back to the default text.
	Text    *string
	Enabled *bool
	// Delay: an order topic's delay or checkout_abandoned's after; a negative value goes back
	// to the default.
	Delay *time.Duration
	// Confirm: the confirmation question (order topics); ClearConfirm removes it.
	Confirm      *domain.Confirm
	ClearConfirm bool
}

// PutTemplate changes one topic's template.
func (st *Stores) PutTemplate(ctx context.Context, uid, topic string, p TemplatePatch) (TemplateView, error) {
	if !ecom.ValidTemplateTopic(topic) {
		return TemplateView{}, fmt.Errorf("%w: topic must be one of %s", domain.ErrValidation, strings.Join(ecom.TemplateTopics(), ", "))
	}
	if p.Text != nil && len(*p.Text) > maxTemplateText {
		return TemplateView{}, fmt.Errorf("%w: text must be at most %d bytes", domain.ErrValidation, maxTemplateText)
	}
	if p.Delay != nil && *p.Delay > domain.MaxTopicDelay {
		return TemplateView{}, fmt.Errorf("%w: delay must be at most 30 days", domain.ErrValidation)
	}
	var confirm *domain.Confirm
	if p.Confirm != nil {
		if !ecom.OrderTopic(topic) || topic == ecom.TopicOrderCancelled || topic == ecom.TopicRefundCreated {
			return TemplateView{}, fmt.Errorf("%w: a confirmation is asked of a new, paid or shipped order (orders/create, orders/paid, fulfillments/create)", domain.ErrValidation)
		}
		c, err := checkConfirm(*p.Confirm)
		if err != nil {
			return TemplateView{}, err
		}
		confirm = &c
	}
	return st.changeTemplate(ctx, uid, topic, func(t *domain.Template) {
		if p.Text != nil {
			t.Text = strings.TrimSpace(*p.Text)
		}
		if p.Enabled != nil {
			t.Enabled = *p.Enabled
		}
		if p.Delay != nil {
			if *p.Delay < 0 {
				t.Delay = nil
			} else {
				d := *p.Delay
				t.Delay = &d
			}
		}
		switch {
		case p.ClearConfirm:
			t.Confirm = nil
		case confirm != nil:
			t.Confirm = confirm
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

// checkConfirm validates a confirmation question and fills its defaults: a cash-on-delivery
// shop that writes only {} gets "Please confirm your order {order_number}" with "Yes, confirm"
// and "No, cancel", and one follow-up after 2 h (a negative FollowUpAfter; 0 is none). The
// tags' defaults are the HTTP layer's (an absent tag, not an empty one).
func checkConfirm(c domain.Confirm) (domain.Confirm, error) {
	c.Question, c.Yes, c.No = strings.TrimSpace(c.Question), strings.TrimSpace(c.Yes), strings.TrimSpace(c.No)
	c.TagYes, c.TagNo = strings.TrimSpace(c.TagYes), strings.TrimSpace(c.TagNo)
	c.Question = orDefault(c.Question, domain.DefaultConfirmQuestion)
	c.Yes = orDefault(c.Yes, domain.DefaultConfirmYes)
	c.No = orDefault(c.No, domain.DefaultConfirmNo)
	for _, f := range []struct{ name, v string }{{"question", c.Question}, {"yes", c.Yes}, {"no", c.No}, {"tagYes", c.TagYes}, {"tagNo", c.TagNo}} {
		if utf8.RuneCountInString(f.v) > domain.ConfirmTextMax || !utf8.ValidString(f.v) {
			return c, fmt.Errorf("%w: confirm.%s must be valid UTF-8 of at most %d characters", domain.ErrValidation, f.name, domain.ConfirmTextMax)
		}
	}
	if strings.EqualFold(c.Yes, c.No) {
		return c, fmt.Errorf("%w: confirm.yes and confirm.no must differ", domain.ErrValidation)
	}
	for _, a := range []string{c.Yes, c.No} {
		if _, stop := domain.IsStopWord(a, nil); stop || domain.IsStartWord(a) || a == "1" || a == "2" {
			return c, fmt.Errorf("%w: %q cannot be an answer (1, 2, STOP and START mean something else)", domain.ErrValidation, a)
		}
	}
	if strings.Contains(c.TagYes, ",") || strings.Contains(c.TagNo, ",") {
		return c, fmt.Errorf("%w: a tag cannot hold a comma", domain.ErrValidation)
	}
	switch {
	case c.FollowUpAfter < 0:
		c.FollowUpAfter = domain.DefaultFollowUpAfter
	case c.FollowUpAfter > domain.ConfirmAnswerWindow:
		return c, fmt.Errorf("%w: confirm.followUpAfter must be at most 7 days", domain.ErrValidation)
	}
	return c, nil
}

// TemplatePlaceholders lists every placeholder a template may use, written as a user types it.
func TemplatePlaceholders() []string { return ecom.Placeholders() }
