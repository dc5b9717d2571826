package engine

// Events to a broker (DESIGN.md section 20, --events-nats): every event this facet commits is
// also written to the outbox of events not yet published, in the same commit; the forwarder
// publishes each under its id (the broker drops a repeat of an id it has) and removes what the
// broker acknowledged. The outbox is the publish position: a restart, or a cluster partition's
// new owner, resumes from what it holds, so every event is published at least once. A broker
// that is down holds nothing up: events wait in the outbox (at most Backlog of them, each at
// most domain.EventOutboxRetention) and go when it is back.
//
// Where the forwarder reads: at boot, and whenever more events wait than it keeps in memory,
// from the outbox in the store, in order, until it has caught up; then from memory, where each
// event is handed as its commit returns, so a running gateway does not read the outbox back (on
// JetStream a read of the outbox is a scan). An event committed late (an incoming message's
// own commit overtaken by the publisher's) is handed in memory when the store's reader has
// passed its place. Removals are written in batches: a crash before one publishes those events
// again, under the same ids.

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gateway/gateway/domain"
)

// EventForwarder publishes committed events to a broker (natsevents.Publisher).
type EventForwarder interface {
	// Forward publishes evs in order and returns how many of them, from the first, the broker
	// stored (all: a nil error). It returns when they are acknowledged or ctx ends.
	Forward(ctx context.Context, evs []domain.EventRecord) (int, error)
}

// DefaultForwardBacklog is how many events wait for an unreachable broker, per events facet.
const DefaultForwardBacklog = 1_000_000

// Forwarder pacing: a page of the outbox per publish, a retry wait growing to forwardMaxWait,
// a warning about an unreachable broker at most every forwardWarnEvery; removals written every
// forwardRemoveEvery (or page); at most forwardMemory events waiting in memory.
const (
	forwardPage        = 512
	forwardMemory      = 8192
	forwardRemoveEvery = 200 * time.Millisecond
	forwardMinWait     = 100 * time.Millisecond
	forwardMaxWait     = 5 * time.Second
	forwardWarnEvery   = time.Minute
	forwardDrain       = 5 * time.Second // the most Stop spends publishing what is left
)

type forwarder struct {
	e       *Events
	to      EventForwarder
	backlog int64
	pending atomic.Int64 // events in the outbox (counted at boot, then kept)
	metrics forwardMetrics
	wake    chan struct{} // 1-buffered: events were handed over

	// mu guards the reading position: mem, fromDB and cursor. A read of the outbox holds it,
	// so a commit's handoff waits for the read it might have missed.
	mu     sync.Mutex
	mem    []domain.EventRecord // handed over, not yet taken
	fromDB bool                 // read the outbox from the store: at boot, and after mem overflowed
	cursor uint64               // fromDB: every committed event below it was read from the store
	// read holds the numbers of the events read from the store lately: one handed over after
	// its commit (read meanwhile) is not taken twice.
	read recentSeqs

	removed []uint64 // published, their removal not yet written (the run goroutine's)
	lastRm  time.Time

	cancel context.CancelFunc
	drain  chan struct{} // closed by Stop: publish what is there, then end
	done   chan struct{}
	warned atomic.Int64 // unix nanoseconds of the last warning about the broker or the backlog
}

func newForwarder(e *Events, to EventForwarder, backlog int, reg prometheus.Registerer) (*forwarder, error) {
	if backlog <= 0 {
		backlog = DefaultForwardBacklog
	}
	f := &forwarder{e: e, to: to, backlog: int64(backlog), fromDB: true, wake: make(chan struct{}, 1),
		drain: make(chan struct{}), done: make(chan struct{})}
	return f, f.metrics.init(reg)
}

// admit counts an event into the outbox, or refuses it when the backlog is full.
func (f *forwarder) admit() bool {
	if f.pending.Load() >= f.backlog {
		f.metrics.dropped.Inc()
		f.warn("events: the broker outbox is full; this event is not published to the broker (webhooks and live streams still get it)",
			"backlog", f.backlog)
		return false
	}
	f.addPending(1)
	return true
}

