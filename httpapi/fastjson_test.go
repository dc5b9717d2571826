package httpapi

import (
	stdjson "encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-json"
)

// Bodies of every kind of send (and their near misses), for the table test and the fuzzer's
// seeds.
var sendBodies = []string{
	`{"phone":"+1 555 010 0001","message":"hello"}`,
	` { "phone" : "15550100001" , "message" : "a \"quoted\" text\nwith lines \u00e9 \ud83d\ude00 \/ \\ \t" } `,
	`{"phone":"15550100001","type":"image","caption":"the blue one","media":"data:image/png;base64,iVBORw0KGgo=","fileName":"a.png"}`,
	`{"phone":"15550100001","type":"audio","ptt":true,"media":"https://example.com/a.ogg"}`,
	`{"phone":"15550100001","type":"document","fileUrl":"https://example.com/a.pdf","caption":""}`,
	`{"phone":"15550100001","type":"location","lat":-33.86882,"lng":151.20929,"name":"Opera","address":"Sydney"}`,
	`{"phone":"15550100001","type":"location","lat":0,"lng":-0.5e1}`,
	`{"phone":"15550100001","type":"location","lat":1E400,"lng":1}`,
	`{"phone":"15550100001","type":"contact","contactName":"Ann","contactPhone":"+49 151 1234567"}`,
	`{"phone":"120363000000000001@g.us","type":"poll","question":"Lunch?","options":["Yes","No","Maybe"],"multiple":true}`,
	`{"phone":"15550100001","type":"poll","question":"Lunch?","options":[]}`,
	`{"type":"reaction","messageId":"3EB0ABC","emoji":"👍"}`,
	`{"phone":"15550100001","type":"reaction","messageId":"3EB0ABC","emoji":""}`,
	`{"phone":"15550100001","message":"hi","replyTo":"IN1","typing":true,"session_id":"s1"}`,
	`{"phone":null,"message":null,"text":"t","lat":null,"options":null,"ptt":null,"type":null}`,
	`{"phone":"15550100001","text":"dashboard text"}`,
	`{"phone":"15550100001","message":"later","sendAt":"2026-12-01T09:00:00Z","transactional":true}`,
	`{"phone":"15550100001","message":"now","sendAt":null,"transactional":false}`,
	`{"phone":"15550100001","type":"template","template":{"name":"order_shipped","language":"en_US","parameters":["Ann","1042"]}}`,
	`{"phone":"15550100001","type":"buttons","text":"Confirm?","buttons":[{"id":"y","title":"Yes"},{"id":"n","title":"No"}],"header":"h","footer":"f"}`,
	`{"phone":"15550100001","type":"list","text":"Pick","button":"Menu","sections":[{"title":"s","rows":[{"id":"r","title":"R"}]}]}`,
	`{}`,
	``,
	`   `,
	`[]`,
	`null`,
	`"phone"`,
	`{"phone":15550100001,"message":"hi"}`,
	`{"phone":"1","message":true}`,
	`{"phone":"1","ptt":"yes"}`,
	`{"phone":"1","options":"a"}`,
	`{"phone":"1","options":[1,2]}`,
	`{"phone":"1","options":["a",null]}`,
	`{"phone":"1","lat":"1"}`,
	`{"phone":"1","lat":01}`,
	`{"phone":"1","lat":1.}`,
	`{"phone":"1","lat":-}`,
	`{"Phone":"1","MESSAGE":"case"}`,
	`{"phone":"1","phone":"2"}`,
	`{"phone":"1","extra":{"a":[1,2,{"b":null}]}}`,
	`{"phone":"1",}`,
	`{"phone":"1"} x`,
	`{"phone":"1"}{}`,
	`{"phone":"\ud800"}`,
	`{"phone":"\ud83d\u0041"}`,
	"{\"phone\":\"\xff\xfe\"}",
	"{\"phone\":\"a\x01b\"}",
	`{"phone":"a\qb"}`,
	`{"ph\u006fne":"1"}`,
	`{"phone":"1","message":"` + "\u2028\u2029" + `"}`,
}

// decodeBoth reads body with the fast path and with the reflecting decoder; each result as the
// JSON of its exported fields (the pointers' values compared, not where they point; an empty
// list told from a missing one).
func decodeBoth(body []byte) (fast string, fastOK bool, slow string, slowErr error) {
	var f, s messageRequest
	fastOK = fastMessage(body, &f)
	slowErr = json.Unmarshal(body, &s)
	fb, _ := stdjson.Marshal(f)
	sb, _ := stdjson.Marshal(s)
	return string(fb), fastOK, string(sb), slowErr
}

