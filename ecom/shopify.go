package ecom

import (
	"bytes"
	"strconv"
	"strings"

	json "github.com/goccy/go-json"

	"github.com/gateway/gateway/domain"
)

// shopifyAddress is the part of a Shopify address (shipping, billing, a fulfillment's
// destination, a customer's default address) that messages use.
type shopifyAddress struct {
	FirstName   flexString `json:"first_name"`
	Address1    flexString `json:"address1"`
	City        flexString `json:"city"`
	Phone       flexString `json:"phone"`
	CountryCode flexString `json:"country_code"`
}

type shopifyLine struct {
	Title    flexString `json:"title"`
	Name     flexString `json:"name"`
	Quantity flexInt    `json:"quantity"`
}

// shopifyPayload is the union of the three webhook shapes (order, fulfillment, refund) and of
// the order FetchOrder returns: fields a shape lacks stay zero.
type shopifyPayload struct {
	ID                  flexInt      `json:"id"`
	Name                flexString   `json:"name"`
	OrderNumber         flexInt      `json:"order_number"`
	TotalPrice          flexString   `json:"total_price"`
	Currency            flexString   `json:"currency"`
	Gateway             flexString   `json:"gateway"`
	PaymentGatewayNames []flexString `json:"payment_gateway_names"`
	Phone               flexString   `json:"phone"`
	OrderStatusURL      flexString   `json:"order_status_url"`
	CheckoutToken       flexString   `json:"checkout_token"` // an order: the checkout it came from
	// checkout shape (checkouts/create, checkouts/update)
	Token                flexString `json:"token"`
	AbandonedCheckoutURL flexString `json:"abandoned_checkout_url"`
	CompletedAt          flexString `json:"completed_at"`
	Customer             *struct {
		FirstName      flexString      `json:"first_name"`
		Phone          flexString      `json:"phone"`
		DefaultAddress *shopifyAddress `json:"default_address"`
	} `json:"customer"`
	ShippingAddress *shopifyAddress `json:"shipping_address"`
	BillingAddress  *shopifyAddress `json:"billing_address"`
	LineItems       []shopifyLine   `json:"line_items"`
	Fulfillments    []struct {
		TrackingNumber  flexString `json:"tracking_number"`
		TrackingURL     flexString `json:"tracking_url"`
		TrackingCompany flexString `json:"tracking_company"`
	} `json:"fulfillments"`

	// fulfillment and refund shapes
	OrderID         flexInt         `json:"order_id"`
	TrackingNumber  flexString      `json:"tracking_number"`
	TrackingNumbers []flexString    `json:"tracking_numbers"`
	TrackingURL     flexString      `json:"tracking_url"`
	TrackingURLs    []flexString    `json:"tracking_urls"`
	TrackingCompany flexString      `json:"tracking_company"`
	Destination     *shopifyAddress `json:"destination"`
	RefundLineItems []struct {
		Quantity flexInt     `json:"quantity"`
		LineItem shopifyLine `json:"line_item"`
	} `json:"refund_line_items"`
	Transactions []struct {
		Amount flexString `json:"amount"`
		Kind   flexString `json:"kind"`
		Status flexString `json:"status"`
	} `json:"transactions"`
}

