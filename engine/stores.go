package engine

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anthdm/hollywood/actor"
	json "github.com/goccy/go-json"

	"github.com/gateway/gateway/actors"
	"github.com/gateway/gateway/ecom"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/persist"
)

// Store integration (DESIGN.md section 3, flow 3): connected stores, their owners, message
// templates, OAuth nonces, and the webhook receiver's durable inbox feeding one storeevents
// actor per store.
//
// Key schema:
//
//	store/<shop>                         StoreRecord (credentials sealed, see secrets.go)
//	template/<uid>                       the user's templates by topic
//	oauth_nonce/<nonce>                  a pending OAuth install (TTL 10 min)
//	inbox/<shop>/<seq>                   actors.InboxEntry until its outcome is recorded
//	webhook_seen/<shop>/<delivery id>    dedupe of the platform's deliveries (TTL 3 days)
//	store_sent/<shop>/<event key>        a message went out for this order event (TTL 30 days)
//	store_event/<shop>/<slot>            the last actors.RecentStoreEvents outcomes (a ring)
//
// Concurrency: storeIndex.mu guards the shop and user maps (never held during I/O);
// storeIndex.write serialises connects and disconnects; a storeEntry's credentials never change
// after it is built (a reconnect builds a new entry). The webhook hot path reads the maps under
// the read lock only.

// Store errors, re-exported for the HTTP layer.
var (
	ErrStoreNotFound    = actors.ErrStoreNotFound
	ErrInvalidSignature = actors.ErrInvalidSignature
	// ErrInvalidShop: the shop domain is not a `<name>.myshopify.com` domain (checked before any
	// outbound call).
	ErrInvalidShop = ecom.ErrInvalidShop
	// ErrStoreTokenRejected: the store platform refused the access token or app credentials.
	ErrStoreTokenRejected = ecom.ErrUnauthorized
	// ErrStorePlatform: the store platform failed or answered something unexpected.
	ErrStorePlatform = ecom.ErrUpstream
	// ErrInvalidPayload: a webhook body is not a JSON object.
	ErrInvalidPayload = errors.New("the webhook body is not a valid JSON object")
	// ErrStoreTaken: another user has this store connected, and this connection method does not
	// prove ownership (native webhooks, WooCommerce) so it cannot take it over.
	ErrStoreTaken = errors.New("this store is connected to another account")
)

// Store connection methods (StoreRecord.Method).
const (
	StoreMethodOAuth   = "oauth"
	StoreMethodManual  = "manual"
	StoreMethodNative  = "native"
	StoreMethodConnect = "connect" // POST /api/client/store/connect
)

const (
	// OAuthScopes are the access scopes the OAuth install asks for.
	OAuthScopes     = "read_orders,read_customers"
	oauthNonceTTL   = 10 * time.Minute
	webhookSeenTTL  = 72 * time.Hour // Shopify retries a delivery for 4 h; WooCommerce for less
	storeSentTTL    = 30 * 24 * time.Hour
	storeEventTTL   = 30 * 24 * time.Hour
	maxTemplateText = 4096
	storeActorKind  = "storeevents"
	// storeStopWait bounds how long Stop waits for store workers in flight (their entries stay in
	// the inbox and are run again at boot, so waiting longer buys nothing).
	storeStopWait = 2 * time.Second
)

// accessTokenPrefixes are the prefixes of the Shopify-type platform's Admin API tokens.
var accessTokenPrefixes = []string{"shpat_", "shpca_", "shppa_"}

// StoreConfig configures the store integration.
type StoreConfig struct {
	// Client talks to the store platform (nil: ecom.NewClient with its defaults).
	Client *ecom.Client
	// PublicURL is the gateway's public base URL, for webhook addresses and OAuth redirects.
	PublicURL string
	// ClientID and ClientSecret are the app credentials used when oauth-init stored none.
	ClientID, ClientSecret string
	// RequireSignature refuses webhooks of stores that have no signing secret.
	RequireSignature bool
	// SecretKey seals credentials at rest (32 bytes); nil = the key in SecretKeyFile, created on
	// first use; both empty = a key that lives as long as the process (tests).
	SecretKey     []byte
	SecretKeyFile string
	// Retry policy of the storeevents actors (zero values: see actors.StoreEventsDeps).
	BaseBackoff, MaxBackoff, SessionPoll, RetryWindow time.Duration
}

// StoreRecord is a connected store as stored. AccessToken, ClientSecret and WebhookSecret are
// sealed; they are never logged or returned.
type StoreRecord struct {
	Shop     string `json:"shop"`
	Platform string `json:"platform"` // ecom.PlatformShopify or ecom.PlatformWooCommerce
	Method   string `json:"method"`
	UserID   string `json:"userId"`
	ShopName string `json:"shopName,omitempty"`
	// AccessToken is the Admin API token (OAuth, manual, store/connect).
	AccessToken string `json:"accessToken,omitempty"`
	ClientID    string `json:"clientId,omitempty"`
	// ClientSecret is the app secret given to oauth-init: the platform signs the webhooks it
	// registered through the app with it.
	ClientSecret string `json:"clientSecret,omitempty"`
	// AppCredentials: installed with the configured app credentials (--ecom-client-secret
	// signs its webhooks).
	AppCredentials bool `json:"appCredentials,omitempty"`
	// WebhookSecret signs webhooks made in the store admin (native) or WooCommerce's.
	WebhookSecret      string    `json:"webhookSecret,omitempty"`
	Scope              string    `json:"scope,omitempty"`
	WebhooksRegistered int       `json:"webhooksRegistered"`
	ConnectedAt        time.Time `json:"connectedAt"`
}

// storeEntry is a connected store in memory: its record, opened credentials and actor.
type storeEntry struct {
	rec                             StoreRecord
	token, clientSecret, hookSecret string
	hookMACs, clientMACs            macPool // HMAC-SHA256 states keyed with the secrets, reused
	openErr                         error   // the credentials did not open (key changed)
	seq                             atomic.Int64
	view                            atomic.Pointer[actors.StoreEventsView]
	mu                              sync.Mutex // guards pid
	pid                             *actor.PID
	storeName, webhookURL           string
}

type storeIndex struct {
	mu     sync.RWMutex
	byShop map[string]*storeEntry
	byUser map[string]*storeEntry
	write  sync.Mutex
	gen    atomic.Int64 // actor id suffix: a reconnected shop gets a fresh actor id
}

type oauthNonce struct {
	UserID         string    `json:"userId"`
	Shop           string    `json:"shop"`
	ClientID       string    `json:"clientId"`
	ClientSecret   string    `json:"clientSecret,omitempty"` // sealed
	AppCredentials bool      `json:"appCredentials,omitempty"`
	CreatedAt      time.Time `json:"createdAt"`
}

type storedTemplate struct {
	Text    string `json:"text,omitempty"` // "" = the default text
	Enabled bool   `json:"enabled"`
}

