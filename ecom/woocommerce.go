package ecom

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"html"
	"net/url"
	"strconv"
	"strings"

	json "github.com/goccy/go-json"

	"github.com/gateway/gateway/domain"
)

// WooCommerce webhook topics (X-WC-Webhook-Topic) that can carry one of the five events.
const (
	WooTopicOrderCreated = "order.created"
	WooTopicOrderUpdated = "order.updated"
)

type wooAddress struct {
	FirstName flexString `json:"first_name"`
	Address1  flexString `json:"address_1"`
	City      flexString `json:"city"`
	Country   flexString `json:"country"`
	Phone     flexString `json:"phone"` // shipping.phone exists since WooCommerce 5.6
}

type wooOrder struct {
	ID                 flexInt    `json:"id"`
	Number             flexString `json:"number"`
	Status             flexString `json:"status"`
	Total              flexString `json:"total"`
	Currency           flexString `json:"currency"`
	PaymentMethod      flexString `json:"payment_method"` // the gateway's id: "cod" is cash on delivery
	PaymentMethodTitle flexString `json:"payment_method_title"`
	Billing            wooAddress `json:"billing"`
	Shipping           wooAddress `json:"shipping"`
	LineItems          []struct {
		Name     flexString `json:"name"`
		Quantity flexInt    `json:"quantity"`
	} `json:"line_items"`
	Refunds []struct {
		Total flexString `json:"total"`
	} `json:"refunds"`
	MetaData []struct {
		Key   flexString      `json:"key"`
		Value json.RawMessage `json:"value"`
	} `json:"meta_data"`
}

// ParseWoo normalises a WooCommerce order.created / order.updated body. The order's status
// picks the topic: pending or on-hold → orders/create (order.created only: an update that
// leaves an order unpaid tells the customer nothing), processing → orders/paid, completed →
// fulfillments/create, cancelled → orders/cancelled, refunded → refunds/create. failed, other
// statuses and other topics return ErrIgnored with the reason; a body that is not a JSON order
// returns ErrMalformed (WooCommerce's creation ping is a form body: see WooPing).
func ParseWoo(topic string, body []byte) (Event, error) {
	topic = strings.ToLower(strings.TrimSpace(topic))
	if topic == TopicCheckoutAbandoned {
		return parseWooAbandonedCart(body)
	}
	if topic != WooTopicOrderCreated && topic != WooTopicOrderUpdated {
		return Event{}, &detailError{kind: ErrIgnored, detail: "topic " + strconv.Quote(topic) + " sends no message"}
	}
	var o wooOrder
	if err := decodeObject(body, &o); err != nil {
		return Event{}, err
	}
	if o.ID <= 0 {
		return Event{}, wrapMalformed("order without id")
	}
	status := strings.ToLower(string(o.Status))
	cod := strings.EqualFold(string(o.PaymentMethod), wooCOD)
	var t string
	switch status {
	case "pending", "on-hold":
		if topic == WooTopicOrderCreated {
			t = TopicOrderCreated
		}
	case "processing":
		// Cash on delivery: WooCommerce puts a new order in processing though nothing is paid
		// (and a confirmation sets it there): placed, not paid.
		switch {
		case !cod:
			t = TopicOrderPaid
		case topic == WooTopicOrderCreated:
			t = TopicOrderCreated
		}
	case "completed":
		t = TopicOrderFulfilled
	case "cancelled":
		t = TopicOrderCancelled
	case "refunded":
		t = TopicRefundCreated
	}
	if t == "" {
		detail := "status " + strconv.Quote(status) + " on " + topic + " sends no message"
		if cod && status == "processing" {
			detail = "a cash-on-delivery order in processing is not paid: no payment message"
		}
		return Event{}, &detailError{kind: ErrIgnored, detail: detail}
	}

	ev := Event{
		Platform:      PlatformWooCommerce,
		Topic:         t,
		OrderID:       int64(o.ID),
		Total:         string(o.Total),
		Currency:      string(o.Currency),
		PaymentMethod: string(o.PaymentMethodTitle),
		CustomerName:  pick(string(o.Billing.FirstName), string(o.Shipping.FirstName)),
		Address:       pick(string(o.Shipping.Address1), string(o.Billing.Address1)),
		ShippingCity:  pick(string(o.Shipping.City), string(o.Billing.City)),
	}
	if n := pick(string(o.Number), strconv.FormatInt(int64(o.ID), 10)); n != "" {
		ev.OrderName = "#" + strings.TrimPrefix(n, "#")
	}
	for _, l := range o.LineItems {
		if l.Name != "" {
			// WordPress stores product names HTML-escaped ("Idea &ndash; Black").
			ev.Items = append(ev.Items, Item{Title: html.UnescapeString(string(l.Name)), Quantity: int(l.Quantity)})
		}
	}
	if t == TopicRefundCreated {
		amounts := make([]string, 0, len(o.Refunds))
		for _, r := range o.Refunds {
			amounts = append(amounts, string(r.Total))
		}
		ev.RefundAmount = sumAmounts(amounts, true)
	}
	if t == TopicOrderFulfilled {
		ev.TrackingNumber, ev.TrackingURL, ev.TrackingCompany = wooTracking(&o)
	}
	bill, ship := string(o.Billing.Country), string(o.Shipping.Country)
	ev.Phone, ev.PhoneRaw, ev.SkipReason = pickPhone([]phoneCandidate{
		{"billing.phone", string(o.Billing.Phone), []string{bill, ship}},
		{"shipping.phone", string(o.Shipping.Phone), []string{ship, bill}},
	})
	return ev, nil
}

