package engine

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
)

// TestMessageIDShape checks the hand-written id against the encoding it replaced, and the
// derived id's stability (a retry after a crash names the same message).
func TestMessageIDShape(t *testing.T) {
	for range 1000 {
		var b [10]byte
		_, _ = rand.Read(b[:])
		if got, want := messageID(&b), "3EB0"+strings.ToUpper(hex.EncodeToString(b[:])); got != want {
			t.Fatalf("messageID(%x) = %q, want %q", b, got, want)
		}
	}
	for _, b := range [][10]byte{{}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}} {
		if got, want := messageID(&b), "3EB0"+strings.ToUpper(hex.EncodeToString(b[:])); got != want {
			t.Fatalf("messageID(%x) = %q, want %q", b, got, want)
		}
	}
	if id := NewMessageID(); len(id) != 24 || !strings.HasPrefix(id, "3EB0") || strings.ToUpper(id) != id {
		t.Fatalf("NewMessageID() = %q", id)
	}
	// DerivedID is a function of its inputs, with the same value as before this encoding.
	if got := DerivedID("k1", "order-1042"); got != DerivedID("k1", "order-1042") || got == DerivedID("k1", "order-1043") {
		t.Fatalf("DerivedID not a function of its inputs: %q", got)
	}
	if got, want := DerivedID("k1", "order-1042"), "3EB0"+strings.ToUpper(hex.EncodeToString(sha256Sum("k1\x00order-1042")[:10])); got != want {
		t.Fatalf("DerivedID = %q, want %q", got, want)
	}
}

func sha256Sum(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}
