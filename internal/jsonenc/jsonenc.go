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
		// The run of bytes that need no escaping, in one append: eight at a time while none
		// of the eight needs a look, then byte by byte.
		start := i
		for i+8 <= len(s) && !needsEscape8(s[i:i+8]) {
			i += 8
		}
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

// Bytes of eight lanes (SWAR: the eight bytes of a string as one uint64).
const (
	lanes01 = 0x0101010101010101
	lanes80 = 0x8080808080808080
)

// needsEscape8 tells whether any of w's eight bytes is a control character, a quote, a
// backslash or not ASCII: a byte under 0x20 (its lane borrows when 0x20 is subtracted), one
// equal to '"' or '\\' (its lane is zero after the XOR), or one with the high bit set.
func needsEscape8(s string) bool {
	_ = s[7]
	// One load: the compiler merges the eight (as binary.LittleEndian.Uint64 does for a slice).
	w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
	zero := func(v uint64) uint64 { return (v - lanes01) & ^v & lanes80 }
	return (w-0x20*lanes01)&^w&lanes80|zero(w^('"'*lanes01))|zero(w^('\\'*lanes01))|w&lanes80 != 0
}
