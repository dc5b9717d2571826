package httpapi

import (
	"encoding/binary"
	"strconv"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
	"unsafe"

	"github.com/valyala/fasthttp"
)

// Request bodies of the hot routes decoded without reflection (issue 32): a send of any kind
// (send, the dashboard's send, send-image, an edit) and an API key to validate. The fast path reads the bodies clients send: one JSON object, keys
// spelled as documented, each once, values of their documented types. Anything else (a syntax
// error, a value of another type, an unknown key or one in another case, a duplicate key, a
// string that is not valid UTF-8 or holds a lone surrogate, a number out of range) makes it give
// up, and the reflecting decoder reads the body instead, so a body is decoded and refused
// exactly as before: FuzzFastDecoders checks that both read every body the fast path reads the
// same way.

// jscan reads one JSON value after another from b.
type jscan struct {
	b []byte
	i int
	// all is b as one string: strings without escapes are taken from it, without an allocation
	// each. shared: all is b itself (not a copy), for a request whose strings live no longer
	// than it (a validate's key).
	all string
}

// smallBody: up to this size, a body's strings share one allocation (a larger one, with media,
// would be kept alive whole by a short field).
const smallBody = 4 << 10

// newScan reads b, whose strings are kept after the request (copied: one allocation for a
// small body).
func newScan(b []byte) jscan {
	s := jscan{b: b}
	if len(b) <= smallBody {
		s.all = string(b)
	}
	return s
}

// newScanShared reads b, whose strings are read during the request only: they are b's bytes.
func newScanShared(b []byte) jscan {
	return jscan{b: b, all: unsafe.String(unsafe.SliceData(b), len(b))}
}

func (s *jscan) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// next is the next byte after whitespace (0 at the end).
func (s *jscan) next() byte {
	s.ws()
	if s.i >= len(s.b) {
		return 0
	}
	return s.b[s.i]
}

// eat consumes c after whitespace.
func (s *jscan) eat(c byte) bool {
	if s.next() != c {
		return false
	}
	s.i++
	return true
}

// lit consumes a literal (true, false, null).
func (s *jscan) lit(w string) bool {
	if len(s.b)-s.i < len(w) || string(s.b[s.i:s.i+len(w)]) != w {
		return false
	}
	s.i += len(w)
	return true
}

// null consumes null when it is next.
func (s *jscan) null() bool {
	return s.next() == 'n' && s.lit("null")
}

// key reads an object's next key (the first after begin, then after each value): done at the
// object's end; ok false when the object is not one the fast path reads (a key that needs
// unescaping, non-ASCII, a syntax error). A loop, not a callback: nothing escapes to the heap.
func (s *jscan) key(first bool) (key []byte, done, ok bool) {
	if first {
		if !s.eat('{') {
			return nil, false, false
		}
		if s.eat('}') {
			return nil, true, true
		}
	} else {
		switch s.next() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil, true, true
		default:
			return nil, false, false
		}
	}
	if s.next() != '"' {
		return nil, false, false
	}
	start := s.i + 1
	end := start
	for end < len(s.b) && s.b[end] != '"' && s.b[end] != '\\' && s.b[end] >= 0x20 && s.b[end] < 0x80 {
		end++
	}
	if end >= len(s.b) || s.b[end] != '"' {
		return nil, false, false // escaped or non-ASCII key: the reflecting decoder matches those
	}
	s.i = end + 1
	if !s.eat(':') {
		return nil, false, false
	}
	return s.b[start:end], false, true
}

// fields reads an object to its end, calling field with each key (positioned at its value),
// and then checks that only whitespace is left: false when the object is not one the fast path
// reads or field says so. field does not escape (it is only called), so a decoder's closure
// stays on the stack.
func (s *jscan) fields(field func(key []byte) bool) bool {
	for first := true; ; first = false {
		key, done, ok := s.key(first)
		if !ok || !done && !field(key) {
			return false
		}
		if done {
			return s.end()
		}
	}
}

// end tells whether only whitespace is left.
func (s *jscan) end() bool { return s.next() == 0 && s.i == len(s.b) }

