// Package whatsapp is the WhatsApp adapter of the network port, built on whatsmeow: it links
// devices by QR code or phone code, keeps them connected, sends every message kind and maps
// whatsmeow's events and errors onto the port's. It owns DATA/whatsapp.db: whatsmeow's device
// store (one SQLite container holding every device) plus the gateway's own session id → device
// JID table. With Options.StoreURL the store is on PostgreSQL instead (store.go). It imports only the standard library, third-party modules and
// github.com/gateway/gateway/network.
//
// Concurrency: every Client has one event goroutine that delivers events to its sink in order;
// whatsmeow's event handlers only append to that goroutine's queue. A Client's mu guards its
// state and is never held during I/O; ctlMu serialises the operations that change the
// connection (Connect, Disconnect, Logout, shutdown). Lock order: ctlMu → mu. The event
// goroutine takes mu only; Network.mu is never held while a client's locks are taken.
package whatsapp

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/store/sqlstore"

	"github.com/gateway/gateway/network"
)

// Options configures Open.
type Options struct {
	// DBPath is the SQLite file holding every device (DATA/whatsapp.db). Created if missing.
	DBPath string
	// StoreURL, when set, puts the device store on PostgreSQL instead (postgres://…, lib/pq's
	// URL form; `--whatsapp-store`); DBPath is then unused. Devices are used under advisory
	// locks (devlock.go).
	StoreURL string
	// Logger receives the adapter's logs and whatsmeow's (module attribute "whatsmeow/...").
	Logger *slog.Logger
	// SendTimeout bounds one send: media upload and the wait for the server's acknowledgement
	// (whatsmeow waits 75 s by default). Zero means DefaultSendTimeout.
	SendTimeout time.Duration
	// RejectCalls declines incoming voice and video calls (`--reject-calls`).
	RejectCalls bool
	// FFmpeg is the path of an ffmpeg binary that converts voice notes (ptt) that are not
	// Ogg/Opus into Ogg/Opus (`--ffmpeg`); empty: such voice notes are refused (audio.go).
	FFmpeg string
	// HTTPClient, when set, carries every connection to WhatsApp (websocket, media, the version
	// fetch) instead of the default transport and the sessions' proxies: a test build points
	// it at the fake server.
	HTTPClient *http.Client
	// NoVersionFetch keeps the client version built into whatsmeow instead of asking
	// web.whatsapp.com for the current one before the first connection (see clientVersion).
	NoVersionFetch bool
}

// Defaults used when Options leaves a field zero, and the adapter's fixed policies.
const (
	DefaultSendTimeout = 60 * time.Second

	// busyTimeout lets concurrent writers (many sessions saving keys at once) wait for the
	// SQLite write lock instead of failing with SQLITE_BUSY.
	busyTimeout = 10 * time.Second
	// dbTimeout bounds one statement of the adapter's own (mapping table) queries.
	dbTimeout = 10 * time.Second

	// After linking (awaitLogin): how often the link connection is checked until the login
	// starts, and how long the server may leave it open without the 515 that starts it.
	loginPoll = 100 * time.Millisecond
	loginWait = 30 * time.Second

	// First-connect retry: capped exponential backoff with jitter.
	connectBackoffBase = time.Second
	connectBackoffMax  = time.Minute

	// Recipient lookups (IsOnWhatsApp) are cached: a number that is on the network rarely
	// leaves it; one that is not may join, so negative answers are kept for less time.
	lookupTTL         = 12 * time.Hour
	negativeLookupTTL = 10 * time.Minute
	lookupCacheMax    = 50_000

	// keepWait bounds how long whatsmeow's node handler waits for an incoming message or a
	// receipt to be kept before it leaves it unacked (client.take). The commits take
	// milliseconds; while it waits, the connection's other nodes wait behind it.
	keepWait = 10 * time.Second
	// redeliverAfter: how long after an event was left unacked the link is reset, for the
	// server to deliver it again (client.redeliverSoon).
	redeliverAfter = 30 * time.Second
)

// Network is the WhatsApp implementation of network.Network.
type Network struct {
	log         *slog.Logger
	db          *sql.DB
	dialect     string       // dialectSQLite or dialectPostgres
	locks       *deviceLocks // nil on SQLite
	container   *sqlstore.Container
	sendTimeout time.Duration

	// ctx lives as long as the Network: every whatsmeow connection and QR channel hangs off it,
	// so Close stops them all.
	ctx    context.Context
	cancel context.CancelFunc

	rejectCalls bool
	version     *clientVersion
	ffmpeg      string // Options.FFmpeg

	// Test hooks, set only by tests before the first Open(sessionID): httpClient carries every
	// whatsmeow connection (websocket and media) to a fake server; the delays are shortened so
	// retries are observable quickly.
	httpClient   *http.Client
	backoffBase  time.Duration
	backoffMax   time.Duration
	banEndJitter time.Duration
	// connectedWait: how long a send waits for a dropped link (see the constant).
	connectedWait  time.Duration
	keepWait       time.Duration // see the constant
	redeliverAfter time.Duration // see the constant

	mu      sync.Mutex // guards clients and closed
	clients map[string]*client
	closed  bool
}

// Interface guards.
var (
	_ network.Network = (*Network)(nil)
	_ network.Client  = (*client)(nil)
)

// errClosed is returned by every method once the Network is closed.
var errClosed = errors.New("whatsapp network is closed")

