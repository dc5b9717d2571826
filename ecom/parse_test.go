package ecom

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	json "github.com/goccy/go-json"

	"github.com/gateway/gateway/domain"
)

func fixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// edited returns the fixture with edit applied to its decoded JSON object.
func edited(t *testing.T, name string, edit func(m map[string]any)) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(fixture(t, name), &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func obj(m map[string]any, key string) map[string]any { return m[key].(map[string]any) }

func TestParseShopifyOrderFixture(t *testing.T) {
	body := fixture(t, "shopify/order.json")
	for _, topic := range []string{TopicOrderCreated, TopicOrderPaid, TopicOrderCancelled} {
		t.Run(topic, func(t *testing.T) {
			ev, err := ParseShopify(topic, body)
			if err != nil {
				t.Fatal(err)
			}
			want := Event{
				Platform:      PlatformShopify,
				Topic:         topic,
				OrderID:       123456,
				OrderName:     "#9999",
				CustomerName:  "John",
				Address:       "123 Shipping Street",
				ShippingCity:  "Shippington",
				Total:         "10.00",
				Currency:      "USD",
				PaymentMethod: "visa, bogus", // gateway is null: payment_gateway_names
				Items:         []Item{{"Soda", 1}, {"Another Beer For Good Times", 1}},
				// customer.phone is absent: shipping_address.phone, vanity letters read by
				// libphonenumber in the shipping country (US).
				Phone:    "15555557447",
				PhoneRaw: "555-555-SHIP",
			}
			if !reflect.DeepEqual(ev, want) {
				t.Fatalf("event\n got %+v\nwant %+v", ev, want)
			}
		})
	}
}

func TestParseShopifyPhoneOrder(t *testing.T) {
	cases := []struct {
		name      string
		edit      func(m map[string]any)
		wantPhone string
		wantRaw   string
		wantSkip  bool
	}{
		{"customer.phone first", func(m map[string]any) {
			obj(m, "customer")["phone"] = "+44 20 7946 0958"
		}, "442079460958", "+44 20 7946 0958", false},
		{"billing when shipping has none", func(m map[string]any) {
			obj(m, "shipping_address")["phone"] = nil
		}, "15555552455", "555-555-BILL", false},
		{"order phone last", func(m map[string]any) {
			obj(m, "shipping_address")["phone"] = ""
			obj(m, "billing_address")["phone"] = nil
			m["phone"] = "(555) 555-5555"
		}, "15555555555", "(555) 555-5555", false},
		{"unusable shipping phone falls through to billing", func(m map[string]any) {
			obj(m, "shipping_address")["phone"] = "12"
		}, "15555552455", "555-555-BILL", false},
		{"country from the shipping address", func(m map[string]any) {
			obj(m, "shipping_address")["phone"] = "020 7946 0958"
			obj(m, "shipping_address")["country_code"] = "GB"
		}, "442079460958", "020 7946 0958", false},
		{"no phone anywhere", func(m map[string]any) {
			delete(obj(m, "shipping_address"), "phone")
			delete(obj(m, "billing_address"), "phone")
		}, "", "", true},
		{"only garbage", func(m map[string]any) {
			obj(m, "shipping_address")["phone"] = "n/a"
			obj(m, "billing_address")["phone"] = "123"
		}, "", "n/a", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ev, err := ParseShopify(TopicOrderCreated, edited(t, "shopify/order.json", c.edit))
			if err != nil {
				t.Fatal(err)
			}
			if ev.Phone != c.wantPhone || ev.PhoneRaw != c.wantRaw {
				t.Fatalf("phone %q raw %q, want %q raw %q", ev.Phone, ev.PhoneRaw, c.wantPhone, c.wantRaw)
			}
			if (ev.SkipReason != "") != c.wantSkip {
				t.Fatalf("SkipReason %q, want skip=%v", ev.SkipReason, c.wantSkip)
			}
		})
	}
}

func TestParseShopifyTrackingAndNames(t *testing.T) {
	body := edited(t, "shopify/order.json", func(m map[string]any) {
		m["fulfillments"] = []any{map[string]any{"tracking_number": "1Z999", "tracking_url": "https://ups.example/1Z999", "tracking_company": "UPS"}}
		m["name"] = nil
		m["gateway"] = "Cash on Delivery (COD)"
		m["total_price"] = 12.5 // a number instead of a string: still read
		delete(m, "customer")
	})
	ev, err := ParseShopify("Orders/Paid", body)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Topic != TopicOrderPaid || ev.TrackingNumber != "1Z999" || ev.TrackingURL != "https://ups.example/1Z999" || ev.TrackingCompany != "UPS" {
		t.Fatalf("tracking/topic: %+v", ev)
	}
	if ev.OrderName != "#1234" { // name missing: order_number
		t.Fatalf("OrderName %q", ev.OrderName)
	}
	if ev.CustomerName != "Steve" { // no customer: shipping first name
		t.Fatalf("CustomerName %q", ev.CustomerName)
	}
	if ev.PaymentMethod != "Cash on Delivery (COD)" || ev.Total != "12.5" {
		t.Fatalf("payment %q total %q", ev.PaymentMethod, ev.Total)
	}
}

