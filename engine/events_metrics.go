package engine

import (
	"crypto/rand"
	"encoding/base32"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/gateway/gateway/actors/webhook"
	"github.com/gateway/gateway/domain"
	"github.com/prometheus/client_golang/prometheus"
)

// eventsObserver is the facet as the actors' webhook.Observer.
type eventsObserver Events

func (o *eventsObserver) Delivered(_ string, lag time.Duration) {
	o.metrics.delivered.Inc()
	o.metrics.addPending(-1)
	o.metrics.lag.Observe(lag.Seconds())
}

func (o *eventsObserver) Failed(string, int) { o.metrics.failed.Inc() }

func (o *eventsObserver) Dropped(_ string, n int) {
	o.metrics.dropped.Add(float64(n))
	o.metrics.addPending(-n)
}

// Changed keeps the index's copy of a subscription's health (never its secret, which the index
// does not hold, nor its events, which only Subscribe sets).
func (o *eventsObserver) Changed(s domain.WebhookSubscription) {
	e := (*Events)(o)
	e.mu.Lock()
	defer e.mu.Unlock()
	cur, ok := e.byID[s.ID]
	if !ok {
		return
	}
	cur.FailingSince, cur.Disabled, cur.DisabledAt, cur.DisabledReason = s.FailingSince, s.Disabled, s.DisabledAt, s.DisabledReason
	e.index(cur)
}

// eventMetrics: queued, delivered, failed, dropped, pending and lag (DESIGN.md section 10).
type eventMetrics struct {
	queued, delivered, failed, dropped prometheus.Counter
	pending                            prometheus.Gauge
	lag                                prometheus.Histogram
	// own is this facet's share of pending (the gauge may be shared by a cluster node's
	// facets): a facet that stops takes its share out.
	own atomic.Int64
}

func (m *eventMetrics) addPending(n int) {
	m.own.Add(int64(n))
	m.pending.Add(float64(n))
}

// release takes this facet's pending deliveries out of the gauge (Stop: another node resumes
// them).
func (m *eventMetrics) release() { m.pending.Sub(float64(m.own.Swap(0))) }

func newEventMetrics(reg prometheus.Registerer) (*eventMetrics, error) {
	m := &eventMetrics{
		queued: prometheus.NewCounter(prometheus.CounterOpts{Name: "gateway_webhook_events_queued_total",
			Help: "Webhook deliveries committed to a subscription's queue (one per event and subscription)."}),
		delivered: prometheus.NewCounter(prometheus.CounterOpts{Name: "gateway_webhook_deliveries_total",
			Help: "Webhook deliveries a receiver accepted (2xx)."}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "gateway_webhook_attempts_failed_total",
			Help: "Webhook delivery attempts that failed (non-2xx, timeout, connection); each is retried."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "gateway_webhook_deliveries_dropped_total",
			Help: "Webhook deliveries dropped because their subscription was disabled after 24 h of failures."}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Name: "gateway_webhook_pending",
			Help: "Webhook deliveries queued and not yet accepted by their receiver."}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "gateway_webhook_delivery_lag_seconds",
			Help:    "Time from an event's commit to its receiver's 2xx.",
			Buckets: []float64{.001, .005, .01, .05, .1, .5, 1, 5, 30, 60, 300, 1800, 3600, 6 * 3600, 24 * 3600}}),
	}
	if reg == nil {
		return m, nil
	}
	// Registered already (a cluster node runs one events facet per partition): share them.
	var err error
	for _, c := range []*prometheus.Counter{&m.queued, &m.delivered, &m.failed, &m.dropped} {
		if *c, err = register(reg, *c); err != nil {
			return nil, err
		}
	}
	if m.pending, err = register(reg, m.pending); err != nil {
		return nil, err
	}
	if m.lag, err = register(reg, m.lag); err != nil {
		return nil, err
	}
	return m, nil
}

// register registers c, or returns the collector of the same description registered before.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if old, ok := are.ExistingCollector.(C); ok {
			return old, nil
		}
	}
	if err != nil {
		return c, fmt.Errorf("engine: events metrics: %w", err)
	}
	return c, nil
}

// realClock is webhook.Clock on the system clock.
type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) webhook.Timer { return time.AfterFunc(d, f) }

// randomID returns n random bytes, lower-case base32 without padding (2n*8/5 characters).
func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails (crypto/rand panics rather than return an error)
	return lowerBase32.EncodeToString(b)
}

var lowerBase32 = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)