// ParseShopify normalises a Shopify webhook body for the X-Shopify-Topic topic. orders/create,
// orders/paid and orders/cancelled carry an order; fulfillments/create a fulfillment and
// refunds/create a refund, which lack the customer: their Event has NeedsOrder set (fetch the
// order by OrderID, then MergeOrder); checkouts/create and checkouts/update a checkout, read as
// topic checkout_abandoned. Other topics return ErrIgnored; a body that is not an
// order-shaped JSON object returns ErrMalformed.
func ParseShopify(topic string, body []byte) (Event, error) {
	topic = strings.ToLower(strings.TrimSpace(topic))
	if topic == TopicCheckoutCreated || topic == TopicCheckoutUpdated {
		return parseShopifyCheckout(body)
	}
	if !ValidTopic(topic) {
		return Event{}, &detailError{kind: ErrIgnored, detail: "topic " + strconv.Quote(topic) + " sends no message"}
	}
	var p shopifyPayload
	if err := decodeObject(body, &p); err != nil {
		return Event{}, err
	}
	ev := Event{Platform: PlatformShopify, Topic: topic}
	switch topic {
	case TopicOrderFulfilled:
		if p.OrderID <= 0 {
			return Event{}, wrapMalformed("fulfillment without order_id")
		}
		ev.OrderID, ev.FulfillmentID = int64(p.OrderID), int64(p.ID)
		ev.TrackingNumber = firstOf(p.TrackingNumber, p.TrackingNumbers)
		ev.TrackingURL = firstOf(p.TrackingURL, p.TrackingURLs)
		ev.TrackingCompany = string(p.TrackingCompany)
		ev.Items = shopifyItems(p.LineItems)
		var cands []phoneCandidate
		if d := p.Destination; d != nil {
			ev.CustomerName = string(d.FirstName)
			ev.Address, ev.ShippingCity = string(d.Address1), string(d.City)
			cands = append(cands, phoneCandidate{"destination.phone", string(d.Phone), []string{string(d.CountryCode)}})
		}
		ev.Phone, ev.PhoneRaw, ev.SkipReason = pickPhone(cands)
		ev.NeedsOrder = true // a fulfillment never names its order ("#1001.1" is its own name)
	case TopicRefundCreated:
		if p.OrderID <= 0 {
			return Event{}, wrapMalformed("refund without order_id")
		}
		ev.OrderID, ev.RefundID = int64(p.OrderID), int64(p.ID)
		for _, l := range p.RefundLineItems {
			if t := lineTitle(l.LineItem); t != "" {
				ev.Items = append(ev.Items, Item{Title: t, Quantity: int(l.Quantity)})
			}
		}
		var amounts []string
		for _, t := range p.Transactions {
			kind, status := strings.ToLower(string(t.Kind)), strings.ToLower(string(t.Status))
			if (kind == "" || kind == "refund") && status != "failure" && status != "error" {
				amounts = append(amounts, string(t.Amount))
			}
		}
		ev.RefundAmount = sumAmounts(amounts, true)
		ev.NeedsOrder = true
	default:
		if p.ID <= 0 {
			return Event{}, wrapMalformed("order without id")
		}
		fillFromShopifyOrder(&ev, &p)
	}
	if ev.NeedsOrder {
		ev.SkipReason = "" // decided once the order is merged
	}
	return ev, nil
}

// parseShopifyCheckout reads a Checkout (checkouts/create, checkouts/update) as an
// abandoned-checkout event: its token, recovery address and lines, and whether it became an
// order (completed_at).
func parseShopifyCheckout(body []byte) (Event, error) {
	var p shopifyPayload
	if err := decodeObject(body, &p); err != nil {
		return Event{}, err
	}
	if p.Token == "" {
		return Event{}, wrapMalformed("checkout without token")
	}
	ev := Event{Platform: PlatformShopify, Topic: TopicCheckoutAbandoned}
	fillFromShopifyOrder(&ev, &p)
	ev.OrderName, ev.OrderStatusURL = "", ""
	ev.CheckoutToken = string(p.Token)
	ev.RecoveryURL = string(p.AbandonedCheckoutURL)
	ev.Completed = p.CompletedAt != ""
	return ev, nil
}