func TestParseShopifyRejects(t *testing.T) {
	order := fixture(t, "shopify/order.json")
	cases := []struct {
		name  string
		topic string
		body  string
		want  error
	}{
		{"unknown topic", "orders/updated", string(order), ErrIgnored},
		{"app topic", "app/uninstalled", `{}`, ErrIgnored},
		{"empty body", TopicOrderCreated, ``, ErrMalformed},
		{"not JSON", TopicOrderCreated, `webhook_id=1`, ErrMalformed},
		{"array", TopicOrderCreated, `[1,2]`, ErrMalformed},
		{"null", TopicOrderCreated, `null`, ErrMalformed},
		{"truncated", TopicOrderCreated, string(order[:200]), ErrMalformed},
		{"order without id", TopicOrderPaid, `{"name":"#1"}`, ErrMalformed},
		{"fulfillment without order", TopicOrderFulfilled, `{"id":1}`, ErrMalformed},
		{"refund without order", TopicRefundCreated, `{"id":1}`, ErrMalformed},
		{"wrong type for an object", TopicOrderCreated, `{"id":1,"customer":"x"}`, ErrMalformed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseShopify(c.topic, []byte(c.body))
			if !errors.Is(err, c.want) {
				t.Fatalf("err = %v, want %v", err, c.want)
			}
		})
	}
}

func TestParseShopifyFulfillmentThenMerge(t *testing.T) {
	ev, err := ParseShopify(TopicOrderFulfilled, fixture(t, "shopify/fulfillment.json"))
	if err != nil {
		t.Fatal(err)
	}
	want := Event{
		Platform:        PlatformShopify,
		Topic:           TopicOrderFulfilled,
		OrderID:         450789469,
		FulfillmentID:   1022782888,
		TrackingNumber:  "123456789",
		TrackingURL:     "https://shipping.xyz/track.php?num=123456789",
		TrackingCompany: "Bluedart",
		Items:           []Item{{"IPod Nano - 8gb", 1}, {"IPod Nano - 8gb", 1}, {"IPod Nano - 8gb", 1}},
		NeedsOrder:      true,
	}
	if !reflect.DeepEqual(ev, want) {
		t.Fatalf("event\n got %+v\nwant %+v", ev, want)
	}

	// The order fixture is another order: merging it must fail, not mix two orders.
	if err := MergeOrder(&ev, fixture(t, "shopify/order.json")); !errors.Is(err, ErrMalformed) {
		t.Fatalf("merging another order: err = %v", err)
	}

	// The same order with this fulfillment's id, wrapped as the REST API returns it.
	order := edited(t, "shopify/order.json", func(m map[string]any) { m["id"] = 450789469 })
	wrapped := []byte(`{"order":` + string(order) + `}`)
	if err := MergeOrder(&ev, wrapped); err != nil {
		t.Fatal(err)
	}
	if ev.NeedsOrder || ev.SkipReason != "" {
		t.Fatalf("after merge NeedsOrder=%v SkipReason=%q", ev.NeedsOrder, ev.SkipReason)
	}
	if ev.OrderName != "#9999" || ev.CustomerName != "John" || ev.Phone != "15555557447" || ev.Total != "10.00" {
		t.Fatalf("order fields not merged: %+v", ev)
	}
	if ev.TrackingNumber != "123456789" || len(ev.Items) != 3 || ev.FulfillmentID != 1022782888 {
		t.Fatalf("fulfillment fields lost in merge: %+v", ev)
	}
}

