package httpapi

import (
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/gateway/gateway/engine"
)

// httpMetrics: requests by route and status, latency by route, API-key decisions by outcome.
type httpMetrics struct {
	routes    *routeCollector // requests and latency by route (routemetrics.go)
	decisions *prometheus.CounterVec

	outcomes counters[string] // decisions' series by outcome

	sends    *prometheus.CounterVec
	streams  prometheus.Gauge    // open event streams (GET /api/client/events/stream)
	sendByOc counters[[2]string] // sends' series by origin and outcome
}

// counters caches a CounterVec's series by their labels, read without a lock on every request
// (an RWMutex's reader count is a cache line every core writes): the map is replaced whole
// when a series is first made, which happens once per key.
type counters[K comparable] struct {
	mu   sync.Mutex
	m    atomic.Pointer[map[K]prometheus.Counter]
	make func(K) prometheus.Counter
	// hot is the key nearly every request counts (an allowed key, a sent message): its series
	// is kept beside the map once made (hotC), found by a compare instead of a hash and a
	// lookup (both counts were 0.5 µs of a send in the send path's profile; bench/README.md,
	// seventeenth pass).
	hot  K
	hotC atomic.Pointer[prometheus.Counter]
}

func (c *counters[K]) get(k K) prometheus.Counter {
	if k == c.hot {
		if x := c.hotC.Load(); x != nil {
			return *x
		}
		x := c.getMap(k)
		c.hotC.Store(&x)
		return x
	}
	return c.getMap(k)
}

func (c *counters[K]) getMap(k K) prometheus.Counter {
	if m := c.m.Load(); m != nil {
		if x, ok := (*m)[k]; ok {
			return x
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[K]prometheus.Counter
	if m := c.m.Load(); m != nil {
		old = *m
	}
	if x, ok := old[k]; ok {
		return x
	}
	next := make(map[K]prometheus.Counter, len(old)+1)
	for key, x := range old {
		next[key] = x
	}
	x := c.make(k)
	next[k] = x
	c.m.Store(&next)
	return x
}

func newHTTPMetrics(reg *prometheus.Registry) (*httpMetrics, error) {
	m := &httpMetrics{
		routes: newRouteCollector(),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_api_key_decisions_total", Help: "API-key authorization decisions by outcome.",
		}, []string{"outcome"}),
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_sends_total", Help: "Send requests by origin (api, dashboard) and outcome (sent or an error code).",
		}, []string{"origin", "outcome"}),
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gateway_event_streams", Help: "Open dashboard event streams (Server-Sent Events).",
		}),
	}
	m.outcomes.make = func(outcome string) prometheus.Counter { return m.decisions.WithLabelValues(outcome) }
	m.sendByOc.make = func(k [2]string) prometheus.Counter { return m.sends.WithLabelValues(k[0], k[1]) }
	m.outcomes.hot, m.sendByOc.hot = "allowed", [2]string{"api", "sent"}
	for _, c := range []prometheus.Collector{m.routes, m.decisions, m.sends, m.streams,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *httpMetrics) keyDecision(outcome string) { m.outcomes.get(outcome).Inc() }

// send counts one send request's outcome.
func (m *httpMetrics) send(origin string, err error) {
	outcome := "sent"
	if err != nil {
		_, outcome = statusOf(err)
	}
	m.sendByOc.get([2]string{origin, outcome}).Inc()
}

// engineCollectors export the engine's own counters.
func engineCollectors(stats func() engine.Stats) []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_messages_sent_total", Help: "Messages the network acknowledged."},
			func() float64 { return float64(stats().MessagesSent) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_messages_failed_total", Help: "Messages whose send failed."},
			func() float64 { return float64(stats().MessagesFailed) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gateway_outbox_pending", Help: "Outbox entries accepted and without an outcome yet."},
			func() float64 { return float64(stats().OutboxDepth) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gateway_campaigns_running", Help: "Bulk campaigns running."},
			func() float64 { return float64(stats().CampaignsRunning) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_campaigns_completed_total", Help: "Bulk campaigns completed."},
			func() float64 { return float64(stats().CampaignsCompleted) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_campaigns_cancelled_total", Help: "Bulk campaigns cancelled."},
			func() float64 { return float64(stats().CampaignsCancelled) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gateway_sessions", Help: "Sessions (actors) in this process."},
			func() float64 { return float64(stats().Sessions) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "gateway_api_keys", Help: "API keys (actors) in this process."},
			func() float64 { return float64(stats().Keys) }),
	}
}
