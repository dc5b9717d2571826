package fakegraph

import (
	"encoding/base64"
	"strings"
	"testing"
)

// The fake's message ids are made as Meta's: they name the contact, and a client can put them
// in a path as they are (no '/' or '+').
func TestWamidIsMetasShape(t *testing.T) {
	for range 2000 {
		id := wamid("16505076520")
		if strings.ContainsAny(id, "/+") {
			t.Fatalf("%s holds a '/' or a '+'", id)
		}
		raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(id, "wamid."))
		if err != nil || len(raw) != 3+11+6+20+1 || string(raw[3:14]) != "16505076520" {
			t.Fatalf("%s decodes to %q (%v)", id, raw, err)
		}
	}
}
