package sim

import (
	"strconv"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/internal/jsonenc"
)

// appendDelivery appends d as one journal line: the JSON encoding/json would write (absent
// fields left out, the time in RFC 3339 with nanoseconds), written by hand. Through a
// reflecting encoder, the line was most of the sim's own cost per delivery (issue 21).
func appendDelivery(b []byte, d *domain.Delivered) []byte {
	b = append(b, `{"id":`...)
	b = jsonenc.AppendString(b, d.ID)
	b = append(b, `,"from":`...)
	b = jsonenc.AppendString(b, d.From)
	b = append(b, `,"to":`...)
	b = jsonenc.AppendString(b, d.To)
	b = append(b, `,"type":`...)
	b = jsonenc.AppendString(b, d.Type)
	b = jsonenc.AppendField(b, `,"text":`, d.Text)
	b = jsonenc.AppendField(b, `,"caption":`, d.Caption)
	b = jsonenc.AppendField(b, `,"fileName":`, d.FileName)
	b = jsonenc.AppendField(b, `,"mimeType":`, d.MimeType)
	if d.Bytes != 0 {
		b = strconv.AppendInt(append(b, `,"bytes":`...), int64(d.Bytes), 10)
	}
	if d.Lat != nil && d.Lng != nil { // a location's, 0 included (the equator, Greenwich)
		b = strconv.AppendFloat(append(b, `,"lat":`...), *d.Lat, 'g', -1, 64)
		b = strconv.AppendFloat(append(b, `,"lng":`...), *d.Lng, 'g', -1, 64)
	}
	if d.PTT {
		b = append(b, `,"ptt":true`...)
	}
	b = jsonenc.AppendField(b, `,"address":`, d.Address)
	b = jsonenc.AppendField(b, `,"locationName":`, d.LocationName)
	b = jsonenc.AppendField(b, `,"contactName":`, d.ContactName)
	b = jsonenc.AppendField(b, `,"contactPhone":`, d.ContactPhone)
	b = append(b, `,"timestamp":"`...)
	b = d.Timestamp.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	b = jsonenc.AppendField(b, `,"replyTo":`, d.ReplyTo)
	b = jsonenc.AppendField(b, `,"quoted":`, d.Quoted)
	b = jsonenc.AppendField(b, `,"emoji":`, d.Emoji)
	b = jsonenc.AppendField(b, `,"messageId":`, d.Target)
	b = jsonenc.AppendField(b, `,"question":`, d.Question)
	if len(d.Options) > 0 {
		b = append(b, `,"options":[`...)
		for i, o := range d.Options {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonenc.AppendString(b, o)
		}
		b = append(b, ']')
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{d.Multiple, `,"multiple":true`}, {d.Edited, `,"edited":true`}, {d.Revoked, `,"revoked":true`}} {
		if f.on {
			b = append(b, f.name...)
		}
	}
	b = jsonenc.AppendField(b, `,"group":`, d.Group)
	if d.Typing {
		b = append(b, `,"typing":true`...)
	}
	return append(b, '}')
}
