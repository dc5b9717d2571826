package httpapi

import (
	"errors"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gateway/gateway/domain"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/engine"
)

// Store integration routes (SPEC.md sections 4.4 and 4.5): connecting a store (OAuth, manual
// token, native webhooks, client store/connect), the store's view, and the webhook receiver.

type oauthInitRequest struct {
	Shop         *string `json:"shop"`
	ClientID     string  `json:"clientId"`
	ClientSecret string  `json:"clientSecret"`
}

type oauthInitJSON struct {
	Success bool   `json:"success"`
	AuthURL string `json:"authUrl"`
	Shop    string `json:"shop"`
}

// oauthInit is POST /api/ecom/oauth-init.
func (s *Server) oauthInit(ctx *fasthttp.RequestCtx, u domain.User) error {
	var req oauthInitRequest
	if err := bind(ctx, &req, need("shop", &req.Shop)); err != nil {
		return err
	}
	authURL, shop, err := s.engine(ctx).Stores.OAuthInit(s.reqContext(ctx), u.ID, *req.Shop, req.ClientID, req.ClientSecret)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, oauthInitJSON{Success: true, AuthURL: authURL, Shop: shop})
	return nil
}

// ecomCallback is GET /api/ecom/callback, where the store platform sends the owner after the
// install. It always redirects: to the success page, or to the error page with a reason code.
func (s *Server) ecomCallback(ctx *fasthttp.RequestCtx) error {
	q, err := url.ParseQuery(string(ctx.URI().QueryString()))
	if err != nil {
		s.redirect(ctx, "/dashboard/connect-store/error?reason="+engine.CallbackInvalidRequest)
		return nil
	}
	shop, err := s.engine(ctx).Stores.OAuthCallback(s.reqContext(ctx), q)
	if err != nil {
		reason := engine.CallbackUnavailable
		var ce *engine.CallbackError
		if errors.As(err, &ce) {
			reason = ce.Reason
		}
		s.ecom.connect("oauth", reason)
		s.reqLog(ctx).Warn("store OAuth callback failed", "reason", reason, "err", err)
		s.redirect(ctx, "/dashboard/connect-store/error?reason="+url.QueryEscape(reason))
		return nil
	}
	s.ecom.connect("oauth", "connected")
	s.redirect(ctx, "/dashboard/connect-store/success?shop="+url.QueryEscape(shop))
	return nil
}

func (s *Server) redirect(ctx *fasthttp.RequestCtx, location string) {
	ctx.Response.Header.Set("Location", location)
	ctx.Response.Header.Set("Cache-Control", "no-store")
	ctx.SetStatusCode(fasthttp.StatusFound)
}

type manualConnectRequest struct {
	Shop          *string `json:"shop"`
	AccessToken   *string `json:"accessToken"`
	WebhookSecret string  `json:"webhookSecret"`
}

type manualConnectJSON struct {
	Success            bool   `json:"success"`
	Message            string `json:"message"`
	Shop               string `json:"shop"`
	WebhooksRegistered int    `json:"webhooksRegistered"`
	ShopifyVerified    bool   `json:"shopifyVerified"`
	WebhooksSkipped    bool   `json:"webhooksSkipped"`
}

// manualConnect is POST /api/ecom/manual-connect.
func (s *Server) manualConnect(ctx *fasthttp.RequestCtx, u domain.User) error {
	var req manualConnectRequest
	if err := bind(ctx, &req, need("shop", &req.Shop), need("accessToken", &req.AccessToken)); err != nil {
		return err
	}
	r, err := s.engine(ctx).Stores.ManualConnect(s.reqContext(ctx), u.ID, *req.Shop, *req.AccessToken, req.WebhookSecret)
	if err != nil {
		s.ecom.connect("manual", errCode(err))
		return err
	}
	s.ecom.connect("manual", "connected")
	msg := "Store " + r.Shop + " connected; all " + strconv.Itoa(r.WebhooksRegistered) + " webhooks are registered."
	switch {
	case r.WebhooksSkipped:
		msg = "Store " + r.Shop + " connected, but no webhook could be registered with this token (" + r.RegisterError +
			"). Create them in the store admin with the address " + r.WebhookURL
	case r.RegisterError != "":
		msg = "Store " + r.Shop + " connected; " + strconv.Itoa(r.WebhooksRegistered) + " of 5 webhooks registered (" + r.RegisterError + ")."
	}
	writeJSON(ctx, fasthttp.StatusOK, manualConnectJSON{
		Success: true, Message: msg, Shop: r.Shop, WebhooksRegistered: r.WebhooksRegistered,
		ShopifyVerified: true, WebhooksSkipped: r.WebhooksSkipped,
	})
	return nil
}

