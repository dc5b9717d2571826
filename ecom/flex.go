package ecom

import (
	"bytes"
	"math"
	"math/big"
	"strconv"
	"strings"

	json "github.com/goccy/go-json"
)

// flexString takes a JSON string, number or boolean as text and null (or anything else) as "":
// the platforms are loose about which of those a money, id or phone field is, and one odd field
// must not cost the customer their message.
type flexString string

func (s *flexString) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0:
		*s = ""
	case b[0] == '"':
		var v string
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		*s = flexString(strings.TrimSpace(v))
	case b[0] == '-' || (b[0] >= '0' && b[0] <= '9'), string(b) == "true", string(b) == "false":
		*s = flexString(b)
	default:
		*s = ""
	}
	return nil
}

// flexInt takes a JSON integer, an integral float or a numeric string; anything else is 0.
type flexInt int64

func (n *flexInt) UnmarshalJSON(b []byte) error {
	var s flexString
	if err := s.UnmarshalJSON(b); err != nil {
		return err
	}
	*n = 0
	if v, err := strconv.ParseInt(string(s), 10, 64); err == nil {
		*n = flexInt(v)
	} else if f, err := strconv.ParseFloat(string(s), 64); err == nil && f == math.Trunc(f) && math.Abs(f) < 1<<62 {
		*n = flexInt(f)
	}
	return nil
}

// decodeObject decodes a JSON object into v, or reports ErrMalformed.
func decodeObject(body []byte, v any) error {
	body = bytes.TrimSpace(body)
	if len(body) == 0 || body[0] != '{' {
		return wrapMalformed("not a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		return wrapMalformed(err.Error())
	}
	return nil
}

func wrapMalformed(detail string) error {
	return &detailError{kind: ErrMalformed, detail: detail}
}

// sumAmounts adds decimal amounts exactly ("10.00" + "0.5" = "10.50"), keeping the most decimal
// places seen; absolute values when abs is set (WooCommerce writes refunds as negatives).
// Unparseable amounts are skipped; "" when nothing was added.
func sumAmounts(amounts []string, abs bool) string {
	sum := new(big.Rat)
	places, added := 0, false
	for _, a := range amounts {
		a = strings.TrimSpace(a)
		r, ok := new(big.Rat).SetString(a)
		if !ok {
			continue
		}
		if abs {
			r.Abs(r)
		}
		sum.Add(sum, r)
		added = true
		if i := strings.IndexByte(a, '.'); i >= 0 && len(a)-i-1 > places {
			places = len(a) - i - 1
		}
	}
	if !added {
		return ""
	}
	return sum.FloatString(places)
}
