package engine

// Events to a broker (DESIGN.md section 20, --events-nats): every event this facet commits is
// also written to the outbox of events not yet published, in the same commit; the forwarder
// reads the outbox in order, publishes each event under its id (the broker drops a repeat of an
// id it has) and removes what the broker acknowledged. The outbox is the publish position: a
// restart, or a cluster partition's new owner, resumes from what it holds, so every event is
// published at least once. A broker that is down holds nothing up: events wait in the outbox
// (at most Backlog of them, each at most domain.EventOutboxRetention) and go when it is back.

import (
	"context"
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
// a warning about an unreachable broker at most every forwardWarnEvery.
const (
	forwardPage      = 512
	forwardMinWait   = 100 * time.Millisecond
	forwardMaxWait   = 5 * time.Second
	forwardWarnEvery = time.Minute
	forwardDrain     = 5 * time.Second // the most Stop spends publishing what is left
)

type forwarder struct {
	e       *Events
	to      EventForwarder
	backlog int64
	pending atomic.Int64 // events in the outbox (counted at boot, then kept)
	metrics forwardMetrics

	cancel context.CancelFunc
	drain  chan struct{} // closed by Stop: publish what is there, then end
	done   chan struct{}
	warned atomic.Int64 // unix nanoseconds of the last warning about the broker or the backlog
}

func newForwarder(e *Events, to EventForwarder, backlog int, reg prometheus.Registerer) (*forwarder, error) {
	if backlog <= 0 {
		backlog = DefaultForwardBacklog
	}
	f := &forwarder{e: e, to: to, backlog: int64(backlog), drain: make(chan struct{}), done: make(chan struct{})}
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

// stop publishes what the outbox holds (until ctx ends, at most forwardDrain), then ends.
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
	store := f.e.cfg.Store
	var cursor uint64 // the outbox is read from its start: what earlier runs left goes first
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
		page, err := store.OutboxFrom(cursor, f.e.journal.horizon(), forwardPage)
		if err != nil {
			f.warn("events: read the broker outbox", "err", err)
			if !sleep() {
				return
			}
			continue
		}
		if len(page) == 0 {
			select {
			case <-f.e.journal.wake:
				continue
			case <-ctx.Done():
				return
			case <-f.drain:
			}
			// Stopping: one more look, for the engine's last events that settled just now.
			if rest, err := store.OutboxFrom(cursor, f.e.journal.horizon(), 1); err != nil || len(rest) == 0 {
				return
			}
			continue
		}
		for len(page) > 0 && ctx.Err() == nil {
			n, err := f.to.Forward(ctx, page)
			if n > 0 {
				if !f.remove(ctx, page[:n]) {
					return
				}
				cursor = page[n-1].Seq + 1
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

// remove takes published events out of the outbox, retrying while storage fails (false: ctx
// ended first; they are published again after a restart, under the same ids).
func (f *forwarder) remove(ctx context.Context, evs []domain.EventRecord) bool {
	seqs := make([]uint64, len(evs))
	for i, ev := range evs {
		seqs[i] = ev.Seq
	}
	f.metrics.published.Add(float64(len(evs)))
	for wait := forwardMinWait; ; wait = min(2*wait, forwardMaxWait) {
		err := f.e.cfg.Store.DeleteOutbox(ctx, seqs)
		if err == nil {
			f.addPending(-len(evs))
			return true
		}
		f.warn("events: remove published events from the broker outbox", "err", err)
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return false
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