// storeService holds the store integration's tables and state.
type storeService struct {
	cfg     StoreConfig
	client  *ecom.Client
	sealer  *sealer
	idx     storeIndex
	workers workerCount

	records   *persist.Table[StoreRecord]
	nonces    *persist.Table[oauthNonce]
	templates *persist.Table[map[string]storedTemplate]
	inbox     *persist.Table[actors.InboxEntry]
	seen      *persist.Table[struct{}]
	sent      *persist.Table[struct{}]
	events    *persist.Table[actors.StoreEventRecord]
	tmplMu    sync.Mutex // serialises template read-modify-writes

	inflight sync.Map // webhook_seen keys being committed right now

	accepted, duplicates, ignored        atomic.Int64
	pending                              atomic.Int64
	sentN, skippedN, failedN, signatureN atomic.Int64
}

// bootStores builds the store integration and respawns the actor of every store whose inbox
// holds entries.
func (e *Engine) bootStores() (int, error) {
	cfg := e.cfg.Stores
	kv := e.cfg.Store.KV()
	s := &storeService{
		cfg: cfg, client: cfg.Client, sealer: newSealer(cfg.SecretKey, cfg.SecretKeyFile),
		records:   persist.NewTable[StoreRecord](kv, "store", 1),
		nonces:    persist.NewTable[oauthNonce](kv, "oauth_nonce", 1),
		templates: persist.NewTable[map[string]storedTemplate](kv, "template", 1),
		inbox:     persist.NewTable[actors.InboxEntry](kv, "inbox", 1),
		seen:      persist.NewTable[struct{}](kv, "webhook_seen", 1),
		sent:      persist.NewTable[struct{}](kv, "store_sent", 1),
		events:    persist.NewTable[actors.StoreEventRecord](kv, "store_event", 1),
	}
	if s.client == nil {
		s.client = ecom.NewClient(ecom.ClientOptions{})
	}
	s.cfg.PublicURL = strings.TrimRight(s.cfg.PublicURL, "/")
	if s.cfg.PublicURL == "" {
		s.cfg.PublicURL = "http://localhost:8080"
	}
	s.idx.byShop, s.idx.byUser = map[string]*storeEntry{}, map[string]*storeEntry{}
	e.stores = s

	var recs []StoreRecord
	if err := s.records.Scan("", func(_ string, r StoreRecord) error { recs = append(recs, r); return nil }); err != nil {
		return 0, fmt.Errorf("engine: load stores: %w", err)
	}
	for _, r := range recs {
		ent := s.newEntry(r)
		if ent.openErr != nil {
			e.log.Error("store credentials do not open: webhooks with a signature are refused and orders cannot be fetched until it is connected again",
				"shop", r.Shop, "user_id", r.UserID, "err", ent.openErr)
		}
		s.idx.byShop[r.Shop], s.idx.byUser[r.UserID] = ent, ent
	}
	// Pending inbox entries: group by shop; entries of stores no longer connected are dropped.
	counts := map[string]int{}
	var orphans []persist.Op
	err := e.cfg.Store.KV().Scan([]byte("inbox/"), func(key, _ []byte) error {
		id := string(key[len("inbox/"):])
		shop, seq, ok := strings.Cut(id, "/")
		if !ok {
			return nil
		}
		ent := s.idx.byShop[shop]
		if ent == nil {
			orphans = append(orphans, s.inbox.DeleteOp(id))
			return nil
		}
		counts[shop]++
		if n, err := strconv.ParseInt(seq, 10, 64); err == nil && n > ent.seq.Load() {
			ent.seq.Store(n)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("engine: load store inbox: %w", err)
	}
	if len(orphans) > 0 {
		if err := kv.Commit(context.Background(), orphans...); err != nil {
			return 0, fmt.Errorf("engine: drop inbox entries of disconnected stores: %w", err)
		}
	}
	for shop, n := range counts {
		s.pending.Add(int64(n))
		e.storeActor(s.idx.byShop[shop])
	}
	return len(recs), nil
}

// newEntry opens a record's credentials.
func (s *storeService) newEntry(r StoreRecord) *storeEntry {
	ent := &storeEntry{rec: r}
	var errs []error
	var err error
	ent.token, err = s.sealer.open(r.AccessToken)
	errs = append(errs, err)
	ent.clientSecret, err = s.sealer.open(r.ClientSecret)
	errs = append(errs, err)
	ent.hookSecret, err = s.sealer.open(r.WebhookSecret)
	errs = append(errs, err)
	ent.openErr = errors.Join(errs...)
	if r.AppCredentials {
		ent.clientSecret = s.cfg.ClientSecret
	}
	ent.hookMACs.init(ent.hookSecret)
	ent.clientMACs.init(ent.clientSecret)
	ent.storeName = r.ShopName
	if ent.storeName == "" {
		ent.storeName = r.Shop
	}
	ent.webhookURL = s.webhookURL(r.UserID, r.Shop)
	return ent
}

// hasSecret tells whether webhooks of the store can be verified (or must be, having a sealed
// secret that did not open).
func (ent *storeEntry) hasSecret() bool {
	return ent.hookSecret != "" || ent.clientSecret != "" ||
		(ent.openErr != nil && (ent.rec.WebhookSecret != "" || ent.rec.ClientSecret != ""))
}

func (s *storeService) webhookURL(uid, shop string) string {
	return s.cfg.PublicURL + "/api/ecom/webhook?uid=" + url.QueryEscape(uid) + "&shop=" + url.QueryEscape(shop)
}

func (s *storeService) byShop(shop string) *storeEntry {
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	return s.idx.byShop[shop]
}

// storeActor returns the store's actor, spawning it on first use.
func (e *Engine) storeActor(ent *storeEntry) *actor.PID {
	ent.mu.Lock()
	defer ent.mu.Unlock()
	if ent.pid != nil {
		return ent.pid
	}
	s := e.stores
	deps := actors.StoreEventsDeps{
		Store: storeEventsStore{s}, Now: e.cfg.Now, Log: e.log,
		// The store's current entry, not ent: a reconnect of the same shop (new credentials)
		// keeps this actor.
		FetchOrder: func(ctx context.Context, shop string, orderID int64) ([]byte, error) {
			cur := s.byShop(shop)
			if cur == nil {
				return nil, fmt.Errorf("%w: %s", ErrStoreNotFound, shop)
			}
			if cur.token == "" {
				return nil, actors.ErrNoStoreToken
			}
			return s.client.FetchOrder(ctx, shop, cur.token, orderID)
		},
		StoreName: func(shop string) string {
			if cur := s.byShop(shop); cur != nil {
				return cur.storeName
			}
			return shop
		},
		Template:    e.template,
		AlreadySent: func(shop, key string) bool { _, err := s.sent.KV().Get(s.sentKey(shop, key)); return err == nil },
		Outcome:     e.outboxOutcome,
		Send:        e.sendStoreMessage,
		Ready:       e.sessionReady,
		Publish: func(v actors.StoreEventsView) {
			if cur := s.byShop(ent.rec.Shop); cur != nil {
				cur.view.Store(&v)
			}
		},
		Workers:     &s.workers,
		BaseBackoff: s.cfg.BaseBackoff, MaxBackoff: s.cfg.MaxBackoff, SessionPoll: s.cfg.SessionPoll, RetryWindow: s.cfg.RetryWindow,
	}
	id := ent.rec.Shop + "." + strconv.FormatInt(s.idx.gen.Add(1), 10)
	ent.pid = e.spawn(actors.NewStoreEvents(ent.rec.Shop, deps), storeActorKind, id)
	return ent.pid
}

// stopStoreActor stops an entry's actor, if it runs.
func (e *Engine) stopStoreActor(ent *storeEntry) {
	ent.mu.Lock()
	pid := ent.pid
	ent.pid = nil
	ent.mu.Unlock()
	if pid != nil {
		e.hw.Poison(pid)
	}
}

// stopStores stops every store actor and waits a little for their workers (an unfinished
// entry is run again at boot).
func (e *Engine) stopStores(ctx context.Context) {
	s := e.stores
	if s == nil {
		return
	}
	s.idx.mu.RLock()
	ents := make([]*storeEntry, 0, len(s.idx.byShop))
	for _, ent := range s.idx.byShop {
		ents = append(ents, ent)
	}
	s.idx.mu.RUnlock()
	var pids []*actor.PID
	for _, ent := range ents {
		ent.mu.Lock()
		if ent.pid != nil {
			pids = append(pids, ent.pid)
		}
		ent.pid = nil
		ent.mu.Unlock()
	}
	e.poisonAll(ctx, pids)
	wctx, cancel := context.WithTimeout(ctx, storeStopWait)
	defer cancel()
	s.workers.wait(wctx)
}

// workerCount counts the store actors' worker goroutines. Unlike a WaitGroup, it may be waited
// on with a deadline while workers still start and end.
type workerCount struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil while nobody waits
}

func (w *workerCount) Add(d int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n += d
	if w.n == 0 && w.idle != nil {
		close(w.idle)
		w.idle = nil
	}
}

func (w *workerCount) Done() { w.Add(-1) }

// wait returns when no worker runs, or when ctx ends.
func (w *workerCount) wait(ctx context.Context) {
	w.mu.Lock()
	if w.n == 0 {
		w.mu.Unlock()
		return
	}
	if w.idle == nil {
		w.idle = make(chan struct{})
	}
	idle := w.idle
	w.mu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
	}
}

