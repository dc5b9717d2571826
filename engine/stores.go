package engine

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/actors/storeevents"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/ecom"
)

// Store integration (DESIGN.md section 3, flow 3): connected stores, their owners, message
// templates, OAuth nonces, and the webhook receiver's durable inbox feeding one storeevents
// actor per store.
//
// Storage: persist.Stores (records, OAuth nonces, templates) and persist.Inbox (inbox, dedupe
// marks, recent outcomes); their key schema is written down in persist/stores.go and
// persist/inbox.go.
//
// Concurrency (LOCKS.md): storeIndex.mu, its registry's lock, guards the shop and user maps
// (never held during I/O); storeIndex.write serialises connects and disconnects; a storeEntry's
// credentials never change after it is built (a reconnect builds a new entry), and its mu guards
// only its lazily spawned actor. The webhook hot path reads the maps under the read lock only.

const (
	// OAuthScopes are the access scopes the OAuth install asks for: write_orders lets a
	// confirmation's answer be written back to the order (tags, note, cancel).
	OAuthScopes     = "read_orders,write_orders,read_customers"
	maxTemplateText = 4096
	storeActorKind  = "storeevents"
	// storeStopWait bounds how long Stop waits for store workers in flight (their entries stay in
	// the inbox and are run again at boot, so waiting longer buys nothing).
	storeStopWait = 2 * time.Second
)

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
	// Sealer seals credentials at rest (node loads its key); nil refuses to seal or open, so
	// no store can connect (tests that do not connect stores).
	Sealer Sealer
	// Retry policy of the storeevents actors (zero values: see storeevents.Deps).
	BaseBackoff, MaxBackoff, SessionPoll, RetryWindow time.Duration
}

// storeEntry is a connected store in memory: its record, opened credentials and actor.
type storeEntry struct {
	rec                             domain.Store
	token, clientSecret, hookSecret string
	restKey, restSecret             string               // a WooCommerce-type store's REST API keys
	hookMACs, clientMACs            ecom.WebhookVerifier // keyed with the secrets, reused per request
	openErr                         error                // the credentials did not open (key changed)
	seq                             domain.InboxSeq
	view                            atomic.Pointer[storeevents.View]
	mu                              sync.Mutex // guards pid
	pid                             *actor.PID
	storeName, webhookURL           string
}

// actorPID is the store's actor, nil while none runs (spawned on the first event).
func (ent *storeEntry) actorPID() *actor.PID {
	ent.mu.Lock()
	defer ent.mu.Unlock()
	return ent.pid
}

// storeIndex finds store entries by shop domain (the registry) and by owner (byUser, guarded by
// the registry's mu). write serialises connects and disconnects.
type storeIndex struct {
	registry[string, *storeEntry]
	byUser map[string]*storeEntry
	write  sync.Mutex
	gen    atomic.Int64 // actor id suffix: a reconnected shop gets a fresh actor id
}

// ofUser is the user's store entry (nil: none is connected).
func (x *storeIndex) ofUser(uid string) *storeEntry {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.byUser[uid]
}

// storeService holds the store integration's tables and state.
type storeService struct {
	e       *Engine
	pub     *publisher // store.event (nil: events off)
	cfg     StoreConfig
	client  *ecom.Client
	sealer  Sealer
	idx     storeIndex
	workers workerCount

	records ShopStore
	inbox   InboxStore
	loop    StoreLoopStore // the store loop's records (stores_loop.go)
	orders  orderLocks     // one order's record changes one at a time
	writing sync.Map       // the orders whose answer a worker writes back now
	tmplMu  sync.Mutex     // serialises template read-modify-writes

	inflight sync.Map // webhook_seen keys being committed right now

	accepted, duplicates, ignored        atomic.Int64
	pending                              atomic.Int64
	sentN, skippedN, failedN, signatureN atomic.Int64
}

