package identity

import (
	"sync"
	"time"
)

// tokenCache remembers tokens that verified, keyed by the SHA-256 of the raw token, so the
// dashboard's repeated token costs a map lookup instead of an RSA verification. Entries are
// honoured only until their deadline; the size is bounded. Safe for concurrent use: mu guards
// entries.
type tokenCache struct {
	max     int
	mu      sync.Mutex
	entries map[[32]byte]cachedClaims
}

type cachedClaims struct {
	claims Claims
	until  time.Time
	kid    string // the token's key id: the entry is honoured while that key is published
	gen    uint64 // key-set generation at verification, for tokens without a kid
}

func newTokenCache(size int) *tokenCache {
	return &tokenCache{max: size, entries: make(map[[32]byte]cachedClaims)}
}

func (c *tokenCache) get(key [32]byte, now time.Time) (cachedClaims, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok {
		return cachedClaims{}, false
	}
	if !now.Before(e.until) {
		delete(c.entries, key)
		return cachedClaims{}, false
	}
	return e, true
}

func (c *tokenCache) put(key [32]byte, e cachedClaims, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries[key]; !ok && len(c.entries) >= c.max {
		c.evict(now)
	}
	c.entries[key] = e
}

func (c *tokenCache) drop(key [32]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.entries, key)
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
