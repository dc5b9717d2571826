package whatsapp

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.mau.fi/whatsmeow"

	"github.com/gateway/gateway/internal/pgtest"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/network/whatsapp/fakewa"
)

func TestMain(m *testing.M) {
	// The fake server's certificates chain to its own root. Set once, before any client runs.
	whatsmeow.WACertPubKey = fakewa.RootPublicKey()
	// Keepalives every 200-300 ms with a 1 s deadline (lenient for a loaded machine under the
	// race detector), so a dead path shows within about 1.5 s. whatsmeow's forced reconnect
	// after KeepAliveMaxFailTime stays out of the tests' way.
	whatsmeow.KeepAliveIntervalMin, whatsmeow.KeepAliveIntervalMax = 200*time.Millisecond, 300*time.Millisecond
	whatsmeow.KeepAliveResponseDeadline = time.Second
	// As main does: libsignal's logger is a lazily set package variable (racy on first use).
	RouteSignalLogs(slog.New(slog.DiscardHandler))
	code := m.Run()
	pgtest.StopShared()
	os.Exit(code)
}

// wait is how long a test waits for an event from the fake network.
const wait = 15 * time.Second

// testLogger logs through t (shown for failing tests or -v); WHATSAPP_TEST_DEBUG=1 adds
// whatsmeow's frame-level debug logs.
func testLogger(t testing.TB) *slog.Logger {
	level := slog.LevelInfo
	if os.Getenv("WHATSAPP_TEST_DEBUG") != "" {
		level = slog.LevelDebug
	}
	w := &tWriter{t: t}
	t.Cleanup(w.stop)
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// tWriter writes log lines to t until the test's cleanup: whatsmeow goroutines may still log
// afterwards, and t.Log then panics.
type tWriter struct {
	mu      sync.Mutex
	t       testing.TB
	stopped bool
}

func (w *tWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.stopped {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func (w *tWriter) stop() {
	w.mu.Lock()
	w.stopped = true
	w.mu.Unlock()
}

// harness is one fake network and one Network (device store) pointed at it.
type harness struct {
	t      testing.TB
	srv    *fakewa.Server
	dbPath string
	// storeURL: the device store is on PostgreSQL (newPostgresHarness) instead of dbPath.
	storeURL string
	net      *Network
	// fetchVersion: the Network asks the fake for the current web version (whatsmeow keeps the
	// version in a process-wide variable: only tests that do not run in parallel set it).
	fetchVersion bool
}

func newHarness(t testing.TB) *harness {
	t.Helper()
	return newHarnessOn(t, "")
}

// newPostgresHarness is newHarness with the device store in a new database of the test
// binary's PostgreSQL server (internal/pgtest: skipped only under -short).
func newPostgresHarness(t testing.TB) *harness {
	t.Helper()
	return newHarnessOn(t, pgtest.DB(t))
}

// newHarnessOn makes a harness whose store is storeURL (PostgreSQL), or SQLite when empty.
func newHarnessOn(t testing.TB, storeURL string) *harness {
	t.Helper()
	srv, err := fakewa.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	h := &harness{t: t, srv: srv, dbPath: filepath.Join(t.TempDir(), "whatsapp.db"), storeURL: storeURL}
	h.reopen()
	return h
}

// reopen opens the Network on the harness database (closing the previous one).
func (h *harness) reopen() {
	h.t.Helper()
	if h.net != nil {
		if err := h.net.Close(); err != nil {
			h.t.Fatal(err)
		}
	}
	h.net = h.openNetwork()
	h.t.Cleanup(func() { _ = h.net.Close() })
}

// openNetwork opens another Network on the harness's store and fake server.
func (h *harness) openNetwork() *Network {
	h.t.Helper()
	n, err := Open(Options{DBPath: h.dbPath, StoreURL: h.storeURL, Logger: testLogger(h.t), SendTimeout: 10 * time.Second, NoVersionFetch: !h.fetchVersion})
	if err != nil {
		h.t.Fatal(err)
	}
	n.httpClient = h.srv.HTTPClient()
	n.backoffBase, n.backoffMax = 20*time.Millisecond, 100*time.Millisecond
	n.banEndJitter = 10 * time.Millisecond
	n.connectedWait = time.Second
	return n
}

// session is an open client and the events its sink received.
type session struct {
	t   testing.TB
	c   *client
	rec *recorder
}

func (h *harness) open(id string) *session {
	h.t.Helper()
	rec := newRecorder()
	c, err := h.net.Open(id, rec.sink)
	if err != nil {
		h.t.Fatal(err)
	}
	return &session{t: h.t, c: c.(*client), rec: rec}
}

// recorder is a sink that never blocks and lets tests wait for events in order.
type recorder struct {
	mu     sync.Mutex
	events []network.Event
	at     []time.Time // when each event arrived
	next   int
	wake   chan struct{}
	// keep takes the Done of an event that carries one (an incoming message, a receipt): nil
	// keeps it at once, as the session does once its commit is done.
	keep func(network.Event, network.Done)
}

func newRecorder() *recorder { return &recorder{wake: make(chan struct{}, 1)} }

func (r *recorder) sink(e network.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.at = append(r.at, time.Now())
	keep := r.keep
	r.mu.Unlock()
	select {
	case r.wake <- struct{}{}:
	default:
	}
	if d := network.DoneOf(e); d != nil {
		if keep == nil {
			d(nil)
		} else {
			keep(e, d)
		}
	}
}

// expect waits for the next event matching match, skipping others (QR rotations, say). It fails
// the test if none comes within wait.
// seen tells whether any event so far (consumed or not) matches.
func (s *session) seen(match func(network.Event) bool) bool {
	s.rec.mu.Lock()
	defer s.rec.mu.Unlock()
	for _, e := range s.rec.events {
		if match(e) {
			return true
		}
	}
	return false
}

func (s *session) expect(what string, match func(network.Event) bool) network.Event {
	s.t.Helper()
	deadline := time.After(wait)
	for {
		s.rec.mu.Lock()
		for s.rec.next < len(s.rec.events) {
			e := s.rec.events[s.rec.next]
			s.rec.next++
			if match(e) {
				s.rec.mu.Unlock()
				return e
			}
		}
		seen := fmt.Sprintf("%#v", s.rec.events)
		s.rec.mu.Unlock()
		select {
		case <-s.rec.wake:
		case <-deadline:
			s.t.Fatalf("no %s event within %v; events so far: %s", what, wait, seen)
		}
	}
}

// expectNone fails if an event matching match arrives within d (only for asserting absence).
func (s *session) expectNone(what string, d time.Duration, match func(network.Event) bool) {
	s.t.Helper()
	deadline := time.After(d)
	for {
		s.rec.mu.Lock()
		for i := s.rec.next; i < len(s.rec.events); i++ {
			if match(s.rec.events[i]) {
				s.rec.mu.Unlock()
				s.t.Fatalf("unexpected %s event: %#v", what, s.rec.events[i])
			}
		}
		s.rec.mu.Unlock()
		select {
		case <-s.rec.wake:
		case <-deadline:
			return
		}
	}
}

func isQR(e network.Event) bool        { _, ok := e.(network.QRCode); return ok }
func isQRTimeout(e network.Event) bool { _, ok := e.(network.QRTimeout); return ok }
func isPaired(e network.Event) bool    { _, ok := e.(network.Paired); return ok }
func isConnected(e network.Event) bool { _, ok := e.(network.Connected); return ok }
func isLoggedOut(e network.Event) bool { _, ok := e.(network.LoggedOut); return ok }
func isDisconnected(reconnecting bool) func(network.Event) bool {
	return func(e network.Event) bool {
		d, ok := e.(network.Disconnected)
		return ok && d.Reconnecting == reconnecting
	}
}

func (s *session) connect() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	if err := s.c.Connect(ctx); err != nil {
		s.t.Fatalf("Connect: %v", err)
	}
}

// link connects an unpaired session, scans its first QR code as phone and waits for Connected.
func (h *harness) link(s *session, phone string) {
	h.t.Helper()
	h.scan(s, phone, nil)
	if c := s.expect("Connected", isConnected).(network.Connected); c.Phone != phone {
		h.t.Fatalf("Connected.Phone = %q, want %q", c.Phone, phone)
	}
}

// scan connects an unpaired session, runs between (when not nil) once its first QR code is
// shown, scans the code as phone and waits for Paired.
func (h *harness) scan(s *session, phone string, between func()) {
	h.t.Helper()
	s.connect()
	qr := s.expect("QRCode", isQR).(network.QRCode)
	if between != nil {
		between()
	}
	if err := h.srv.Scan(qr.Code, phone); err != nil {
		h.t.Fatal(err)
	}
	if p := s.expect("Paired", isPaired).(network.Paired); p.Phone != phone {
		h.t.Fatalf("Paired.Phone = %q, want %q", p.Phone, phone)
	}
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	t.Cleanup(cancel)
	return ctx
}
