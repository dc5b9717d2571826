package engine

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/gateway/gateway/domain"
)

// TestMessageIDShape checks the hand-written id against the encoding it replaced, and the
// derived id's stability (a retry after a crash names the same message).
func TestMessageIDShape(t *testing.T) {
	for range 1000 {
		var b [10]byte
		_, _ = rand.Read(b[:])
		if got, want := domain.WebMessageID(&b), "3EB0"+strings.ToUpper(hex.EncodeToString(b[:])); got != want {
			t.Fatalf("WebMessageID(%x) = %q, want %q", b, got, want)
		}
	}
	for _, b := range [][10]byte{{}, {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}} {
		if got, want := domain.WebMessageID(&b), "3EB0"+strings.ToUpper(hex.EncodeToString(b[:])); got != want {
			t.Fatalf("WebMessageID(%x) = %q, want %q", b, got, want)
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

// TestMessageIDsSortAsMade checks that ids made one after another sort one after another
// (their first 4 bytes are the clock in microseconds, modulo 2^32: compared as such, so that a
// wrap during the test is no failure), and that their random part differs.
func TestMessageIDsSortAsMade(t *testing.T) {
	prev := NewMessageID()
	for range 2000 {
		id := NewMessageID()
		a, errA := strconv.ParseUint(prev[4:12], 16, 32)
		b, errB := strconv.ParseUint(id[4:12], 16, 32)
		if errA != nil || errB != nil {
			t.Fatalf("ids %q, %q: no clock prefix", prev, id)
		}
		if uint32(b)-uint32(a) >= 1<<31 {
			t.Fatalf("%q made after %q sorts before it", id, prev)
		}
		if id == prev || id[12:] == prev[12:] {
			t.Fatalf("two ids %q, %q with one random part", prev, id)
		}
		prev = id
	}
}

func sha256Sum(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// DerivedIDOn names the message an Idempotency-Key made on a day: the same bytes hashed as the
// release that wrote its records (fmt's "%s\x00%s\x00%d"), or a retry after an upgrade would
// name a new message and send it again.
func TestDerivedIDOnUnchanged(t *testing.T) {
	long := strings.Repeat("k", 300) // past DerivedIDOn's buffer on the stack
	for _, c := range []struct {
		keyID, key string
		day        int64
	}{{"k1", "order-1", 20425}, {"", "", 0}, {"key_abc", "x\x00y", -1}, {"k", long, 1 << 40}, {long, "é", -20425}} {
		sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%d", c.keyID, c.key, c.day))
		want := domain.WebMessageID((*[10]byte)(sum[:10]))
		if got := DerivedIDOn(c.keyID, c.key, c.day); got != want {
			t.Errorf("DerivedIDOn(%q, %q, %d) = %s, want %s", c.keyID, c.key, c.day, got, want)
		}
	}
}