// wooCOD is WooCommerce's cash-on-delivery gateway id (payment_method).
const wooCOD = "cod"

// parseWooAbandonedCart reads the abandoned-cart webhook of CartFlows' Cart Abandonment Recovery
// for WooCommerce, the common way WooCommerce stores track abandoned carts (core WooCommerce has
// none): a form body (its http_build_query) with first_name, last_name, phone_number, email,
// checkout_url, product_names (comma-separated), coupon_code, order_status (abandoned, or
// completed once the cart became an order) and cart_total. A JSON object with those fields is
// read the same way.
func parseWooAbandonedCart(body []byte) (Event, error) {
	f, err := formOrJSON(body)
	if err != nil {
		return Event{}, err
	}
	checkout := strings.TrimSpace(f["checkout_url"])
	if checkout == "" {
		return Event{}, wrapMalformed("abandoned cart without checkout_url")
	}
	ev := Event{
		Platform:     PlatformWooCommerce,
		Topic:        TopicCheckoutAbandoned,
		CustomerName: strings.TrimSpace(f["first_name"]),
		Total:        strings.TrimSpace(f["cart_total"]),
		RecoveryURL:  checkout,
		Completed:    strings.EqualFold(strings.TrimSpace(f["order_status"]), "completed"),
	}
	// The checkout link carries the cart's own token (wcf_ac_token); the link is the key.
	sum := sha256.Sum256([]byte(checkout))
	ev.CheckoutToken = hex.EncodeToString(sum[:12])
	// The names come joined with ", " (and a name may hold a comma itself): one line.
	if n := html.UnescapeString(strings.TrimSpace(f["product_names"])); n != "" {
		ev.Items = []Item{{Title: n}}
	}
	ev.Phone, ev.PhoneRaw, ev.SkipReason = pickPhone([]phoneCandidate{{"phone_number", f["phone_number"], billingCountry(f["billing_address"])}})
	return ev, nil
}

// billingCountry reads the country out of the plugin's billing_address, its fields joined with
// ", ": "<company> <address 1>, <state>, <country>, <city>, <postcode>" (the country an ISO 3166
// alpha-2 code, third from the end).
func billingCountry(address string) []string {
	parts := strings.Split(address, ",")
	if len(parts) < 4 {
		return nil
	}
	c := strings.TrimSpace(parts[len(parts)-3])
	if len(c) != 2 || c[0] < 'A' || c[0] > 'Z' || c[1] < 'A' || c[1] > 'Z' {
		return nil
	}
	return []string{c}
}

// FormAsJSON turns a form body (a=1&b=2) into the JSON object of its fields (each field's first
// value), as the receiver keeps a webhook posted as a form.
func FormAsJSON(body []byte) ([]byte, error) {
	q, err := url.ParseQuery(strings.TrimSpace(string(body)))
	if err != nil || len(q) == 0 {
		return nil, wrapMalformed("not a form body")
	}
	m := make(map[string]string, len(q))
	for k, v := range q {
		m[k] = v[0]
	}
	return json.Marshal(m)
}

