package httpapi

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The per-route request metrics (gateway_http_requests_total by route and status,
// gateway_http_request_duration_seconds by route) are counted in shards, a request's chosen by
// its connection (fasthttp's ConnID), each shard on cache lines of its own, and summed when
// /metrics is scraped. Every request counts itself: through client_golang's histogram and
// counter that was five atomic writes (the histogram's count and hot index, its bucket, its
// sum in a compare-and-swap loop, its count again, the status counter) to lines that both
// cores write in turn, a cache line moved between the cores for each under load (bench/README.md,
// issue 32's tenth pass). A shard is written by the connections that share it: with
// routeShards shards, two requests served at once share one in routeShards cases.
const routeShards = 8

// latencyBuckets are the duration histogram's upper bounds (seconds), as before the shards.
var latencyBuckets = [...]float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// latencyBounds are latencyBuckets in nanoseconds: a request's bucket found without a float.
var latencyBounds = func() (b [len(latencyBuckets)]int64) {
	for i, s := range latencyBuckets {
		b[i] = int64(s * float64(time.Second))
	}
	return b
}()

// routeShard is one shard of a route's counts. Buckets are not cumulative here (a request adds
// to one); the scrape sums them up. 17 words padded to 192 bytes: three cache lines of its own.
type routeShard struct {
	buckets [len(latencyBuckets) + 1]atomic.Uint64 // the last is +Inf
	sumNs   atomic.Int64                           // the durations' sum
	ok      atomic.Uint64                          // answers with status 200
	_       [192 - (len(latencyBuckets)+3)*8]byte
}

// routeMetrics is one route's counts: its shards, and the answers other than 200 by status
// (rarer; one counter per status, shared by the cores).
type routeMetrics struct {
	name   string
	shards [routeShards]routeShard
	other  statusCounts
}

// statusCounts counts answers by status, read without a lock (the map is replaced whole when a
// status is first counted, as counters does).
type statusCounts struct {
	mu sync.Mutex
	m  atomic.Pointer[map[int]*atomic.Uint64]
}

func (c *statusCounts) get(status int) *atomic.Uint64 {
	if m := c.m.Load(); m != nil {
		if x, ok := (*m)[status]; ok {
			return x
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[int]*atomic.Uint64
	if m := c.m.Load(); m != nil {
		old = *m
	}
	if x, ok := old[status]; ok {
		return x
	}
	next := make(map[int]*atomic.Uint64, len(old)+1)
	for k, x := range old {
		next[k] = x
	}
	x := new(atomic.Uint64)
	next[status] = x
	c.m.Store(&next)
	return x
}

// observe counts one answer of the route: its status and its duration, in the shard of the
// connection it came on (conn: fasthttp's ConnID).
func (r *routeMetrics) observe(conn uint64, status int, d time.Duration) {
	s := &r.shards[conn%routeShards]
	i := 0
	for i < len(latencyBounds) && int64(d) > latencyBounds[i] {
		i++
	}
	s.buckets[i].Add(1)
	s.sumNs.Add(int64(d))
	if status == 200 {
		s.ok.Add(1)
		return
	}
	r.other.get(status).Add(1)
}

// routeCollector exports every route's counts: a histogram per route (as client_golang's
// HistogramVec did, a route's series exists from its registration on) and a counter per route
// and status answered at least once. A scrape sums the shards as the requests add to them: the
// figures of one scrape may disagree by the requests counted meanwhile (a bucket and the sum),
// and each is never less than the previous scrape's.
type routeCollector struct {
	requests, latency *prometheus.Desc

	mu     sync.Mutex
	routes []*routeMetrics
}

func newRouteCollector() *routeCollector {
	return &routeCollector{
		requests: prometheus.NewDesc("gateway_http_requests_total", "HTTP requests by route and status.", []string{"route", "status"}, nil),
		latency:  prometheus.NewDesc("gateway_http_request_duration_seconds", "HTTP request latency by route.", []string{"route"}, nil),
	}
}

// route makes a route's counts (once per route, as it is registered).
func (c *routeCollector) route(name string) *routeMetrics {
	r := &routeMetrics{name: name}
	c.mu.Lock()
	c.routes = append(c.routes, r)
	c.mu.Unlock()
	return r
}

func (c *routeCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.requests
	ch <- c.latency
}

func (c *routeCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	routes := c.routes[:len(c.routes):len(c.routes)]
	c.mu.Unlock()
	for _, r := range routes {
		var counts [len(latencyBuckets) + 1]uint64
		var sum int64
		var ok uint64
		for i := range r.shards {
			s := &r.shards[i]
			for b := range s.buckets {
				counts[b] += s.buckets[b].Load()
			}
			sum += s.sumNs.Load()
			ok += s.ok.Load()
		}
		cum := make(map[float64]uint64, len(latencyBuckets))
		var n uint64
		for b, upper := range latencyBuckets {
			n += counts[b]
			cum[upper] = n
		}
		n += counts[len(latencyBuckets)]
		ch <- prometheus.MustNewConstHistogram(c.latency, n, time.Duration(sum).Seconds(), cum, r.name)
		if ok > 0 {
			ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(ok), r.name, "200")
		}
		if m := r.other.m.Load(); m != nil {
			for status, x := range *m {
				ch <- prometheus.MustNewConstMetric(c.requests, prometheus.CounterValue, float64(x.Load()), r.name, strconv.Itoa(status))
			}
		}
	}
}
