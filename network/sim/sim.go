// Package sim is the embedded stand-in for the messaging network: the outside world the
// gateway talks to when it runs with no real accounts (dev, tests, benchmarks). It implements
// the network port (network.Network) and the dev controls behind /api/dev/sim/* (DESIGN.md
// section 6): a phone scanning a QR or typing a pair code, links dropping, numbers that are not
// on the network, delivery latency, and the list of what was delivered.
//
// What the sim delivered, which sessions are paired to which phone and which numbers are not
// on the network are kept in append-only files in Options.Dir, so they survive a restart or a
// kill -9 of the gateway, as the real network would. A message id is delivered at most once,
// forever.
//
// It imports only the standard library, the network port, internal/runq, goccy/go-json and
// google/uuid.
//
// Locks, in the order they may be taken: client.mu, then Network.mu, then conv.mu, then
// unregMu, rules.mu or deliveries.mu, then the drainers' queue's. A client's events reach its sink from one of
// the network's event goroutines (drainers.go), which holds no lock while calling the sink.
package sim

import (
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gateway/gateway/domain"

	"github.com/goccy/go-json"

	"github.com/gateway/gateway/internal/runq"
	"github.com/gateway/gateway/network"
)

// Errors of the dev controls (the HTTP layer maps them: ErrNotScanning → 409, ErrBadCode,
// ErrBadPhone and ErrEmptyText → 400, ErrUnknownSession and ErrUnknownMessage → 404,
// domain.ErrNotConnected → 409).
var (
	// ErrNotScanning: Scan was asked of a session that is not showing a QR code.
	ErrNotScanning = domain.E("not_scanning", "session is not showing a QR code")
	// ErrBadCode: Pair was given a code that is not the session's current pair code.
	ErrBadCode = domain.E("bad_code", "wrong pair code")
	// ErrUnknownSession: no client of that session was opened on this network.
	ErrUnknownSession = fmt.Errorf("%w: unknown session", domain.ErrSessionNotFound)
	// ErrBadPhone: a phone number that is not 8 to 15 digits.
	ErrBadPhone = fmt.Errorf("%w: phone number must be 8 to 15 digits", domain.ErrInvalidPhone)
	// ErrUnknownMessage: Read was given an id the sim never delivered.
	ErrUnknownMessage = fmt.Errorf("%w: no message with that id was delivered", domain.ErrMessageNotFound)
	// ErrEmptyText: Inbound was given no text.
	ErrEmptyText = fmt.Errorf("%w: text is required", domain.ErrValidation)
)

// errClosed is what calls on a closed network fail with: for callers, the link is down.
var errClosed = fmt.Errorf("sim: network closed: %w", domain.ErrNotConnected)

// Defaults of the timings tests shorten.
const (
	defaultQRRotate       = 20 * time.Second
	defaultReconnectDelay = 500 * time.Millisecond
)

// Options configure a sim network.
type Options struct {
	Dir      string        // DATA/sim: state kept here survives a restart or kill -9 of the process
	AutoPair time.Duration // pair a session this long after its first QR is shown (0 = never)
	Latency  time.Duration // each delivery takes this long (Send blocks that long, honouring ctx)
	Logger   *slog.Logger

	qrRotate       time.Duration // a new QR code this often while one is shown
	reconnectDelay time.Duration // a dropped link comes back after this long
}

// Network is the sim messaging network. It is safe for concurrent use.
type Network struct {
	log            *slog.Logger
	autoPair       time.Duration
	qrRotate       time.Duration
	reconnectDelay time.Duration
	latency        atomic.Int64 // time.Duration
	closed         atomic.Bool
	done           chan struct{}    // closed by Close: wakes sends waiting out the latency
	events         sync.WaitGroup   // clients with events not yet at their sinks
	drainers       *runq.Q[*client] // the goroutines that deliver them (drainers.go)
	deliveries     *deliveries

	mu       sync.Mutex
	clients  map[string]*client
	pairings map[string]string // session id → phone; persisted in pairings.jsonl
	pairLog  *journal

	unregMu  sync.Mutex
	unreg    atomic.Pointer[map[string]struct{}] // replaced whole on change: read on every send
	unregLog *journal

	rules rules         // refusals, timelocks (rules.go)
	conv  conversations // what phones wrote, groups (conversations.go)
}