// formOrJSON reads a flat form body (a=1&b=2) or a flat JSON object into a map.
func formOrJSON(body []byte) (map[string]string, error) {
	b := bytes.TrimSpace(body)
	out := map[string]string{}
	if len(b) > 0 && b[0] == '{' {
		var m map[string]flexString
		if err := json.Unmarshal(b, &m); err != nil {
			return nil, wrapMalformed("not a JSON object")
		}
		for k, v := range m {
			out[k] = string(v)
		}
		return out, nil
	}
	q, err := url.ParseQuery(string(b))
	if err != nil || len(q) == 0 {
		return nil, wrapMalformed("not a form body")
	}
	for k, v := range q {
		out[k] = v[0]
	}
	return out, nil
}

// wooTracking reads the latest shipment of the Shipment Tracking extension, the common way
// WooCommerce stores carry tracking (core WooCommerce has no tracking field).
func wooTracking(o *wooOrder) (number, url, company string) {
	for _, m := range o.MetaData {
		if m.Key != "_wc_shipment_tracking_items" {
			continue
		}
		var items []struct {
			Number         flexString `json:"tracking_number"`
			Provider       flexString `json:"tracking_provider"`
			CustomProvider flexString `json:"custom_tracking_provider"`
			CustomLink     flexString `json:"custom_tracking_link"`
		}
		if json.Unmarshal(m.Value, &items) != nil || len(items) == 0 {
			continue
		}
		last := items[len(items)-1]
		return string(last.Number), string(last.CustomLink), pick(string(last.CustomProvider), string(last.Provider))
	}
	return "", "", ""
}

// WooPing reports whether body is the ping WooCommerce posts when a webhook is created: a form
// body `webhook_id=N`, unsigned. Answer it 200 without checking the signature.
func WooPing(body []byte) bool {
	body = bytes.TrimSpace(body)
	if !bytes.HasPrefix(body, []byte("webhook_id=")) {
		return false
	}
	_, err := strconv.ParseUint(string(body[len("webhook_id="):]), 10, 64)
	return err == nil
}

func init() { Register(wooCommerce{}) }

// wooCommerce is the WooCommerce-type platform: connected by its host name, webhooks made in
// its admin (order.created and order.updated; the order's status picks the message).
type wooCommerce struct{}

func (wooCommerce) Name() domain.Platform { return PlatformWooCommerce }

var wooHeaders = WebhookHeaders{
	Topic:      []string{"X-Wc-Webhook-Topic"},
	ShopDomain: []string{"X-Wc-Webhook-Source"},
	Signature:  []string{"X-Wc-Webhook-Signature"},
	DeliveryID: []string{"X-Wc-Webhook-Delivery-Id"},
}

func (wooCommerce) Headers() WebhookHeaders { return wooHeaders }

func (wooCommerce) ParseSignature(h []byte) (WebhookSignature, bool) {
	return ParseWebhookSignature(h)
}

func (wooCommerce) IsPing(body []byte) bool { return WooPing(body) }

// Topic: both order topics carry the whole order, which must name a phone; an abandoned cart
// (checkout_abandoned, from the webhook address's topic) is read by the actor, completed ones
// without a phone included.
func (wooCommerce) Topic(topic string) (sends, needsPhone bool) {
	if topic == TopicCheckoutAbandoned {
		return true, false
	}
	ok := topic == WooTopicOrderCreated || topic == WooTopicOrderUpdated
	return ok, ok
}

// FormBody implements FormTopics: CartFlows posts an abandoned cart as a form body.
func (wooCommerce) FormBody(topic string) bool { return topic == TopicCheckoutAbandoned }

func (wooCommerce) TopicLabel(topic []byte) string {
	switch string(bytes.TrimSpace(topic)) {
	case "":
		return "none"
	case WooTopicOrderCreated:
		return WooTopicOrderCreated
	case WooTopicOrderUpdated:
		return WooTopicOrderUpdated
	case TopicCheckoutAbandoned:
		return TopicCheckoutAbandoned
	}
	return "other"
}

func (wooCommerce) Parse(topic string, body []byte) (Event, error) { return ParseWoo(topic, body) }

func (wooCommerce) Connect() ConnectMethod { return ConnectByDomain }

func (wooCommerce) Domain(input string) (string, bool) { return NormalizeHost(input) }
