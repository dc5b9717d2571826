package node

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist/natskv"
)

// directory tells a cluster node which partition holds a record that is not named by a user
// id: an API key by its hash or id, a session, a shop (httpapi.Cluster.Locate). It is a cache
// of the records' subjects kept current by a watch of the records stream (headers only, so no
// value crosses), so a known key costs no round trip; one it has not seen yet (created a moment
// ago through another node) costs one lookup of the newest record of that key in any
// partition.
type directory struct {
	store  *natskv.Store
	cancel context.CancelFunc

	mu     sync.RWMutex
	tables map[string]map[string]int
}

// directoryTables are the tables the directory follows.
var directoryTables = []string{"apikey_hash", "apikey", "session", "store"}

func openDirectory(ctx context.Context, store *natskv.Store, log *slog.Logger) (*directory, error) {
	d := &directory{store: store, tables: map[string]map[string]int{}}
	for _, t := range directoryTables {
		d.tables[t] = map[string]int{}
	}
	wctx, cancel := context.WithCancel(context.Background())
	d.cancel = cancel
	ready, err := store.Watch(wctx, directoryTables, d.apply)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("cluster directory: %w", err)
	}
	select {
	case <-ready:
	case <-ctx.Done():
		cancel()
		return nil, fmt.Errorf("cluster directory: %w", ctx.Err())
	}
	n := 0
	for _, m := range d.tables {
		n += len(m)
	}
	log.Info("cluster directory loaded", "records", n)
	return d, nil
}

func (d *directory) close() { d.cancel() }

// apply takes one change from the watch: a record written in a partition, or deleted from one
// (a delete forgets the key only where it was: a session moved between partitions is written
// in its new one after it is deleted from its old one).
func (d *directory) apply(e natskv.WatchEntry) {
	table, id, ok := strings.Cut(string(e.Key), "/")
	if !ok {
		return
	}
	p, ok := natskv.PartitionToken(e.Partition)
	if !ok {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	m := d.tables[table]
	if m == nil {
		return
	}
	if e.Deleted {
		if cur, ok := m[id]; ok && cur == p {
			delete(m, id)
		}
		return
	}
	m[id] = p
}

// locate finds id's partition in table: from the cache, else from the store.
func (d *directory) locate(table, id string) (int, bool, error) {
	d.mu.RLock()
	p, ok := d.tables[table][id]
	d.mu.RUnlock()
	if ok {
		return p, true, nil
	}
	tok, found, err := d.store.Locate([]byte(table + "/" + id))
	if err != nil {
		return 0, false, fmt.Errorf("%w: %w", domain.ErrNodeUnavailable, err)
	}
	if !found {
		return 0, false, nil
	}
	p, ok = natskv.PartitionToken(tok)
	if !ok {
		return 0, false, nil
	}
	d.mu.Lock()
	if m := d.tables[table]; m != nil {
		m[id] = p
	}
	d.mu.Unlock()
	return p, true, nil
}
