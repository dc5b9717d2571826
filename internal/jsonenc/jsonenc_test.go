package jsonenc

import (
	"encoding/json"
	"testing"
)

// Every string reads back through encoding/json as encoding/json itself writes it.
func TestAppendStringReadsBack(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uo\te`, "tab\tnl\ncr\r bell\x07 nul\x00", "é 日本 😀", "bad \xff\xfe utf8", "line\u2028sep\u2029",
		"<b>&amp;</b>"} {
		got := AppendString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatalf("%q: %s is not JSON: %v", s, got, err)
		}
		want, _ := json.Marshal(s)
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Fatalf("%q reads back as %q, want %q", s, back, wantBack)
		}
	}
}

// An empty string leaves the field out; any other is the key and the string.
func TestAppendField(t *testing.T) {
	if got := string(AppendField([]byte("{"), `"a":`, "")); got != "{" {
		t.Fatalf("empty: %s", got)
	}
	if got := string(AppendField([]byte("{"), `"a":`, `x"y`)); got != `{"a":"x\"y"` {
		t.Fatalf("set: %s", got)
	}
}

// The eight-byte test agrees with the byte-by-byte one for every byte in every lane.
func TestNeedsEscape8(t *testing.T) {
	one := func(c byte) bool { return c < 0x20 || c == '"' || c == '\\' || c >= 0x80 }
	for c := range 256 {
		for lane := range 8 {
			w := []byte("abcdefgh")
			w[lane] = byte(c)
			if got := needsEscape8(string(w)); got != one(byte(c)) {
				t.Fatalf("byte %#x in lane %d: %v", c, lane, got)
			}
		}
	}
	// Neighbouring lanes (a borrow must not leak a false answer either way).
	for _, s := range []string{"\x00\x00\x00\x00\x00\x00\x00\x00", "!!!!!!!!", "########", "[[[[[[[[", "]]]]]]]]", "\x1f\x20\x21\x22\x23\x5b\x5c\x5d", " ~ ~ ~ ~"} {
		want := false
		for i := range 8 {
			want = want || one(s[i])
		}
		if got := needsEscape8(s); got != want {
			t.Fatalf("%q: %v, want %v", s, got, want)
		}
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("plain ascii that is long enough")
	f.Add("q\"uo\\te and é and \x00 \xff")
	f.Fuzz(func(t *testing.T, s string) {
		var back string
		if err := json.Unmarshal(AppendString(nil, s), &back); err != nil {
			t.Fatalf("%q: not JSON: %v", s, err)
		}
		want, _ := json.Marshal(s)
		var wantBack string
		_ = json.Unmarshal(want, &wantBack)
		if back != wantBack {
			t.Fatalf("%q reads back as %q, want %q", s, back, wantBack)
		}
	})
}
