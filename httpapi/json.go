package httpapi

import (
	"bytes"
	"errors"
	"strings"
	"time"
	"unsafe"

	"github.com/goccy/go-json"
	"github.com/valyala/fasthttp"
)

var contentTypeJSON = []byte("application/json")

// writeJSON encodes v as the response body.
func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	ctx.Response.Header.SetContentTypeBytes(contentTypeJSON)
	ctx.SetStatusCode(status)
	enc := json.NewEncoder(ctx)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Only a bug (an unencodable value) gets here.
		ctx.ResetBody()
		ctx.SetStatusCode(fasthttp.StatusInternalServerError)
		ctx.SetBodyString(`{"success":false,"error":"internal error","code":"internal"}`)
	}
}

// decodeBody reads the JSON object body into v. A syntax error is `invalid_json`; a value of
// the wrong type is `validation_failed` naming the field.
func decodeBody(ctx *fasthttp.RequestCtx, v any) error {
	body := ctx.PostBody()
	if len(bytes.TrimSpace(body)) == 0 {
		return badInput("invalid_json", "request body must be a JSON object")
	}
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			field := te.Field
			if field == "" {
				return badInput("invalid_json", "request body must be a JSON object")
			}
			return badInput("validation_failed", "%s must be %s", field, jsonType(te.Type.Kind().String()))
		}
		return badInput("invalid_json", "malformed JSON: %s", err.Error())
	}
	return nil
}

func jsonType(kind string) string {
	switch {
	case kind == "string":
		return "a string"
	case kind == "bool":
		return "a boolean"
	case kind == "slice" || kind == "array":
		return "an array"
	case kind == "struct" || kind == "map":
		return "an object"
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"), strings.HasPrefix(kind, "float"):
		return "a number"
	}
	return "of another type"
}

// timestamp is RFC 3339 UTC with milliseconds (DESIGN.md section 4).
type timestamp time.Time

const tsLayout = "2006-01-02T15:04:05.000Z07:00"

func (t timestamp) MarshalJSON() ([]byte, error) {
	return appendTimestamp(make([]byte, 0, len(tsLayout)+2), time.Time(t)), nil
}

// appendTimestamp appends t as a JSON timestamp (its string, quoted).
func appendTimestamp(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = appendTS(b, t)
	return append(b, '"')
}

// appendTS appends t in UTC as AppendFormat(tsLayout) does, by hand: the hot routes' answers
// carry one or two, and AppendFormat's parse of the layout was a tenth of validate's own work
// (TestAppendTS checks both agree).
func appendTS(b []byte, t time.Time) []byte {
	t = t.UTC()
	y, mo, d := t.Date()
	if y < 0 || y > 9999 {
		return t.AppendFormat(b, tsLayout)
	}
	h, mi, s := t.Clock()
	b = append(b, byte('0'+y/1000), byte('0'+y/100%10), byte('0'+y/10%10), byte('0'+y%10), '-')
	b = append(b, byte('0'+int(mo)/10), byte('0'+int(mo)%10), '-', byte('0'+d/10), byte('0'+d%10), 'T')
	b = append(b, byte('0'+h/10), byte('0'+h%10), ':', byte('0'+mi/10), byte('0'+mi%10), ':')
	ms := t.Nanosecond() / 1e6
	return append(b, byte('0'+s/10), byte('0'+s%10), '.', byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z')
}

// unsafeBytes is s's bytes, for a callee that only reads them and keeps nothing.
func unsafeBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// tsPtr is a timestamp that may be null.
func tsPtr(t *time.Time) *timestamp {
	if t == nil {
		return nil
	}
	v := timestamp(*t)
	return &v
}

// parseExpiry accepts an ISO 8601 date ("2026-12-31": the key expires at the start of that UTC
// day) or an RFC 3339 timestamp.
func parseExpiry(s string) (time.Time, error) {
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t.UTC(), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t.UTC(), nil
	}
	return time.Time{}, badInput("validation_failed", "expiresAt must be an ISO 8601 date (2026-12-31) or timestamp (2026-12-31T23:59:59Z)")
}

// reqField is a required string field of a request body.
type reqField struct {
	name string
	v    **string
}

// need names a required string field: present and not blank.
func need(name string, v **string) reqField { return reqField{name: name, v: v} }

// bind decodes the JSON body into req and checks the required fields, in order: the error is
// a 400 (invalid_json, or validation_failed naming the field). A required field (an id, a
// token, a name) is trimmed of blank space, as a cluster routes the request by it (bodyField)
// and as a user's id is created: " bob " names bob everywhere.
func bind(ctx *fasthttp.RequestCtx, req any, fields ...reqField) error {
	if err := decodeBody(ctx, req); err != nil {
		return err
	}
	for _, f := range fields {
		if *f.v == nil || strings.TrimSpace(**f.v) == "" {
			return missing(f.name)
		}
		if t := strings.TrimSpace(**f.v); t != **f.v {
			*f.v = &t
		}
	}
	return nil
}
