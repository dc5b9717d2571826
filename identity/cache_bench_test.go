package identity

import (
	"strings"
	"testing"
	"time"
)

// BenchmarkTokenCacheHit is a signed-in request's lookup of its ID token (about 900 bytes),
// from both cores at once.
//
//	go test -run X -bench TokenCacheHit -cpu 1,2 ./identity
func BenchmarkTokenCacheHit(b *testing.B) {
	now := time.Now()
	c := newTokenCache(4096)
	tok := strings.Repeat("x", 900)
	c.put(tok, cachedClaims{claims: Claims{UID: "alice"}, until: now.Add(time.Hour)}, now)
	key := []byte(tok)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		k := append([]byte(nil), key...)
		for pb.Next() {
			if _, ok := c.get(k, now); !ok {
				b.Fatal("miss")
			}
		}
	})
}