// str reads a string.
func (s *jscan) str() (string, bool) {
	if s.next() != '"' {
		return "", false
	}
	start := s.i + 1
	i := plainPrefix(s.b, start)
	ascii := true
	for i < len(s.b) {
		c := s.b[i]
		switch {
		case c == '"':
			raw := s.b[start:i]
			if !ascii && !utf8.Valid(raw) {
				return "", false
			}
			s.i = i + 1
			if s.all != "" {
				return s.all[start:i], true
			}
			return string(raw), true
		case c == '\\':
			return s.escaped(start)
		case c < 0x20:
			return "", false
		case c >= 0x80:
			ascii = false
		}
		i++
	}
	return "", false
}

// plainPrefix skips, from i, the bytes a string holds as they are (printable ASCII other than
// the quote and the backslash) eight at a time, and returns where the first other byte's word
// begins (or the last whole word ends): the byte loop in str reads on from there. An API key or
// a phone number is such bytes only, and the byte-at-a-time loop was most of a validate's
// decode (issue 32's sixth pass).
func plainPrefix(b []byte, i int) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	for ; i+8 <= len(b); i += 8 {
		x := binary.LittleEndian.Uint64(b[i:])
		q, bs := x^(ones*'"'), x^(ones*'\\')
		// Any byte under 0x20, from 0x80 (its high bit set), or zero in q or bs (a quote or a
		// backslash): the classic "has less than" and "has zero" word tests, which never miss
		// one (a false alarm only stops the skip early).
		if ((x-ones*0x20)&^x|(q-ones)&^q|(bs-ones)&^bs|x)&highs != 0 {
			return i
		}
	}
	return i
}

