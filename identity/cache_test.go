package identity

import (
	"fmt"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// The cache's bound holds, an expired entry is never honoured (and goes), a dropped one is
// gone, and lookups race with puts safely (-race) without allocating.
func TestTokenCacheBoundsAndExpiry(t *testing.T) {
	now := time.Date(2026, 11, 29, 1, 0, 0, 0, time.UTC)
	c := newTokenCache(16)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				key := fmt.Sprintf("token-%d-%d", w, i)
				c.put(key, cachedClaims{claims: Claims{UID: key}, until: now.Add(time.Hour)}, now)
				if e, ok := c.get([]byte(key), now); ok && e.claims.UID != key {
					t.Errorf("%s read back as %s", key, e.claims.UID)
				}
			}
		}()
	}
	wg.Wait()
	if n := c.len(); n > 16 || n == 0 {
		t.Fatalf("%d entries, want 1..16", n)
	}
	c.put("short", cachedClaims{until: now.Add(time.Second)}, now)
	if _, ok := c.get([]byte("short"), now); !ok {
		t.Fatal("a live entry was not found")
	}
	before := c.len()
	if _, ok := c.get([]byte("short"), now.Add(time.Second)); ok {
		t.Fatal("an entry was honoured at its deadline")
	}
	if c.len() != before-1 {
		t.Fatalf("the expired entry stayed: %d entries, want %d", c.len(), before-1)
	}
	c.put("gone", cachedClaims{until: now.Add(time.Hour)}, now)
	c.drop([]byte("gone"))
	if _, ok := c.get([]byte("gone"), now); ok {
		t.Fatal("a dropped entry was found")
	}
	key := []byte("token-0-99")
	if n := testing.AllocsPerRun(100, func() { c.get(key, now) }); n != 0 {
		t.Fatalf("%v allocations per lookup", n)
	}
}

// TestCachedClaimsLayout: what a cache hit reads (the hash, the token, the deadline, the Memo)
// is the entry's first 64 bytes, and the entry's size class keeps them on one cache line.
func TestCachedClaimsLayout(t *testing.T) {
	var e cachedClaims
	if end := unsafe.Offsetof(e.memo) + unsafe.Sizeof(e.memo); end > 64 {
		t.Errorf("the hit's fields end at byte %d of the entry", end)
	}
	if size := unsafe.Sizeof(e); size%64 != 0 {
		t.Errorf("the entry is %d bytes, not a multiple of a cache line: its size class does not align it", size)
	}
}