type nativeConnectRequest struct {
	Shop          *string `json:"shop"`
	WebhookSecret string  `json:"webhookSecret"`
}

type nativeConnectJSON struct {
	Success bool   `json:"success"`
	Message string `json:"message"`
	Shop    string `json:"shop"`
}

// nativeConnect is POST /api/ecom/native-connect: the owner makes the webhooks in the store admin.
func (s *Server) nativeConnect(ctx *fasthttp.RequestCtx, u domain.User) error {
	var req nativeConnectRequest
	if err := bind(ctx, &req, need("shop", &req.Shop)); err != nil {
		return err
	}
	shop, hook, err := s.engine(ctx).Stores.NativeConnect(s.reqContext(ctx), u.ID, *req.Shop, req.WebhookSecret)
	if err != nil {
		s.ecom.connect("native", errCode(err))
		return err
	}
	s.ecom.connect("native", "connected")
	msg := "Store " + shop + " connected. In the store admin, create webhooks (JSON) for orders/create, orders/paid, " +
		"fulfillments/create, orders/cancelled and refunds/create with the address " + hook
	if strings.TrimSpace(req.WebhookSecret) == "" {
		msg += ", then save their signing secret here so their signatures are checked."
	} else {
		msg += "; their signatures are checked with the secret you gave."
	}
	writeJSON(ctx, fasthttp.StatusOK, nativeConnectJSON{Success: true, Message: msg, Shop: shop})
	return nil
}

type storeConnectRequest struct {
	Platform      *string `json:"platform"`
	Domain        *string `json:"domain"`
	AccessToken   string  `json:"access_token"`
	WebhookSecret string  `json:"webhookSecret"`
	// ConsumerKey and ConsumerSecret are a WooCommerce-type store's REST API keys (optional):
	// with them a confirmation's answer is written back to the order.
	ConsumerKey    string `json:"consumerKey"`
	ConsumerSecret string `json:"consumerSecret"`
}

// storeConnect is POST /api/client/store/connect.
func (s *Server) storeConnect(ctx *fasthttp.RequestCtx, u domain.User) error {
	var req storeConnectRequest
	if err := bind(ctx, &req, need("platform", &req.Platform), need("domain", &req.Domain)); err != nil {
		return err
	}
	err := s.engine(ctx).Stores.Connect(s.reqContext(ctx), u.ID, *req.Platform, *req.Domain, req.AccessToken, req.WebhookSecret,
		req.ConsumerKey, req.ConsumerSecret)
	if err != nil {
		s.ecom.connect("connect", errCode(err))
		return err
	}
	s.ecom.connect("connect", "connected")
	writeJSON(ctx, fasthttp.StatusOK, successJSON{Success: true})
	return nil
}

type verifyShopifyRequest struct {
	Domain      *string `json:"domain"`
	AccessToken *string `json:"access_token"`
}

type verifyShopifyJSON struct {
	Success  bool   `json:"success"`
	ShopName string `json:"shopName"`
}

// verifyShopify is POST /api/client/store/verify-shopify.
func (s *Server) verifyShopify(ctx *fasthttp.RequestCtx, _ domain.User) error {
	var req verifyShopifyRequest
	if err := bind(ctx, &req, need("domain", &req.Domain), need("access_token", &req.AccessToken)); err != nil {
		return err
	}
	name, err := s.engine(ctx).Stores.VerifyShopify(s.reqContext(ctx), *req.Domain, *req.AccessToken)
	if err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, verifyShopifyJSON{Success: true, ShopName: name})
	return nil
}

