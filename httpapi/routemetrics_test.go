package httpapi

import (
	"math"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gateway/gateway/internal/cputime"
)

// TestRouteMetricsAreClientGolangs: the sharded route counts export what client_golang's
// HistogramVec and CounterVec exported for the same answers (the buckets, count, sum and the
// counts by status), whatever the connections' shards, through a pedantic registry.
func TestRouteMetricsAreClientGolangs(t *testing.T) {
	c := newRouteCollector()
	a, b := c.route("POST /a"), c.route("GET /b")
	c.route("GET /never") // a route never called: its histogram, empty, and no counter
	was := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h", Buckets: latencyBuckets[:]}, []string{"route"})
	wasN := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "n"}, []string{"route", "status"})
	was.WithLabelValues("GET /never")
	durations := []time.Duration{0, 400 * time.Microsecond, 500 * time.Microsecond, 500*time.Microsecond + 1,
		3 * time.Millisecond, 70 * time.Millisecond, time.Second, 10 * time.Second, 11 * time.Second, time.Minute}
	for i := range 200 {
		r, name := a, "POST /a"
		if i%3 == 0 {
			r, name = b, "GET /b"
		}
		status := []int{200, 200, 404, 200, 503}[i%5]
		d := durations[i%len(durations)]
		r.observe(uint64(i*7), status, d)
		was.WithLabelValues(name).Observe(d.Seconds())
		wasN.WithLabelValues(name, itoa(status)).Inc()
	}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(c)
	old := prometheus.NewPedanticRegistry()
	old.MustRegister(was, wasN)
	got, want := gatherByName(t, reg), gatherByName(t, old)
	if len(got["gateway_http_request_duration_seconds"]) != 3 || len(got["gateway_http_requests_total"]) != 6 {
		t.Fatalf("series: %d histograms, %d counters; want 3 and 6", len(got["gateway_http_request_duration_seconds"]), len(got["gateway_http_requests_total"]))
	}
	for i, m := range got["gateway_http_request_duration_seconds"] {
		h, w := m.GetHistogram(), want["h"][i].GetHistogram()
		if labels(m) != labels(want["h"][i]) || h.GetSampleCount() != w.GetSampleCount() || math.Abs(h.GetSampleSum()-w.GetSampleSum()) > 1e-9 {
			t.Fatalf("%s: count %d sum %v, want %s %d %v", labels(m), h.GetSampleCount(), h.GetSampleSum(), labels(want["h"][i]), w.GetSampleCount(), w.GetSampleSum())
		}
		for j, bk := range h.GetBucket() {
			if wb := w.GetBucket()[j]; bk.GetUpperBound() != wb.GetUpperBound() || bk.GetCumulativeCount() != wb.GetCumulativeCount() {
				t.Fatalf("%s bucket %v: %d, want %v: %d", labels(m), bk.GetUpperBound(), bk.GetCumulativeCount(), wb.GetUpperBound(), wb.GetCumulativeCount())
			}
		}
	}
	for i, m := range got["gateway_http_requests_total"] {
		if w := want["n"][i]; labels(m) != labels(w) || m.GetCounter().GetValue() != w.GetCounter().GetValue() {
			t.Fatalf("%s = %v, want %s = %v", labels(m), m.GetCounter().GetValue(), labels(w), w.GetCounter().GetValue())
		}
	}
}

func gatherByName(t *testing.T, reg *prometheus.Registry) map[string][]*dto.Metric {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]*dto.Metric{}
	for _, f := range fams {
		out[f.GetName()] = f.GetMetric()
	}
	return out
}

func labels(m *dto.Metric) (s string) {
	for _, l := range m.GetLabel() {
		s += l.GetName() + "=" + l.GetValue() + ","
	}
	return s
}

// BenchmarkRouteMetrics is one answer counted, from every core at once (as the load test's
// connections are served), by the sharded counts (a goroutine per connection, as fasthttp
// serves them) and by client_golang's HistogramVec and CounterVec series they replaced.
//
//	go test -run X -bench RouteMetrics -cpu 1,2 ./httpapi
func BenchmarkRouteMetrics(b *testing.B) {
	b.Run("sharded", func(b *testing.B) {
		r := newRouteCollector().route("GET /x")
		var conns atomic.Uint64
		start := cputime.Process()
		b.RunParallel(func(pb *testing.PB) {
			conn := conns.Add(1)
			for pb.Next() {
				r.observe(conn, 200, 300*time.Microsecond)
			}
		})
		b.ReportMetric(float64((cputime.Process()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
	b.Run("client_golang", func(b *testing.B) {
		h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "h", Buckets: latencyBuckets[:]}, []string{"route"}).WithLabelValues("GET /x")
		n := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "n"}, []string{"route", "status"}).WithLabelValues("GET /x", "200")
		start := cputime.Process()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				h.Observe((300 * time.Microsecond).Seconds())
				n.Inc()
			}
		})
		b.ReportMetric(float64((cputime.Process()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
	})
}
