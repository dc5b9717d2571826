package domain

import (
	"encoding/json"
	"time"
)

// Store integration (SPEC.md sections 4.4, 4.5 and 6): a connected store, one accepted webhook
// in its durable inbox, an event's outcome, and a user's message template.

// Store connection methods (Store.Method).
const (
	StoreMethodOAuth   = "oauth"
	StoreMethodManual  = "manual"
	StoreMethodNative  = "native"
	StoreMethodConnect = "connect" // POST /api/client/store/connect
)

// Platform names a store platform: the name an ecom.Platform registers under ("shopify",
// "woocommerce").
type Platform string

// Store is a connected store as stored. AccessToken, ClientSecret and WebhookSecret are
// sealed; they are never logged or returned.
type Store struct {
	Shop     string   `json:"shop"`
	Platform Platform `json:"platform"` // a registered ecom.Platform's name
	Method   string   `json:"method"`
	UserID   string   `json:"userId"`
	ShopName string   `json:"shopName,omitempty"`
	// AccessToken is the Admin API token (OAuth, manual, store/connect).
	AccessToken string `json:"accessToken,omitempty"`
	ClientID    string `json:"clientId,omitempty"`
	// ClientSecret is the app secret given to oauth-init: the platform signs the webhooks it
	// registered through the app with it.
	ClientSecret string `json:"clientSecret,omitempty"`
	// AppCredentials: installed with the configured app credentials (--ecom-client-secret
	// signs its webhooks).
	AppCredentials bool `json:"appCredentials,omitempty"`
	// WebhookSecret signs webhooks made in the store admin (native) or WooCommerce's.
	WebhookSecret string `json:"webhookSecret,omitempty"`
	// RestKey and RestSecret are a WooCommerce-type store's REST API consumer key and secret
	// (sealed): a confirmation's answer is written back to the order with them.
	RestKey            string    `json:"restKey,omitempty"`
	RestSecret         string    `json:"restSecret,omitempty"`
	Scope              string    `json:"scope,omitempty"`
	WebhooksRegistered int       `json:"webhooksRegistered"`
	ConnectedAt        time.Time `json:"connectedAt"`
}

// InboxEntry is one accepted webhook: committed before the platform gets its 200, removed when
// its outcome is recorded.
type InboxEntry struct {
	Seq       string   `json:"seq"` // fixed-width, increasing per shop: the processing order
	Shop      string   `json:"shop"`
	UserID    string   `json:"userId"`
	Platform  Platform `json:"platform"`            // a registered ecom.Platform's name
	Topic     string   `json:"topic"`               // as the platform sent it
	WebhookID string   `json:"webhookId,omitempty"` // the platform's delivery id (deduped)
	// MessageID is the outbox id the customer's message gets. It is chosen at acceptance, so an
	// event processed again after a crash finds its message in the outbox instead of sending a
	// second one.
	MessageID  string          `json:"messageId"`
	ReceivedAt time.Time       `json:"receivedAt"`
	Body       json.RawMessage `json:"body"` // last: the inbox splices the body in as it came
}

// Outcomes of a store event (StoreEvent.Status).
const (
	StoreEventPending = "pending" // in the inbox, not processed yet (or waiting for a retry)
	StoreEventSent    = "sent"    // the customer's message was sent
	StoreEventSkipped = "skipped" // nothing to send: no phone, template disabled, topic or status that sends nothing
	StoreEventFailed  = "failed"  // could not be sent, and retrying will not help (or 24 h of retries did not)
)

// RecentStoreEvents is how many processed events a store keeps for GET /api/client/store.
const RecentStoreEvents = 50

// StoreEvent is one event's outcome, as GET /api/client/store lists it.
type StoreEvent struct {
	// N orders the records of a store; the record lives in ring slot N % RecentStoreEvents.
	N           int64     `json:"n"`
	Seq         string    `json:"seq,omitempty"`
	Topic       string    `json:"topic"`
	WebhookID   string    `json:"webhookId,omitempty"`
	OrderID     int64     `json:"orderId,omitempty"`
	OrderName   string    `json:"orderName,omitempty"`
	Phone       string    `json:"phone,omitempty"`
	Status      string    `json:"status"`
	Reason      string    `json:"reason,omitempty"`
	MessageID   string    `json:"messageId,omitempty"`
	Attempts    int       `json:"attempts"`
	ReceivedAt  time.Time `json:"receivedAt"`
	ProcessedAt time.Time `json:"processedAt"`
	// SendAt: the message was accepted for later (a topic's delay, a checkout's after, quiet
	// hours); it goes then unless skipped meanwhile (the record then says skipped and why).
	SendAt time.Time `json:"sendAt,omitempty"`
}

// Template is a user's message template for one topic, as stored.
type Template struct {
	Text    string `json:"text,omitempty"` // "" = the default text
	Enabled bool   `json:"enabled"`
	// Cloud is the Cloud API template the topic's message goes as when it must reach a cold
	// contact over a cloud number (DESIGN.md section 17): its parameters are placeholders,
	// rendered like the text (none: the rendered text is its one parameter). Nil: the
	// account's cold template.
	Cloud *TemplateSend `json:"cloud,omitempty"`
	// Delay holds the topic's message this long (an order topic's delay, checkout_abandoned's
	// after; nil = the topic's default: none, or domain.DefaultCheckoutAfter).
	Delay *time.Duration `json:"delay,omitempty"`
	// Confirm asks the customer to confirm the order with the message (order topics).
	Confirm *Confirm `json:"confirm,omitempty"`
}
