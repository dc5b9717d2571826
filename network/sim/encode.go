package sim

import (
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// appendDelivery appends d as one journal line: the JSON encoding/json would write (absent
// fields left out, the time in RFC 3339 with nanoseconds), written by hand. Through a
// reflecting encoder, the line was most of the sim's own cost per delivery (issue 21).
func appendDelivery(b []byte, d *Delivered) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, d.ID)
	b = append(b, `,"from":`...)
	b = appendJSONString(b, d.From)
	b = append(b, `,"to":`...)
	b = appendJSONString(b, d.To)
	b = append(b, `,"type":`...)
	b = appendJSONString(b, d.Type)
	b = appendOptString(b, `,"text":`, d.Text)
	b = appendOptString(b, `,"caption":`, d.Caption)
	b = appendOptString(b, `,"fileName":`, d.FileName)
	b = appendOptString(b, `,"mimeType":`, d.MimeType)
	if d.Bytes != 0 {
		b = strconv.AppendInt(append(b, `,"bytes":`...), int64(d.Bytes), 10)
	}
	if d.Lat != 0 {
		b = strconv.AppendFloat(append(b, `,"lat":`...), d.Lat, 'g', -1, 64)
	}
	if d.Lng != 0 {
		b = strconv.AppendFloat(append(b, `,"lng":`...), d.Lng, 'g', -1, 64)
	}
	b = appendOptString(b, `,"address":`, d.Address)
	b = appendOptString(b, `,"contactName":`, d.ContactName)
	b = appendOptString(b, `,"contactPhone":`, d.ContactPhone)
	b = append(b, `,"timestamp":"`...)
	b = d.Timestamp.AppendFormat(b, time.RFC3339Nano)
	return append(b, `"}`...)
}

func appendOptString(b []byte, key, v string) []byte {
	if v == "" {
		return b
	}
	return appendJSONString(append(b, key...), v)
}

// appendJSONString appends s as a JSON string: quotes, backslashes and control characters
// escaped, invalid UTF-8 replaced by U+FFFD (as encoding/json does).
func appendJSONString(b []byte, s string) []byte {
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
			b = fmt.Appendf(b, `\u%04x`, r) // valid JSON either way; escaped as encoding/json does
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
}