// escaped reads a string with escapes, from its first byte at start.
func (s *jscan) escaped(start int) (string, bool) {
	out := make([]byte, 0, 64)
	i := start
	for i < len(s.b) {
		c := s.b[i]
		switch {
		case c == '"':
			if !utf8.Valid(out) {
				return "", false
			}
			s.i = i + 1
			return string(out), true
		case c < 0x20:
			return "", false
		case c != '\\':
			out = append(out, c)
			i++
			continue
		}
		if i+1 >= len(s.b) {
			return "", false
		}
		switch e := s.b[i+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := hex4(s.b, i+2)
			if !ok {
				return "", false
			}
			i += 6
			if utf16.IsSurrogate(r) {
				// Only a whole pair: a lone surrogate is the reflecting decoder's to repair.
				if i+6 > len(s.b) || s.b[i] != '\\' || s.b[i+1] != 'u' {
					return "", false
				}
				r2, ok := hex4(s.b, i+2)
				if !ok {
					return "", false
				}
				if r = utf16.DecodeRune(r, r2); r == utf8.RuneError {
					return "", false
				}
				i += 6
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			return "", false
		}
		i += 2
	}
	return "", false
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// optStr reads a string or null into *dst (nil for null), taking its storage from v.
func (s *jscan) optStr(dst **string, v *string) bool {
	if s.null() {
		*dst = nil
		return true
	}
	str, ok := s.str()
	if !ok {
		return false
	}
	*v = str
	*dst = v
	return true
}

// plainStr reads a string, or null (which leaves *dst as it is).
func (s *jscan) plainStr(dst *string) bool {
	if s.null() {
		return true
	}
	str, ok := s.str()
	*dst = str
	return ok
}

// boolean reads true, false or null (null leaves *dst as it is).
func (s *jscan) boolean(dst *bool) bool {
	switch s.next() {
	case 't':
		*dst = true
		return s.lit("true")
	case 'f':
		*dst = false
		return s.lit("false")
	}
	return s.null()
}

// optNum reads a number or null into *dst, its storage in v.
func (s *jscan) optNum(dst **float64, v *float64) bool {
	if s.null() {
		*dst = nil
		return true
	}
	s.ws()
	start := s.i
	i := start
	digits := func() bool {
		n := i
		for i < len(s.b) && s.b[i] >= '0' && s.b[i] <= '9' {
			i++
		}
		return i > n
	}
	if i < len(s.b) && s.b[i] == '-' {
		i++
	}
	if i < len(s.b) && s.b[i] == '0' {
		i++
	} else if !digits() {
		return false
	}
	if i < len(s.b) && s.b[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(s.b) && (s.b[i] == 'e' || s.b[i] == 'E') {
		i++
		if i < len(s.b) && (s.b[i] == '+' || s.b[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	f, err := strconv.ParseFloat(string(s.b[start:i]), 64)
	if err != nil {
		return false
	}
	s.i = i
	*v = f
	*dst = v
	return true
}

// strings reads an array of strings, or null (nil).
func (s *jscan) strings(dst *[]string) bool {
	if s.null() {
		*dst = nil
		return true
	}
	if !s.eat('[') {
		return false
	}
	out := []string{}
	if s.eat(']') {
		*dst = out
		return true
	}
	for {
		str, ok := s.str()
		if !ok {
			return false
		}
		out = append(out, str)
		switch s.next() {
		case ',':
			s.i++
		case ']':
			s.i++
			*dst = out
			return true
		default:
			return false
		}
	}
}

// fieldSet notes the keys of an object read so far (a repeated key is the reflecting
// decoder's).
type fieldSet uint32

func (f *fieldSet) first(n int) bool {
	if *f&(1<<n) != 0 {
		return false
	}
	*f |= 1 << n
	return true
}

// decodeMessage reads a send's body into req, without reflection when it can (see the top of
// the file), with the reflecting decoder otherwise.
func decodeMessage(ctx *fasthttp.RequestCtx, req *messageRequest) error {
	if fastMessage(ctx.PostBody(), req) {
		return nil
	}
	*req = messageRequest{}
	return decodeBody(ctx, req)
}

// fastMessage is the fast path of decodeMessage: false when it gave up (req is then partly
// set).
func fastMessage(body []byte, req *messageRequest) bool {
	s := newScan(body)
	var seen fieldSet
	v := &req.vals
	return s.fields(func(key []byte) bool {
		switch string(key) {
		case "phone":
			return seen.first(0) && s.optStr(&req.Phone, &v.phone)
		case "type":
			return seen.first(1) && s.plainStr(&req.Type)
		case "message":
			return seen.first(2) && s.optStr(&req.Message, &v.message)
		case "text":
			return seen.first(3) && s.optStr(&req.Text, &v.text)
		case "media":
			return seen.first(4) && s.optStr(&req.Media, &v.media)
		case "fileUrl":
			return seen.first(5) && s.optStr(&req.FileURL, &v.fileURL)
		case "fileName":
			return seen.first(6) && s.plainStr(&req.FileName)
		case "caption":
			return seen.first(7) && s.plainStr(&req.Caption)
		case "ptt":
			return seen.first(8) && s.boolean(&req.PTT)
		case "lat":
			return seen.first(9) && s.optNum(&req.Lat, &v.lat)
		case "lng":
			return seen.first(10) && s.optNum(&req.Lng, &v.lng)
		case "name":
			return seen.first(11) && s.plainStr(&req.Name)
		case "address":
			return seen.first(12) && s.plainStr(&req.Address)
		case "contactName":
			return seen.first(13) && s.optStr(&req.ContactName, &v.contactName)
		case "contactPhone":
			return seen.first(14) && s.optStr(&req.ContactPhone, &v.contactPhone)
		case "question":
			return seen.first(15) && s.optStr(&req.Question, &v.question)
		case "options":
			return seen.first(16) && s.strings(&req.Options)
		case "multiple":
			return seen.first(17) && s.boolean(&req.Multiple)
		case "messageId":
			return seen.first(18) && s.optStr(&req.MessageID, &v.messageID)
		case "emoji":
			return seen.first(19) && s.optStr(&req.Emoji, &v.emoji)
		case "replyTo":
			return seen.first(20) && s.plainStr(&req.ReplyTo)
		case "typing":
			return seen.first(21) && s.boolean(&req.Typing)
		case "session_id":
			return seen.first(22) && s.plainStr(&req.SessionID)
		case "sendAt":
			return seen.first(23) && s.optStr(&req.SendAt, &v.sendAt)
		case "transactional":
			return seen.first(24) && s.boolean(&req.Transactional)
		}
		return false
	})
}

// messageVals holds the values a messageRequest's optional fields point to (the fast path's:
// one allocation with the request, not one per field).
type messageVals struct {
	phone, message, text, media, fileURL, contactName, contactPhone, question, messageID, emoji, sendAt string
	lat, lng                                                                                            float64
}

// decodeValidate reads a validate's body ({rawKey}) and returns the key, without reflection
// when it can. The key is read during the request only: from the fast path it is the body's
// bytes (no copy, and no request struct pointing into itself, which would go to the heap).
func decodeValidate(ctx *fasthttp.RequestCtx) (string, error) {
	if key, present, ok := fastValidate(ctx.PostBody()); ok {
		if !present || isBlank(key) {
			return "", missing("rawKey")
		}
		return key, nil
	}
	var req validateRequest
	if err := bind(ctx, &req, need("rawKey", &req.RawKey)); err != nil {
		return "", err
	}
	return *req.RawKey, nil
}

// fastValidate is decodeValidate's fast path: the key, whether it was there and not null, and
// false when it gave up.
func fastValidate(body []byte) (key string, present, ok bool) {
	if key, ok := bareValidate(body); ok {
		return key, true, true
	}
	s := newScanShared(body)
	seen := false
	ok = s.fields(func(k []byte) bool {
		if string(k) != "rawKey" || seen {
			return false
		}
		seen = true
		if s.null() {
			key, present = "", false
			return true
		}
		key, present = s.str()
		return present
	})
	if !ok {
		return "", false, false
	}
	return key, present, true
}

// bareValidate reads the body every client sends, {"rawKey":"<key>"} with no space and a key
// of ASCII other than control bytes, the quote and the backslash, without the scanner (about 0.1 µs
// of a validate in process, where the key's SHA-256 is 0.17): the key is the body's bytes.
// Anything else is the scanner's (false).
func bareValidate(body []byte) (string, bool) {
	const head, tail = `{"rawKey":"`, `"}`
	if len(body) < len(head)+len(tail) || string(body[:len(head)]) != head || string(body[len(body)-len(tail):]) != tail {
		return "", false
	}
	end := len(body) - len(tail)
	i := plainPrefix(body[:end], len(head))
	for ; i < end; i++ {
		if c := body[i]; c < 0x20 || c >= 0x80 || c == '"' || c == '\\' {
			return "", false
		}
	}
	return unsafe.String(unsafe.SliceData(body[len(head):]), end-len(head)), true
}

// isBlank is strings.TrimSpace(v) == "".
func isBlank(v string) bool {
	for _, r := range v {
		if !unicode.IsSpace(r) {
			return false
		}
	}
	return true
}

// decodeEdit reads an edit's body ({message} or {text}) into req, without reflection when it
// can.
func decodeEdit(ctx *fasthttp.RequestCtx, req *editRequest) error {
	if fastEdit(ctx.PostBody(), req) {
		return nil
	}
	*req = editRequest{}
	return decodeBody(ctx, req)
}

// fastEdit is decodeEdit's fast path.
func fastEdit(body []byte, req *editRequest) bool {
	s := newScan(body)
	var seen fieldSet
	return s.fields(func(key []byte) bool {
		switch string(key) {
		case "message":
			return seen.first(0) && s.optStr(&req.Message, &req.message)
		case "text":
			return seen.first(1) && s.optStr(&req.Text, &req.text)
		}
		return false
	})
}

// decodeSendImage reads a send-image's body into req, without reflection when it can.
func decodeSendImage(ctx *fasthttp.RequestCtx, req *sendImageRequest) error {
	if fastSendImage(ctx.PostBody(), req) {
		return nil
	}
	*req = sendImageRequest{}
	return decodeBody(ctx, req)
}

// fastSendImage is decodeSendImage's fast path.
func fastSendImage(body []byte, req *sendImageRequest) bool {
	s := newScan(body)
	var seen fieldSet
	return s.fields(func(key []byte) bool {
		switch string(key) {
		case "to":
			return seen.first(0) && s.optStr(&req.To, &req.to)
		case "image":
			return seen.first(1) && s.optStr(&req.Image, &req.image)
		case "caption":
			return seen.first(2) && s.plainStr(&req.Caption)
		case "fileName":
			return seen.first(3) && s.plainStr(&req.FileName)
		case "session_id":
			return seen.first(4) && s.plainStr(&req.SessionID)
		case "sendAt":
			return seen.first(5) && s.optStr(&req.SendAt, &req.sendAt)
		case "transactional":
			return seen.first(6) && s.boolean(&req.Transactional)
		}
		return false
	})
}
