package identity

import (
	"errors"
	"sync/atomic"

	"github.com/gateway/gateway/domain"
	"github.com/prometheus/client_golang/prometheus"
)

// verifierMetrics counts ID-token decisions and key fetches. The collectors are registered by
// whoever serves /metrics (Collectors).
type verifierMetrics struct {
	decisions *prometheus.CounterVec // outcome: ok, invalid, not_allowed, unavailable
	fetches   *prometheus.CounterVec // result: ok, error
	// cached counts decisions{outcome="cached"}, a token answered from the cache: every
	// dashboard call. In shards, a token's chosen by its cache hash, each on a cache line of its
	// own, summed when /metrics is scraped (decisionsCollector): one counter for all was a line
	// both cores wrote in turn on every call (bench/README.md, issue 32's tenth pass).
	cached [hitShards]hitShard
}

// hitShards is how many shards count the cache's hits.
const hitShards = 8

type hitShard struct {
	n atomic.Uint64
	_ [56]byte
}

func newVerifierMetrics() *verifierMetrics {
	return &verifierMetrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: decisionsName,
			Help: decisionsHelp,
		}, []string{"outcome"}),
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_idp_fetch_total",
			Help: "Loads of the identity provider's discovery document and JWKS, by result (ok, error).",
		}, []string{"result"}),
	}
}

// decision counts one Verify outcome other than a cache hit.
func (m *verifierMetrics) decision(err error) {
	switch {
	case err == nil:
		m.decisions.WithLabelValues("ok").Inc()
	case errors.Is(err, domain.ErrIdPUnavailable):
		m.decisions.WithLabelValues("unavailable").Inc()
	case errors.Is(err, domain.ErrSignInNotAllowed):
		m.decisions.WithLabelValues("not_allowed").Inc()
	default:
		m.decisions.WithLabelValues("invalid").Inc()
	}
}

// cacheHit counts a token answered from the cache (h: its cache hash).
func (m *verifierMetrics) cacheHit(h uint64) { m.cached[h%hitShards].n.Add(1) }

const (
	decisionsName = "gateway_id_token_decisions_total"
	decisionsHelp = "ID tokens checked, by outcome (ok, cached, invalid, not_allowed, unavailable)."
)

// decisionsCollector exports decisions: the CounterVec's outcomes and the cache's hits summed
// over their shards (outcome "cached", once there is one).
type decisionsCollector struct {
	m    *verifierMetrics
	desc *prometheus.Desc
}

func (c decisionsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c decisionsCollector) Collect(ch chan<- prometheus.Metric) {
	c.m.decisions.Collect(ch)
	var n uint64
	for i := range c.m.cached {
		n += c.m.cached[i].n.Load()
	}
	if n > 0 {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(n), "cached")
	}
}

func (m *verifierMetrics) fetch(err error) {
	if m == nil {
		return
	}
	if err != nil {
		m.fetches.WithLabelValues("error").Inc()
		return
	}
	m.fetches.WithLabelValues("ok").Inc()
}

// Collectors are the verifier's metrics: decisions, provider fetches, and (OIDC mode) whether
// keys are loaded and their age.
func (v *Verifier) Collectors() []prometheus.Collector {
	// The CounterVec's own description: the vector's outcomes and the hits are one family.
	dc := decisionsCollector{m: v.metrics, desc: prometheus.NewDesc(decisionsName, decisionsHelp, []string{"outcome"}, nil)}
	cs := []prometheus.Collector{dc, v.metrics.fetches}
	if v.provider != nil {
		cs = append(cs,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "gateway_idp_ready",
				Help: "1 while the identity provider's keys are loaded, else 0.",
			}, func() float64 {
				if v.Status().Ready {
					return 1
				}
				return 0
			}),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name: "gateway_idp_keys_age_seconds",
				Help: "Age of the loaded identity-provider keys (grows while the provider is unreachable).",
			}, func() float64 { return v.Status().KeysAge.Seconds() }),
		)
	}
	return cs
}
