// Package ecom is the store-platform adapter: the registry of store platforms (Platform,
// platform.go; Shopify-type in shopify.go, WooCommerce-type in woocommerce.go), the
// Shopify-type Admin API client (OAuth code exchange, token check, webhook registration, order
// fetch), webhook and OAuth signature checks, normalisation of each platform's order payloads
// into one Event, and the message templates rendered from an Event.
//
// A new platform is one file: a type implementing Platform and `func init() { Register(...) }`.
// Nothing else in the gateway names a platform.
//
// Besides the registry (written at init), it holds no state between calls, runs no server and
// stores nothing: the caller (the storeevents actor and the HTTP handlers) owns persistence,
// retries and dedupe. It may import only the standard library, domain,
// github.com/goccy/go-json and github.com/nyaruka/phonenumbers; it never imports the gateway's
// core packages.
package ecom

import (
	"errors"
	"strconv"

	"github.com/gateway/gateway/domain"
)

// Errors returned by this package. Callers test them with errors.Is; the wrapped text adds
// detail but never a token or secret.
var (
	// ErrNotFound: the platform answered but has no such order (deleted, or out of the token's
	// reach). Retrying will not help.
	ErrNotFound = errors.New("ecom: not found on the store platform")
	// ErrMalformed: a webhook body or fetched order is not the JSON object this package expects.
	ErrMalformed = errors.New("ecom: malformed payload")
	// ErrIgnored: the event is valid but sends no message (a topic or status outside the five
	// SPEC topics). The wrapped text gives the reason; answer the platform 200 all the same.
	ErrIgnored = errors.New("ecom: event ignored")
)

// The five event topics of SPEC.md section 6, in the order the platform registers them.
const (
	TopicOrderCreated   = "orders/create"
	TopicOrderPaid      = "orders/paid"
	TopicOrderFulfilled = "fulfillments/create"
	TopicOrderCancelled = "orders/cancelled"
	TopicRefundCreated  = "refunds/create"
)

// The built-in platforms' names (Platform.Name, Event.Platform).
const (
	PlatformShopify     domain.Platform = "shopify"
	PlatformWooCommerce domain.Platform = "woocommerce"
)

// TopicCheckoutAbandoned is the store loop's topic of an abandoned checkout (DESIGN.md section
// 18): the Shopify type's checkouts/create and checkouts/update, the WooCommerce type's
// abandoned-cart webhook.
const TopicCheckoutAbandoned = domain.TopicCheckoutAbandoned

// Shopify-type checkout webhook topics, registered beside the five (best effort: a store whose
// token cannot subscribe to them still connects).
const (
	TopicCheckoutCreated = "checkouts/create"
	TopicCheckoutUpdated = "checkouts/update"
)

// Topics returns the five SPEC topics in registration order (a fresh slice each call).
func Topics() []string {
	return []string{TopicOrderCreated, TopicOrderPaid, TopicOrderFulfilled, TopicOrderCancelled, TopicRefundCreated}
}

// TemplateTopics are the topics a user writes a template for: the five, then
// checkout_abandoned (a fresh slice each call).
func TemplateTopics() []string { return append(Topics(), TopicCheckoutAbandoned) }

// ValidTemplateTopic reports whether topic has a template.
func ValidTemplateTopic(topic string) bool {
	return ValidTopic(topic) || topic == TopicCheckoutAbandoned
}

// OrderTopic reports whether messages of topic are about one order (they may be delayed and
// ask for a confirmation), unlike an abandoned checkout.
func OrderTopic(topic string) bool { return ValidTopic(topic) }

// ValidTopic reports whether topic is one of the five SPEC topics.
func ValidTopic(topic string) bool {
	switch topic {
	case TopicOrderCreated, TopicOrderPaid, TopicOrderFulfilled, TopicOrderCancelled, TopicRefundCreated:
		return true
	}
	return false
}

// Item is one order line as templates show it: "Title x Quantity".
type Item struct {
	Title    string `json:"title"`
	Quantity int    `json:"quantity"`
}

// Event is a store event normalised from either platform: everything a template needs and the
// customer's phone. It is a plain value (JSON-tagged) so the caller can keep it in a durable
// inbox.
type Event struct {
	Platform domain.Platform `json:"platform"` // the Platform's name
	Topic    string          `json:"topic"`    // one of TemplateTopics()

	OrderID       int64  `json:"orderId"`                 // the platform's numeric order id
	OrderName     string `json:"orderName"`               // what the shopper sees: "#1001"
	FulfillmentID int64  `json:"fulfillmentId,omitempty"` // fulfillments/create from Shopify
	RefundID      int64  `json:"refundId,omitempty"`      // refunds/create from Shopify

	CustomerName   string `json:"customerName"`             // first name
	Address        string `json:"address,omitempty"`        // shipping address line 1
	ShippingCity   string `json:"shippingCity,omitempty"`   // shipping city
	Total          string `json:"total,omitempty"`          // order total as the platform writes it: "10.00"
	Currency       string `json:"currency,omitempty"`       // ISO 4217
	PaymentMethod  string `json:"paymentMethod,omitempty"`  // gateway or payment method title
	Items          []Item `json:"items,omitempty"`          // lines: order lines, or what shipped/was refunded
	OrderStatusURL string `json:"orderStatusUrl,omitempty"` // the shopper's order page, when the platform gives one

	TrackingNumber  string `json:"trackingNumber,omitempty"`
	TrackingURL     string `json:"trackingUrl,omitempty"`
	TrackingCompany string `json:"trackingCompany,omitempty"`
	RefundAmount    string `json:"refundAmount,omitempty"` // sum of the refund's transactions

	Phone    string `json:"phone"`              // E.164 digits without the plus; "" when no usable number
	PhoneRaw string `json:"phoneRaw,omitempty"` // the number as the shopper typed it

	// CheckoutToken names the checkout an order came from, or the abandoned checkout itself.
	CheckoutToken string `json:"checkoutToken,omitempty"`
	// RecoveryURL is where an abandoned checkout is taken up again ({recovery_url}).
	RecoveryURL string `json:"recoveryUrl,omitempty"`
	// Completed: the checkout became an order (no reminder).
	Completed bool `json:"completed,omitempty"`

	// NeedsOrder: a fulfillment or refund payload lacks the customer or the order's name; fetch
	// the order (Client.FetchOrder) and call MergeOrder before rendering.
	NeedsOrder bool `json:"needsOrder,omitempty"`
	// SkipReason is set when no message can be sent (no usable phone). Final only once
	// NeedsOrder is false.
	SkipReason string `json:"skipReason,omitempty"`
}

// DedupeKey names what the event tells the customer, so a caller can send it once even when the
// platform repeats itself (WooCommerce fires order.updated on every edit of the order; Shopify
// redelivers with the same X-Shopify-Webhook-Id, which is the better key there). Partial
// shipments and refunds keep their own ids and so their own messages.
func (e Event) DedupeKey() string {
	if e.Topic == TopicCheckoutAbandoned {
		return string(e.Platform) + ":" + e.Topic + ":" + e.CheckoutToken
	}
	k := string(e.Platform) + ":" + e.Topic + ":" + strconv.FormatInt(e.OrderID, 10)
	switch {
	case e.FulfillmentID != 0:
		k += ":" + strconv.FormatInt(e.FulfillmentID, 10)
	case e.RefundID != 0:
		k += ":" + strconv.FormatInt(e.RefundID, 10)
	}
	return k
}
