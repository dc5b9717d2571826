package sim

import (
	"fmt"
	"hash/fnv"
	"testing"
)

// lidOf's value is the one the sim has always given a number (its LIDs are stable across
// releases: a journal or a test may hold one): FNV-1a of "lid:"+number through hash/fnv, in
// decimal through fmt, as it was computed before it was written out by hand.
func TestLidOf(t *testing.T) {
	want := func(phone string) string {
		h := fnv.New64a()
		h.Write([]byte("lid:" + phone))
		return fmt.Sprintf("%d", 100_000_000_000_000+h.Sum64()%900_000_000_000_000)
	}
	for _, p := range []string{"", "1", "15550000001", "491512345678", "4915000000999", "120363000000000000@g.us"} {
		if got, w := lidOf(p), want(p); got != w {
			t.Errorf("lidOf(%q) = %s, want %s", p, got, w)
		}
	}
	if n := testing.AllocsPerRun(100, func() { _ = lidOf("15550000001") }); n > 1 {
		t.Errorf("lidOf allocates %.0f times, want at most 1 (its string)", n)
	}
}
