package httpapi

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gateway/gateway/domain"
)

// The hot series (an allowed key, a sent message) are counted where every other outcome is: the
// series kept beside the map is the CounterVec's own, before and after another outcome's.
func TestCountersHotSeries(t *testing.T) {
	m, err := newHTTPMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	m.keyDecision("allowed")
	m.keyDecision("invalid_api_key")
	m.keyDecision("allowed")
	m.send("api", nil)
	m.send("dashboard", nil)
	m.send("api", domain.ErrRateLimited)
	m.send("api", nil)
	for _, c := range []struct {
		got  prometheus.Counter
		want float64
	}{
		{m.decisions.WithLabelValues("allowed"), 2},
		{m.decisions.WithLabelValues("invalid_api_key"), 1},
		{m.sends.WithLabelValues("api", "sent"), 2},
		{m.sends.WithLabelValues("dashboard", "sent"), 1},
	} {
		var d dto.Metric
		if err := c.got.Write(&d); err != nil {
			t.Fatal(err)
		}
		if v := d.GetCounter().GetValue(); v != c.want {
			t.Errorf("%v: %v, want %v", c.got.Desc(), v, c.want)
		}
	}
	if n := testing.AllocsPerRun(100, func() { m.keyDecision("allowed"); m.send("api", nil) }); n != 0 {
		t.Errorf("%v allocations a hot count", n)
	}
}
