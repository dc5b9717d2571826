package ecom

import (
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/gateway/gateway/domain"
)

// DefaultTemplate returns the message sent for topic when the user has not written one
// (SPEC.md section 6; checkout_abandoned: DESIGN.md section 18), or "" for a topic outside
// TemplateTopics().
func DefaultTemplate(topic string) string {
	switch topic {
	case TopicOrderCreated:
		return "Hi {customer_name}, thank you for your order {order_number} at {store_name}!\n\n" +
			"{items_list}\n\nTotal: {order_total} {currency}\n\nWe will let you know when it ships."
	case TopicOrderPaid:
		return "Hi {customer_name}, we have received your payment of {order_total} {currency} " +
			"for order {order_number}. Thank you for shopping at {store_name}!"
	case TopicOrderFulfilled:
		return "Hi {customer_name}, good news: your order {order_number} from {store_name} " +
			"is on its way!\n\n{tracking_info}"
	case TopicOrderCancelled:
		return "Hi {customer_name}, your order {order_number} at {store_name} has been cancelled. " +
			"If you did not ask for this, just reply to this message."
	case TopicRefundCreated:
		return "Hi {customer_name}, a refund of {refund_amount} {currency} for order {order_number} " +
			"has been processed. It may take a few days to show on your statement. — {store_name}"
	case TopicCheckoutAbandoned:
		return "Hi {customer_name}, you left something in your cart at {store_name}:\n\n{items_list}\n\n" +
			"Complete your order here: {recovery_url}"
	}
	return ""
}

// Placeholders lists every placeholder Render understands, guide form first (SPEC.md
// section 6's table), then the native camelCase names, then extras. Each is written with its
// braces, as a user types it.
func Placeholders() []string {
	return []string{
		// guide form
		"{customer_name}", "{customer_phone}", "{customer_address}", "{order_number}",
		"{order_total}", "{currency}", "{payment_method}", "{items_list}", "{items_count}",
		"{shipping_city}", "{tracking_number}", "{tracking_url}", "{store_name}",
		// native form
		"{customerName}", "{customerPhone}", "{customerAddress}", "{orderNumber}", "{orderId}",
		"{totalPrice}", "{paymentMethod}", "{itemsList}", "{itemsCount}", "{shippingCity}",
		"{trackingNumber}", "{trackingUrl}", "{storeName}",
		// extras, in both forms
		"{order_id}", "{tracking_company}", "{trackingCompany}", "{tracking_info}", "{trackingInfo}",
		"{refund_amount}", "{refundAmount}", "{order_status_url}", "{orderStatusUrl}",
		"{recovery_url}", "{recoveryUrl}",
	}
}

// Render fills tmpl's placeholders from ev. Both placeholder families of SPEC.md section 6
// work ({customerName} and {customer_name}); {{name}} is read as {name} for users used to
// double braces. A placeholder whose value is missing renders empty; an unknown one is left as
// written. Values are inserted once, never read again as placeholders (a customer named
// "{store_name}" stays that). Leading and trailing blank space of the result is trimmed, so an
// empty value at the end of a template leaves no dangling lines.
func Render(tmpl string, ev Event, storeName string) string {
	var b strings.Builder
	b.Grow(len(tmpl) + 64)
	for i := 0; i < len(tmpl); {
		open := strings.IndexByte(tmpl[i:], '{')
		if open < 0 {
			b.WriteString(tmpl[i:])
			break
		}
		open += i
		b.WriteString(tmpl[i:open])
		end := strings.IndexByte(tmpl[open+1:], '}')
		if end < 0 {
			b.WriteString(tmpl[open:])
			break
		}
		end += open + 1
		name := tmpl[open+1 : end]
		if strings.HasPrefix(name, "{") && strings.HasPrefix(tmpl[end:], "}}") {
			if v, ok := placeholderValue(name[1:], &ev, storeName); ok {
				b.WriteString(v)
				i = end + 2
				continue
			}
		}
		if v, ok := placeholderValue(name, &ev, storeName); ok {
			b.WriteString(v)
			i = end + 1
			continue
		}
		b.WriteByte('{') // not a placeholder: keep it and look again from the next byte
		i = open + 1
	}
	return capText(strings.TrimSpace(b.String()))
}

