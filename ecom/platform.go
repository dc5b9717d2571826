package ecom

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/gateway/gateway/domain"
)

// Platform is everything the gateway knows about one store platform: how its webhooks are
// read, signed and parsed, and how a store of it connects. A platform is one file that
// registers itself (Register in init, as shopify.go and woocommerce.go do); the engine, the
// storeevents actor and the HTTP layer ask the registry and never branch on a platform's name.
type Platform interface {
	// Name is the platform's value in POST /api/client/store/connect and in a store's record.
	Name() domain.Platform
	// Headers names the webhook headers the platform sends.
	Headers() WebhookHeaders
	// ParseSignature decodes the signature header into the HMAC-SHA256 of the raw body it
	// carries (false: not a signature of this platform's form).
	ParseSignature(header []byte) (WebhookSignature, bool)
	// IsPing reports whether body is the platform's unsigned check that the address answers (it
	// carries no event and is answered 200 without a signature check).
	IsPing(body []byte) bool
	// Topic says what a webhook of topic (as sent, trimmed) does: whether it can send a message
	// at all, and whether its body is an order that must name a phone for it to.
	Topic(topic string) (sends, needsPhone bool)
	// TopicLabel bounds the topic header to a metric label: one of the platform's known topics,
	// "other", or "none" when empty. It returns constant strings, so it does not allocate.
	TopicLabel(topic []byte) string
	// Parse normalises a webhook body into an Event (ErrIgnored: valid but sends nothing;
	// ErrMalformed: not the object the platform sends).
	Parse(topic string, body []byte) (Event, error)
	// Connect is how POST /api/client/store/connect connects a store of the platform.
	Connect() ConnectMethod
	// Domain normalises the domain given to store/connect into the store's shop id (false: not
	// a domain of this platform).
	Domain(input string) (string, bool)
}

// FormTopics is implemented by a platform that posts some topics as a form body rather than
// JSON (an abandoned-cart plugin's webhook): the receiver accepts such a body for them.
type FormTopics interface {
	FormBody(topic string) bool
}

// WebhookHeaders are the header names of a platform's webhooks, each list in order of
// preference (the first one present wins).
type WebhookHeaders struct {
	Topic, ShopDomain, Signature, DeliveryID []string
}

// ConnectMethod is how store/connect connects a store.
type ConnectMethod int

const (
	// ConnectByToken: an Admin API access token is verified and the five webhooks are
	// registered through the Admin API (Client): the Shopify-type flow.
	ConnectByToken ConnectMethod = iota
	// ConnectByDomain: the store is saved under its domain with an optional webhook secret; its
	// owner creates the webhooks in the store's admin.
	ConnectByDomain
)

// HeaderPeeker reads a request header by name (fasthttp's *RequestHeader is one).
type HeaderPeeker interface {
	Peek(key string) []byte
}

// First returns the first of names present in h (nil: none).
func First(h HeaderPeeker, names []string) []byte {
	for _, n := range names {
		if v := h.Peek(n); len(v) > 0 {
			return v
		}
	}
	return nil
}

// The registry: a copy-on-write snapshot, so the webhook hot path reads it without a lock.
var (
	registryMu sync.Mutex
	registry   atomic.Pointer[platforms]
)

type platforms struct {
	byName      map[domain.Platform]Platform
	shopHeaders []string // every platform's ShopDomain headers, deduplicated, in registration order
}

// Register adds a platform. It panics when the name is empty or taken: both are programming
// errors, found at start-up (caddy's RegisterModule does the same).
func Register(p Platform) {
	registryMu.Lock()
	defer registryMu.Unlock()
	old := registry.Load()
	next := &platforms{byName: map[domain.Platform]Platform{}}
	if old != nil {
		maps.Copy(next.byName, old.byName)
		next.shopHeaders = slices.Clone(old.shopHeaders)
	}
	name := p.Name()
	if name == "" || next.byName[name] != nil {
		panic(fmt.Sprintf("ecom: platform %q registered twice or without a name", name))
	}
	next.byName[name] = p
	for _, h := range p.Headers().ShopDomain {
		if !slices.Contains(next.shopHeaders, h) {
			next.shopHeaders = append(next.shopHeaders, h)
		}
	}
	registry.Store(next)
}

// Lookup returns the registered platform of name. The empty name is Shopify: store records
// written before the platform field existed are Shopify-type.
func Lookup(name domain.Platform) (Platform, bool) {
	if name == "" {
		name = PlatformShopify
	}
	r := registry.Load()
	if r == nil {
		return nil, false
	}
	p, ok := r.byName[name]
	return p, ok
}

// Names lists the registered platforms' names, sorted.
func Names() []domain.Platform {
	r := registry.Load()
	if r == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(r.byName))
}

// ShopDomainHeaders are the shop-domain headers of every registered platform: a webhook's store
// is found by them before its platform is known.
func ShopDomainHeaders() []string {
	if r := registry.Load(); r != nil {
		return r.shopHeaders
	}
	return nil
}
