package whatsapp

// The WhatsApp web version the clients announce. whatsmeow builds one in, but WhatsApp answers
// "client outdated" (405) to versions it has retired, and that takes every session down, so
// before the first connection the adapter asks web.whatsapp.com for the current version
// (whatsmeow.GetLatestVersion, as mautrix-whatsapp does at start) and uses it when it is newer.
// The answer is cached in the device database for a day, and the cached one is used when the
// site cannot be reached; the built-in version is the last resort. A 405 asks again at once.

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"go.mau.fi/whatsmeow"
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

// clientVersion keeps the announced version current.
type clientVersion struct {
	n       *Network
	enabled bool

	mu        sync.Mutex
	checked   time.Time // last fetch attempt (or cache read) that settled the version
	lastError error
}

func newClientVersion(n *Network, enabled bool) *clientVersion {
	return &clientVersion{n: n, enabled: enabled}
}

// ensure makes sure the version was checked recently (once a day): cached answer first, then
// web.whatsapp.com. It never fails a connection: on error the version stays as it was.
func (v *clientVersion) ensure(ctx context.Context, force bool) (changed bool) {
	if !v.enabled {
		return false
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if !force && !v.checked.IsZero() && time.Since(v.checked) < versionRetryAfter {
		return false
	}
	if !force {
		if ver, at, err := v.cached(ctx); err == nil && !ver.IsZero() && time.Since(at) < versionTTL {
			v.checked = time.Now()
			return apply(ver)
		}
	}
	fctx, cancel := context.WithTimeout(ctx, versionFetchTimeout)
	defer cancel()
	ver, err := whatsmeow.GetLatestVersion(fctx, v.n.httpClient)
	v.checked = time.Now()
	if err != nil {
		v.lastError = err
		v.n.log.Warn("could not fetch the current WhatsApp web version; using the cached or built-in one",
			"built_in", store.GetWAVersion().String(), "error", err)
		if cached, _, cerr := v.cached(ctx); cerr == nil && !cached.IsZero() {
			return apply(cached)
		}
		return false
	}
	v.lastError = nil
	if err := v.save(ctx, *ver); err != nil {
		v.n.log.Warn("could not cache the WhatsApp web version", "error", err)
	}
	changed = apply(*ver)
	v.n.log.Info("WhatsApp web version", "fetched", ver.String(), "using", store.GetWAVersion().String())
	return changed
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

// recoverOutdated runs after a 405: it asks for the current version at once and, when it is
// newer than the one refused, connects the session again. Otherwise the session stays down
// (Disconnected outdated) until the gateway is upgraded.
func (n *Network) recoverOutdated(c *client, gen uint64) {
	refused := store.GetWAVersion()
	n.version.ensure(n.ctx, true)
	if !newer(store.GetWAVersion(), refused) {
		return
	}
	c.mu.Lock()
	current := c.gen == gen && !c.closed
	c.mu.Unlock()
	if !current {
		return
	}
	c.log.Info("a newer WhatsApp web version is out; reconnecting", "version", store.GetWAVersion().String())
	ctx, cancel := context.WithTimeout(n.ctx, dbTimeout)
	defer cancel()
	if err := c.Connect(ctx); err != nil {
		c.log.Warn("reconnect with the new version failed", "error", err)
	}
}