// Every body the fast path reads, the reflecting decoder reads the same way.
func TestFastDecoderAgreesWithReflection(t *testing.T) {
	read := 0
	for _, b := range sendBodies {
		fast, ok, slow, err := decodeBoth([]byte(b))
		if !ok {
			continue
		}
		read++
		if err != nil {
			t.Errorf("%s: the fast path read what the reflecting decoder refuses (%v)", b, err)
		} else if fast != slow {
			t.Errorf("%s:\n fast %s\n slow %s", b, fast, slow)
		}
	}
	if read < 14 {
		t.Fatalf("the fast path read only %d of the well-formed bodies", read)
	}
	// What it gives up on is the reflecting decoder's: an answer identical to before.
	// The Cloud API's fields (a template with its parameters, buttons, a list) are the
	// reflecting decoder's too.
	for _, b := range []string{`{"Phone":"1"}`, `{"phone":"1","phone":"2"}`, `{"phone":"\ud800"}`, `{"phone":"1","extra":1}`, ``,
		`{"phone":"1","type":"template","template":{"name":"t","language":"en","parameters":["a"]}}`,
		`{"phone":"1","type":"buttons","text":"?","buttons":[{"id":"y","title":"Yes"}]}`,
		`{"phone":"1","type":"list","text":"?","button":"b","sections":[]}`, `{"phone":"1","message":"m","header":"h","footer":"f"}`} {
		var req messageRequest
		if fastMessage([]byte(b), &req) {
			t.Errorf("%s: read by the fast path", b)
		}
	}
	for _, b := range []string{`{"rawKey":"svc_live_x"}`, `{"rawKey":null}`, `{"rawKey":"a","rawKey":"b"}`, `{"rawkey":"a"}`, `{"rawKey":1}`} {
		if msg := validateAgrees([]byte(b)); msg != "" {
			t.Error(msg)
		}
	}
}

// Bodies of the other sends: send-image and an edit (and their near misses).
var otherBodies = []string{
	`{"to":"15550100001","image":"data:image/png;base64,iVBORw0KGgo=","caption":"c","fileName":"a.png","session_id":"s1"}`,
	`{"to":"15550100001","image":"https://example.com/a.png"}`,
	`{"to":"15550100001","image":"https://example.com/a.png","sendAt":"2026-12-01T09:00:00Z","transactional":true}`,
	`{"to":null,"image":null,"caption":null}`,
	`{"to":"1","to":"2"}`,
	`{"To":"1"}`,
	`{"to":1}`,
	`{"message":"fixed typo"}`,
	`{"text":"fixed \u00e9"}`,
	`{"message":null,"text":"t"}`,
	`{"message":"a","message":"b"}`,
	`{"message":"a","extra":1}`,
	`{"message":true}`,
}

// sameRead tells whether the fast path and the reflecting decoder read body the same way
// (when the fast path reads it at all), for request type T.
func sameRead[T any](body []byte, fast func([]byte, *T) bool) (read bool, fj, sj string, err error) {
	var f, s T
	if !fast(body, &f) {
		return false, "", "", nil
	}
	err = json.Unmarshal(body, &s)
	fb, _ := stdjson.Marshal(f)
	sb, _ := stdjson.Marshal(s)
	return true, string(fb), string(sb), err
}

// The send-image and edit decoders read what the reflecting decoder reads.
func TestFastSendImageAndEditAgree(t *testing.T) {
	read := 0
	for _, b := range otherBodies {
		for _, check := range []func([]byte) (bool, string, string, error){
			func(b []byte) (bool, string, string, error) { return sameRead(b, fastSendImage) },
			func(b []byte) (bool, string, string, error) { return sameRead(b, fastEdit) },
		} {
			ok, fast, slow, err := check([]byte(b))
			if !ok {
				continue
			}
			read++
			if err != nil || fast != slow {
				t.Errorf("%s: fast %s, slow %s %v", b, fast, slow, err)
			}
		}
	}
	if read < 6 {
		t.Fatalf("the fast paths read only %d bodies", read)
	}
	for _, b := range []string{`{"to":"1","to":"2"}`, `{"To":"1"}`, `{"message":"a","extra":1}`} {
		var im sendImageRequest
		var ed editRequest
		if fastSendImage([]byte(b), &im) || fastEdit([]byte(b), &ed) {
			t.Errorf("%s: read by a fast path", b)
		}
	}
}

// validateAgrees checks fastValidate against the reflecting decoder on body: "" when they
// agree (or the fast path gave up), else what differs.
func validateAgrees(body []byte) string {
	key, present, ok := fastValidate(body)
	if !ok {
		return ""
	}
	var slow validateRequest
	if err := json.Unmarshal(body, &slow); err != nil {
		return fmt.Sprintf("validate %q: the fast path read what the reflecting decoder refuses (%v)", body, err)
	}
	if present != (slow.RawKey != nil) || present && key != *slow.RawKey {
		return fmt.Sprintf("validate %q: fast %q (present %v), slow %v", body, key, present, slow.RawKey)
	}
	return ""
}

