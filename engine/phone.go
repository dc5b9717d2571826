package engine

import (
	"fmt"
	"strings"

	"github.com/gateway/gateway/domain"
)

// NormalizePhone strips +, spaces, -, (, ) and . and checks that 8 to 15 digits remain. A
// leading 00 (the international prefix most countries dial) is read as +; a number that still
// begins with 0 is refused: no country code does, so it is a national number whose country is
// unknown here, and sent as written it would reach nobody, or someone else.
func NormalizePhone(s string) (string, error) {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			b.WriteByte(c)
		case c == '+' || c == ' ' || c == '-' || c == '(' || c == ')' || c == '.':
		default:
			return "", domain.ErrInvalidPhone
		}
	}
	d := b.String()
	if strings.HasPrefix(d, "00") && !strings.Contains(s, "+") {
		d = d[2:]
	}
	if n := len(d); n < 8 || n > 15 {
		return "", domain.ErrInvalidPhone
	}
	if d[0] == '0' {
		return "", fmt.Errorf("%w (no country code begins with 0: write the number with its country code)", domain.ErrInvalidPhone)
	}
	return d, nil
}

// NormalizeRecipient normalises a send's recipient: a phone number (NormalizePhone) or a group
// id (<digits>@g.us, or the older <digits>-<digits>@g.us), kept as it is.
func NormalizeRecipient(s string) (string, error) {
	s = strings.TrimSpace(s)
	if id, ok := strings.CutSuffix(s, domain.GroupSuffix); ok {
		head, tail, dash := strings.Cut(id, "-")
		if digitsOnly(head) && (!dash || digitsOnly(tail)) && len(id) <= 40 {
			return s, nil
		}
		return "", fmt.Errorf("%w: a group id is <digits>@g.us", domain.ErrInvalidPhone)
	}
	return NormalizePhone(s)
}

func digitsOnly(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
