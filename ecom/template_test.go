package ecom

import (
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gateway/gateway/domain"
)

func sampleEvent() Event {
	return Event{
		Platform:        PlatformShopify,
		Topic:           TopicOrderFulfilled,
		OrderID:         450789469,
		OrderName:       "#1001",
		CustomerName:    "John",
		Address:         "123 Shipping Street",
		ShippingCity:    "Shippington",
		Total:           "10.00",
		Currency:        "USD",
		PaymentMethod:   "visa",
		Items:           []Item{{"Soda", 1}, {"Another Beer", 3}},
		TrackingNumber:  "123456789",
		TrackingURL:     "https://shipping.xyz/track.php?num=123456789",
		TrackingCompany: "Bluedart",
		RefundAmount:    "4.50",
		OrderStatusURL:  "https://shop.example/status/1",
		RecoveryURL:     "https://shop.example/checkouts/ab12/recover",
		Phone:           "15555557447",
		PhoneRaw:        "555-555-SHIP",
	}
}

func TestRenderGuideForm(t *testing.T) {
	tmpl := "{customer_name}|{customer_phone}|{customer_address}|{order_number}|{order_total}|{currency}|" +
		"{payment_method}|{items_count}|{shipping_city}|{tracking_number}|{tracking_url}|{store_name}\n{items_list}"
	want := "John|+15555557447|123 Shipping Street|#1001|10.00|USD|visa|2|Shippington|123456789|" +
		"https://shipping.xyz/track.php?num=123456789|Acme\nSoda x 1\nAnother Beer x 3"
	if got := Render(tmpl, sampleEvent(), "Acme"); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestRenderNativeForm(t *testing.T) {
	tmpl := "{customerName}|{customerPhone}|{customerAddress}|{orderNumber}|{orderId}|{totalPrice}|{currency}|" +
		"{paymentMethod}|{itemsCount}|{shippingCity}|{trackingNumber}|{trackingUrl}|{store_name}|{storeName}|{items_list}"
	want := "John|+15555557447|123 Shipping Street|#1001|450789469|10.00|USD|visa|2|Shippington|123456789|" +
		"https://shipping.xyz/track.php?num=123456789|Acme|Acme|Soda x 1\nAnother Beer x 3"
	if got := Render(tmpl, sampleEvent(), "Acme"); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestRenderEdges(t *testing.T) {
	ev := sampleEvent()
	cases := []struct {
		name, tmpl string
		ev         Event
		want       string
	}{
		{"unknown placeholders kept", "Hi {customer_name}, {coupon} {Customer_Name} {}", ev, "Hi John, {coupon} {Customer_Name} {}"},
		{"unclosed brace kept", "Total {order_total", ev, "Total {order_total"},
		{"brace inside text", "a { b } {customer_name}", ev, "a { b } John"},
		{"double braces", "Hi {{customer_name}}!", ev, "Hi John!"},
		{"double braces around unknown", "{{nope}}", ev, "{{nope}}"},
		{"missing values render empty", "[{tracking_number}][{customer_phone}][{items_count}][{orderId}]", Event{}, "[][][][]"},
		{"raw phone when unusable", "{customer_phone}", Event{PhoneRaw: "n/a"}, "n/a"},
		{"values are not expanded again", "Hi {customer_name}", Event{CustomerName: "{store_name}"}, "Hi {store_name}"},
		{"edges trimmed", "\n  Hi {customer_name}\n{tracking_info}\n", Event{CustomerName: "Ann"}, "Hi Ann"},
		{"no placeholders", "plain text", ev, "plain text"},
		{"unicode around", "¡Hola {customer_name}! 🎉", ev, "¡Hola John! 🎉"},
		{"extras", "{refund_amount}|{refundAmount}|{order_status_url}|{trackingCompany}", ev, "4.50|4.50|https://shop.example/status/1|Bluedart"},
		{"tracking info", "{tracking_info}", ev, "Tracking number: 123456789 (Bluedart)\nTrack it here: https://shipping.xyz/track.php?num=123456789"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Render(c.tmpl, c.ev, "Acme"); got != c.want {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}

func TestPlaceholdersAllRender(t *testing.T) {
	seen := map[string]bool{}
	ev := sampleEvent()
	for _, p := range Placeholders() {
		if seen[p] {
			t.Errorf("%s listed twice", p)
		}
		seen[p] = true
		if !strings.HasPrefix(p, "{") || !strings.HasSuffix(p, "}") {
			t.Errorf("%s: not written with braces", p)
		}
		if got := Render(p, ev, "Acme"); got == p || got == "" {
			t.Errorf("%s renders %q", p, got)
		}
	}
	for _, guide := range []string{"{customer_name}", "{customer_phone}", "{customer_address}", "{order_number}",
		"{order_total}", "{currency}", "{payment_method}", "{items_list}", "{items_count}", "{shipping_city}",
		"{tracking_number}", "{tracking_url}", "{customerName}", "{orderId}", "{totalPrice}", "{trackingNumber}", "{store_name}"} {
		if !seen[guide] {
			t.Errorf("SPEC placeholder %s missing from Placeholders()", guide)
		}
	}
}

func TestDefaultTemplates(t *testing.T) {
	if DefaultTemplate("orders/updated") != "" {
		t.Fatal("default for a non-SPEC topic")
	}
	ev := sampleEvent()
	for _, topic := range Topics() {
		tmpl := DefaultTemplate(topic)
		if tmpl == "" {
			t.Fatalf("%s: no default", topic)
		}
		ev.Topic = topic
		msg := Render(tmpl, ev, "Acme")
		if strings.Contains(msg, "{") || !strings.Contains(msg, "#1001") || !strings.Contains(msg, "John") {
			t.Errorf("%s renders %q", topic, msg)
		}
	}
	want := map[string]string{
		TopicOrderCreated:   "Soda x 1",
		TopicOrderPaid:      "10.00 USD",
		TopicOrderFulfilled: "https://shipping.xyz/track.php?num=123456789",
		TopicOrderCancelled: "cancelled",
		TopicRefundCreated:  "4.50 USD",
	}
	for topic, part := range want {
		if msg := Render(DefaultTemplate(topic), ev, "Acme"); !strings.Contains(msg, part) {
			t.Errorf("%s: %q lacks %q", topic, msg, part)
		}
	}
	// A shipment without tracking (most WooCommerce stores) still reads well.
	noTracking := ev
	noTracking.TrackingNumber, noTracking.TrackingURL, noTracking.TrackingCompany = "", "", ""
	msg := Render(DefaultTemplate(TopicOrderFulfilled), noTracking, "Acme")
	if strings.Contains(msg, "Tracking") || strings.HasSuffix(msg, "\n") {
		t.Errorf("untracked shipment renders %q", msg)
	}
	if len(Topics()) != 5 {
		t.Fatalf("Topics() = %v", Topics())
	}
}

// A wholesale order's {items_list} names its first 50 items and counts the rest, and no
// rendered message is longer than the network takes (domain.MaxTextBytes).
func TestRenderStaysWithinTheTextLimit(t *testing.T) {
	items := make([]Item, 5000)
	for i := range items {
		items[i] = Item{Title: "Widget " + strconv.Itoa(i+1), Quantity: 1}
	}
	got := Render("Items:\n{items_list}\nThanks!", Event{Items: items}, "S")
	lines := strings.Split(got, "\n")
	if len(lines) != 53 || lines[50] != "Widget 50 x 1" || lines[51] != "… and 4950 more" || lines[52] != "Thanks!" {
		t.Fatalf("a 5,000-item order rendered %d lines: %q … %q", len(lines), lines[:2], lines[max(0, len(lines)-3):])
	}
	long := Render("{customer_address} é", Event{Address: strings.Repeat("é", domain.MaxTextBytes)}, "S")
	if len(long) > domain.MaxTextBytes || !utf8.ValidString(long) || !strings.HasSuffix(long, "…") {
		t.Fatalf("a rendered message of %d bytes (valid UTF-8 %v), want at most %d ending in …", len(long), utf8.ValidString(long), domain.MaxTextBytes)
	}
}

func TestUnknownPlaceholders(t *testing.T) {
	got := UnknownPlaceholders("{customer_name} {bogus} {{order_number}} {bogus} {nope} {} {open")
	if !slices.Equal(got, []string{"{bogus}", "{nope}"}) {
		t.Fatalf("unknown placeholders %q", got)
	}
	if got := UnknownPlaceholders("Hi {customerName}, #{order_number}"); got != nil {
		t.Fatalf("known ones reported unknown: %q", got)
	}
}