type storeEventJSON struct {
	ID          string     `json:"id"`
	Topic       string     `json:"topic"`
	Status      string     `json:"status"`
	Reason      string     `json:"reason,omitempty"`
	WebhookID   string     `json:"webhookId,omitempty"`
	OrderID     int64      `json:"orderId,omitempty"`
	OrderName   string     `json:"orderName,omitempty"`
	Phone       string     `json:"phone,omitempty"`
	MessageID   string     `json:"messageId,omitempty"`
	Attempts    int        `json:"attempts"`
	ReceivedAt  timestamp  `json:"receivedAt"`
	ProcessedAt *timestamp `json:"processedAt,omitempty"`
	// SendAt: its message waits until then (a delay, a checkout's after, quiet hours).
	SendAt *timestamp `json:"sendAt,omitempty"`
}

// storeOrderJSON is an order the store loop keeps (DESIGN.md section 18): its confirmation and
// the messages that waited.
type storeOrderJSON struct {
	OrderID      int64              `json:"orderId"`
	OrderName    string             `json:"orderName,omitempty"`
	Phone        string             `json:"phone,omitempty"`
	Cancelled    bool               `json:"cancelled"`
	Confirmation *confirmationJSON  `json:"confirmation,omitempty"`
	Messages     []orderMessageJSON `json:"messages"`
	UpdatedAt    timestamp          `json:"updatedAt"`
}

type confirmationJSON struct {
	State      string     `json:"state"` // awaiting, confirmed, cancelled
	Via        string     `json:"via"`   // poll, buttons, text
	MessageID  string     `json:"messageId"`
	AskedAt    timestamp  `json:"askedAt"`
	FollowUpAt *timestamp `json:"followUpAt,omitempty"`
	Answer     string     `json:"answer,omitempty"`
	AnsweredBy string     `json:"answeredBy,omitempty"`
	AnswerText string     `json:"answerText,omitempty"`
	AnsweredAt *timestamp `json:"answeredAt,omitempty"`
	// WriteBack: pending, done, failed (WriteError says why) or none (no API access).
	WriteBack  string     `json:"writeBack,omitempty"`
	WriteError string     `json:"writeError,omitempty"`
	WrittenAt  *timestamp `json:"writtenAt,omitempty"`
}

type orderMessageJSON struct {
	Topic     string     `json:"topic"`
	MessageID string     `json:"messageId"`
	SendAt    *timestamp `json:"sendAt,omitempty"`
	Skipped   string     `json:"skipped,omitempty"`
}

func nonZeroTS(t time.Time) *timestamp {
	if t.IsZero() {
		return nil
	}
	return tsPtr(&t)
}

func toStoreOrderJSON(o domain.StoreOrder) storeOrderJSON {
	j := storeOrderJSON{OrderID: o.OrderID, OrderName: o.OrderName, Phone: o.Phone, Cancelled: o.Cancelled,
		Messages: make([]orderMessageJSON, 0, len(o.Messages)), UpdatedAt: timestamp(o.UpdatedAt)}
	for _, m := range o.Messages {
		j.Messages = append(j.Messages, orderMessageJSON{Topic: m.Topic, MessageID: m.MessageID, SendAt: nonZeroTS(m.SendAt), Skipped: m.Skipped})
	}
	if c := o.Confirmation; c != nil {
		j.Confirmation = &confirmationJSON{State: c.State, Via: c.Via, MessageID: c.MessageID, AskedAt: timestamp(c.AskedAt),
			FollowUpAt: nonZeroTS(c.FollowUpAt), Answer: c.Answer, AnsweredBy: c.AnsweredBy, AnswerText: c.AnswerText,
			AnsweredAt: nonZeroTS(c.AnsweredAt), WriteBack: c.WriteBack, WriteError: c.WriteError, WrittenAt: nonZeroTS(c.WrittenAt)}
	}
	return j
}