// ---- the webhook receiver's hot path ----

// Webhook is one inbound store webhook as the HTTP layer read it. The byte slices are only read
// during AcceptWebhook.
type Webhook struct {
	UID, Shop  []byte // query parameters
	Topic      []byte // x-ecom-topic, X-Shopify-Topic or X-WC-Webhook-Topic
	ShopDomain []byte // x-ecom-shop-domain, X-Shopify-Shop-Domain or X-WC-Webhook-Source
	Signature  []byte // X-Shopify-Hmac-Sha256 or X-WC-Webhook-Signature
	DeliveryID []byte // X-Shopify-Webhook-Id or X-WC-Webhook-Delivery-ID
	Body       []byte
}

// Webhook outcomes (WebhookResult.Status).
const (
	WebhookQueued    = "queued"
	WebhookDuplicate = "duplicate"
	WebhookIgnored   = "ignored"
)

// WebhookResult is the receiver's answer.
type WebhookResult struct {
	Status string
	Reason string
	// Topic is the topic for metrics: one of the platforms' known topics, "other" or "none".
	Topic string
}

// AcceptWebhook is the webhook receiver: resolve the store, verify the signature, dedupe by
// delivery id, commit the event to the store's durable inbox (dedupe mark and entry in one
// group commit), and hand it to the store's actor. It parses nothing beyond a JSON validity
// check and a scan for a phone field; the actor does the rest.
func (e *Engine) AcceptWebhook(ctx context.Context, w Webhook) (WebhookResult, error) {
	s := e.stores
	ent := s.resolve(w)
	if ent == nil {
		return WebhookResult{Topic: "none"}, fmt.Errorf("%w: no connected store matches this webhook", ErrStoreNotFound)
	}
	woo := ent.rec.Platform == ecom.PlatformWooCommerce
	res := WebhookResult{Topic: metricTopic(w.Topic, woo)}
	if ecom.WooPing(w.Body) {
		// WooCommerce's unsigned ping when a webhook is created.
		res.Status, res.Reason = WebhookIgnored, "webhook ping"
		return res, nil
	}
	if err := s.verify(ent, w); err != nil {
		s.signatureN.Add(1)
		return res, err
	}
	topic := string(bytes.TrimSpace(w.Topic))
	if topic == "" {
		return res, fmt.Errorf("%w: the topic header (X-Shopify-Topic, x-ecom-topic or X-WC-Webhook-Topic) is required", ErrValidation)
	}
	if b := bytes.TrimLeft(w.Body, " \t\r\n"); len(b) == 0 || b[0] != '{' || !json.Valid(w.Body) {
		return res, ErrInvalidPayload
	}
	now := e.Now().UTC()
	orderShaped := woo || topic == ecom.TopicOrderCreated || topic == ecom.TopicOrderPaid || topic == ecom.TopicOrderCancelled
	switch {
	case woo && topic != ecom.WooTopicOrderCreated && topic != ecom.WooTopicOrderUpdated,
		!woo && !ecom.ValidTopic(strings.ToLower(topic)):
		res.Status, res.Reason = WebhookIgnored, "topic "+strconv.Quote(topic)+" sends no message"
	case orderShaped && !payloadHasPhone(w.Body):
		res.Status, res.Reason = WebhookIgnored, "no phone number in the payload"
	}
	if res.Status == WebhookIgnored {
		s.ignored.Add(1)
		e.hw.Send(e.storeActor(ent), actors.RecordStoreEvent{Record: actors.StoreEventRecord{
			Topic: topic, WebhookID: string(w.DeliveryID), Status: actors.StoreEventSkipped, Reason: res.Reason,
			ReceivedAt: now, ProcessedAt: now,
		}})
		return res, nil
	}

	var seenID string
	if len(w.DeliveryID) > 0 {
		seenID = ent.rec.Shop + "/" + string(w.DeliveryID)
		if _, busy := s.inflight.LoadOrStore(seenID, struct{}{}); busy {
			s.duplicates.Add(1)
			res.Status = WebhookDuplicate
			return res, nil
		}
		defer s.inflight.Delete(seenID)
		if _, err := s.seen.KV().Get(s.seenKey(seenID)); err == nil {
			s.duplicates.Add(1)
			res.Status = WebhookDuplicate
			return res, nil
		}
	}
	seq := ent.nextSeq(now)
	entry := actors.InboxEntry{
		Seq: seq, Shop: ent.rec.Shop, UserID: ent.rec.UserID, Platform: ent.rec.Platform, Topic: topic,
		WebhookID: string(w.DeliveryID), MessageID: NewMessageID(), ReceivedAt: now, Body: w.Body,
	}
	put, err := inboxOp(ent.rec.Shop+"/"+seq, entry)
	if err != nil {
		return res, fmt.Errorf("%w: %v", ErrInvalidPayload, err)
	}
	ops := [2]persist.Op{put}
	n := 1
	if seenID != "" {
		ops[1] = persist.Op{Key: s.seenKey(seenID), Value: seenValue, TTL: webhookSeenTTL}
		n = 2
	}
	if err := s.inbox.KV().Commit(ctx, ops[:n]...); err != nil {
		return res, fmt.Errorf("%w: store the webhook: %v", ErrUnavailable, err)
	}
	s.accepted.Add(1)
	s.pending.Add(1)
	e.hw.Send(e.storeActor(ent), actors.InboxAdded{Seq: seq})
	res.Status = WebhookQueued
	return res, nil
}