// MergeOrder completes a fulfillment or refund Event with the order it belongs to, as
// Client.FetchOrder returns it (a Shopify order object, bare or wrapped as {"order": {...}}).
// The order's customer, phone and totals win; the payload's own tracking, items and refund
// amount stay; the payload's destination name and phone are used only when the order has none.
// NeedsOrder is cleared and SkipReason recomputed.
func MergeOrder(ev *Event, order []byte) error {
	var wrapper struct {
		Order json.RawMessage `json:"order"`
	}
	if err := decodeObject(order, &wrapper); err != nil {
		return err
	}
	if o := bytes.TrimSpace(wrapper.Order); len(o) > 0 && o[0] == '{' {
		order = o
	}
	var p shopifyPayload
	if err := decodeObject(order, &p); err != nil {
		return err
	}
	if p.ID <= 0 {
		return wrapMalformed("order without id")
	}
	if ev.OrderID != 0 && ev.OrderID != int64(p.ID) {
		return wrapMalformed("order " + strconv.FormatInt(int64(p.ID), 10) + " is not the event's order " + strconv.FormatInt(ev.OrderID, 10))
	}
	var o Event
	fillFromShopifyOrder(&o, &p)

	ev.OrderID, ev.OrderName = o.OrderID, o.OrderName
	ev.Total, ev.Currency, ev.PaymentMethod, ev.OrderStatusURL = o.Total, o.Currency, o.PaymentMethod, o.OrderStatusURL
	ev.CustomerName = pick(o.CustomerName, ev.CustomerName)
	ev.Address = pick(o.Address, ev.Address)
	ev.ShippingCity = pick(o.ShippingCity, ev.ShippingCity)
	if len(ev.Items) == 0 {
		ev.Items = o.Items
	}
	if ev.TrackingNumber == "" && ev.TrackingURL == "" {
		ev.TrackingNumber, ev.TrackingURL, ev.TrackingCompany = o.TrackingNumber, o.TrackingURL, pick(ev.TrackingCompany, o.TrackingCompany)
	}
	switch {
	case o.Phone != "":
		ev.Phone, ev.PhoneRaw, ev.SkipReason = o.Phone, o.PhoneRaw, ""
	case ev.Phone != "":
		ev.SkipReason = ""
	default:
		ev.PhoneRaw = pick(o.PhoneRaw, ev.PhoneRaw)
		ev.SkipReason = o.SkipReason
	}
	ev.NeedsOrder = false
	return nil
}

// fillFromShopifyOrder maps an order object onto ev (SPEC.md section 6's variable table).
func fillFromShopifyOrder(ev *Event, p *shopifyPayload) {
	ev.OrderID = int64(p.ID)
	ev.OrderName = string(p.Name)
	if ev.OrderName == "" && p.OrderNumber > 0 {
		ev.OrderName = "#" + strconv.FormatInt(int64(p.OrderNumber), 10)
	}
	ev.Total, ev.Currency = string(p.TotalPrice), string(p.Currency)
	ev.OrderStatusURL = string(p.OrderStatusURL)
	ev.CheckoutToken = string(p.CheckoutToken)
	ev.PaymentMethod = string(p.Gateway)
	if ev.PaymentMethod == "" {
		names := make([]string, 0, len(p.PaymentGatewayNames))
		for _, n := range p.PaymentGatewayNames {
			if n != "" {
				names = append(names, string(n))
			}
		}
		ev.PaymentMethod = strings.Join(names, ", ")
	}
	ev.Items = shopifyItems(p.LineItems)
	if len(p.Fulfillments) > 0 {
		f := p.Fulfillments[0]
		ev.TrackingNumber, ev.TrackingURL, ev.TrackingCompany = string(f.TrackingNumber), string(f.TrackingURL), string(f.TrackingCompany)
	}

	ship, bill := p.ShippingAddress, p.BillingAddress
	if ship == nil {
		ship = &shopifyAddress{}
	}
	if bill == nil {
		bill = &shopifyAddress{}
	}
	var custFirst, custPhone, homeCountry flexString
	if c := p.Customer; c != nil {
		custFirst, custPhone = c.FirstName, c.Phone
		if c.DefaultAddress != nil {
			homeCountry = c.DefaultAddress.CountryCode
		}
	}
	ev.CustomerName = pick(string(custFirst), string(ship.FirstName), string(bill.FirstName))
	ev.Address = string(ship.Address1)
	ev.ShippingCity = string(ship.City)

	orderRegions := []string{string(ship.CountryCode), string(bill.CountryCode), string(homeCountry)}
	ev.Phone, ev.PhoneRaw, ev.SkipReason = pickPhone([]phoneCandidate{
		{"customer.phone", string(custPhone), orderRegions},
		{"shipping_address.phone", string(ship.Phone), orderRegions},
		{"billing_address.phone", string(bill.Phone), []string{string(bill.CountryCode), string(ship.CountryCode), string(homeCountry)}},
		{"phone", string(p.Phone), orderRegions},
	})
}

