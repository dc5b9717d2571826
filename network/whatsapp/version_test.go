package whatsapp

// The version the clients announce (version.go). Not parallel: whatsmeow keeps it in a
// process-wide variable.

import (
	"sync"
	"testing"
	"time"

	"go.mau.fi/whatsmeow/store"
)

func restoreVersion(t *testing.T) store.WAVersionContainer {
	builtIn := store.GetWAVersion()
	t.Cleanup(func() { store.SetWAVersion(builtIn) })
	return builtIn
}

// After a 405 the session compares the current version with the one its own refused
// connection announced, not with the process-wide one: when another session already raised
// the version, this one reconnects too instead of staying down.
func TestRecoverOutdatedComparesTheRefusedConnectionsVersion(t *testing.T) {
	builtIn := restoreVersion(t)
	h := newHarness(t)
	h.fetchVersion = true
	h.reopen()
	s := h.open("s1")
	h.link(s, phoneA)
	s.c.mu.Lock()
	announced := s.c.connVersion
	s.c.mu.Unlock()
	if announced != builtIn {
		t.Fatalf("the connection announced %v, want %v", announced, builtIn)
	}
	s.c.Disconnect()

	// WhatsApp moves on: the built-in version is refused, the web page names a newer one,
	// and another session has already switched the process to it.
	current := builtIn[2] + 7
	h.srv.SetWebVersion(current)
	h.srv.SetOutdated(true, current)
	apply(store.WAVersionContainer{builtIn[0], builtIn[1], current})
	s.c.mu.Lock()
	gen := s.c.gen
	s.c.mu.Unlock()

	// Compared with the process-wide version (as before) nothing would happen; compared with
	// the refused one, the session reconnects with the current version.
	h.net.recoverOutdated(s.c, gen, store.WAVersionContainer{builtIn[0], builtIn[1], current})
	s.expectNone("Connected (nothing newer than the refused version)", 300*time.Millisecond, isConnected)
	h.net.recoverOutdated(s.c, gen, builtIn)
	s.expect("Connected with the current version", isConnected)
	s.c.mu.Lock()
	announced = s.c.connVersion
	s.c.mu.Unlock()
	if announced[2] != current {
		t.Fatalf("reconnected announcing %v, want 2.3000.%d", announced, current)
	}
}

// Forced fetches are single-flight (a wave of 405s costs one fetch) and a caller that needs
// no fetch never waits behind one.
func TestForcedVersionFetchSingleFlight(t *testing.T) {
	builtIn := restoreVersion(t)
	h := newHarness(t)
	h.fetchVersion = true
	h.reopen()
	h.srv.SetWebVersion(builtIn[2] + 3)
	h.srv.SetWebDelay(500 * time.Millisecond)
	v := h.net.version
	if !v.ensure(ctxT(t), false, h.net.httpClient) || h.srv.WebVersionFetches() != 1 {
		t.Fatalf("first check: %d fetches", h.srv.WebVersionFetches())
	}
	v.mu.Lock()
	v.fetched = time.Time{} // as if the last fetch were long ago
	v.mu.Unlock()

	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() { v.ensure(ctxT(t), true, h.net.httpClient) })
	}
	waitFor(t, "the forced fetch under way", func() bool { return h.srv.WebVersionFetches() == 2 })
	start := time.Now()
	v.ensure(ctxT(t), false, h.net.httpClient) // checked a moment ago: no fetch, no wait
	if d := time.Since(start); d > 200*time.Millisecond {
		t.Fatalf("a caller needing no fetch waited %v behind a forced one", d)
	}
	wg.Wait()
	if n := h.srv.WebVersionFetches(); n != 2 {
		t.Fatalf("%d fetches, want the first and one forced fetch for 20 callers", n)
	}
	// Right after, a further 405 does not fetch again.
	v.ensure(ctxT(t), true, h.net.httpClient)
	if n := h.srv.WebVersionFetches(); n != 2 {
		t.Fatalf("%d fetches after another forced check within a minute", n)
	}
}