// inboxOp is s.inbox.PutOp for an entry whose body json.Valid has checked: the body is spliced
// in as it came instead of being validated and compacted again by the encoder (the record
// reads back the same through the inbox table).
func inboxOp(id string, e actors.InboxEntry) (persist.Op, error) {
	body := e.Body
	e.Body = nil
	head, err := persist.Encode(1, e) // ends with `,"body":null}`
	if err != nil {
		return persist.Op{}, err
	}
	head, ok := bytes.CutSuffix(head, []byte("null}"))
	if !ok {
		return persist.Op{}, errors.New("inbox entry encoding: unexpected shape")
	}
	v := make([]byte, 0, len(head)+len(body)+1)
	v = append(append(append(v, head...), body...), '}')
	return persist.Op{Key: []byte("inbox/" + id), Value: v}, nil
}

// seenValue is the encoded empty record of webhook_seen (version 1, "{}").
var seenValue = []byte("\x01{}")

func (s *storeService) seenKey(id string) []byte { return []byte("webhook_seen/" + id) }

func (s *storeService) sentKey(shop, key string) []byte {
	return []byte("store_sent/" + shop + "/" + key)
}

// resolve finds the store a webhook is for: the uid's store (which must be the query's shop
// when one is given), else the store with the query's or the header's shop domain.
func (s *storeService) resolve(w Webhook) *storeEntry {
	s.idx.mu.RLock()
	defer s.idx.mu.RUnlock()
	if len(w.UID) > 0 {
		ent := s.idx.byUser[string(w.UID)]
		if ent == nil || (len(w.Shop) > 0 && !strings.EqualFold(string(w.Shop), ent.rec.Shop)) {
			return nil
		}
		return ent
	}
	shop := w.Shop
	if len(shop) == 0 {
		shop = w.ShopDomain
	}
	if len(shop) == 0 {
		return nil
	}
	if ent := s.idx.byShop[string(shop)]; ent != nil {
		return ent
	}
	h, ok := hostOf(string(shop))
	if !ok {
		return nil
	}
	return s.idx.byShop[h]
}

// verify checks the webhook's signature with the store's secrets (constant time).
func (s *storeService) verify(ent *storeEntry, w Webhook) error {
	if !ent.hasSecret() {
		if s.cfg.RequireSignature {
			return fmt.Errorf("%w: this store has no webhook signing secret, and the gateway requires signed webhooks", ErrInvalidSignature)
		}
		return nil
	}
	if len(w.Signature) == 0 {
		return fmt.Errorf("%w: the signature header is missing", ErrInvalidSignature)
	}
	var given [sha256.Size]byte
	sig := bytes.TrimSpace(w.Signature)
	if base64.StdEncoding.DecodedLen(len(sig)) <= len(given)+2 {
		var buf [sha256.Size + 3]byte
		if n, err := base64.StdEncoding.Decode(buf[:], sig); err == nil && n == sha256.Size {
			copy(given[:], buf[:n])
			if ent.hookMACs.verify(w.Body, given) || ent.clientMACs.verify(w.Body, given) {
				return nil
			}
		}
	}
	return fmt.Errorf("%w: the signature does not match the body", ErrInvalidSignature)
}

// macPool reuses HMAC-SHA256 states keyed with one secret (hmac.New allocates several objects,
// and the webhook route verifies every request). The comparison is constant-time, as
// ecom.VerifyWebhookHMAC's.
type macPool struct {
	pool *sync.Pool // nil: no secret
}

func (m *macPool) init(secret string) {
	if secret == "" {
		return
	}
	key := []byte(secret)
	m.pool = &sync.Pool{New: func() any { return hmac.New(sha256.New, key) }}
}

func (m *macPool) verify(body []byte, given [sha256.Size]byte) bool {
	if m.pool == nil {
		return false
	}
	h := m.pool.Get().(hash.Hash)
	h.Reset()
	h.Write(body)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	m.pool.Put(h)
	return hmac.Equal(sum[:], given[:])
}

// nextSeq is a fixed-width increasing sequence: the clock in nanoseconds, bumped past the last
// one (so it also increases across restarts).
func (ent *storeEntry) nextSeq(now time.Time) string {
	for {
		last := ent.seq.Load()
		n := max(last+1, now.UnixNano())
		if ent.seq.CompareAndSwap(last, n) {
			var b [20]byte
			v := strconv.AppendInt(b[:0], n, 10)
			out := make([]byte, 20)
			for i := range out {
				out[i] = '0'
			}
			copy(out[20-len(v):], v)
			return string(out)
		}
	}
}

var phoneKey = []byte(`"phone"`)

