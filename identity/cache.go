package identity

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
)

// tokenCache remembers tokens that verified, so the dashboard's repeated token costs a lookup
// instead of an RSA verification. It is an open-addressed table of fixed size: a token's slot
// is found from a seeded hash of its tail (hashOf), and the entry there is honoured only if it
// holds the very same token (compared whole: exact, where a digest is only unlikely to
// collide). A lookup takes no lock and walks no tree: a hash of 32 bytes, one or two cache
// lines of slots, the entry and its token. It replaced a sync.Map keyed by the token (whose
// trie walk and key comparison were 0.33 µs of a client status request under load,
// bench/README.md, issue 32's seventh pass), which had replaced a mutex-guarded map keyed by a
// SHA-256 of the token (0.55 µs).
//
// The tokens are the ones the server read anyway; 4,096 of them are a few MB. Entries are
// honoured only until their deadline. Puts, rare, are serialised by mu; the size is bounded by
// max (n counts the entries).
type tokenCache struct {
	max   int
	seed  maphash.Seed
	mask  uint64
	slots []tokenSlot

	mu sync.Mutex // serialises puts and evictions
	n  atomic.Int64
}

// tokenSlot is one place of the table. tag is the entry's hash, read before the entry itself
// so a probe past other tokens' slots touches no entry; the entry is what decides (a tag
// written before or after its entry only sends a lookup to the comparison or past it).
type tokenSlot struct {
	tag atomic.Uint64
	e   atomic.Pointer[cachedClaims]
}

// tokenProbe is how many slots from its home a token may sit: the table has at least twice
// as many slots as entries, so a window of this many is rarely full.
const tokenProbe = 8

// cachedClaims is an entry (never changed once put). What a hit reads comes first, one cache
// line of the entry's 192 bytes (the size class aligns it): the hash, the token's place, the
// deadline and the caller's Memo; the key's id and generation (OIDC mode) and the claims follow
// (a caller that only needs the Memo reads none of them: Verifier.CachedMemo).
type cachedClaims struct {
	hash   uint64
	token  string
	until  time.Time
	memo   Memo   // the caller's (VerifyBytesMemo, CachedMemo)
	kid    string // the token's key id: the entry is honoured while that key is published
	gen    uint64 // key-set generation at verification, for tokens without a kid
	claims Claims
}

func newTokenCache(size int) *tokenCache {
	n := 16
	for n < 2*size {
		n *= 2
	}
	return &tokenCache{max: size, seed: maphash.MakeSeed(), mask: uint64(n - 1), slots: make([]tokenSlot, n)}
}

// view is key as a string for a lookup that keeps nothing of it (no copy).
func view(key []byte) string { return unsafe.String(unsafe.SliceData(key), len(key)) }

// hashOf places a token: a seeded hash of its last 32 bytes (and its length). A verified
// token ends in its signature, whose bytes differ between any two tokens and which no one can
// aim without the issuer's key; only verified tokens are put, and a lookup compares the whole
// token, so a forged token with a valid one's tail only finds that entry and misses.
// maphash hashes in 128-byte rounds: the whole ~900-byte token cost more than the lookup.
func (c *tokenCache) hashOf(key string) uint64 {
	tail := key[max(len(key)-32, 0):]
	return maphash.String(c.seed, tail) ^ uint64(len(key))*0x9e3779b97f4a7c15
}

// find returns the slot holding key's entry and the entry, or nil.
func (c *tokenCache) find(key string, h uint64) (*tokenSlot, *cachedClaims) {
	for i := range uint64(tokenProbe) {
		s := &c.slots[(h+i)&c.mask]
		if s.tag.Load() != h {
			continue
		}
		if e := s.e.Load(); e != nil && e.hash == h && e.token == key {
			return s, e
		}
	}
	return nil, nil
}

func (c *tokenCache) get(key []byte, now time.Time) (*cachedClaims, bool) {
	s, e := c.find(view(key), c.hashOf(view(key)))
	if e == nil {
		return nil, false
	}
	if !now.Before(e.until) {
		if s.e.CompareAndSwap(e, nil) {
			c.n.Add(-1)
		}
		return nil, false
	}
	return e, true
}

func (c *tokenCache) put(key string, e cachedClaims, now time.Time) {
	e.hash, e.token = c.hashOf(key), key
	c.mu.Lock()
	defer c.mu.Unlock()
	if s, old := c.find(key, e.hash); old != nil {
		s.e.Store(&e) // a token verified again: its newer entry
		return
	}
	if c.n.Load() >= int64(c.max) {
		c.evict(now, e.hash)
	}
	// The first empty or expired slot of the window, else the live entry due first.
	var at *tokenSlot
	var due time.Time
	for i := range uint64(tokenProbe) {
		s := &c.slots[(e.hash+i)&c.mask]
		old := s.e.Load()
		if old == nil {
			at = s
			break
		}
		if !now.Before(old.until) {
			if s.e.CompareAndSwap(old, nil) {
				c.n.Add(-1)
			}
			at = s
			break
		}
		if at == nil || old.until.Before(due) {
			at, due = s, old.until
		}
	}
	at.tag.Store(e.hash)
	if at.e.Swap(&e) == nil {
		c.n.Add(1)
	}
}

func (c *tokenCache) drop(key []byte) {
	if s, e := c.find(view(key), c.hashOf(view(key))); e != nil && s.e.CompareAndSwap(e, nil) {
		c.n.Add(-1)
	}
}

// evict drops expired entries and, if the cache is still full, makes room: an entry of the
// window the next put goes to (its own slot then replaces it), else the first live entry
// found after that window. Called with mu held, only when the cache is full (rare).
func (c *tokenCache) evict(now time.Time, h uint64) {
	for i := range c.slots {
		s := &c.slots[i]
		if e := s.e.Load(); e != nil && !now.Before(e.until) && s.e.CompareAndSwap(e, nil) {
			c.n.Add(-1)
		}
	}
	if c.n.Load() < int64(c.max) {
		return
	}
	for i := range uint64(len(c.slots)) {
		s := &c.slots[(h+i)&c.mask]
		if e := s.e.Load(); e != nil && s.e.CompareAndSwap(e, nil) {
			c.n.Add(-1)
			return
		}
	}
}

func (c *tokenCache) len() int { return int(c.n.Load()) }