func TestMergeOrderPhonePrecedence(t *testing.T) {
	fulfillment := edited(t, "shopify/fulfillment.json", func(m map[string]any) {
		m["destination"] = map[string]any{"first_name": "Gift", "phone": "(415) 555-2671", "country_code": "US", "city": "Oakland"}
	})
	order := func(customerPhone any) []byte {
		return edited(t, "shopify/order.json", func(m map[string]any) {
			m["id"] = 450789469
			obj(m, "customer")["phone"] = customerPhone
			delete(obj(m, "shipping_address"), "phone")
			delete(obj(m, "billing_address"), "phone")
		})
	}

	ev, err := ParseShopify(TopicOrderFulfilled, fulfillment)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Phone != "14155552671" || !ev.NeedsOrder || ev.SkipReason != "" {
		t.Fatalf("destination phone: %+v", ev)
	}
	noPhone := ev
	if err := MergeOrder(&noPhone, order(nil)); err != nil {
		t.Fatal(err)
	}
	if noPhone.Phone != "14155552671" || noPhone.SkipReason != "" {
		t.Fatalf("order without phone should keep the destination's: %+v", noPhone)
	}
	if noPhone.CustomerName != "John" {
		t.Fatalf("the order's customer name wins: %q", noPhone.CustomerName)
	}
	withPhone := ev
	if err := MergeOrder(&withPhone, order("+16135550123")); err != nil {
		t.Fatal(err)
	}
	if withPhone.Phone != "16135550123" || withPhone.PhoneRaw != "+16135550123" {
		t.Fatalf("the customer's own phone wins: %+v", withPhone)
	}

	// Neither has a phone: skip with a reason.
	bare, err := ParseShopify(TopicRefundCreated, []byte(`{"id":9,"order_id":450789469,"transactions":[{"amount":"4.50","kind":"refund","status":"success"},{"amount":"1.5","kind":"refund","status":"success"},{"amount":"100","kind":"refund","status":"failure"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if bare.RefundAmount != "6.00" || bare.RefundID != 9 || !bare.NeedsOrder {
		t.Fatalf("refund: %+v", bare)
	}
	if err := MergeOrder(&bare, order(nil)); err != nil {
		t.Fatal(err)
	}
	if bare.Phone != "" || !strings.Contains(bare.SkipReason, "phone") || bare.NeedsOrder {
		t.Fatalf("no phone anywhere: %+v", bare)
	}
	if err := MergeOrder(&bare, []byte(`{"order": 5}`)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("bad order: %v", err)
	}
}

func TestParseWooFixture(t *testing.T) {
	body := fixture(t, "woocommerce-order.json")
	for _, topic := range []string{WooTopicOrderCreated, WooTopicOrderUpdated} {
		ev, err := ParseWoo(topic, body)
		if err != nil {
			t.Fatal(err)
		}
		want := Event{
			Platform:      PlatformWooCommerce,
			Topic:         TopicOrderPaid, // status processing
			OrderID:       727,
			OrderName:     "#727",
			CustomerName:  "John",
			Address:       "969 Market",
			ShippingCity:  "San Francisco",
			Total:         "29.35",
			Currency:      "USD",
			PaymentMethod: "Direct Bank Transfer",
			Items:         []Item{{"Woo Single #1", 2}, {"Ship Your Idea – Color: Black, Size: M Test", 1}},
			Phone:         "15555555555",
			PhoneRaw:      "(555) 555-5555",
		}
		if !reflect.DeepEqual(ev, want) {
			t.Fatalf("%s event\n got %+v\nwant %+v", topic, ev, want)
		}
	}
}

func TestParseWooStatuses(t *testing.T) {
	cases := []struct {
		status, topic string
		want          string // "" = ignored
	}{
		{"pending", WooTopicOrderCreated, TopicOrderCreated},
		{"on-hold", WooTopicOrderCreated, TopicOrderCreated},
		{"pending", WooTopicOrderUpdated, ""},
		{"on-hold", WooTopicOrderUpdated, ""},
		{"processing", WooTopicOrderCreated, TopicOrderPaid},
		{"processing", WooTopicOrderUpdated, TopicOrderPaid},
		{"completed", WooTopicOrderUpdated, TopicOrderFulfilled},
		{"cancelled", WooTopicOrderUpdated, TopicOrderCancelled},
		{"refunded", WooTopicOrderUpdated, TopicRefundCreated},
		{"failed", WooTopicOrderUpdated, ""},
		{"checkout-draft", WooTopicOrderCreated, ""},
		{"processing", "order.deleted", ""},
		{"processing", "product.created", ""},
	}
	for _, c := range cases {
		t.Run(c.topic+"/"+c.status, func(t *testing.T) {
			body := edited(t, "woocommerce-order.json", func(m map[string]any) { m["status"] = c.status })
			ev, err := ParseWoo(c.topic, body)
			if c.want == "" {
				if !errors.Is(err, ErrIgnored) || !strings.Contains(err.Error(), strings.SplitN(c.topic, ".", 2)[0]) {
					t.Fatalf("err = %v, want ErrIgnored with a reason", err)
				}
				return
			}
			if err != nil || ev.Topic != c.want {
				t.Fatalf("topic %q err %v, want %q", ev.Topic, err, c.want)
			}
		})
	}
}

func TestParseWooDetails(t *testing.T) {
	t.Run("refund amount", func(t *testing.T) {
		body := edited(t, "woocommerce-order.json", func(m map[string]any) {
			m["status"] = "refunded"
			m["refunds"] = []any{map[string]any{"id": 1, "total": "-10.00"}, map[string]any{"id": 2, "total": "-2.5"}}
		})
		ev, err := ParseWoo(WooTopicOrderUpdated, body)
		if err != nil || ev.RefundAmount != "12.50" {
			t.Fatalf("refund amount %q err %v", ev.RefundAmount, err)
		}
	})
	t.Run("shipment tracking extension", func(t *testing.T) {
		body := edited(t, "woocommerce-order.json", func(m map[string]any) {
			m["status"] = "completed"
			m["meta_data"] = append(m["meta_data"].([]any), map[string]any{"id": 1, "key": "_wc_shipment_tracking_items", "value": []any{
				map[string]any{"tracking_provider": "usps", "tracking_number": "OLD"},
				map[string]any{"tracking_provider": "", "custom_tracking_provider": "Aramex", "tracking_number": "AX1", "custom_tracking_link": "https://aramex.example/AX1"},
			}})
		})
		ev, err := ParseWoo(WooTopicOrderUpdated, body)
		if err != nil || ev.TrackingNumber != "AX1" || ev.TrackingURL != "https://aramex.example/AX1" || ev.TrackingCompany != "Aramex" {
			t.Fatalf("tracking %+v err %v", ev, err)
		}
	})
	t.Run("phone via shipping and no region", func(t *testing.T) {
		body := edited(t, "woocommerce-order.json", func(m map[string]any) {
			obj(m, "billing")["phone"] = ""
			obj(m, "billing")["country"] = ""
			obj(m, "shipping")["country"] = ""
			obj(m, "shipping")["phone"] = "919876543210" // country code typed without the plus
		})
		ev, err := ParseWoo(WooTopicOrderCreated, body)
		if err != nil || ev.Phone != "919876543210" {
			t.Fatalf("phone %q err %v", ev.Phone, err)
		}
	})
	t.Run("no phone", func(t *testing.T) {
		body := edited(t, "woocommerce-order.json", func(m map[string]any) { delete(obj(m, "billing"), "phone") })
		ev, err := ParseWoo(WooTopicOrderCreated, body)
		if err != nil || ev.Phone != "" || ev.SkipReason == "" || ev.NeedsOrder {
			t.Fatalf("%+v err %v", ev, err)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		for _, b := range []string{"", "webhook_id=12", "{", `{"id":"x"}`} {
			if _, err := ParseWoo(WooTopicOrderCreated, []byte(b)); !errors.Is(err, ErrMalformed) {
				t.Errorf("%q: err = %v", b, err)
			}
		}
	})
	t.Run("ping", func(t *testing.T) {
		if !WooPing([]byte("webhook_id=12")) || WooPing([]byte(`{"id":1}`)) || WooPing([]byte("webhook_id=x")) {
			t.Fatal("WooPing")
		}
	})
}

func TestDedupeKey(t *testing.T) {
	a := Event{Platform: PlatformShopify, Topic: TopicOrderFulfilled, OrderID: 1, FulfillmentID: 2}
	b := a
	b.FulfillmentID = 3
	if a.DedupeKey() == b.DedupeKey() {
		t.Fatal("two shipments of one order share a key")
	}
	w := Event{Platform: PlatformWooCommerce, Topic: TopicOrderPaid, OrderID: 727}
	if w.DedupeKey() != "woocommerce:orders/paid:727" {
		t.Fatalf("key %q", w.DedupeKey())
	}
}

func TestTopicLabel(t *testing.T) {
	for _, c := range []struct {
		platform    domain.Platform
		topic, want string
	}{
		{PlatformShopify, "orders/create", TopicOrderCreated},
		{PlatformShopify, " refunds/create\n", TopicRefundCreated},
		{PlatformShopify, "fulfillments/create", TopicOrderFulfilled},
		{PlatformShopify, "products/update", "other"},
		{PlatformShopify, "order.created", "other"},
		{PlatformShopify, "", "none"},
		{PlatformWooCommerce, "order.created", WooTopicOrderCreated},
		{PlatformWooCommerce, "order.updated", WooTopicOrderUpdated},
		{PlatformWooCommerce, "orders/create", "other"},
		{PlatformWooCommerce, "  ", "none"},
	} {
		p, _ := Lookup(c.platform)
		if got := p.TopicLabel([]byte(c.topic)); got != c.want {
			t.Errorf("TopicLabel(%s, %q) = %q, want %q", c.platform, c.topic, got, c.want)
		}
	}
	p, _ := Lookup(PlatformShopify)
	topic := []byte("orders/paid") // a request's header: not the label's to allocate
	if n := testing.AllocsPerRun(100, func() { p.TopicLabel(topic) }); n != 0 {
		t.Errorf("TopicLabel allocates %v times", n)
	}
}
