package httpapi

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/gateway/gateway/engine"
)

// httpMetrics: requests by route and status, latency by route, API-key decisions by outcome.
type httpMetrics struct {
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	decisions *prometheus.CounterVec

	mu       sync.RWMutex
	outcomes map[string]prometheus.Counter

	sends    *prometheus.CounterVec
	streams  prometheus.Gauge // open event streams (GET /api/client/events/stream)
	sendsMu  sync.RWMutex
	sendByOc map[[2]string]prometheus.Counter
}

func newHTTPMetrics(reg *prometheus.Registry) (*httpMetrics, error) {
	m := &httpMetrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_http_requests_total", Help: "HTTP requests by route and status.",
		}, []string{"route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "gateway_http_request_duration_seconds", Help: "HTTP request latency by route.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"route"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_api_key_decisions_total", Help: "API-key authorization decisions by outcome.",
		}, []string{"outcome"}),
		outcomes: map[string]prometheus.Counter{},
		sends: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_sends_total", Help: "Send requests by origin (api, dashboard) and outcome (sent or an error code).",
		}, []string{"origin", "outcome"}),
		sendByOc: map[[2]string]prometheus.Counter{},
		streams: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "gateway_event_streams", Help: "Open dashboard event streams (Server-Sent Events).",
		}),
	}
	for _, c := range []prometheus.Collector{m.requests, m.latency, m.decisions, m.sends, m.streams,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

func (m *httpMetrics) keyDecision(outcome string) {
	m.mu.RLock()
	c := m.outcomes[outcome]
	m.mu.RUnlock()
	if c == nil {
		c = m.decisions.WithLabelValues(outcome)
		m.mu.Lock()
		m.outcomes[outcome] = c
		m.mu.Unlock()
	}
	c.Inc()
}

// routeMetrics caches one route's series, so the hot path does no label hashing.
type routeMetrics struct {
	name     string
	parent   *httpMetrics
	latency  prometheus.Observer
	mu       sync.RWMutex
	byStatus map[int]prometheus.Counter
	// ok is byStatus[200] once made: the common answer counted without the lock.
	ok atomic.Pointer[prometheus.Counter]
}

func (m *httpMetrics) route(name string) *routeMetrics {
	return &routeMetrics{name: name, parent: m, latency: m.latency.WithLabelValues(name), byStatus: map[int]prometheus.Counter{}}
}

func (r *routeMetrics) observe(status int, d time.Duration) {
	r.latency.Observe(d.Seconds())
	if c := r.ok.Load(); c != nil && status == 200 {
		(*c).Inc()
		return
	}
	r.mu.RLock()
	c := r.byStatus[status]
	r.mu.RUnlock()
	if c == nil {
		c = r.parent.requests.WithLabelValues(r.name, strconv.Itoa(status))
		r.mu.Lock()
		r.byStatus[status] = c
		r.mu.Unlock()
	}
	if status == 200 {
		r.ok.Store(&c)
	}
	c.Inc()
}

// send counts one send request's outcome.
func (m *httpMetrics) send(origin string, err error) {
	outcome := "sent"
	if err != nil {
		_, outcome = statusOf(err)
	}
	k := [2]string{origin, outcome}
	m.sendsMu.RLock()
	c := m.sendByOc[k]
	m.sendsMu.RUnlock()
	if c == nil {
		c = m.sends.WithLabelValues(origin, outcome)
		m.sendsMu.Lock()
		m.sendByOc[k] = c
		m.sendsMu.Unlock()
	}
	c.Inc()
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