type storeJSON struct {
	Success            bool            `json:"success"`
	Connected          bool            `json:"connected"`
	Shop               string          `json:"shop,omitempty"`
	ShopName           string          `json:"shopName,omitempty"`
	Platform           domain.Platform `json:"platform,omitempty"`
	Method             string          `json:"method,omitempty"`
	ConnectedAt        *timestamp      `json:"connectedAt,omitempty"`
	WebhookURL         string          `json:"webhookUrl,omitempty"`
	HasWebhookSecret   bool            `json:"hasWebhookSecret"`
	WebhooksRegistered int             `json:"webhooksRegistered"`
	// CheckoutWebhookURL: the address for an abandoned-cart plugin's webhook (WooCommerce type).
	CheckoutWebhookURL string `json:"checkoutWebhookUrl,omitempty"`
	// WriteBack: confirmations' answers can be written back to the orders (API access).
	WriteBack bool             `json:"writeBack"`
	Events    []storeEventJSON `json:"events"`
	Orders    []storeOrderJSON `json:"orders"`
}

// clientStore is GET /api/client/store: the connected store (never its credentials) and its
// recent events; connected false when there is none.
func (s *Server) clientStore(ctx *fasthttp.RequestCtx, u domain.User) error {
	v, err := s.engine(ctx).Stores.Get(u.ID)
	if errors.Is(err, domain.ErrStoreNotFound) {
		writeJSON(ctx, fasthttp.StatusOK, storeJSON{Success: true, Events: []storeEventJSON{}, Orders: []storeOrderJSON{}})
		return nil
	}
	if err != nil {
		return err
	}
	out := storeJSON{
		Success: true, Connected: true, Shop: v.Shop, ShopName: v.ShopName, Platform: v.Platform, Method: v.Method,
		ConnectedAt: tsPtr(&v.ConnectedAt), WebhookURL: v.WebhookURL, HasWebhookSecret: v.HasWebhookSecret,
		WebhooksRegistered: v.WebhooksRegistered, Events: make([]storeEventJSON, 0, len(v.Events)),
		CheckoutWebhookURL: v.CheckoutWebhookURL, WriteBack: v.WriteBack, Orders: make([]storeOrderJSON, 0, len(v.Orders)),
	}
	for _, o := range v.Orders {
		out.Orders = append(out.Orders, toStoreOrderJSON(o))
	}
	for _, r := range v.Events {
		ev := storeEventJSON{
			ID: r.Seq, Topic: r.Topic, Status: r.Status, Reason: r.Reason, WebhookID: r.WebhookID, OrderID: r.OrderID,
			OrderName: r.OrderName, Phone: r.Phone, MessageID: r.MessageID, Attempts: r.Attempts, ReceivedAt: timestamp(r.ReceivedAt),
		}
		if r.Status != domain.StoreEventPending {
			ev.ProcessedAt = tsPtr(&r.ProcessedAt)
		}
		ev.SendAt = nonZeroTS(r.SendAt)
		out.Events = append(out.Events, ev)
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
	return nil
}

// deleteStore is DELETE /api/client/store.
func (s *Server) deleteStore(ctx *fasthttp.RequestCtx, u domain.User) error {
	if err := s.engine(ctx).Stores.Disconnect(s.reqContext(ctx), u.ID); err != nil {
		return err
	}
	writeJSON(ctx, fasthttp.StatusOK, successJSON{Success: true})
	return nil
}

type ecomTestJSON struct {
	Status    string    `json:"status"`
	Message   string    `json:"message"`
	Timestamp timestamp `json:"timestamp"`
}

// ecomTest is GET /api/ecom/test: the store integration's health check.
func (s *Server) ecomTest(ctx *fasthttp.RequestCtx) error {
	writeJSON(ctx, fasthttp.StatusOK, ecomTestJSON{Status: "ok", Message: "store integration is running", Timestamp: timestamp(time.Now())})
	return nil
}

// The webhook answers that carry no reason, written without encoding.
var (
	webhookQueuedBody    = []byte(`{"success":true,"status":"queued"}` + "\n")
	webhookDuplicateBody = []byte(`{"success":true,"status":"duplicate"}` + "\n")
)

type webhookJSON struct {
	Success bool   `json:"success"`
	Status  string `json:"status"`
	Reason  string `json:"reason,omitempty"`
}

// ecomWebhook is POST /api/ecom/webhook, the store platforms' webhook receiver (DESIGN.md
// section 3, flow 3). It answers within a group commit: the event is durable in the store's
// inbox before the 200, and the message is sent afterwards.
func (s *Server) ecomWebhook(ctx *fasthttp.RequestCtx) error {
	args := ctx.QueryArgs()
	w := engine.Webhook{UID: args.Peek("uid"), Shop: args.Peek("shop"), Topic: args.Peek("topic"), Key: args.Peek("key"),
		Header: &ctx.Request.Header, Body: ctx.PostBody()}
	res, err := s.engine(ctx).Stores.AcceptWebhook(s.reqContext(ctx), w)
	if err != nil {
		s.ecom.webhook(res.Topic, errCode(err))
		return err
	}
	s.ecom.webhook(res.Topic, res.Status)
	switch {
	case res.Reason != "":
		writeJSON(ctx, fasthttp.StatusOK, webhookJSON{Success: true, Status: res.Status, Reason: res.Reason})
	case res.Status == engine.WebhookDuplicate:
		writeRaw(ctx, webhookDuplicateBody)
	default:
		writeRaw(ctx, webhookQueuedBody)
	}
	return nil
}

// writeRaw answers 200 with a constant JSON body.
func writeRaw(ctx *fasthttp.RequestCtx, body []byte) {
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.SetBodyRaw(body)
}

func errCode(err error) string {
	_, code := statusOf(err)
	return code
}

// ecomMetrics: webhooks by topic and outcome, store connections by method and outcome, and the
// engine's store counters.
type ecomMetrics struct {
	webhooks, connects *prometheus.CounterVec
	mu                 sync.RWMutex
	byKey              map[[3]string]prometheus.Counter // vec name, label values
}

func newEcomMetrics(reg *prometheus.Registry, stats func() engine.StoreStats) (*ecomMetrics, error) {
	m := &ecomMetrics{
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_store_webhooks_total",
			Help: "Store webhooks by topic and outcome (queued, duplicate, ignored, or an error code such as invalid_signature).",
		}, []string{"topic", "outcome"}),
		connects: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_store_connects_total", Help: "Store connection attempts by method and outcome (connected or an error code).",
		}, []string{"method", "outcome"}),
		byKey: map[[3]string]prometheus.Counter{},
	}
	event := func(outcome string, read func(engine.StoreStats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "gateway_store_events_total", Help: "Store events processed, by outcome.", ConstLabels: prometheus.Labels{"outcome": outcome},
		}, func() float64 { return float64(read(stats())) })
	}
	cs := []prometheus.Collector{
		m.webhooks, m.connects,
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "gateway_store_webhook_signature_failures_total", Help: "Store webhooks refused for a missing or wrong signature.",
		}, func() float64 { return float64(stats().SignatureFailures) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gateway_store_events_pending", Help: "Store events in the durable inbox, not processed yet."},
			func() float64 { return float64(stats().EventsPending) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gateway_stores", Help: "Connected stores."},
			func() float64 { return float64(stats().Stores) }),
		event("sent", func(s engine.StoreStats) int64 { return s.EventsSent }),
		event("skipped", func(s engine.StoreStats) int64 { return s.EventsSkipped }),
		event("failed", func(s engine.StoreStats) int64 { return s.EventsFailed }),
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// webhook counts one webhook's outcome; topic is bounded by the engine (ecom.TopicLabel).
func (m *ecomMetrics) webhook(topic, outcome string) {
	m.counter(m.webhooks, "w", topic, outcome).Inc()
}

// connect counts one store connection attempt.
func (m *ecomMetrics) connect(method, outcome string) {
	m.counter(m.connects, "c", method, outcome).Inc()
}

// counter returns a pre-resolved series, so the hot path does no label hashing.
func (m *ecomMetrics) counter(vec *prometheus.CounterVec, name, a, b string) prometheus.Counter {
	k := [3]string{name, a, b}
	m.mu.RLock()
	c := m.byKey[k]
	m.mu.RUnlock()
	if c == nil {
		c = vec.WithLabelValues(a, b)
		m.mu.Lock()
		m.byKey[k] = c
		m.mu.Unlock()
	}
	return c
}
