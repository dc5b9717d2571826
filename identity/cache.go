package identity

import (
	"sync"
	"time"
)

// tokenCache remembers tokens that verified, keyed by the raw token itself, so the dashboard's
// repeated token costs a map lookup instead of an RSA verification. The map's own hash and
// its full comparison of the key stand in for the SHA-256 it was keyed by before: that was
// 0.55 µs of the 12 µs a client status request cost (bench/README.md, issue 32), and a whole
// token compared is exact where a digest is only unlikely to collide. The tokens are the
// ones the server read anyway; 4,096 of them are a few MB. Entries are
// honoured only until their deadline; the size is bounded. Safe for concurrent use: mu guards
// entries.
type tokenCache struct {
	max     int
	mu      sync.Mutex
	entries map[string]cachedClaims
}

type cachedClaims struct {
	claims Claims
	until  time.Time
	kid    string // the token's key id: the entry is honoured while that key is published
	gen    uint64 // key-set generation at verification, for tokens without a kid
}

func newTokenCache(size int) *tokenCache {
	return &tokenCache{max: size, entries: make(map[string]cachedClaims)}
}

func (c *tokenCache) get(key []byte, now time.Time) (cachedClaims, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[string(key)] // no copy: the compiler looks the bytes up as they are
	if !ok {
		return cachedClaims{}, false
	}
	if !now.Before(e.until) {
		delete(c.entries, string(key))
		return cachedClaims{}, false
	}
	return e, true
}

func (c *tokenCache) put(key string, e cachedClaims, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.max {
		c.evict(now)
	}
	c.entries[key] = e
}

func (c *tokenCache) drop(key []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, string(key))
}

// evict drops expired entries and, if the cache is still full, an arbitrary eighth of it
// (map order is random), so a full cache of live tokens is not swept on every insert.
func (c *tokenCache) evict(now time.Time) {
	for k, e := range c.entries {
		if !now.Before(e.until) {
			delete(c.entries, k)
		}
	}
	if len(c.entries) < c.max {
		return
	}
	drop := max(c.max/8, 1)
	for k := range c.entries {
		if drop == 0 {
			break
		}
		delete(c.entries, k)
		drop--
	}
}

func (c *tokenCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
