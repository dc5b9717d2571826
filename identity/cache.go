package identity

import (
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// tokenCache remembers tokens that verified, keyed by the raw token itself, so the dashboard's
// repeated token costs a map lookup instead of an RSA verification. The map's own hash and
// its full comparison of the key stand in for the SHA-256 it was keyed by before: that was
// 0.55 µs of the 12 µs a client status request cost (bench/README.md, issue 32), and a whole
// token compared is exact where a digest is only unlikely to collide. The tokens are the
// ones the server read anyway; 4,096 of them are a few MB. Entries are honoured only until
// their deadline; the size is bounded (n counts the entries, approximately while puts race).
// A lookup takes no lock (sync.Map): every signed-in request makes one, from every core, and a
// mutex's cache line moved between the cores on each (bench/README.md, third pass); puts, rare,
// are serialised by mu so the bound holds.
type tokenCache struct {
	max     int
	mu      sync.Mutex // serialises puts and evictions
	entries sync.Map   // string → *cachedClaims
	n       atomic.Int64
}

type cachedClaims struct {
	claims Claims
	until  time.Time
	kid    string // the token's key id: the entry is honoured while that key is published
	gen    uint64 // key-set generation at verification, for tokens without a kid
}

func newTokenCache(size int) *tokenCache {
	return &tokenCache{max: size}
}

// view is key as a string for a lookup that keeps nothing of it (no copy).
func view(key []byte) string { return unsafe.String(unsafe.SliceData(key), len(key)) }

func (c *tokenCache) get(key []byte, now time.Time) (cachedClaims, bool) {
	v, ok := c.entries.Load(view(key))
	if !ok {
		return cachedClaims{}, false
	}
	e := v.(*cachedClaims)
	if !now.Before(e.until) {
		if c.entries.CompareAndDelete(view(key), e) {
			c.n.Add(-1)
		}
		return cachedClaims{}, false
	}
	return *e, true
}

func (c *tokenCache) put(key string, e cachedClaims, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.entries.Load(key); !ok && c.n.Load() >= int64(c.max) {
		c.evict(now)
	}
	if _, loaded := c.entries.Swap(key, &e); !loaded {
		c.n.Add(1)
	}
}

func (c *tokenCache) drop(key []byte) {
	if _, loaded := c.entries.LoadAndDelete(view(key)); loaded {
		c.n.Add(-1)
	}
}

// evict drops expired entries and, if the cache is still full, an arbitrary eighth of it
// (map order is random), so a full cache of live tokens is not swept on every insert. Called
// with mu held.
func (c *tokenCache) evict(now time.Time) {
	c.entries.Range(func(k, v any) bool {
		if !now.Before(v.(*cachedClaims).until) && c.entries.CompareAndDelete(k, v) {
			c.n.Add(-1)
		}
		return true
	})
	if c.n.Load() < int64(c.max) {
		return
	}
	drop := max(c.max/8, 1)
	c.entries.Range(func(k, v any) bool {
		if drop == 0 {
			return false
		}
		if c.entries.CompareAndDelete(k, v) {
			c.n.Add(-1)
		}
		drop--
		return true
	})
}

func (c *tokenCache) len() int { return int(c.n.Load()) }