func (f *forwarder) addPending(n int) {
	f.pending.Add(int64(n))
	f.metrics.own.Add(int64(n))
	f.metrics.pending.Add(float64(n))
}

// handoff takes an event whose commit returned: into memory, unless the store's reader will
// find it (it reads the store and has not passed its place). Past forwardMemory events in
// memory, the reader reads the whole outbox from the store again instead.
func (f *forwarder) handoff(r domain.EventRecord) {
	f.mu.Lock()
	switch {
	case f.fromDB && r.Seq >= f.cursor, f.read.has(r.Seq):
	case len(f.mem) < forwardMemory:
		f.mem = append(f.mem, r)
	default:
		f.fromDB, f.mem, f.cursor = true, nil, 0 // the outbox holds every event not yet published
	}
	f.mu.Unlock()
	select {
	case f.wake <- struct{}{}:
	default:
	}
}

// next is the next page to publish: what memory holds, else, while the reader reads the store,
// the outbox's next page (empty: caught up, and memory from now on).
func (f *forwarder) next() ([]domain.EventRecord, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.mem) > 0 {
		n := min(len(f.mem), forwardPage)
		page := slices.Clone(f.mem[:n])
		if f.mem = f.mem[n:]; len(f.mem) == 0 {
			f.mem = nil
		}
		return page, nil
	}
	if !f.fromDB {
		return nil, nil
	}
	page, err := f.e.cfg.Store.OutboxFrom(f.cursor, forwardPage)
	switch {
	case err != nil:
		return nil, err
	case len(page) == 0:
		f.fromDB = false // every committed event was read: the rest is handed over
	default:
		f.cursor = page[len(page)-1].Seq + 1
		for _, r := range page {
			f.read.add(r.Seq)
		}
	}
	return page, nil
}

// recentSeqs remembers the last 2 × forwardPage numbers added.
type recentSeqs struct {
	set  map[uint64]struct{}
	ring [2 * forwardPage]uint64
	next int
}

func (r *recentSeqs) add(seq uint64) {
	if r.set == nil {
		r.set = make(map[uint64]struct{}, len(r.ring))
	}
	delete(r.set, r.ring[r.next])
	r.ring[r.next] = seq
	r.set[seq] = struct{}{}
	r.next = (r.next + 1) % len(r.ring)
}

func (r *recentSeqs) has(seq uint64) bool {
	_, ok := r.set[seq]
	return ok
}

// idle tells whether nothing waits to be read.
func (f *forwarder) idle() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.mem) == 0 && !f.fromDB
}

// warn logs at most every forwardWarnEvery.
func (f *forwarder) warn(msg string, args ...any) {
	now := time.Now().UnixNano()
	last := f.warned.Load()
	if now-last < int64(forwardWarnEvery) || !f.warned.CompareAndSwap(last, now) {
		return
	}
	f.e.log.Warn(msg, args...)
}

func (f *forwarder) start() {
	ctx, cancel := context.WithCancel(context.Background())
	f.cancel = cancel
	go f.run(ctx)
}

// stop publishes what waits (until ctx ends, at most forwardDrain), then ends.
func (f *forwarder) stop(ctx context.Context) {
	if f.cancel == nil {
		return // never started
	}
	close(f.drain)
	ctx, cancel := context.WithTimeout(ctx, forwardDrain)
	defer cancel()
	select {
	case <-f.done:
	case <-ctx.Done():
		f.cancel()
		<-f.done
	}
	f.cancel()
	f.metrics.pending.Sub(float64(f.metrics.own.Swap(0)))
}