// capText keeps a rendered message within the network's text limit (domain.MaxTextBytes): a
// longer one (a template filled with a platform's very long value) is cut at a character
// boundary and ends with "…", so the customer gets the message rather than none.
func capText(s string) string {
	if len(s) <= domain.MaxTextBytes {
		return s
	}
	const more = "…"
	cut := domain.MaxTextBytes - len(more)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + more
}

// UnknownPlaceholders lists the {names} in tmpl that are no placeholder of Render's (which
// leaves them as written), each once, in order.
func UnknownPlaceholders(tmpl string) []string {
	var unknown []string
	for rest := tmpl; ; {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			return unknown
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return unknown
		}
		name := strings.Trim(rest[open+1:open+end], "{")
		if _, ok := placeholderValue(name, &Event{}, ""); !ok && name != "" && !slices.Contains(unknown, "{"+name+"}") {
			unknown = append(unknown, "{"+name+"}")
		}
		rest = rest[open+end+1:]
	}
}

// placeholderValue is the single table behind Render and Placeholders (a test keeps them in step).
func placeholderValue(name string, ev *Event, storeName string) (string, bool) {
	switch name {
	case "customer_name", "customerName":
		return ev.CustomerName, true
	case "customer_phone", "customerPhone":
		if ev.Phone != "" {
			return "+" + ev.Phone, true
		}
		return ev.PhoneRaw, true
	case "customer_address", "customerAddress":
		return ev.Address, true
	case "order_number", "orderNumber":
		return ev.OrderName, true
	case "order_id", "orderId":
		if ev.OrderID == 0 {
			return "", true
		}
		return strconv.FormatInt(ev.OrderID, 10), true
	case "order_total", "totalPrice":
		return ev.Total, true
	case "currency":
		return ev.Currency, true
	case "payment_method", "paymentMethod":
		return ev.PaymentMethod, true
	case "items_list", "itemsList":
		return itemsList(ev.Items), true
	case "items_count", "itemsCount":
		if len(ev.Items) == 0 {
			return "", true
		}
		return strconv.Itoa(len(ev.Items)), true
	case "shipping_city", "shippingCity":
		return ev.ShippingCity, true
	case "tracking_number", "trackingNumber":
		return ev.TrackingNumber, true
	case "tracking_url", "trackingUrl":
		return ev.TrackingURL, true
	case "tracking_company", "trackingCompany":
		return ev.TrackingCompany, true
	case "tracking_info", "trackingInfo":
		return trackingInfo(ev), true
	case "refund_amount", "refundAmount":
		return ev.RefundAmount, true
	case "order_status_url", "orderStatusUrl":
		return ev.OrderStatusURL, true
	case "store_name", "storeName":
		return storeName, true
	case "recovery_url", "recoveryUrl":
		return ev.RecoveryURL, true
	}
	return "", false
}

// maxItemLines is how many of an order's items {items_list} names: the rest are counted in a
// last line ("… and 4950 more"), so a wholesale order's message stays readable and within the
// network's text limit.
const maxItemLines = 50

// itemsList renders one "title x quantity" line per item, at most maxItemLines of them.
func itemsList(items []Item) string {
	var b strings.Builder
	for i, it := range items {
		if i > 0 {
			b.WriteByte('\n')
		}
		if i == maxItemLines {
			b.WriteString("… and ")
			b.WriteString(strconv.Itoa(len(items) - i))
			b.WriteString(" more")
			break
		}
		b.WriteString(it.Title)
		if it.Quantity > 0 { // an abandoned cart's lines may come without quantities
			b.WriteString(" x ")
			b.WriteString(strconv.Itoa(it.Quantity))
		}
	}
	return b.String()
}

// trackingInfo is the tracking block of the default shipping message: whatever of number,
// carrier and link is known, or "" (WooCommerce stores often have none).
func trackingInfo(ev *Event) string {
	var lines []string
	if ev.TrackingNumber != "" {
		l := "Tracking number: " + ev.TrackingNumber
		if ev.TrackingCompany != "" {
			l += " (" + ev.TrackingCompany + ")"
		}
		lines = append(lines, l)
	}
	if ev.TrackingURL != "" {
		lines = append(lines, "Track it here: "+ev.TrackingURL)
	}
	return strings.Join(lines, "\n")
}