// Interface guards.
var (
	_ network.Network = (*Network)(nil)
	_ network.Client  = (*client)(nil)
)

type pairingRecord struct {
	Session string `json:"session"`
	Phone   string `json:"phone"` // "" = unpaired
}

type unregisteredRecord struct {
	Number string `json:"number"`
}

// Open opens the sim network kept in o.Dir (created if missing).
func Open(o Options) (*Network, error) {
	if o.Dir == "" {
		return nil, errors.New("sim: Options.Dir is required")
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	n := &Network{
		log:            o.Logger,
		autoPair:       o.AutoPair,
		qrRotate:       o.qrRotate,
		reconnectDelay: o.reconnectDelay,
		done:           make(chan struct{}),
		clients:        make(map[string]*client),
		pairings:       make(map[string]string),
	}
	n.drainers = newDrainers()
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	if n.qrRotate <= 0 {
		n.qrRotate = defaultQRRotate
	}
	if n.reconnectDelay <= 0 {
		n.reconnectDelay = defaultReconnectDelay
	}
	n.latency.Store(int64(o.Latency))

	var err error
	if n.pairLog, err = openJournal(filepath.Join(o.Dir, "pairings.jsonl")); err != nil {
		return nil, err
	}
	err = n.pairLog.replay(n.log, func(_ int64, line []byte) error {
		var r pairingRecord
		if err := json.Unmarshal(line, &r); err != nil {
			return err
		}
		if r.Phone == "" {
			delete(n.pairings, r.Session)
		} else {
			n.pairings[r.Session] = r.Phone
		}
		return nil
	})
	if err != nil {
		n.pairLog.close()
		return nil, err
	}

	unreg := make(map[string]struct{})
	if n.unregLog, err = openJournal(filepath.Join(o.Dir, "unregistered.jsonl")); err == nil {
		err = n.unregLog.replay(n.log, func(_ int64, line []byte) error {
			var r unregisteredRecord
			if err := json.Unmarshal(line, &r); err != nil {
				return err
			}
			unreg[r.Number] = struct{}{}
			return nil
		})
		if err != nil {
			n.unregLog.close()
		}
	}
	if err != nil {
		n.pairLog.close()
		return nil, err
	}
	n.unreg.Store(&unreg)

	if n.conv.log, err = openJournal(filepath.Join(o.Dir, "conversations.jsonl")); err == nil {
		if err = n.conv.replay(n); err != nil {
			n.conv.log.close()
		}
	}
	if err != nil {
		n.pairLog.close()
		n.unregLog.close()
		return nil, err
	}
	if n.deliveries, err = openDeliveries(o.Dir, n.log); err != nil {
		n.pairLog.close()
		n.unregLog.close()
		n.conv.log.close()
		return nil, err
	}
	n.log.Info("sim network open", "dir", o.Dir, "pairings", len(n.pairings),
		"unregistered", len(unreg), "delivered", n.deliveries.count.Load())
	return n, nil
}

// Open returns the client of a session, creating it on first use; a session opened again
// gets the same client (its link state is kept) with events now going to sink.
// Options (a message source, a proxy) mean nothing to the sim and are ignored.
func (n *Network) Open(sessionID string, sink func(network.Event), _ ...network.Option) (network.Client, error) {
	if sessionID == "" {
		return nil, errors.New("sim: empty session id")
	}
	n.mu.Lock()
	if n.closed.Load() {
		n.mu.Unlock()
		return nil, errClosed
	}
	c := n.clients[sessionID]
	if c == nil {
		c = &client{n: n, session: sessionID, phone: n.pairings[sessionID]}
		n.clients[sessionID] = c
	}
	n.mu.Unlock()

	c.mu.Lock()
	c.sink = sink
	c.mu.Unlock()
	return c, nil
}

// Close takes every client offline (pairings are kept), waits for pending events to reach
// their sinks, and closes the files. Sends waiting out the latency fail with ErrNotConnected.
func (n *Network) Close() error {
	n.mu.Lock()
	if n.closed.Load() {
		n.mu.Unlock()
		return nil
	}
	n.closed.Store(true)
	close(n.done)
	clients := make([]*client, 0, len(n.clients))
	for _, c := range n.clients {
		clients = append(clients, c)
	}
	n.mu.Unlock()

	// Once a client's lock has been taken after closed was set, it queues no event and its
	// timers do nothing, so the Wait below covers every event there will be; then the event
	// goroutines have nothing left and exit.
	for _, c := range clients {
		c.mu.Lock()
		c.setState(offline)
		c.mu.Unlock()
	}
	n.events.Wait()
	n.drainers.Stop()

	n.mu.Lock()
	err := n.pairLog.close()
	n.mu.Unlock()
	n.unregMu.Lock()
	err = errors.Join(err, n.unregLog.close())
	n.unregMu.Unlock()
	n.conv.mu.Lock()
	err = errors.Join(err, n.conv.log.close())
	n.conv.mu.Unlock()
	return errors.Join(err, n.deliveries.close())
}

// Scan is the phone scanning the session's QR code: the session is paired with phone
// (Paired, then Connected). ErrNotScanning unless the session is showing a QR code.
func (n *Network) Scan(sessionID, phone string) error {
	phone = normalizePhone(phone)
	if !validPhone(phone) {
		return ErrBadPhone
	}
	c, err := n.client(sessionID)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.state != linking {
		return ErrNotScanning
	}
	return c.pairLocked(phone)
}

// Pair is the phone entering the pair code PairPhone gave: the session is paired with the
// phone given to PairPhone (Paired, then Connected). ErrBadCode unless code is the session's
// current code (case and dashes do not matter: people type it).
func (n *Network) Pair(sessionID, code string) error {
	c, err := n.client(sessionID)
	if err != nil {
		return err
	}
	code = strings.ToUpper(strings.ReplaceAll(strings.TrimSpace(code), "-", ""))
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pairCode == "" || c.phone != "" || code != c.pairCode {
		return ErrBadCode
	}
	return c.pairLocked(c.pairPhone)
}

// Messages returns what was delivered to a number (digits) or a group, in delivery order, with
// edits and revokes laid over the messages they change; never nil.
func (n *Network) Messages(to string) []domain.Delivered { return domain.Folded(n.deliveries.to(to)) }

// MessagesFrom is Messages of those the phone from sent.
func (n *Network) MessagesFrom(from, to string) []domain.Delivered {
	var out []domain.Delivered
	for _, d := range n.Messages(to) {
		if d.From == from {
			out = append(out, d)
		}
	}
	return out
}

// DeliveredCount is the number of messages delivered since Dir was created.
func (n *Network) DeliveredCount() int64 { return n.deliveries.count.Load() }

// SetLatency sets the time each delivery takes from now on.
func (n *Network) SetLatency(d time.Duration) { n.latency.Store(int64(max(d, 0))) }

// SetUnregistered marks numbers as not on the network (added to those already marked, and
// kept in Dir). Numbers are normalised as the gateway does (+, spaces, -, (, ), . removed).
// A failure to persist is logged; the numbers still apply until the process ends.
func (n *Network) SetUnregistered(numbers []string) {
	n.unregMu.Lock()
	defer n.unregMu.Unlock()
	if n.closed.Load() {
		return
	}
	old := *n.unreg.Load()
	next := make(map[string]struct{}, len(old)+len(numbers))
	for k := range old {
		next[k] = struct{}{}
	}
	var lines []byte
	for _, num := range numbers {
		num = normalizePhone(num)
		if _, ok := next[num]; ok || num == "" {
			continue
		}
		next[num] = struct{}{}
		b, _ := json.Marshal(unregisteredRecord{Number: num})
		lines = append(append(lines, b...), '\n')
	}
	if len(lines) == 0 {
		return
	}
	if _, err := n.unregLog.append(lines); err != nil {
		n.log.Error("sim: persist unregistered numbers", "err", err)
	}
	n.unreg.Store(&next)
}

func (n *Network) registered(number string) bool {
	_, no := (*n.unreg.Load())[number]
	return !no && validPhone(number)
}

// Drop is the link of a session failing. logout=false: a transient drop, Disconnected
// {Reconnecting: true} and, shortly after, Connected again (ErrNotConnected unless the session
// is connected). logout=true: the phone unlinked the device, LoggedOut and the pairing is gone
// (ErrNotConnected unless the session is paired).
func (n *Network) Drop(sessionID string, logout bool) error {
	c, err := n.client(sessionID)
	if errors.Is(err, ErrUnknownSession) && logout {
		// Paired but not opened in this process (sessions are opened lazily): unlink it anyway.
		n.mu.Lock()
		_, paired := n.pairings[sessionID]
		n.mu.Unlock()
		if !paired {
			return err
		}
		return n.setPairing(sessionID, "")
	}
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if logout {
		if c.phone == "" {
			return fmt.Errorf("sim: session %s is not paired: %w", sessionID, domain.ErrNotConnected)
		}
		return c.logoutLocked("device unlinked from the phone")
	}
	if c.state != online {
		return fmt.Errorf("sim: session %s is not connected: %w", sessionID, domain.ErrNotConnected)
	}
	c.setState(reconnecting)
	c.emit(network.Disconnected{Reason: "connection dropped", Reconnecting: true, StatusReason: network.ReasonNetwork})
	gen := c.gen
	c.timer = time.AfterFunc(n.reconnectDelay, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.gen != gen || n.closed.Load() {
			return
		}
		c.setState(online)
		c.emit(network.Connected{Phone: c.phone})
	})
	return nil
}

