package identity

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// decisionCounts is gateway_id_token_decisions_total by outcome, as a registry of the
// verifier's Collectors gathers it.
func decisionCounts(t *testing.T, v *Verifier) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(v.Collectors()...)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range fams {
		if f.GetName() != decisionsName {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" {
					out[l.GetValue()] += m.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}
