package engine

import (
	"strings"

	"github.com/gateway/gateway/domain"
)

// NormalizePhone strips +, spaces, -, (, ) and . and checks that 8 to 15 digits remain.
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
	if n := b.Len(); n < 8 || n > 15 {
		return "", domain.ErrInvalidPhone
	}
	return b.String(), nil
}
