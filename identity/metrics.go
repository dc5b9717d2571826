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
	decisions *prometheus.CounterVec // outcome: ok, cached, invalid, not_allowed, unavailable
	fetches   *prometheus.CounterVec // result: ok, error
	// cached is decisions{outcome="cached"} once made: counted on every cached check without a
	// lookup of its labels.
	cached atomic.Pointer[prometheus.Counter]
}

func newVerifierMetrics() *verifierMetrics {
	return &verifierMetrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "gateway_id_token_decisions_total",
			Help: "ID tokens checked, by outcome (ok, cached, invalid, not_allowed, unavailable).",
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

func (m *verifierMetrics) cacheHit() {
	c := m.cached.Load()
	if c == nil {
		cc := m.decisions.WithLabelValues("cached")
		c = &cc
		m.cached.Store(c)
	}
	(*c).Inc()
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
	cs := []prometheus.Collector{v.metrics.decisions, v.metrics.fetches}
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