// payloadHasPhone reports whether body has any "phone" field holding a non-empty string or a
// number. A false "yes" only defers the decision to the actor; a "no" is certain: the event
// has no number to send to.
func payloadHasPhone(body []byte) bool {
	for i := 0; i < len(body); {
		j := bytes.Index(body[i:], phoneKey)
		if j < 0 {
			return false
		}
		k := i + j + len(phoneKey)
		k = skipSpace(body, k)
		if k < len(body) && body[k] == ':' {
			k = skipSpace(body, k+1)
			if k+1 < len(body) && body[k] == '"' && body[k+1] != '"' {
				return true
			}
			if k < len(body) && body[k] >= '0' && body[k] <= '9' {
				return true
			}
		}
		i = k
	}
	return false
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// metricTopic bounds the topic label of the webhook metrics (constant strings: no allocation).
func metricTopic(topic []byte, woo bool) string {
	t := bytes.TrimSpace(topic)
	if len(t) == 0 {
		return "none"
	}
	if woo {
		switch string(t) {
		case ecom.WooTopicOrderCreated:
			return ecom.WooTopicOrderCreated
		case ecom.WooTopicOrderUpdated:
			return ecom.WooTopicOrderUpdated
		}
		return "other"
	}
	switch string(t) {
	case ecom.TopicOrderCreated:
		return ecom.TopicOrderCreated
	case ecom.TopicOrderPaid:
		return ecom.TopicOrderPaid
	case ecom.TopicOrderFulfilled:
		return ecom.TopicOrderFulfilled
	case ecom.TopicOrderCancelled:
		return ecom.TopicOrderCancelled
	case ecom.TopicRefundCreated:
		return ecom.TopicRefundCreated
	}
	return "other"
}

// ---- storage for the actors ----

// storeEventsStore implements actors.StoreEventsStore.
type storeEventsStore struct{ s *storeService }

// Interface guards.
var _ actors.StoreEventsStore = storeEventsStore{}

func (st storeEventsStore) PendingInbox(shop string) ([]string, error) {
	var seqs []string
	err := st.s.inbox.KV().Scan([]byte("inbox/"+shop+"/"), func(key, _ []byte) error {
		seqs = append(seqs, string(key[len("inbox/"+shop+"/"):]))
		return nil
	})
	return seqs, err
}

func (st storeEventsStore) InboxEntry(shop, seq string) (actors.InboxEntry, bool, error) {
	e, err := st.s.inbox.Get(shop + "/" + seq)
	if errors.Is(err, persist.ErrNotFound) {
		return e, false, nil
	}
	return e, err == nil, err
}

func (st storeEventsStore) LastEventN(shop string) (int64, error) {
	var n int64
	err := st.s.events.Scan(shop+"/", func(_ string, r actors.StoreEventRecord) error {
		n = max(n, r.N)
		return nil
	})
	return n, err
}

func (st storeEventsStore) FinishEvent(ctx context.Context, shop, seq string, rec actors.StoreEventRecord, sentKey string) error {
	s := st.s
	if seq != "" {
		if _, err := s.inbox.KV().Get([]byte("inbox/" + shop + "/" + seq)); errors.Is(err, persist.ErrNotFound) {
			return nil // removed meanwhile: the store was disconnected
		}
	}
	put, err := s.events.PutTTLOp(eventSlot(shop, rec.N), rec, storeEventTTL)
	if err != nil {
		return err
	}
	ops := []persist.Op{put}
	if seq != "" {
		ops = append(ops, s.inbox.DeleteOp(shop+"/"+seq))
	}
	if sentKey != "" {
		ops = append(ops, persist.Op{Key: s.sentKey(shop, sentKey), Value: seenValue, TTL: storeSentTTL})
	}
	if err := s.inbox.KV().Commit(ctx, ops...); err != nil {
		return err
	}
	if seq != "" {
		s.pending.Add(-1)
		switch rec.Status {
		case actors.StoreEventSent:
			s.sentN.Add(1)
		case actors.StoreEventSkipped:
			s.skippedN.Add(1)
		default:
			s.failedN.Add(1)
		}
	}
	return nil
}

func eventSlot(shop string, n int64) string {
	return fmt.Sprintf("%s/%02d", shop, n%actors.RecentStoreEvents)
}

// sendStoreMessage sends a store event's message through the owner's default session under the
// entry's message id (actors.StoreEventsDeps.Send).
func (e *Engine) sendStoreMessage(ctx context.Context, uid, msgID, to, text, origin string) (actors.OutboxEntry, error) {
	return e.Send(ctx, SendRequest{UserID: uid, Origin: origin,
		Message: network.Message{ID: msgID, To: to, Kind: network.KindText, Text: text}})
}

// sessionReady tells whether the user's default session is connected.
func (e *Engine) sessionReady(uid string) bool {
	_, err := e.sendSession(uid, "")
	return err == nil
}

// ---- templates ----

// TemplateView is one topic's message template.
type TemplateView struct {
	Topic     string
	Text      string
	Enabled   bool
	IsDefault bool // the user has not written their own text
}

// template is the user's template for a topic (actors.StoreEventsDeps.Template).
func (e *Engine) template(uid, topic string) (string, bool, error) {
	all, err := e.stores.userTemplates(uid)
	if err != nil {
		return "", false, err
	}
	v := templateView(topic, all)
	return v.Text, v.Enabled, nil
}

func (s *storeService) userTemplates(uid string) (map[string]storedTemplate, error) {
	m, err := s.templates.Get(uid)
	if errors.Is(err, persist.ErrNotFound) {
		return nil, nil
	}
	return m, err
}

func templateView(topic string, all map[string]storedTemplate) TemplateView {
	t, ok := all[topic]
	if !ok {
		t.Enabled = true
	}
	v := TemplateView{Topic: topic, Text: t.Text, Enabled: t.Enabled}
	if v.Text == "" {
		v.Text, v.IsDefault = ecom.DefaultTemplate(topic), true
	}
	return v
}

// Templates lists the user's five templates, in the platform's topic order.
func (e *Engine) Templates(uid string) ([]TemplateView, error) {
	all, err := e.stores.userTemplates(uid)
	if err != nil {
		return nil, fmt.Errorf("%w: read templates: %v", ErrUnavailable, err)
	}
	out := make([]TemplateView, 0, 5)
	for _, t := range ecom.Topics() {
		out = append(out, templateView(t, all))
	}
	return out, nil
}

// PutTemplate changes one topic's template: text (nil = unchanged, "" = back to the default)
// and enabled (nil = unchanged).
func (e *Engine) PutTemplate(ctx context.Context, uid, topic string, text *string, enabled *bool) (TemplateView, error) {
	if !ecom.ValidTopic(topic) {
		return TemplateView{}, fmt.Errorf("%w: topic must be one of %s", ErrValidation, strings.Join(ecom.Topics(), ", "))
	}
	if text != nil && len(*text) > maxTemplateText {
		return TemplateView{}, fmt.Errorf("%w: text must be at most %d bytes", ErrValidation, maxTemplateText)
	}
	s := e.stores
	s.tmplMu.Lock()
	defer s.tmplMu.Unlock()
	all, err := s.userTemplates(uid)
	if err != nil {
		return TemplateView{}, fmt.Errorf("%w: read templates: %v", ErrUnavailable, err)
	}
	if all == nil {
		all = map[string]storedTemplate{}
	}
	t, ok := all[topic]
	if !ok {
		t.Enabled = true
	}
	if text != nil {
		t.Text = strings.TrimSpace(*text)
	}
	if enabled != nil {
		t.Enabled = *enabled
	}
	all[topic] = t
	if err := s.templates.Put(ctx, uid, all); err != nil {
		return TemplateView{}, fmt.Errorf("%w: save template: %v", ErrUnavailable, err)
	}
	return templateView(topic, all), nil
}

// ---- connecting ----

// OAuthInit starts an OAuth install: it stores the app credentials with a single-use nonce
// (10 minutes) and returns the platform's authorization address and the shop. Empty clientID
// and clientSecret use the configured app credentials.
func (e *Engine) OAuthInit(ctx context.Context, uid, shop, clientID, clientSecret string) (authURL, canonical string, err error) {
	s := e.stores
	canonical, ok := ecom.NormalizeShopDomain(shop)
	if !ok {
		return "", "", fmt.Errorf("%w: %q; use <name>.myshopify.com", ErrInvalidShop, shop)
	}
	n := oauthNonce{UserID: uid, Shop: canonical, ClientID: strings.TrimSpace(clientID), CreatedAt: e.Now().UTC()}
	clientSecret = strings.TrimSpace(clientSecret)
	switch {
	case n.ClientID == "" && clientSecret == "":
		if s.cfg.ClientID == "" || s.cfg.ClientSecret == "" {
			return "", "", fmt.Errorf("%w: clientId and clientSecret are required (no app credentials are configured)", ErrValidation)
		}
		n.ClientID, n.AppCredentials = s.cfg.ClientID, true
	case n.ClientID == "":
		return "", "", fmt.Errorf("%w: clientId is required", ErrValidation)
	case clientSecret == "":
		return "", "", fmt.Errorf("%w: clientSecret is required", ErrValidation)
	default:
		if n.ClientSecret, err = s.sealer.seal(clientSecret); err != nil {
			return "", "", fmt.Errorf("%w: seal the client secret: %v", ErrUnavailable, err)
		}
	}
	nonce := randomHex(16)
	op, err := s.nonces.PutTTLOp(nonce, n, oauthNonceTTL)
	if err != nil {
		return "", "", err
	}
	if err := s.nonces.KV().Commit(ctx, op); err != nil {
		return "", "", fmt.Errorf("%w: save the OAuth state: %v", ErrUnavailable, err)
	}
	authURL = s.client.AuthorizeURL(canonical, n.ClientID, OAuthScopes, s.cfg.PublicURL+"/api/ecom/callback", uid+"___"+nonce)
	return authURL, canonical, nil
}

// CallbackError is why an OAuth callback failed; Reason is the code the error page gets.
type CallbackError struct {
	Reason string
	Err    error
}

func (c *CallbackError) Error() string { return "oauth callback: " + c.Reason + ": " + c.Err.Error() }
func (c *CallbackError) Unwrap() error { return c.Err }

// OAuth callback failure reasons.
const (
	CallbackInvalidRequest = "invalid_request"
	CallbackInvalidShop    = "invalid_shop"
	CallbackInvalidState   = "invalid_state"
	CallbackInvalidHMAC    = "invalid_hmac"
	CallbackExchange       = "token_exchange_failed"
	CallbackWebhooks       = "webhook_registration_failed"
	CallbackPlatform       = "store_platform_error"
	CallbackUnavailable    = "unavailable"
)

// OAuthCallback completes an install (SPEC.md section 4.5): the state's nonce must be one this
// gateway issued, unexpired, for that user and shop; the `hmac` must verify with the app
// secret; then the code is exchanged, the five webhooks registered and the store saved. On any
// failure nothing is saved and the error is a *CallbackError.
func (e *Engine) OAuthCallback(ctx context.Context, q url.Values) (string, error) {
	s := e.stores
	fail := func(reason string, err error) (string, error) {
		return "", &CallbackError{Reason: reason, Err: err}
	}
	code, shopIn, state := q.Get("code"), q.Get("shop"), q.Get("state")
	if code == "" || shopIn == "" || state == "" {
		return fail(CallbackInvalidRequest, errors.New("code, shop and state are required"))
	}
	shop, ok := ecom.NormalizeShopDomain(shopIn)
	if !ok {
		return fail(CallbackInvalidShop, fmt.Errorf("%w: %q", ErrInvalidShop, shopIn))
	}
	i := strings.LastIndex(state, "___")
	if i <= 0 {
		return fail(CallbackInvalidState, errors.New("state is not <uid>___<nonce>"))
	}
	uid, nonce := state[:i], state[i+3:]
	n, err := s.nonces.Get(nonce)
	switch {
	case nonce == "" || errors.Is(err, persist.ErrNotFound):
		return fail(CallbackInvalidState, errors.New("unknown or expired state"))
	case err != nil:
		return fail(CallbackUnavailable, err)
	case e.Now().Sub(n.CreatedAt) > oauthNonceTTL:
		return fail(CallbackInvalidState, errors.New("expired state"))
	case n.UserID != uid || n.Shop != shop:
		return fail(CallbackInvalidState, errors.New("the state was issued for another user or shop"))
	}
	secret := s.cfg.ClientSecret
	if !n.AppCredentials {
		if secret, err = s.sealer.open(n.ClientSecret); err != nil {
			return fail(CallbackUnavailable, err)
		}
	}
	if !ecom.VerifyOAuthHMAC(q, secret) {
		return fail(CallbackInvalidHMAC, errors.New("the hmac does not verify"))
	}
	// Single use: consumed before the exchange, so a replayed callback finds no state.
	if err := s.nonces.Delete(ctx, nonce); err != nil {
		return fail(CallbackUnavailable, err)
	}
	token, scope, err := s.client.ExchangeCode(ctx, shop, n.ClientID, secret, code)
	switch {
	case errors.Is(err, ecom.ErrUnauthorized):
		return fail(CallbackExchange, err)
	case err != nil:
		return fail(CallbackPlatform, err)
	}
	name, _ := s.client.VerifyToken(ctx, shop, token) // the name only fills {store_name}
	registered, err := s.client.RegisterWebhooks(ctx, shop, token, s.webhookURL(uid, shop))
	if err != nil || registered < len(ecom.Topics()) {
		if err == nil {
			err = fmt.Errorf("%d of %d webhooks registered", registered, len(ecom.Topics()))
		}
		return fail(CallbackWebhooks, err)
	}
	rec := StoreRecord{
		Shop: shop, Platform: ecom.PlatformShopify, Method: StoreMethodOAuth, UserID: uid, ShopName: name,
		ClientID: n.ClientID, ClientSecret: n.ClientSecret, AppCredentials: n.AppCredentials, Scope: scope,
		WebhooksRegistered: registered, ConnectedAt: e.Now().UTC(),
	}
	if rec.AccessToken, err = s.sealer.seal(token); err != nil {
		return fail(CallbackUnavailable, err)
	}
	if err := e.saveStore(ctx, rec, true); err != nil {
		return fail(CallbackUnavailable, err)
	}
	e.log.Info("store connected", "method", rec.Method, "shop", shop, "user_id", uid)
	return shop, nil
}

// ManualResult is the outcome of a manual (access token) connect.
type ManualResult struct {
	Shop               string
	ShopName           string
	WebhooksRegistered int
	WebhooksSkipped    bool // none could be registered (create them in the store admin)
	WebhookURL         string
	RegisterError      string
}

// ManualConnect connects a store with an Admin API access token: the token is verified, the
// five webhooks registered (as many as the token allows) and the store saved. webhookSecret is
// the signing secret of the app the token belongs to, when known.
func (e *Engine) ManualConnect(ctx context.Context, uid, shop, token, webhookSecret string) (ManualResult, error) {
	s := e.stores
	canonical, token, name, err := e.verifyShopToken(ctx, shop, token)
	if err != nil {
		return ManualResult{}, err
	}
	res := ManualResult{Shop: canonical, ShopName: name, WebhookURL: s.webhookURL(uid, canonical)}
	n, rerr := s.client.RegisterWebhooks(ctx, canonical, token, res.WebhookURL)
	res.WebhooksRegistered, res.WebhooksSkipped = n, n == 0
	if rerr != nil {
		res.RegisterError = rerr.Error()
		e.log.Warn("store webhooks not all registered", "shop", canonical, "user_id", uid, "registered", n, "err", rerr)
	}
	rec := StoreRecord{
		Shop: canonical, Platform: ecom.PlatformShopify, Method: StoreMethodManual, UserID: uid, ShopName: name,
		WebhooksRegistered: n, ConnectedAt: e.Now().UTC(),
	}
	if err := e.sealInto(&rec, token, webhookSecret); err != nil {
		return ManualResult{}, err
	}
	if err := e.saveStore(ctx, rec, true); err != nil {
		return ManualResult{}, err
	}
	e.log.Info("store connected", "method", rec.Method, "shop", canonical, "user_id", uid, "webhooks", n)
	return res, nil
}

// NativeConnect connects a store whose owner creates the webhooks in the store admin;
// webhookSecret is the signing secret the admin shows for them (optional).
func (e *Engine) NativeConnect(ctx context.Context, uid, shop, webhookSecret string) (string, string, error) {
	canonical, ok := ecom.NormalizeShopDomain(shop)
	if !ok {
		return "", "", fmt.Errorf("%w: %q; use <name>.myshopify.com", ErrInvalidShop, shop)
	}
	rec := StoreRecord{Shop: canonical, Platform: ecom.PlatformShopify, Method: StoreMethodNative, UserID: uid, ConnectedAt: e.Now().UTC()}
	if err := e.sealInto(&rec, "", webhookSecret); err != nil {
		return "", "", err
	}
	if err := e.saveStore(ctx, rec, false); err != nil {
		return "", "", err
	}
	e.log.Info("store connected", "method", rec.Method, "shop", canonical, "user_id", uid)
	return canonical, e.stores.webhookURL(uid, canonical), nil
}

// ConnectStore is POST /api/client/store/connect: a Shopify-type store by access token (verified,
// and all five webhooks must register) or a WooCommerce store by domain (its webhooks are made
// in its admin, optionally signed with webhookSecret).
func (e *Engine) ConnectStore(ctx context.Context, uid, platform, domain, token, webhookSecret string) error {
	s := e.stores
	switch strings.ToLower(strings.TrimSpace(platform)) {
	case ecom.PlatformShopify:
		canonical, token, name, err := e.verifyShopToken(ctx, domain, token)
		if err != nil {
			return err
		}
		n, err := s.client.RegisterWebhooks(ctx, canonical, token, s.webhookURL(uid, canonical))
		if err != nil || n < len(ecom.Topics()) {
			if err == nil {
				err = fmt.Errorf("%w: %d of %d webhooks registered", ErrStorePlatform, n, len(ecom.Topics()))
			}
			return err
		}
		rec := StoreRecord{
			Shop: canonical, Platform: ecom.PlatformShopify, Method: StoreMethodConnect, UserID: uid, ShopName: name,
			WebhooksRegistered: n, ConnectedAt: e.Now().UTC(),
		}
		if err := e.sealInto(&rec, token, webhookSecret); err != nil {
			return err
		}
		return e.saveStore(ctx, rec, true)
	case ecom.PlatformWooCommerce:
		host, ok := hostOf(domain)
		if !ok {
			return fmt.Errorf("%w: domain must be the store's host name (shop.example.com)", ErrValidation)
		}
		rec := StoreRecord{Shop: host, Platform: ecom.PlatformWooCommerce, Method: StoreMethodConnect, UserID: uid, ConnectedAt: e.Now().UTC()}
		if err := e.sealInto(&rec, "", webhookSecret); err != nil {
			return err
		}
		return e.saveStore(ctx, rec, false)
	}
	return fmt.Errorf("%w: platform must be shopify or woocommerce", ErrValidation)
}

// VerifyShopify checks an access token against the platform and returns the shop's name.
func (e *Engine) VerifyShopify(ctx context.Context, domain, token string) (string, error) {
	_, _, name, err := e.verifyShopToken(ctx, domain, token)
	return name, err
}

// verifyShopToken validates the domain (before any outbound call) and the token's shape, then
// asks the platform for the shop's name.
func (e *Engine) verifyShopToken(ctx context.Context, domain, token string) (shop, tok, name string, err error) {
	shop, ok := ecom.NormalizeShopDomain(domain)
	if !ok {
		return "", "", "", fmt.Errorf("%w: %q; use <name>.myshopify.com", ErrInvalidShop, domain)
	}
	tok = strings.TrimSpace(token)
	if tok == "" {
		return "", "", "", fmt.Errorf("%w: the access token is required", ErrValidation)
	}
	if !slices.ContainsFunc(accessTokenPrefixes, func(p string) bool { return strings.HasPrefix(tok, p) }) {
		return "", "", "", fmt.Errorf("%w: the access token must start with %s", ErrValidation, strings.Join(accessTokenPrefixes, ", "))
	}
	name, err = e.stores.client.VerifyToken(ctx, shop, tok)
	if err != nil {
		return "", "", "", err
	}
	return shop, tok, name, nil
}

func (e *Engine) sealInto(rec *StoreRecord, token, webhookSecret string) error {
	s := e.stores
	var err error
	if rec.AccessToken, err = s.sealer.seal(token); err != nil {
		return fmt.Errorf("%w: seal the access token: %v", ErrUnavailable, err)
	}
	if rec.WebhookSecret, err = s.sealer.seal(strings.TrimSpace(webhookSecret)); err != nil {
		return fmt.Errorf("%w: seal the webhook secret: %v", ErrUnavailable, err)
	}
	return nil
}

// saveStore makes rec the user's store, in one commit: the user's previous store (if another
// shop) and, when takeOver allows it (the platform proved access), another user's connection of
// the same shop are removed with their pending events. A reconnect of the same shop by the same
// user keeps its pending events and actor.
func (e *Engine) saveStore(ctx context.Context, rec StoreRecord, takeOver bool) error {
	s := e.stores
	s.idx.write.Lock()
	defer s.idx.write.Unlock()
	s.idx.mu.RLock()
	sameShop, prevOfUser := s.idx.byShop[rec.Shop], s.idx.byUser[rec.UserID]
	s.idx.mu.RUnlock()
	if sameShop != nil && sameShop.rec.UserID != rec.UserID && !takeOver {
		return ErrStoreTaken
	}
	put, err := s.records.PutOp(rec.Shop, rec)
	if err != nil {
		return err
	}
	ops := []persist.Op{put}
	var dropped []*storeEntry
	if prevOfUser != nil && prevOfUser.rec.Shop != rec.Shop {
		dropped = append(dropped, prevOfUser)
		ops = append(ops, s.records.DeleteOp(prevOfUser.rec.Shop))
	}
	if sameShop != nil && sameShop.rec.UserID != rec.UserID {
		dropped = append(dropped, sameShop)
	}
	var removed int64
	for _, d := range dropped {
		more, n, err := s.shopDataOps(d.rec.Shop)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrUnavailable, err)
		}
		ops, removed = append(ops, more...), removed+n
	}
	if err := s.records.KV().Commit(ctx, ops...); err != nil {
		return fmt.Errorf("%w: save store: %v", ErrUnavailable, err)
	}
	s.pending.Add(-removed)
	ent := s.newEntry(rec)
	if sameShop != nil && sameShop.rec.UserID == rec.UserID {
		// Same store, new credentials: its actor goes on with its queue (it reads the store's
		// current credentials).
		sameShop.mu.Lock()
		ent.pid, sameShop.pid = sameShop.pid, nil
		sameShop.mu.Unlock()
		ent.seq.Store(sameShop.seq.Load())
		if v := sameShop.view.Load(); v != nil {
			ent.view.Store(v)
		}
	}
	s.idx.mu.Lock()
	for _, d := range dropped {
		if s.idx.byShop[d.rec.Shop] == d {
			delete(s.idx.byShop, d.rec.Shop)
		}
		if s.idx.byUser[d.rec.UserID] == d {
			delete(s.idx.byUser, d.rec.UserID)
		}
	}
	s.idx.byShop[rec.Shop], s.idx.byUser[rec.UserID] = ent, ent
	s.idx.mu.Unlock()
	for _, d := range dropped {
		e.stopStoreActor(d)
	}
	return nil
}