// Stores is the store facet (DESIGN.md section 3, flow 3): connecting and disconnecting a
// user's store (storeconnect.go), its message templates (templates.go), the webhook receiver
// (webhook.go), and the store's view and counters. Each store with events to run has a
// storeevents actor; the facet's state, which those actors consume too, is the storeService.
type Stores struct {
	e *Engine
	s *storeService
}

func newStores(e *Engine) *Stores {
	cfg := e.cfg.Stores
	s := &storeService{
		e: e, cfg: cfg, client: cfg.Client, sealer: cfg.Sealer, pub: e.pub,
		records: e.cfg.Records.Shops, inbox: e.cfg.Records.Inbox, loop: e.cfg.Records.StoreLoop,
	}
	if s.sealer == nil {
		s.sealer = noSealer{}
	}
	if s.client == nil {
		s.client = ecom.NewClient(ecom.ClientOptions{})
	}
	s.cfg.PublicURL = strings.TrimRight(s.cfg.PublicURL, "/")
	if s.cfg.PublicURL == "" {
		s.cfg.PublicURL = "http://localhost:8080"
	}
	s.idx.init()
	s.idx.byUser = map[string]*storeEntry{}
	return &Stores{e: e, s: s}
}

// storesRead is what the stores' boot reads (records, inbox, writeBacks).
type storesRead struct {
	recs       []domain.Store
	pending    []inboxRef     // the inbox's pending entries
	writeBacks []writeBackRef // answers left with a write-back mark (with a store loop)
}

// inboxRef is one pending inbox entry: its shop and sequence.
type inboxRef struct{ shop, seq string }

// The stores' boot reads (the engine's boot makes them at once, beside the other facets'):
// the connected stores, their pending inbox entries and the answers left with a write-back
// mark. Stores and their inbox change only through requests and store actors, neither running
// before boot; a mark written meanwhile (an answer arriving through a session booted first) has
// its write-back started by the answer itself, as before.

func (st *Stores) records() ([]domain.Store, error) {
	recs, err := st.s.records.All()
	if err != nil {
		return nil, fmt.Errorf("engine: load stores: %w", err)
	}
	return recs, nil
}

