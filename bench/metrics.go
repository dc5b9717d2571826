package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// procMetrics is what the scale mode reads from the gateway's /metrics.
type procMetrics struct {
	HeapAlloc  float64 `json:"heap_alloc_bytes"`
	HeapInuse  float64 `json:"heap_inuse_bytes"`
	RSS        float64 `json:"rss_bytes"`
	Goroutines float64 `json:"goroutines"`
	GCs        float64 `json:"-"` // go_gc_duration_seconds_count: garbage collections so far
	// AfterGC: the figures are the least seen after garbage collections (so close to live
	// memory); false when the gateway collected no garbage while it was sampled.
	AfterGC bool `json:"after_gc"`
}

var procMetricNames = map[string]func(*procMetrics, float64){
	"go_memstats_heap_alloc_bytes":  func(m *procMetrics, v float64) { m.HeapAlloc = v },
	"go_memstats_heap_inuse_bytes":  func(m *procMetrics, v float64) { m.HeapInuse = v },
	"process_resident_memory_bytes": func(m *procMetrics, v float64) { m.RSS = v },
	"go_goroutines":                 func(m *procMetrics, v float64) { m.Goroutines = v },
	"go_gc_duration_seconds_count":  func(m *procMetrics, v float64) { m.GCs = v },
}

// parseProcMetrics reads the unlabelled samples it knows from Prometheus text format.
func parseProcMetrics(text []byte) (procMetrics, error) {
	var m procMetrics
	found := 0
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, value, ok := strings.Cut(line, " ")
		set := procMetricNames[name]
		if !ok || set == nil {
			continue
		}
		value, _, _ = strings.Cut(strings.TrimSpace(value), " ") // drop a timestamp
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return m, fmt.Errorf("metric %s: %w", name, err)
		}
		set(&m, v)
		found++
	}
	if err := sc.Err(); err != nil {
		return m, err
	}
	if found < len(procMetricNames) {
		return m, fmt.Errorf("/metrics lacks some of go_memstats_heap_alloc_bytes, go_memstats_heap_inuse_bytes, process_resident_memory_bytes, go_goroutines, go_gc_duration_seconds_count")
	}
	return m, nil
}

// scrape reads /metrics once.
func scrape(api *apiClient) (procMetrics, error) {
	st, body, err := api.do("GET", "/metrics", nil, nil)
	if err := want2xx("GET /metrics", st, body, err); err != nil {
		return procMetrics{}, err
	}
	return parseProcMetrics(body)
}

// liveScrape reads memory as close to live bytes as /metrics allows. An idle process
// collects no garbage, so what the last requests left behind would count as heap; but every
// scrape allocates a little in the gateway, so polling /metrics drives it through collections.
// It polls until it has seen gcs collections (or limit passes) and keeps the least of each
// figure seen after the first: the sample just after a collection is the live heap plus
// almost nothing. With a low GOGC (scale's default 10) collections come after a few scrapes.
func liveScrape(api *apiClient, gcs int, limit time.Duration) (procMetrics, error) {
	first, err := scrape(api)
	if err != nil {
		return first, err
	}
	best, seen := first, false
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		m, err := scrape(api)
		if err != nil {
			return best, err
		}
		if m.GCs <= first.GCs {
			best = minMetrics(best, m)
			continue
		}
		if !seen {
			best, seen = m, true
		}
		best = minMetrics(best, m)
		if m.GCs-first.GCs >= float64(gcs) {
			break
		}
	}
	best.AfterGC = seen
	return best, nil
}

func minMetrics(a, b procMetrics) procMetrics {
	return procMetrics{HeapAlloc: min(a.HeapAlloc, b.HeapAlloc), HeapInuse: min(a.HeapInuse, b.HeapInuse),
		RSS: min(a.RSS, b.RSS), Goroutines: min(a.Goroutines, b.Goroutines), GCs: max(a.GCs, b.GCs)}
}

// perItem is the growth from before to after, divided over n items.
func perItem(before, after procMetrics, n int) procMetrics {
	d := float64(n)
	return procMetrics{
		HeapAlloc: (after.HeapAlloc - before.HeapAlloc) / d, HeapInuse: (after.HeapInuse - before.HeapInuse) / d,
		RSS: (after.RSS - before.RSS) / d, Goroutines: (after.Goroutines - before.Goroutines) / d,
		AfterGC: before.AfterGC && after.AfterGC,
	}
}

// cpuSeconds reads the gateway's process_cpu_seconds_total.
func cpuSeconds(api *apiClient) (float64, error) {
	v, err := scrapeCounters(api, "process_cpu_seconds_total")
	return v[0], err
}

// scrapeCounters reads unlabelled samples from /metrics, in the order asked. A sample absent
// or not a number is the error (the others are still read).
func scrapeCounters(api *apiClient, names ...string) ([]float64, error) {
	out := make([]float64, len(names))
	st, body, err := api.do("GET", "/metrics", nil, nil)
	if err := want2xx("GET /metrics", st, body, err); err != nil {
		return out, err
	}
	seen := make([]bool, len(names))
	var bad error
	for line := range strings.SplitSeq(string(body), "\n") {
		name, v, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		for i, n := range names {
			if name != n {
				continue
			}
			f, perr := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if perr != nil && bad == nil {
				bad = fmt.Errorf("metric %s: %w", n, perr)
			}
			out[i], seen[i] = f, true
		}
	}
	for i, ok := range seen {
		if !ok && bad == nil {
			bad = fmt.Errorf("/metrics has no %s", names[i])
		}
	}
	return out, bad
}

// settleIdle: the gateway is idle once it uses under this share of a core over a window.
const settleIdle = 0.10

// settle waits until the gateway is nearly idle over a window, up to limit. Work it does after answering
// (group commits, compactions, asynchronous deliveries) would otherwise take CPU from the next
// measurement, the bare server's included, on a machine the processes share. It returns how
// long it waited and whether the gateway became idle.
func settle(ctx context.Context, api *apiClient, window, limit time.Duration) (time.Duration, bool, error) {
	start := time.Now()
	prev, err := cpuSeconds(api)
	if err != nil {
		return 0, false, err
	}
	for {
		select {
		case <-ctx.Done():
			return time.Since(start), false, ctx.Err()
		case <-time.After(window):
		}
		cur, err := cpuSeconds(api)
		if err != nil {
			return time.Since(start), false, err
		}
		if cur-prev < settleIdle*window.Seconds() {
			return time.Since(start), true, nil
		}
		if time.Since(start) > limit {
			return time.Since(start), false, nil
		}
		prev = cur
	}
}
