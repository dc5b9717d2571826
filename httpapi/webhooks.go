package httpapi

// Events out (DESIGN.md section 10): a user's webhook subscriptions and their recent deliveries.

import (
	"cmp"
	"context"
	"strings"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
)

// WebhookService is the events facet as the HTTP layer uses it (*engine.Events).
type WebhookService interface {
	Subscribe(ctx context.Context, uid, url string, types []domain.EventType) (domain.WebhookSubscription, error)
	// SubscribeAs is Subscribe with the deliveries' format ("standard" or "meta").
	SubscribeAs(ctx context.Context, uid, url string, types []domain.EventType, format string) (domain.WebhookSubscription, error)
	List(uid string) []domain.WebhookSubscription
	Delete(ctx context.Context, uid, id string) error
	Deliveries(uid, id string) ([]domain.WebhookAttempt, error)
	Subscription(uid, id string) (domain.WebhookSubscription, error)
	Test(ctx context.Context, uid, subID string) (domain.WebhookDelivery, error)
	Redeliver(ctx context.Context, uid, subID, eventID string) (domain.WebhookDelivery, error)
	Listen(uid string) *engine.Listener
	// Replay calls fn with uid's events after lastID (the journal keeps 24 h); found is false
	// when the journal does not hold lastID.
	Replay(uid, lastID string, fn func(engine.LiveEvent) error) (found bool, err error)
}

// Interface guards.
var _ WebhookService = (*engine.Events)(nil)

// subscriptionJSON is a subscription as the API shows it (the secret only in the create response).
type subscriptionJSON struct {
	ID             string             `json:"id"`
	URL            string             `json:"url"`
	Events         []domain.EventType `json:"events"`
	Format         string             `json:"format"` // standard or meta
	Secret         string             `json:"secret,omitempty"`
	Status         string             `json:"status"` // active, failing, disabled
	CreatedAt      timestamp          `json:"createdAt"`
	FailingSince   *timestamp         `json:"failingSince"`
	DisabledAt     *timestamp         `json:"disabledAt"`
	DisabledReason string             `json:"disabledReason,omitempty"`
}

func toSubscriptionJSON(s domain.WebhookSubscription) subscriptionJSON {
	out := subscriptionJSON{ID: s.ID, URL: s.URL, Events: s.Events, Format: cmp.Or(s.Format, "standard"), Secret: s.Secret, Status: "active",
		CreatedAt: timestamp(s.CreatedAt), DisabledReason: s.DisabledReason}
	if !s.FailingSince.IsZero() {
		out.Status, out.FailingSince = "failing", tsPtr(&s.FailingSince)
	}
	if s.Disabled {
		out.Status, out.DisabledAt = "disabled", tsPtr(&s.DisabledAt)
	}
	return out
}

type webhookCreatedJSON struct {
	Success bool `json:"success"`
	subscriptionJSON
}

type webhookListJSON struct {
	Success  bool               `json:"success"`
	Webhooks []subscriptionJSON `json:"webhooks"`
	Events   []string           `json:"eventTypes"`
}

type createWebhookRequest struct {
	URL    *string   `json:"url"`
	Events *[]string `json:"events"`
	// Format: "standard" (the default) or "meta" (Meta's webhook payloads, DESIGN.md section 20).
	Format string `json:"format"`
}

// listWebhooks is GET /api/client/webhooks: the user's subscriptions, without secrets.
func (s *Server) listWebhooks(ctx *fasthttp.RequestCtx, u domain.User) error {
	subs := s.webhooks(ctx).List(u.ID)
	out := webhookListJSON{Success: true, Webhooks: make([]subscriptionJSON, 0, len(subs))}
	for _, sub := range subs {
		out.Webhooks = append(out.Webhooks, toSubscriptionJSON(sub))
	}
	for _, t := range domain.EventTypes() {
		out.Events = append(out.Events, string(t))
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}

// createWebhook is POST /api/client/webhooks {url, events}: 201 with the secret, shown once.
func (s *Server) createWebhook(ctx *fasthttp.RequestCtx, u domain.User) error {
	var req createWebhookRequest
	if err := bind(ctx, &req, need("url", &req.URL)); err != nil {
		return err
	}
	if req.Events == nil || len(*req.Events) == 0 {
		return missing("events")
	}
	types := make([]domain.EventType, 0, len(*req.Events))
	for _, t := range *req.Events {
		types = append(types, domain.EventType(strings.TrimSpace(t)))
	}
	sub, err := s.webhooks(ctx).SubscribeAs(s.reqContext(ctx), u.ID, strings.TrimSpace(*req.URL), types, strings.TrimSpace(req.Format))
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusCreated, webhookCreatedJSON{Success: true, subscriptionJSON: toSubscriptionJSON(sub)})
	return nil
}