// Open opens (creating if needed) the device store at o.DBPath. It does no network I/O.
func Open(o Options) (*Network, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if o.SendTimeout <= 0 {
		o.SendTimeout = DefaultSendTimeout
	}
	warnLibraryAge(log, time.Now())
	db, dialect, err := openDB(o)
	if err != nil {
		return nil, err
	}
	where := storeTarget(o)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	container := sqlstore.NewWithDB(db, dialect, newWALogger(log, "whatsmeow/Database"))
	if err := container.Upgrade(ctx); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("whatsapp: upgrade device store %s: %w", where, err)
	}
	if err := migrate(ctx, db, dialect); err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("whatsapp: %s: %w", where, err)
	}
	n := &Network{
		log:            log,
		db:             db,
		dialect:        dialect,
		container:      container,
		sendTimeout:    o.SendTimeout,
		backoffBase:    connectBackoffBase,
		backoffMax:     connectBackoffMax,
		banEndJitter:   banEndJitter,
		connectedWait:  connectedWait,
		keepWait:       keepWait,
		redeliverAfter: redeliverAfter,
		clients:        make(map[string]*client),
		rejectCalls:    o.RejectCalls,
		httpClient:     o.HTTPClient,
		ffmpeg:         o.FFmpeg,
	}
	n.version = newClientVersion(n, !o.NoVersionFetch)
	n.ctx, n.cancel = context.WithCancel(context.Background())
	if dialect == dialectPostgres {
		n.locks = newDeviceLocks(db, log, n.locksLost)
	}
	return n, nil
}

// Open returns the client of a gateway session: its paired device when the session has one
// (read from the session table, then the device store), else a new unpaired device that is
// saved when a phone links it. Opening a session that is already open returns the same client
// with its sink replaced (a restarted session actor takes the events over).
func (n *Network) Open(sessionID string, sink func(network.Event), opts ...network.Option) (network.Client, error) {
	if sessionID == "" {
		return nil, errors.New("whatsapp: empty session id")
	}
	if sink == nil {
		return nil, errors.New("whatsapp: nil event sink")
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return nil, errClosed
	}
	o := network.Options(opts...)
	if err := checkProxy(o.Proxy); err != nil {
		return nil, err
	}
	if c, ok := n.clients[sessionID]; ok {
		c.sink.Store(&sink)
		c.opts.Store(&o) // a new proxy applies at the next connection (proxy.go)
		return c, nil
	}
	dev, err := n.loadDevice(sessionID)
	if err != nil {
		return nil, err
	}
	c := newClient(n, sessionID, dev, sink, o)
	if c.phone != "" {
		ctx, cancel := context.WithTimeout(n.ctx, dbTimeout)
		c.loadPhoneSeen(ctx)
		c.loadTimelock(ctx)
		cancel()
	}
	n.clients[sessionID] = c
	return c, nil
}

// loadDevice finds the session's device, or makes a new unpaired one. A mapping whose device is
// gone from the store (deleted by whatsmeow while the gateway was down) is dropped.
func (n *Network) loadDevice(sessionID string) (*store.Device, error) {
	ctx, cancel := context.WithTimeout(n.ctx, dbTimeout)
	defer cancel()
	jid, ok, err := lookupSessionDevice(ctx, n.db, sessionID)
	if err != nil {
		return nil, fmt.Errorf("whatsapp: session %s: %w", sessionID, err)
	}
	if !ok {
		return n.container.NewDevice(), nil
	}
	dev, err := n.container.GetDevice(ctx, jid)
	if err != nil {
		return nil, fmt.Errorf("whatsapp: session %s: load device %s: %w", sessionID, jid, err)
	}
	if dev == nil {
		n.log.Warn("device of session is gone from the store; a new link is needed",
			"session", sessionID, "device", jid.String())
		if err := forgetSessionDevice(ctx, n.db, sessionID, jid); err != nil {
			return nil, fmt.Errorf("whatsapp: session %s: %w", sessionID, err)
		}
		return n.container.NewDevice(), nil
	}
	return dev, nil
}

// checkProxy accepts the proxies whatsmeow can use: socks5, http and https URLs with a host.
func checkProxy(raw string) error {
	if raw == "" {
		return nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("whatsapp: proxy %q: %w", raw, err)
	}
	switch u.Scheme {
	case "socks5", "http", "https":
	default:
		return fmt.Errorf("whatsapp: proxy %q: want socks5://, http:// or https://", u.Redacted())
	}
	if u.Host == "" {
		return fmt.Errorf("whatsapp: proxy %q: no host", u.Redacted())
	}
	return nil
}

// Close disconnects every client (pairings are kept) and closes the device store.
func (n *Network) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	clients := make([]*client, 0, len(n.clients))
	for _, c := range n.clients {
		clients = append(clients, c)
	}
	n.mu.Unlock()

	// Disconnects wait for the websocket close handshake: run them side by side.
	var wg sync.WaitGroup
	for _, c := range clients {
		wg.Go(c.shutdown)
	}
	wg.Wait()
	n.cancel()
	n.locks.close()
	if err := n.container.Close(); err != nil {
		return fmt.Errorf("whatsapp: close device store: %w", err)
	}
	return nil
}

// DefaultPacing is the pacing the core applies to WhatsApp sessions unless configured
// otherwise (README.md, "WhatsApp", has the sources). Conservative on purpose: WhatsApp
// publishes no limits, and the peers that document anything say "slow, random, few cold
// contacts".
var DefaultPacing = network.Pacing{
	MinGap:              8 * time.Second,
	Jitter:              7 * time.Second,
	PerMinute:           6,
	NewContactsPerDay:   200,
	NewContactsFirstDay: 20,
	RampDays:            14,
}

// DefaultPacing implements network.PacingDefaulter.
func (n *Network) DefaultPacing() network.Pacing { return DefaultPacing }

var _ network.PacingDefaulter = (*Network)(nil)