// client returns the opened client of a session.
func (n *Network) client(sessionID string) (*client, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed.Load() {
		return nil, errClosed
	}
	c := n.clients[sessionID]
	if c == nil {
		return nil, fmt.Errorf("sim: session %q: %w", sessionID, ErrUnknownSession)
	}
	return c, nil
}

// setPairing records that session is paired with phone ("" = unpaired), in memory and in Dir.
func (n *Network) setPairing(session, phone string) error {
	b, err := json.Marshal(pairingRecord{Session: session, Phone: phone})
	if err != nil {
		return fmt.Errorf("sim: encode pairing: %w", err)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed.Load() {
		return errClosed
	}
	if _, err := n.pairLog.append(append(b, '\n')); err != nil {
		return err
	}
	if phone == "" {
		delete(n.pairings, session)
	} else {
		n.pairings[session] = phone
	}
	return nil
}

// autoPhone is the phone AutoPair links a session with: derived from the session id, so it is
// the same after a restart, 13 digits starting 999.
func autoPhone(sessionID string) string {
	h := fnv.New64a()
	h.Write([]byte(sessionID))
	return fmt.Sprintf("999%010d", h.Sum64()%1e10)
}

// normalizePhone removes what people put between digits, as the gateway does.
func normalizePhone(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '+', ' ', '-', '(', ')', '.':
			return -1
		}
		return r
	}, s)
}

func validPhone(s string) bool {
	if len(s) < 8 || len(s) > 15 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Read is the recipient of a delivered message opening it (POST /api/dev/sim/read): the
// sending session hears MessageReceipt{Status: read}. ErrUnknownMessage unless the id was
// delivered. A session that is not open (or not linked to the sender's phone any more) hears
// nothing, as on the network.
func (n *Network) Read(messageID string) error {
	d, ok, err := n.deliveries.record(messageID)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("sim: read %q: %w", messageID, ErrUnknownMessage)
	}
	n.mu.Lock()
	clients := make([]*client, 0, 1)
	for id, phone := range n.pairings {
		if phone == d.From {
			if c := n.clients[id]; c != nil {
				clients = append(clients, c)
			}
		}
	}
	n.mu.Unlock()
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, c := range clients {
		c.mu.Lock()
		c.emit(network.MessageReceipt{IDs: []string{d.ID}, Status: network.StatusRead, From: d.To, At: now})
		c.mu.Unlock()
	}
	return nil
}
