package ecom

import "testing"

func TestNormalizePhone(t *testing.T) {
	cases := []struct {
		name    string
		raw     string
		regions []string
		want    string // "" = not usable
	}{
		{"US format with US address", "(555) 555-5555", []string{"US"}, "15555555555"},
		{"vanity letters (libphonenumber maps them)", "555-555-BILL", []string{"US"}, "15555552455"},
		{"lower-case region", "555-555-5555", []string{"us"}, "15555555555"},
		{"international with plus ignores region", "+44 20 7946 0958", []string{"US"}, "442079460958"},
		{"national UK number", "020 7946 0958", []string{"GB"}, "442079460958"},
		{"second region tried", "020 7946 0958", []string{"", "XX", "GB"}, "442079460958"},
		{"US number with trunk 1", "1 (415) 555-2671", []string{"US"}, "14155552671"},
		{"E.164 customer.phone", "+16135550123", nil, "16135550123"},
		{"no region: digits with country code", "447911123456", nil, "447911123456"},
		{"no region: too short", "5555555", nil, ""},
		{"region known: no guessing another country", "41555526710", []string{"US"}, ""},
		{"too short", "12", []string{"US"}, ""},
		{"letters only", "n/a", []string{"US"}, ""},
		{"empty", "  ", []string{"US"}, ""},
		{"plus and garbage", "+", nil, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := NormalizePhone(c.raw, c.regions...)
			if got != c.want || ok != (c.want != "") {
				t.Fatalf("NormalizePhone(%q, %v) = %q, %v; want %q", c.raw, c.regions, got, ok, c.want)
			}
		})
	}
}

func TestPickPhoneReasons(t *testing.T) {
	if _, _, reason := pickPhone(nil); reason != "no phone number in the payload" {
		t.Fatalf("reason %q", reason)
	}
	phone, raw, reason := pickPhone([]phoneCandidate{
		{"customer.phone", "", nil},
		{"shipping_address.phone", "abc", []string{"US"}},
		{"billing_address.phone", "99", []string{"US"}},
	})
	if phone != "" || raw != "abc" || reason != "no usable phone number (tried shipping_address.phone, billing_address.phone)" {
		t.Fatalf("got %q %q %q", phone, raw, reason)
	}
}

func TestHasPhone(t *testing.T) {
	for body, want := range map[string]bool{
		`{"customer":{"phone":"+1 312 555 0101"}}`:          true,
		`{"billing": {"phone" : "(555) 555-5555"}}`:         true,
		`{"phone":4915112345678}`:                           true,
		`{"customer":{"phone":null},"phone":""}`:            false,
		`{"note":"call \"phone\":\"123\" later"}`:           false,
		`{"phones":"123","telephone":"5"}`:                  false,
		`{"id":1}`:                                          false,
		`{"shipping_address":{"phone":null},"phone":   ""}`: false,
		`{"phone":`:   false,
		`{"phone": "`: false,
	} {
		if got := HasPhone([]byte(body)); got != want {
			t.Errorf("HasPhone(%s) = %v, want %v", body, got, want)
		}
	}
}