func shopifyItems(lines []shopifyLine) []Item {
	var items []Item
	for _, l := range lines {
		if t := lineTitle(l); t != "" {
			items = append(items, Item{Title: t, Quantity: int(l.Quantity)})
		}
	}
	return items
}

func lineTitle(l shopifyLine) string {
	return pick(string(l.Title), string(l.Name))
}

func firstOf(one flexString, many []flexString) string {
	if one != "" {
		return string(one)
	}
	for _, s := range many {
		if s != "" {
			return string(s)
		}
	}
	return ""
}

// pick returns the first non-empty string.
func pick(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func init() { Register(shopify{}) }

// shopify is the Shopify-type platform. Its headers have the neutral x-ecom-* forms SPEC.md
// names (section 4.5) beside Shopify's own.
type shopify struct{}

func (shopify) Name() domain.Platform { return PlatformShopify }

var shopifyHeaders = WebhookHeaders{
	Topic:      []string{"X-Ecom-Topic", "X-Shopify-Topic"},
	ShopDomain: []string{"X-Ecom-Shop-Domain", "X-Shopify-Shop-Domain"},
	Signature:  []string{"X-Shopify-Hmac-Sha256", "X-Ecom-Hmac-Sha256"},
	DeliveryID: []string{"X-Shopify-Webhook-Id", "X-Ecom-Webhook-Id"},
}

func (shopify) Headers() WebhookHeaders { return shopifyHeaders }

func (shopify) ParseSignature(h []byte) (WebhookSignature, bool) { return ParseWebhookSignature(h) }

func (shopify) IsPing([]byte) bool { return false }

// Topic: the five SPEC topics send; the three carrying an order must name a phone
// (fulfillments and refunds may fetch their order for it).
func (shopify) Topic(topic string) (sends, needsPhone bool) {
	switch topic {
	case TopicOrderCreated, TopicOrderPaid, TopicOrderCancelled:
		return true, true
	case TopicCheckoutCreated, TopicCheckoutUpdated:
		// A checkout without a phone still says it became an order (completed_at): the
		// storeevents actor reads it.
		return true, false
	}
	return ValidTopic(strings.ToLower(topic)), false
}

func (shopify) TopicLabel(topic []byte) string {
	switch string(bytes.TrimSpace(topic)) {
	case "":
		return "none"
	case TopicOrderCreated:
		return TopicOrderCreated
	case TopicOrderPaid:
		return TopicOrderPaid
	case TopicOrderFulfilled:
		return TopicOrderFulfilled
	case TopicOrderCancelled:
		return TopicOrderCancelled
	case TopicRefundCreated:
		return TopicRefundCreated
	case TopicCheckoutCreated:
		return TopicCheckoutCreated
	case TopicCheckoutUpdated:
		return TopicCheckoutUpdated
	}
	return "other"
}

func (shopify) Parse(topic string, body []byte) (Event, error) { return ParseShopify(topic, body) }

func (shopify) Connect() ConnectMethod { return ConnectByToken }

func (shopify) Domain(input string) (string, bool) { return NormalizeShopDomain(input) }
