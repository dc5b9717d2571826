package whatsapp

// The WhatsApp web version the clients announce. whatsmeow builds one in, but WhatsApp answers
// "client outdated" (405) to versions it has retired, and that takes every session down, so
// before the first connection the adapter asks web.whatsapp.com for the current version
// (whatsmeow.GetLatestVersion, as mautrix-whatsapp does at start) and uses it when it is newer.
// The answer is cached in the device database for a day, and the cached one is used when the
// site cannot be reached; the built-in version is the last resort. A 405 asks again at once
// (recoverOutdated). The fetch goes through the connecting session's proxy.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waWa6"
	"go.mau.fi/whatsmeow/store"
)

const (
	versionTTL          = 24 * time.Hour
	versionFetchTimeout = 10 * time.Second
	// versionRetryAfter: after a failed fetch, connections go on with what is known and the
	// next connect after this tries again.
	versionRetryAfter = 10 * time.Minute
)

const createVersionTable = `
CREATE TABLE IF NOT EXISTS gateway_wa_version (
	id         INTEGER PRIMARY KEY CHECK (id = 1),
	version    TEXT NOT NULL,
	fetched_at BIGINT NOT NULL
)`

// setVersionMu serialises store.SetWAVersion (a process-wide variable of whatsmeow).
var setVersionMu sync.Mutex

// forcedFetchMin: a forced fetch (after a 405) is skipped when a fetch ended this recently: a
// wave of 405s costs one fetch, and each session compares with what it found.
const forcedFetchMin = time.Minute

// clientVersion keeps the announced version current. Fetches are single-flight: callers that
// need one while one runs wait for it, and v.mu is never held during I/O.
type clientVersion struct {
	n       *Network
	enabled bool

	mu        sync.Mutex
	checked   time.Time      // last check (fetch or cache read) that settled the version
	fetched   time.Time      // last fetch that ended (success or not)
	flight    *versionFlight // the check under way, nil if none
	lastError error
}

// versionFlight is one check under way; done is closed when it ends.
type versionFlight struct {
	force   bool
	done    chan struct{}
	changed bool
}

func newClientVersion(n *Network, enabled bool) *clientVersion {
	return &clientVersion{n: n, enabled: enabled}
}

// ensure makes sure the version was checked recently (once a day): cached answer first, then
// web.whatsapp.com through hc (the session's proxy). force (after a 405) skips the cache. It
// never fails a connection: on error the version stays as it was. It reports whether the
// version in use changed.
func (v *clientVersion) ensure(ctx context.Context, force bool, hc *http.Client) (changed bool) {
	if !v.enabled {
		return false
	}
	v.mu.Lock()
	switch {
	case !force && !v.checked.IsZero() && time.Since(v.checked) < versionRetryAfter:
		v.mu.Unlock()
		return false
	case force && !v.fetched.IsZero() && time.Since(v.fetched) < forcedFetchMin && v.flight == nil:
		v.mu.Unlock()
		return false
	}
	f := v.flight
	if f == nil || (force && !f.force) {
		// A forced check does not settle for a cache read under way: it waits for that one
		// and runs its own after it.
		if f != nil {
			v.mu.Unlock()
			select {
			case <-f.done:
			case <-ctx.Done():
				return false
			}
			return v.ensure(ctx, force, hc)
		}
		f = &versionFlight{force: force, done: make(chan struct{})}
		v.flight = f
		go v.run(f, hc)
	}
	v.mu.Unlock()
	select {
	case <-f.done:
		return f.changed
	case <-ctx.Done():
		return false
	}
}