// shopDataOps are the deletions of a shop's pending inbox and recent events, and how many
// inbox entries they remove.
func (s *storeService) shopDataOps(shop string) (ops []persist.Op, pending int64, err error) {
	kv := s.records.KV()
	for _, prefix := range []string{"inbox/" + shop + "/", "store_event/" + shop + "/"} {
		err := kv.Scan([]byte(prefix), func(key, _ []byte) error {
			ops = append(ops, persist.Op{Key: bytes.Clone(key), Delete: true})
			if strings.HasPrefix(prefix, "inbox/") {
				pending++
			}
			return nil
		})
		if err != nil {
			return nil, 0, err
		}
	}
	return ops, pending, nil
}

// DisconnectStore removes the user's store, its pending events and its recent events. The
// webhooks registered on the platform stay (they are answered 404 from now on).
func (e *Engine) DisconnectStore(ctx context.Context, uid string) error {
	s := e.stores
	s.idx.write.Lock()
	defer s.idx.write.Unlock()
	s.idx.mu.RLock()
	ent := s.idx.byUser[uid]
	s.idx.mu.RUnlock()
	if ent == nil {
		return fmt.Errorf("%w: no store is connected to this account", ErrStoreNotFound)
	}
	e.stopStoreActor(ent)
	ops, removed, err := s.shopDataOps(ent.rec.Shop)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	ops = append(ops, s.records.DeleteOp(ent.rec.Shop))
	if err := s.records.KV().Commit(ctx, ops...); err != nil {
		return fmt.Errorf("%w: remove store: %v", ErrUnavailable, err)
	}
	s.pending.Add(-removed)
	s.idx.mu.Lock()
	delete(s.idx.byShop, ent.rec.Shop)
	delete(s.idx.byUser, uid)
	s.idx.mu.Unlock()
	e.log.Info("store disconnected", "shop", ent.rec.Shop, "user_id", uid)
	return nil
}