// deleteWebhook is DELETE /api/client/webhooks?id=.
func (s *Server) deleteWebhook(ctx *fasthttp.RequestCtx, u domain.User) error {
	id := string(ctx.QueryArgs().Peek("id"))
	if id == "" {
		return missing("id")
	}
	if err := s.webhooks(ctx).Delete(s.reqContext(ctx), u.ID, id); err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, successJSON{Success: true})
	return nil
}

type webhookAttemptJSON struct {
	ID         string           `json:"id"`
	EventID    string           `json:"eventId"`
	Type       domain.EventType `json:"type"`
	Attempt    int              `json:"attempt"`
	StatusCode int              `json:"statusCode"`
	Delivered  bool             `json:"delivered"`
	Error      string           `json:"error,omitempty"`
	At         timestamp        `json:"at"`
	DurationMs int64            `json:"durationMs"`
}

type webhookDeliveriesJSON struct {
	Success    bool                 `json:"success"`
	Webhook    subscriptionJSON     `json:"webhook"`
	Deliveries []webhookAttemptJSON `json:"deliveries"`
}

// webhookDeliveries is GET /api/client/webhooks/deliveries?id=: the recent attempts, newest first.
func (s *Server) webhookDeliveries(ctx *fasthttp.RequestCtx, u domain.User) error {
	id := string(ctx.QueryArgs().Peek("id"))
	if id == "" {
		return missing("id")
	}
	sub, err := s.webhooks(ctx).Subscription(u.ID, id)
	if err != nil {
		return err
	}
	as, err := s.webhooks(ctx).Deliveries(u.ID, id)
	if err != nil {
		return err
	}
	out := webhookDeliveriesJSON{Success: true, Webhook: toSubscriptionJSON(sub), Deliveries: make([]webhookAttemptJSON, 0, len(as))}
	for _, a := range as {
		out.Deliveries = append(out.Deliveries, webhookAttemptJSON{ID: a.ID, EventID: a.EventID, Type: a.Type, Attempt: a.Attempt,
			StatusCode: a.Status, Delivered: a.Delivered, Error: a.Error, At: timestamp(a.At), DurationMs: a.Duration})
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}

// queuedDeliveryJSON answers a test event or a redelivery: queued, sent by the subscription's
// deliverer in its order (its outcome shows in the deliveries list).
type queuedDeliveryJSON struct {
	Success   bool             `json:"success"`
	ID        string           `json:"id"` // the webhook-id the receiver sees
	EventID   string           `json:"eventId"`
	Type      domain.EventType `json:"type"`
	Queued    bool             `json:"queued"`
	CreatedAt timestamp        `json:"createdAt"`
}

func queuedDelivery(d domain.WebhookDelivery) queuedDeliveryJSON {
	return queuedDeliveryJSON{Success: true, ID: d.ID, EventID: d.EventID, Type: d.Type, Queued: true, CreatedAt: timestamp(d.CreatedAt)}
}

// testWebhook is POST /api/client/webhooks/test?id=: a signed webhook.test event to one
// subscription.
func (s *Server) testWebhook(ctx *fasthttp.RequestCtx, u domain.User) error {
	id := string(ctx.QueryArgs().Peek("id"))
	if id == "" {
		return missing("id")
	}
	d, err := s.webhooks(ctx).Test(s.reqContext(ctx), u.ID, id)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusAccepted, queuedDelivery(d))
	return nil
}

type redeliverRequest struct {
	ID      *string `json:"id"`
	EventID *string `json:"eventId"`
}

// redeliverWebhook is POST /api/client/webhooks/redeliver {id, eventId}: a recent event sent
// again to the subscription.
func (s *Server) redeliverWebhook(ctx *fasthttp.RequestCtx, u domain.User) error {
	var req redeliverRequest
	if err := bind(ctx, &req, need("id", &req.ID), need("eventId", &req.EventID)); err != nil {
		return err
	}
	d, err := s.webhooks(ctx).Redeliver(s.reqContext(ctx), u.ID, strings.TrimSpace(*req.ID), strings.TrimSpace(*req.EventID))
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusAccepted, queuedDelivery(d))
	return nil
}
