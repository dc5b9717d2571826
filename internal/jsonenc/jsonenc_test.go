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
