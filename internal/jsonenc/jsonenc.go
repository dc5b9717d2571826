// Package jsonenc writes the few JSON values the hot paths write by hand (the access log's
// lines, the sim's journal, the outbox's small records), where a reflecting encoder's cost
// showed in the profiles. It imports nothing of the gateway.
package jsonenc

import (
	"fmt"
	"unicode/utf8"
)

// AppendString appends s as a JSON string: quotes, backslashes and control characters
// escaped, invalid UTF-8 replaced by U+FFFD, U+2028 and U+2029 escaped (as encoding/json
// does, so a line can sit in JavaScript too).
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); {
		// The run of bytes that need no escaping, in one append.
		start := i
		for i < len(s) && s[i] >= 0x20 && s[i] != '"' && s[i] != '\\' && s[i] < utf8.RuneSelf {
			i++
		}
		b = append(b, s[start:i]...)
		if i == len(s) {
			break
		}
		c := s[i]
		if c < utf8.RuneSelf {
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = fmt.Appendf(b, `\u%04x`, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = fmt.Appendf(b, `\u%04x`, r)
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}

// AppendField appends key (the field's `,"name":` as written) and s as a JSON string, unless s
// is empty: an omitempty string field.
func AppendField(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return AppendString(append(b, key...), s)
}