// StoreView is a user's connected store as the dashboard shows it (no credentials).
type StoreView struct {
	Shop, Platform, Method, ShopName string
	ConnectedAt                      time.Time
	WebhookURL                       string
	HasWebhookSecret                 bool
	WebhooksRegistered               int
	// Events: pending events (oldest first), then the recent outcomes, newest first.
	Events []actors.StoreEventRecord
}

// Store returns the user's store; ErrStoreNotFound when none is connected.
func (e *Engine) Store(uid string) (StoreView, error) {
	s := e.stores
	s.idx.mu.RLock()
	ent := s.idx.byUser[uid]
	s.idx.mu.RUnlock()
	if ent == nil {
		return StoreView{}, fmt.Errorf("%w: no store is connected to this account", ErrStoreNotFound)
	}
	r := ent.rec
	v := StoreView{
		Shop: r.Shop, Platform: r.Platform, Method: r.Method, ShopName: r.ShopName, ConnectedAt: r.ConnectedAt,
		WebhookURL: ent.webhookURL, HasWebhookSecret: ent.hasSecret(), WebhooksRegistered: r.WebhooksRegistered,
	}
	qv := ent.view.Load()
	errStop := errors.New("stop")
	err := s.inbox.Scan(r.Shop+"/", func(_ string, in actors.InboxEntry) error {
		rec := actors.StoreEventRecord{Seq: in.Seq, Topic: in.Topic, WebhookID: in.WebhookID, Status: actors.StoreEventPending, ReceivedAt: in.ReceivedAt}
		if qv != nil && qv.Head == in.Seq {
			rec.Attempts, rec.Reason = qv.Attempts, qv.LastError
		}
		v.Events = append(v.Events, rec)
		if len(v.Events) >= actors.RecentStoreEvents {
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return StoreView{}, fmt.Errorf("%w: read the inbox: %v", ErrUnavailable, err)
	}
	var done []actors.StoreEventRecord
	if err := s.events.Scan(r.Shop+"/", func(_ string, rec actors.StoreEventRecord) error {
		done = append(done, rec)
		return nil
	}); err != nil {
		return StoreView{}, fmt.Errorf("%w: read recent events: %v", ErrUnavailable, err)
	}
	slices.SortFunc(done, func(a, b actors.StoreEventRecord) int { return int(b.N - a.N) })
	v.Events = append(v.Events, done...)
	return v, nil
}

// StoreStats are the store integration's counters.
type StoreStats struct {
	Stores                                  int
	WebhooksAccepted, WebhooksDuplicate     int64
	WebhooksIgnored, SignatureFailures      int64
	EventsPending                           int64
	EventsSent, EventsSkipped, EventsFailed int64
}

// StoreStats reads the store integration's counters.
func (e *Engine) StoreStats() StoreStats {
	s := e.stores
	if s == nil {
		return StoreStats{}
	}
	s.idx.mu.RLock()
	n := len(s.idx.byShop)
	s.idx.mu.RUnlock()
	return StoreStats{
		Stores: n, WebhooksAccepted: s.accepted.Load(), WebhooksDuplicate: s.duplicates.Load(),
		WebhooksIgnored: s.ignored.Load(), SignatureFailures: s.signatureN.Load(), EventsPending: s.pending.Load(),
		EventsSent: s.sentN.Load(), EventsSkipped: s.skippedN.Load(), EventsFailed: s.failedN.Load(),
	}
}

// hostOf reads a host name from a domain or URL ("https://Shop.example.com/" → "shop.example.com").
func hostOf(s string) (string, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	s = strings.TrimPrefix(s, "https://")
	s = strings.TrimPrefix(s, "http://")
	if i := strings.IndexAny(s, "/?#"); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSuffix(s, ".")
	if s == "" || len(s) > 253 {
		return "", false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == ':') {
			return "", false
		}
	}
	if s[0] == '.' || s[0] == '-' || s[0] == ':' || !strings.Contains(s, ".") && !strings.HasPrefix(s, "localhost") {
		return "", false
	}
	return s, true
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// TemplatePlaceholders lists every placeholder a template may use, written as a user types it.
func TemplatePlaceholders() []string { return ecom.Placeholders() }
