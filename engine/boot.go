package engine

import (
	"fmt"
	"sync"
	"time"
)

// boot rebuilds every facet from storage. Its reads are made at once: the users', keys',
// sessions', pending messages', open campaigns' and connected stores' records are independent
// reads, and nothing that writes them runs before boot builds it (requests are not served yet,
// and each record kind is written only by its own actors, spawned below). On a cluster node
// that takes over a partition each read is a scan of the partition's records on NATS, a few
// round trips each: read one after the other they were most of a partition's start under load
// (users, keys and sessions 1.1-1.7 s at load 12-15 for one user each).
//
// What is built from the reads has an order: users first (the key and account actors take
// their caps from the owner's plan); sessions before the outbox is recovered (its entries go
// back to their sessions' deliverers); the outbox before campaigns and stores (a message
// accepted before the restart takes its allowance back, forced, before a campaign reclaims
// what is left of its batch or a store event sends anew).
func (e *Engine) boot() error {
	began := time.Now()
	var reads sync.WaitGroup
	defer reads.Wait() // nothing of a failed boot runs on
	users := readAhead(&reads, e.cfg.Store.ListUsers)
	keys := readAhead(&reads, e.cfg.Store.ListKeys)
	sessions := readAhead(&reads, e.Sessions.table.ListSessions)
	pending := readAhead(&reads, e.Messages.msgs.outbox.Pending)
	campaigns := readAhead(&reads, e.Campaigns.open)
	storeRecs := readAhead(&reads, e.Stores.records)
	inbox := readAhead(&reads, e.Stores.inbox)
	writeBacks := readAhead(&reads, e.Stores.writeBacks)
	// The allowances a kill -9 left behind their outbox: corrected before any account loads
	// (recover reserves), by the one writer of the account records until then.
	recounted := readAhead(&reads, e.Messages.recount)
	// The events facet, booted beside these reads (Config.EventsReady), is ready before
	// anything built here can publish to it.
	if e.cfg.EventsReady != nil {
		if err := e.cfg.EventsReady(); err != nil {
			return err
		}
	}

	us, err := users.get("users")
	if err != nil {
		return err
	}
	nUsers := e.Users.boot(us)
	ks, err := keys.get("keys")
	if err != nil {
		return err
	}
	nKeys := e.Keys.boot(ks)
	ss, err := sessions.get("sessions")
	if err != nil {
		return err
	}
	nSessions := e.Sessions.boot(ss)
	entries, err := pending.get("outbox")
	if err != nil {
		return err
	}
	nRecounted, err := recounted.get("")
	if err != nil {
		return err
	}
	nPending, err := e.Messages.recover(entries)
	if err != nil {
		return err
	}
	open, err := campaigns.get("")
	if err != nil {
		return err
	}
	nCampaigns, err := e.Campaigns.boot(open)
	if err != nil {
		return err
	}
	var shops storesRead
	if shops.recs, err = storeRecs.get(""); err != nil {
		return err
	}
	if shops.pending, err = inbox.get(""); err != nil {
		return err
	}
	if shops.writeBacks, err = writeBacks.get(""); err != nil {
		return err
	}
	nStores, err := e.Stores.boot(shops)
	if err != nil {
		return err
	}
	e.log.Info("engine booted", "users", nUsers, "keys", nKeys, "sessions", nSessions, "outbox_pending", nPending, "campaigns", nCampaigns, "stores", nStores,
		"allowances_recounted", nRecounted,
		"took_ms", time.Since(began).Milliseconds(),
		// Each read's time from the boot's start (they run at once), and the outbox's pending
		// read, the longest when messages are queued.
		"users_ms", users.took.Milliseconds(), "keys_ms", keys.took.Milliseconds(), "sessions_ms", sessions.took.Milliseconds(),
		"outbox_ms", pending.took.Milliseconds(), "campaigns_ms", campaigns.took.Milliseconds(),
		"stores_ms", max(storeRecs.took, inbox.took, writeBacks.took).Milliseconds(), "recount_ms", recounted.took.Milliseconds())
	return nil
}

// reading is one of the boot's reads, made on its own goroutine (readAhead).
type reading[T any] struct {
	done chan struct{}
	v    T
	err  error
	took time.Duration // from the read's start to its end
}

// readAhead starts read on its own goroutine, counted in wg.
func readAhead[T any](wg *sync.WaitGroup, read func() (T, error)) *reading[T] {
	r := &reading[T]{done: make(chan struct{})}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(r.done)
		began := time.Now()
		r.v, r.err = read()
		r.took = time.Since(began)
	}()
	return r
}

// get waits for the read and returns what it read; its error names what (the facets' own reads
// name it themselves).
func (r *reading[T]) get(what string) (T, error) {
	<-r.done
	if r.err != nil && what != "" {
		return r.v, fmt.Errorf("engine: load %s: %w", what, r.err)
	}
	return r.v, r.err
}
