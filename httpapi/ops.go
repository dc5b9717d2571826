package httpapi

import (
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/engine"
)

// Guess limits: the public routes that take guesses (API-key validation, the store webhook
// receiver's signatures) allow guessBurst failed attempts per client (or shop), refilled at
// guessRate per second; past that they answer 429 too_many_attempts until the bucket
// refills. Successful calls cost nothing, so legitimate traffic is never slowed.
const (
	guessBurst      = 20
	guessRate       = 2.0
	guessMaxBuckets = 100_000
	// ID tokens that do not verify: a larger budget (a browser with a stale token retries a
	// few calls at once), and only failing tokens are ever refused.
	signinBurst = 200
	signinRate  = 20.0
)

// guessLimits holds one failure bucket per key. Safe for concurrent use: mu guards buckets.
// A key without a bucket has its whole budget, and a bucket that refilled is dropped, so while
// no caller has failures outstanding (held is 0) a call is allowed without taking mu: every
// validate asks, and a mutex both cores take in turn is a cache line they pass back and forth.
type guessLimits struct {
	mu          sync.Mutex
	buckets     map[string]*guessBucket
	held        atomic.Int64 // len(buckets), written under mu
	now         func() time.Time
	burst, rate float64
}

type guessBucket struct {
	tokens float64
	at     time.Time
}

func newGuessLimits() *guessLimits { return newGuessLimitsOf(guessBurst, guessRate) }

func newGuessLimitsOf(burst, rate float64) *guessLimits {
	return &guessLimits{buckets: map[string]*guessBucket{}, now: time.Now, burst: burst, rate: rate}
}

// anyHeld tells whether some caller has failures outstanding (else every caller is allowed).
func (g *guessLimits) anyHeld() bool { return g.held.Load() != 0 }

// allow says whether key has a failure left to spend.
func (g *guessLimits) allow(key string) bool { return g.allowBytes(unsafeBytes(key)) }

// allowBytes is allow of a key in bytes (looked up without a copy).
func (g *guessLimits) allowBytes(key []byte) bool {
	if !g.anyHeld() {
		return true
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	b, ok := g.buckets[string(key)]
	if !ok {
		return true
	}
	if g.refill(b); b.tokens >= g.burst {
		delete(g.buckets, string(key)) // refilled: the same as no bucket
		g.held.Store(int64(len(g.buckets)))
		return true
	}
	return b.tokens >= 1
}

// fail spends one failure of key.
func (g *guessLimits) fail(key string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	b, ok := g.buckets[key]
	if !ok {
		if len(g.buckets) >= guessMaxBuckets {
			g.sweep()
		}
		b = &guessBucket{tokens: g.burst, at: g.now()}
		g.buckets[key] = b
		g.held.Store(int64(len(g.buckets)))
	}
	g.refill(b)
	b.tokens = max(b.tokens-1, 0)
}

func (g *guessLimits) refill(b *guessBucket) {
	now := g.now()
	b.tokens = min(g.burst, b.tokens+now.Sub(b.at).Seconds()*g.rate)
	b.at = now
}

// sweep drops full buckets (they hold nothing); if none is full, all of them.
func (g *guessLimits) sweep() {
	for k, b := range g.buckets {
		if g.refill(b); b.tokens >= g.burst {
			delete(g.buckets, k)
		}
	}
	if len(g.buckets) >= guessMaxBuckets {
		clear(g.buckets)
	}
	g.held.Store(int64(len(g.buckets)))
}

// limitGuesses refuses a caller (by key) that spent its failures, and charges a failure for
// every 401, 403 or 404 the handler answers (a wrong key or signature, an unknown store).
func (s *Server) limitGuesses(key guessKey, h handler) handler {
	return func(ctx *fasthttp.RequestCtx) error {
		// The caller's key is formatted only when it is needed: while no caller has failures
		// outstanding every call is allowed (allowBytes), and a call that succeeds charges
		// nothing. Formatting the peer's address was 70 ns of every validate under load.
		var buf [128]byte
		var kb []byte
		if s.guesses.anyHeld() {
			kb = key.append(buf[:0], ctx)
			if !s.guesses.allowBytes(kb) {
				return errTooManyAttempts
			}
		}
		err := h(ctx)
		status := ctx.Response.StatusCode()
		if err != nil {
			status, _ = statusOf(err)
		}
		switch status {
		case fasthttp.StatusUnauthorized, fasthttp.StatusForbidden, fasthttp.StatusNotFound:
			if kb == nil {
				kb = key.append(buf[:0], ctx)
			}
			s.guesses.fail(string(kb))
		}
		return err
	}
}

// guessKey says whom a guess is charged to: the peer address under a prefix, or the shop a
// webhook claims to come from. A value, not a func: a static call lets the key's buffer stay
// on the stack.
type guessKey struct {
	prefix string
	shop   bool
}

// byClient keys guesses by the peer address.
func byClient(prefix string) guessKey { return guessKey{prefix: prefix} }

// byShop keys webhook signature guesses by the shop they claim to come from.
var byShop = guessKey{prefix: "webhook:", shop: true}

// append appends the request's key to b.
func (k guessKey) append(b []byte, ctx *fasthttp.RequestCtx) []byte {
	b = append(b, k.prefix...)
	if k.shop {
		args := ctx.QueryArgs()
		w := engine.Webhook{UID: args.Peek("uid"), Shop: args.Peek("shop"), Header: &ctx.Request.Header}
		return append(b, strings.ToLower(string(w.ClaimedShop()))...)
	}
	ip, _ := netip.AddrFromSlice(ctx.RemoteIP())
	return ip.Unmap().AppendTo(b)
}

// cors answers preflight requests and adds the CORS headers for the allowed origins.
func (s *Server) cors(next fasthttp.RequestHandler) fasthttp.RequestHandler {
	any := false
	allowed := map[string]bool{}
	for _, o := range s.cfg.CORSOrigins {
		if o == "*" {
			any = true
		}
		allowed[strings.TrimSuffix(o, "/")] = true
	}
	return func(ctx *fasthttp.RequestCtx) {
		origin := string(ctx.Request.Header.Peek("Origin"))
		if origin == "" || (!any && !allowed[origin]) {
			next(ctx)
			return
		}
		h := &ctx.Response.Header
		h.Set("Access-Control-Allow-Origin", origin)
		h.Add("Vary", "Origin")
		h.Set("Access-Control-Expose-Headers", "X-Request-Id, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After")
		if ctx.IsOptions() && len(ctx.Request.Header.Peek("Access-Control-Request-Method")) > 0 {
			h.Set("Access-Control-Allow-Methods", "GET, POST, PUT, PATCH, DELETE")
			h.Set("Access-Control-Allow-Headers", "Authorization, Content-Type, X-Api-Key, Idempotency-Key, X-Request-Id")
			h.Set("Access-Control-Max-Age", "600")
			ctx.SetStatusCode(fasthttp.StatusNoContent)
			return
		}
		next(ctx)
	}
}