func (st *Stores) inbox() ([]inboxRef, error) {
	var refs []inboxRef
	err := st.s.inbox.Pending(func(shop, seq string) error {
		refs = append(refs, inboxRef{shop, seq})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("engine: load store inbox: %w", err)
	}
	return refs, nil
}

func (st *Stores) writeBacks() ([]writeBackRef, error) {
	if st.s.loop == nil {
		return nil, nil
	}
	return st.s.pendingWriteBacks()
}

// boot takes every connected store and respawns the actor of every store whose inbox holds
// entries (read).
func (st *Stores) boot(r storesRead) (int, error) {
	s := st.s
	for _, rec := range r.recs {
		ent := s.newEntry(rec)
		if ent.openErr != nil {
			st.e.log.Error("store credentials do not open: webhooks with a signature are refused and orders cannot be fetched until it is connected again",
				"shop", rec.Shop, "user_id", rec.UserID, "err", ent.openErr)
		}
		s.idx.byID[rec.Shop], s.idx.byUser[rec.UserID] = ent, ent
	}
	// Pending inbox entries: group by shop; entries of stores no longer connected are dropped.
	counts := map[string]int{}
	orphans := map[string][]string{}
	for _, p := range r.pending {
		ent := s.idx.byID[p.shop]
		if ent == nil {
			orphans[p.shop] = append(orphans[p.shop], p.seq)
			continue
		}
		counts[p.shop]++
		ent.seq.Observe(p.seq)
	}
	for shop, seqs := range orphans {
		if err := s.inbox.DeleteEntries(context.Background(), shop, seqs); err != nil {
			return 0, fmt.Errorf("engine: drop inbox entries of disconnected stores: %w", err)
		}
	}
	for shop, n := range counts {
		s.pending.Add(int64(n))
		st.actorOf(s.idx.byID[shop])
	}
	if s.loop != nil {
		if _, err := s.resumeWriteBacks(r.writeBacks); err != nil {
			return 0, err
		}
	}
	return len(r.recs), nil
}

// newEntry opens a record's credentials.
func (s *storeService) newEntry(r domain.Store) *storeEntry {
	ent := &storeEntry{rec: r}
	var errs []error
	var err error
	ent.token, err = s.sealer.Open(r.AccessToken)
	errs = append(errs, err)
	ent.clientSecret, err = s.sealer.Open(r.ClientSecret)
	errs = append(errs, err)
	ent.hookSecret, err = s.sealer.Open(r.WebhookSecret)
	errs = append(errs, err)
	ent.restKey, err = s.sealer.Open(r.RestKey)
	errs = append(errs, err)
	ent.restSecret, err = s.sealer.Open(r.RestSecret)
	errs = append(errs, err)
	ent.openErr = errors.Join(errs...)
	if r.AppCredentials {
		ent.clientSecret = s.cfg.ClientSecret
	}
	ent.hookMACs, ent.clientMACs = ecom.NewWebhookVerifier(ent.hookSecret), ecom.NewWebhookVerifier(ent.clientSecret)
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
	return s.idx.get(shop)
}

// actorOf returns the store's actor, spawning it on first use.
func (st *Stores) actorOf(ent *storeEntry) *actor.PID {
	ent.mu.Lock()
	defer ent.mu.Unlock()
	if ent.pid != nil {
		return ent.pid
	}
	if st.e.stopCtx.Err() != nil {
		// The engine stops (a partition released or fenced while a request still held it):
		// no new actor, which would wait on a closed store for good; what it would have run
		// is in the durable inbox for the partition's next owner. Sends to nil are dropped.
		return nil
	}
	s := st.s
	deps := storeevents.Deps{
		Store: storeEventsStore{s.inbox, s}, Orders: s, Composer: s,
		Sender: storeSender{st.e}, Outbox: storeSender{st.e},
		Publisher: storeViews{s, ent.rec.Shop}, Workers: &s.workers,
		Clock: clockFunc(st.e.cfg.Now), Log: st.e.log,
		BaseBackoff: s.cfg.BaseBackoff, MaxBackoff: s.cfg.MaxBackoff, SessionPoll: s.cfg.SessionPoll, RetryWindow: s.cfg.RetryWindow,
	}
	id := ent.rec.Shop + "." + strconv.FormatInt(s.idx.gen.Add(1), 10)
	ent.pid = st.e.spawn(storeevents.New(ent.rec.Shop, deps), storeActorKind, id)
	return ent.pid
}

// stopActor stops an entry's actor, if it runs.
func (st *Stores) stopActor(ent *storeEntry) {
	ent.mu.Lock()
	pid := ent.pid
	ent.pid = nil
	ent.mu.Unlock()
	if pid != nil {
		st.e.hw.Poison(pid)
	}
}

// stop stops every store actor and waits a little for their workers (an unfinished
// entry is run again at boot).
func (st *Stores) stop(ctx context.Context) {
	s := st.s
	ents := s.idx.all()
	var pids []*actor.PID
	for _, ent := range ents {
		ent.mu.Lock()
		if ent.pid != nil {
			pids = append(pids, ent.pid)
		}
		ent.pid = nil
		ent.mu.Unlock()
	}
	st.e.poisonAll(ctx, pids)
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

// StoreView is a user's connected store as the dashboard shows it (no credentials).
type StoreView struct {
	Shop, Method, ShopName string
	Platform               domain.Platform
	ConnectedAt            time.Time
	WebhookURL             string
	HasWebhookSecret       bool
	WebhooksRegistered     int
	// CheckoutWebhookURL is the address to paste into an abandoned-cart plugin (platforms
	// whose abandoned carts come from one), with its key when the store has a secret.
	CheckoutWebhookURL string
	// WriteBack: answers to confirmations can be written back to orders (API access).
	WriteBack bool
	// Events: pending events (oldest first), then the recent outcomes, newest first.
	Events []domain.StoreEvent
	// Orders are the orders the store loop keeps (a question, a message that waited), most
	// recently changed first.
	Orders []domain.StoreOrder
}

// RecentStoreOrders is how many orders the store's view lists.
const RecentStoreOrders = 50

// Get returns the user's store; ErrStoreNotFound when none is connected.
func (st *Stores) Get(uid string) (StoreView, error) {
	s := st.s
	ent := s.idx.ofUser(uid)
	if ent == nil {
		return StoreView{}, fmt.Errorf("%w: no store is connected to this account", domain.ErrStoreNotFound)
	}
	r := ent.rec
	v := StoreView{
		Shop: r.Shop, Platform: r.Platform, Method: r.Method, ShopName: r.ShopName, ConnectedAt: r.ConnectedAt,
		WebhookURL: ent.webhookURL, HasWebhookSecret: ent.hasSecret(), WebhooksRegistered: r.WebhooksRegistered,
	}
	p, _ := ecom.Lookup(r.Platform)
	if _, form := p.(ecom.FormTopics); form {
		v.CheckoutWebhookURL = ent.webhookURL + "&topic=" + ecom.TopicCheckoutAbandoned
		if key := ent.TopicKey(ecom.TopicCheckoutAbandoned); key != "" {
			v.CheckoutWebhookURL += "&key=" + key
		}
	}
	if w, ok := p.(ecom.OrderWriter); ok {
		v.WriteBack = w.CanWrite(ecom.Credentials{Shop: r.Shop, Token: ent.token, Key: ent.restKey, Secret: ent.restSecret})
	}
	if s.loop != nil {
		os, err := st.Orders(uid, RecentStoreOrders)
		if err != nil {
			return StoreView{}, err
		}
		v.Orders = os
	}
	qv := ent.view.Load()
	errStop := errors.New("stop")
	err := s.inbox.ScanShop(r.Shop, func(in domain.InboxEntry) error {
		rec := domain.StoreEvent{Seq: in.Seq, Topic: in.Topic, WebhookID: in.WebhookID, Status: domain.StoreEventPending, ReceivedAt: in.ReceivedAt}
		if qv != nil && qv.Head == in.Seq {
			rec.Attempts, rec.Reason = qv.Attempts, qv.LastError
		}
		v.Events = append(v.Events, rec)
		if len(v.Events) >= domain.RecentStoreEvents {
			return errStop
		}
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		return StoreView{}, fmt.Errorf("%w: read the inbox: %w", domain.ErrUnavailable, err)
	}
	done, err := s.inbox.RecentEvents(r.Shop)
	if err != nil {
		return StoreView{}, fmt.Errorf("%w: read recent events: %w", domain.ErrUnavailable, err)
	}
	slices.SortFunc(done, func(a, b domain.StoreEvent) int { return int(b.N - a.N) })
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

// Stats reads the store integration's counters.
func (st *Stores) Stats() StoreStats {
	s := st.s
	n := s.idx.len()
	return StoreStats{
		Stores: n, WebhooksAccepted: s.accepted.Load(), WebhooksDuplicate: s.duplicates.Load(),
		WebhooksIgnored: s.ignored.Load(), SignatureFailures: s.signatureN.Load(), EventsPending: s.pending.Load(),
		EventsSent: s.sentN.Load(), EventsSkipped: s.skippedN.Load(), EventsFailed: s.failedN.Load(),
	}
}

// noSealer is the Sealer of an engine built without one: nothing is sealed or opened.
type noSealer struct{}

var errNoSealer = errors.New("engine: no sealer for store credentials (StoreConfig.Sealer)")

func (noSealer) Seal(string) (string, error) { return "", errNoSealer }
func (noSealer) Open(string) (string, error) { return "", errNoSealer }
