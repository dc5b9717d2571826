package ecom

import (
	"bytes"
	"strings"

	"github.com/nyaruka/phonenumbers"
)

// phoneCandidate is one place a payload may carry the customer's number, with the regions to
// read it in when it has no country code (the address it belongs to first).
type phoneCandidate struct {
	field   string
	raw     string
	regions []string
}

// pickPhone returns the first candidate that makes a usable number: its E.164 digits and raw
// text, or "" and a reason naming the fields tried.
func pickPhone(cands []phoneCandidate) (phone, raw, reason string) {
	var tried []string
	for _, c := range cands {
		r := strings.TrimSpace(c.raw)
		if r == "" {
			continue
		}
		if raw == "" {
			raw = r // keep the first one typed, so the caller can show what was unusable
		}
		tried = append(tried, c.field)
		if p, ok := NormalizePhone(r, c.regions...); ok {
			return p, r, ""
		}
	}
	if len(tried) == 0 {
		return "", "", "no phone number in the payload"
	}
	return "", raw, "no usable phone number (tried " + strings.Join(tried, ", ") + ")"
}

// NormalizePhone reads a number as a shopper typed it ("(555) 555-5555", "555-555-BILL",
// "+44 20 7946 0958") with libphonenumber and returns its E.164 digits without the plus.
// A number without a country code is read in the first region (ISO 3166 alpha-2) in which it
// is a possible number; with no region known, digits that already start with a country code
// are tried as such. Vanity letters are mapped to digits as libphonenumber does.
//
// "Possible" (the right length for the country), not "valid" (an assigned range), is the bar:
// stores and their test orders use 555 numbers, and the messaging network says at send time
// whether a number exists.
func NormalizePhone(raw string, regions ...string) (string, bool) {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return "", false
	}
	if strings.HasPrefix(raw, "+") {
		return parsePossible(raw, "")
	}
	known := false
	for _, region := range regions {
		region = strings.ToUpper(strings.TrimSpace(region))
		if len(region) != 2 {
			continue
		}
		known = true
		if p, ok := parsePossible(raw, region); ok {
			return p, true
		}
	}
	if known {
		// Reading digits as international when the address says otherwise could message a
		// stranger in another country (a US number with one digit too many is a Swiss one).
		return "", false
	}
	digits := phonenumbers.NormalizeDigitsOnly(raw)
	if len(digits) < 8 || len(digits) > 15 {
		return "", false
	}
	return parsePossible("+"+digits, "")
}

func parsePossible(raw, region string) (string, bool) {
	n, err := phonenumbers.Parse(raw, region)
	if err != nil {
		return "", false
	}
	if phonenumbers.IsPossibleNumberWithReason(n) != phonenumbers.IS_POSSIBLE {
		return "", false
	}
	return strings.TrimPrefix(phonenumbers.Format(n, phonenumbers.E164), "+"), true
}

var phoneKey = []byte(`"phone"`)

// HasPhone reports whether a webhook body has any "phone" field holding a non-empty string or a
// number: a byte scan, no parse, for the receiver's hot path. A false "yes" only defers the
// decision to the parser; a "no" is certain: the event has no number to send to.
func HasPhone(body []byte) bool {
	for i := 0; i < len(body); {
		j := bytes.Index(body[i:], phoneKey)
		if j < 0 {
			return false
		}
		k := i + j + len(phoneKey)
		k = skipSpace(body, k)
		if k < len(body) && body[k] == ':' {
			k = skipSpace(body, k+1)
			if k+1 < len(body) && body[k] == '"' && body[k+1] != '"' {
				return true
			}
			if k < len(body) && body[k] >= '0' && body[k] <= '9' {
				return true
			}
		}
		i = k
	}
	return false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}