func (f *forwarder) run(ctx context.Context) {
	defer close(f.done)
	defer f.flushRemoved(context.Background(), true)
	wait := forwardMinWait
	sleep := func() bool {
		t := time.NewTimer(wait)
		defer t.Stop()
		wait = min(2*wait, forwardMaxWait)
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	failing := false
	for ctx.Err() == nil {
		page, err := f.next()
		if err != nil {
			f.warn("events: read the broker outbox", "err", err)
			if !sleep() {
				return
			}
			continue
		}
		if len(page) == 0 {
			f.flushRemoved(ctx, false)
			tick := time.NewTimer(forwardRemoveEvery)
			select {
			case <-f.wake:
			case <-tick.C:
			case <-ctx.Done():
			case <-f.drain:
				// Stopping: done once nothing waits (the engine's last events were handed
				// over before this facet stops).
				if f.idle() {
					tick.Stop()
					return
				}
			}
			tick.Stop()
			continue
		}
		for len(page) > 0 && ctx.Err() == nil {
			n, err := f.to.Forward(ctx, page)
			if n > 0 {
				f.published(ctx, page[:n])
				page = page[n:]
			}
			if err == nil {
				if failing {
					f.e.log.Info("events: the broker takes events again", "waiting", f.pending.Load())
					failing = false
				}
				wait = forwardMinWait
				continue
			}
			f.metrics.failures.Inc()
			if !failing {
				f.warned.Store(0) // the first failure is always told
			}
			failing = true
			f.warn("events: the broker did not take events; they wait in the outbox", "waiting", f.pending.Load(), "err", err)
			select {
			case <-f.drain:
				return // stopping: what is left goes after the restart, or from the partition's next owner
			default:
			}
			if !sleep() {
				return
			}
		}
	}
}

// published notes events the broker acknowledged; their removal from the outbox is written
// with others (at most forwardRemoveEvery later, or once forwardPage wait).
func (f *forwarder) published(ctx context.Context, evs []domain.EventRecord) {
	f.metrics.published.Add(float64(len(evs)))
	for _, ev := range evs {
		f.removed = append(f.removed, ev.Seq)
	}
	f.flushRemoved(ctx, false)
}

// flushRemoved writes the removals noted, when enough of them wait or long enough (all: now),
// retrying while storage fails until ctx ends (they are then published again after a restart,
// under the same ids).
func (f *forwarder) flushRemoved(ctx context.Context, all bool) {
	if len(f.removed) == 0 || !all && len(f.removed) < forwardPage && time.Since(f.lastRm) < forwardRemoveEvery {
		return
	}
	for wait := forwardMinWait; ; wait = min(2*wait, forwardMaxWait) {
		err := f.e.cfg.Store.DeleteOutbox(ctx, f.removed)
		if err == nil {
			f.addPending(-len(f.removed))
			f.removed, f.lastRm = f.removed[:0], time.Now()
			return
		}
		f.warn("events: remove published events from the broker outbox", "err", err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return
		}
	}
}

// forwardMetrics: the broker's share of the events metrics (shared by a cluster node's facets).
type forwardMetrics struct {
	published, dropped, failures prometheus.Counter
	pending                      prometheus.Gauge
	own                          atomic.Int64 // this facet's share of pending
}

func (m *forwardMetrics) init(reg prometheus.Registerer) error {
	m.published = prometheus.NewCounter(prometheus.CounterOpts{Name: "gateway_events_nats_published_total",
		Help: "Events the broker (--events-nats) acknowledged."})
	m.dropped = prometheus.NewCounter(prometheus.CounterOpts{Name: "gateway_events_nats_dropped_total",
		Help: "Events not queued for the broker because its outbox was full (--events-nats-backlog)."})
	m.failures = prometheus.NewCounter(prometheus.CounterOpts{Name: "gateway_events_nats_failures_total",
		Help: "Publishes to the broker that failed (each is retried)."})
	m.pending = prometheus.NewGauge(prometheus.GaugeOpts{Name: "gateway_events_nats_pending",
		Help: "Events committed and not yet acknowledged by the broker."})
	if reg == nil {
		return nil
	}
	var err error
	for _, c := range []*prometheus.Counter{&m.published, &m.dropped, &m.failures} {
		if *c, err = register(reg, *c); err != nil {
			return err
		}
	}
	m.pending, err = register(reg, m.pending)
	return err
}