// run does one check on its own context (its callers may give up; the answer serves the next).
func (v *clientVersion) run(f *versionFlight, hc *http.Client) {
	ctx, cancel := context.WithTimeout(v.n.ctx, versionFetchTimeout+dbTimeout)
	defer cancel()
	fetchedNow := false
	defer func() {
		v.mu.Lock()
		v.checked = time.Now()
		if fetchedNow {
			v.fetched = v.checked
		}
		v.flight = nil
		v.mu.Unlock()
		close(f.done)
	}()
	if !f.force {
		if ver, at, err := v.cached(ctx); err == nil && !ver.IsZero() && time.Since(at) < versionTTL {
			f.changed = apply(ver)
			return
		}
	}
	fctx, fcancel := context.WithTimeout(ctx, versionFetchTimeout)
	ver, err := whatsmeow.GetLatestVersion(fctx, hc)
	fcancel()
	fetchedNow = true
	if err != nil {
		v.mu.Lock()
		v.lastError = err
		v.mu.Unlock()
		v.n.log.Warn("could not fetch the current WhatsApp web version; using the cached or built-in one",
			"built_in", store.GetWAVersion().String(), "error", err)
		if cached, _, cerr := v.cached(ctx); cerr == nil && !cached.IsZero() {
			f.changed = apply(cached)
		}
		return
	}
	v.mu.Lock()
	v.lastError = nil
	v.mu.Unlock()
	if err := v.save(ctx, *ver); err != nil {
		v.n.log.Warn("could not cache the WhatsApp web version", "error", err)
	}
	f.changed = apply(*ver)
	v.n.log.Info("WhatsApp web version", "fetched", ver.String(), "using", store.GetWAVersion().String())
}

// apply switches to ver when it is newer than the one in use.
func apply(ver store.WAVersionContainer) bool {
	setVersionMu.Lock()
	defer setVersionMu.Unlock()
	cur := store.GetWAVersion()
	if !newer(ver, cur) {
		return false
	}
	store.SetWAVersion(ver)
	return true
}

func newer(a, b store.WAVersionContainer) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] > b[i]
		}
	}
	return false
}

func (v *clientVersion) cached(ctx context.Context) (store.WAVersionContainer, time.Time, error) {
	var raw string
	var at int64
	err := v.n.db.QueryRowContext(ctx, `SELECT version, fetched_at FROM gateway_wa_version WHERE id = 1`).Scan(&raw, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return store.WAVersionContainer{}, time.Time{}, nil
	}
	if err != nil {
		return store.WAVersionContainer{}, time.Time{}, err
	}
	ver, err := store.ParseVersion(raw)
	if err != nil {
		return store.WAVersionContainer{}, time.Time{}, fmt.Errorf("cached version %q: %w", raw, err)
	}
	return ver, time.UnixMilli(at), nil
}

func (v *clientVersion) save(ctx context.Context, ver store.WAVersionContainer) error {
	_, err := v.n.db.ExecContext(ctx, `
		INSERT INTO gateway_wa_version (id, version, fetched_at) VALUES (1, $1, $2)
		ON CONFLICT (id) DO UPDATE SET version = excluded.version, fetched_at = excluded.fetched_at`,
		ver.String(), time.Now().UnixMilli())
	return err
}

// recoverOutdated runs after a 405: it asks for the current version (one fetch for a wave of
// 405s) and, when the version in use is newer than the one the refused connection announced,
// connects the session again. Otherwise the session stays down (Disconnected outdated) until
// the gateway is upgraded. Comparing with the refused connection's own version matters: by the
// time a session's 405 is handled another session may have raised the version already.
func (n *Network) recoverOutdated(c *client, gen uint64, refused store.WAVersionContainer) {
	n.version.ensure(n.ctx, true, c.http)
	if !newer(store.GetWAVersion(), refused) {
		return
	}
	c.mu.Lock()
	current := c.gen == gen && !c.closed
	c.mu.Unlock()
	if !current {
		return
	}
	c.log.Info("a newer WhatsApp web version is out; reconnecting", "refused", refused.String(), "version", store.GetWAVersion().String())
	ctx, cancel := context.WithTimeout(n.ctx, dbTimeout)
	defer cancel()
	if err := c.Connect(ctx); err != nil {
		c.log.Warn("reconnect with the new version failed", "error", err)
	}
}

// payloadVersion is the web version a client payload announces.
func payloadVersion(p *waWa6.ClientPayload) store.WAVersionContainer {
	v := p.GetUserAgent().GetAppVersion()
	return store.WAVersionContainer{v.GetPrimary(), v.GetSecondary(), v.GetTertiary()}
}