// FuzzFastDecoders: `go test -run X -fuzz FuzzFastDecoders ./httpapi`.
func FuzzFastDecoders(f *testing.F) {
	for _, b := range append(slices.Clip(sendBodies), otherBodies...) {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		if ok, fast, slow, err := sameRead(body, fastSendImage); ok && (err != nil || fast != slow) {
			t.Fatalf("send-image %q: fast %s, slow %s %v", body, fast, slow, err)
		}
		if ok, fast, slow, err := sameRead(body, fastEdit); ok && (err != nil || fast != slow) {
			t.Fatalf("edit %q: fast %s, slow %s %v", body, fast, slow, err)
		}
		if msg := validateAgrees(body); msg != "" {
			t.Fatal(msg)
		}
		fast, ok, slow, err := decodeBoth(body)
		if !ok {
			return
		}
		if err != nil {
			t.Fatalf("%q: the fast path read what the reflecting decoder refuses (%v)", body, err)
		}
		if fast != slow {
			t.Fatalf("%q:\n fast %s\n slow %s", body, fast, slow)
		}
	})
}

// TestAppendTS: the hand-written timestamp is AppendFormat(tsLayout)'s, to the millisecond
// (truncated, never rounded), for any instant and zone.
func TestAppendTS(t *testing.T) {
	times := []time.Time{{}, time.Unix(0, 0), time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2026, 11, 28, 21, 9, 5, 1_999_999, time.FixedZone("x", -7*3600-1800))}
	r := rand.New(rand.NewPCG(1, 2))
	for range 10000 {
		times = append(times, time.Unix(r.Int64N(400*365*86400)-200*365*86400, r.Int64N(1e9)))
	}
	for _, tm := range times {
		if got, want := string(appendTS(nil, tm)), tm.UTC().Format(tsLayout); got != want {
			t.Fatalf("appendTS(%v) = %s, want %s", tm, got, want)
		}
	}
}

// TestPlainPrefix: the word-at-a-time skip stops at or before the first byte a string cannot
// hold as it is, at every position and for every byte value, and never stops early on a word of
// plain bytes.
func TestPlainPrefix(t *testing.T) {
	plain := func(c byte) bool { return c >= 0x20 && c < 0x80 && c != '"' && c != '\\' }
	for n := range 24 {
		for at := range n {
			for c := range 256 {
				b := make([]byte, n)
				for i := range b {
					b[i] = 'a' + byte(i%26)
				}
				b[at] = byte(c)
				got := plainPrefix(b, 0)
				first := n
				if !plain(byte(c)) {
					first = at
				}
				if got > first || got%8 != 0 || first-got >= 8 && first != n || first == n && got != n/8*8 {
					t.Fatalf("n=%d byte %#x at %d: skipped to %d, first special at %d", n, c, at, got, first)
				}
			}
		}
	}
}

// bareValidate takes {"rawKey":"<key>"} with a key of plain bytes only, whatever the key's
// length and wherever a byte the scanner must see sits (the word-at-a-time skip, then the byte
// loop); what it takes is what the reflecting decoder reads, and it leaves anything else to
// the scanner.
func TestBareValidate(t *testing.T) {
	for n := range 40 {
		key := strings.Repeat("k", n)
		body := []byte(`{"rawKey":"` + key + `"}`)
		if got, ok := bareValidate(body); !ok || got != key {
			t.Fatalf("%s: %q %v", body, got, ok)
		}
		if msg := validateAgrees(body); msg != "" {
			t.Fatal(msg)
		}
		for i := range n {
			for _, c := range []byte{'"', '\\', 0x00, 0x1f, 0x80, 0xff} {
				b := slices.Clone(body)
				b[len(`{"rawKey":"`)+i] = c
				if got, ok := bareValidate(b); ok {
					t.Fatalf("%q: read %q", b, got)
				}
				if msg := validateAgrees(b); msg != "" {
					t.Fatal(msg)
				}
			}
		}
	}
	for _, b := range []string{`{"rawKey":"a"} `, ` {"rawKey":"a"}`, `{"rawKey": "a"}`, `{"rawKey":"a"}}`, `{"rawKey":"a"}"}`,
		`{"rawKey":"a","x":"b"}`, `{"rawkey":"a"}`, `{"rawKey":"`, `{"rawKey":"}`, `"}`} {
		if got, ok := bareValidate([]byte(b)); ok {
			t.Errorf("%s: read %q", b, got)
		}
		if msg := validateAgrees([]byte(b)); msg != "" {
			t.Error(msg)
		}
	}
	if got, ok := bareValidate([]byte("{\"rawKey\":\"a\x7fb\"}")); !ok || got != "a\x7fb" {
		t.Errorf("DEL: %q %v", got, ok)
	}
}
