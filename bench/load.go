package main

import (
	"context"
	"fmt"
	"hash"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/valyala/fasthttp"
)

// Limits that keep generated ids and phone numbers fixed-width (see cases.go).
const (
	maxConns      = 990   // worker ids stay below captureWorker
	captureWorker = 999   // the worker id of a case's capture request
	maxUsers      = 99999 // user and key indexes have five digits
)

// target is what one request of a case looks like for one run. prepare fills the parts that
// change per request (headers, body, sometimes the URI) into a request that keeps its method
// and URI between calls, from data built before the run, so the generator allocates nothing
// per request.
type target struct {
	method  string
	uri     string // path and query
	prepare func(req *fasthttp.Request, w *worker)
}

// worker is one connection's request state: ids that must be unique per request derive from
// (run, id, seq).
type worker struct {
	id      int
	run     int
	seq     uint64 // requests this worker has prepared
	scratch []byte
	body    []byte
	mac     hash.Hash
	sum     []byte
}

// load is one measurement: conns connections, a warm-up that is not recorded, then a fixed
// measured time. rate 0 is a closed loop (each connection sends its next request when the last
// one is answered: the peak); rate > 0 is an open loop at that many requests per second in
// total, each request's latency measured from when it was scheduled, so a slow answer that
// delays the requests behind it is counted against them too (no coordinated omission).
type load struct {
	addr     string
	conns    int
	warmup   time.Duration
	duration time.Duration
	rate     float64
	timeout  time.Duration
	run      int
	// seq0 is where the workers' sequences start: a second window of one run (the profile's)
	// starts past the first's, so its unique ids (Idempotency-Keys, webhook ids, orders) are new.
	seq0 uint64
	pid  int // the server under test's process, for OtherCPU (0 = this process)
	// onWindow, when set, is called as the measured window starts (true) and ends (false).
	onWindow func(start bool)
	// perConn: the open loop's schedule is split between the connections, each sending its
	// own share in turn (as wrk2 does): a request waits for its connection's answer before,
	// even while the others are idle. Otherwise (the default) the next request due goes out
	// on the first connection free: a request waits only while every connection is busy
	// (bench/README.md, "Fifteenth pass: the accept's tail outside the commit").
	perConn bool
}

// stats is one measured load against one server. Latencies are in milliseconds.
type stats struct {
	Requests  int64   `json:"requests"` // answered within the measured window
	RPS       float64 `json:"rps"`
	TargetRPS float64 `json:"target_rps,omitempty"`
	P50       float64 `json:"p50_ms"`
	P90       float64 `json:"p90_ms"`
	P99       float64 `json:"p99_ms"`
	P999      float64 `json:"p999_ms"`
	Max       float64 `json:"max_ms"`
	Mean      float64 `json:"mean_ms"`
	Errors    int64   `json:"errors"` // non-2xx answers and transport errors, warm-up included
	OK        int64   `json:"ok"`     // 2xx answers, warm-up included (for the delivery check)
	Missed    int64   `json:"missed,omitempty"`
	OtherCPU  float64 `json:"other_cpu"` // share of the machine used by other processes while measuring (-1 unknown)
	// ServerCPUUS is the server process's own CPU time (user + system, /proc) over the
	// measured window per request answered in it, in µs (0 unknown). Unlike req/s, a shared
	// machine inflates it little: the gateway's and bare's side by side say what a request
	// costs the gateway beyond what fasthttp and the kernel cost any server.
	ServerCPUUS float64 `json:"server_cpu_us,omitempty"`
	// GeneratorCPUUS is the load generator's own CPU time over the measured window per request
	// answered in it, in µs (0 unknown): the bench's process (it also reads the gateway's log
	// pipe, as a log collector would), or wrk's. Throughput on a shared machine is about its
	// cores over (server + generator) CPU per request: a generator that costs more per
	// request against one server than against the other moves the ratio by itself.
	GeneratorCPUUS float64 `json:"generator_cpu_us,omitempty"`
	// ServerSwitches and GeneratorSwitches are the server's and the generator's context
	// switches (their threads', voluntary and not) over the measured window per request (0
	// unknown): how often each slept and was woken, or was preempted, per request
	// (procSwitches).
	ServerSwitches    float64  `json:"server_switches,omitempty"`
	GeneratorSwitches float64  `json:"generator_switches,omitempty"`
	ErrorSamples      []string `json:"error_samples,omitempty"`
	// Open loop: how a request's latency splits (stalls.go). Late: from its due time until the
	// generator sent it (behind an answer its connection still waited for, or the generator
	// itself late); round trip: from sent to answered. Slow: latency over slowMs; of them
	// SlowTrip with a round trip over slowMs (the rest waited to be sent).
	LateP99  float64 `json:"late_p99_ms,omitempty"`
	TripP99  float64 `json:"round_trip_p99_ms,omitempty"`
	TripMax  float64 `json:"round_trip_max_ms,omitempty"`
	Slow     int64   `json:"slow,omitempty"`
	SlowTrip int64   `json:"slow_round_trip,omitempty"`
}

// Latencies are recorded in microseconds, from 1 µs to 60 s, to three significant digits.
const (
	histMin    = 1
	histMax    = 60_000_000
	histDigits = 3
)

func newHist() *hdrhistogram.Histogram { return hdrhistogram.New(histMin, histMax, histDigits) }

// measure runs the load and returns its figures.
func measure(ctx context.Context, l load, t target) stats {
	hc := &fasthttp.HostClient{
		Addr: l.addr, MaxConns: l.conns, MaxIdemponentCallAttempts: 1,
		ReadTimeout: l.timeout, WriteTimeout: l.timeout, NoDefaultUserAgentHeader: true,
		MaxConnWaitTimeout: l.timeout,
	}
	defer hc.CloseIdleConnections()
	m := &meter{hists: make([]*hdrhistogram.Histogram, l.conns)}
	if l.rate > 0 {
		m.late, m.trip = make([]*hdrhistogram.Histogram, l.conns), make([]*hdrhistogram.Histogram, l.conns)
	}
	start := time.Now()
	m.measureFrom = start.Add(l.warmup)
	m.end = m.measureFrom.Add(l.duration)
	// The machine's CPU use over the measured window, besides the generator and the server.
	pids := []int{os.Getpid()}
	if l.pid != 0 && l.pid != os.Getpid() {
		pids = append(pids, l.pid)
	}
	var cpuFrom, cpuTo cpuSnap
	var srvFrom, srvTo, genFrom, genTo serverCPU
	cpuDone := make(chan struct{})
	go func() {
		defer close(cpuDone)
		time.Sleep(time.Until(m.measureFrom))
		cpuFrom, srvFrom, genFrom = snapCPU(pids...), snapServer(l.pid), snapServer(os.Getpid())
		if l.onWindow != nil {
			l.onWindow(true)
		}
		time.Sleep(time.Until(m.end))
		cpuTo, srvTo, genTo = snapCPU(pids...), snapServer(l.pid), snapServer(os.Getpid())
		if l.onWindow != nil {
			l.onWindow(false)
		}
	}()
	var wg sync.WaitGroup
	next := new(atomic.Int64) // the open loop's next request due, shared (not perConn)
	for i := range l.conns {
		m.hists[i] = newHist()
		if l.rate > 0 {
			m.late[i], m.trip[i] = newHist(), newHist()
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &worker{id: i, run: l.run, seq: l.seq0}
			if l.rate > 0 {
				m.openLoop(ctx, hc, l, t, w, start, next)
			} else {
				m.closedLoop(ctx, hc, l, t, w)
			}
		}()
	}
	wg.Wait()
	<-cpuDone
	total := newHist()
	for _, h := range m.hists {
		total.Merge(h)
	}
	s := stats{
		Requests: total.TotalCount(), Errors: m.errors.Load(), OK: m.ok.Load(), Missed: m.missed.Load(),
		P50: ms(total.ValueAtQuantile(50)), P90: ms(total.ValueAtQuantile(90)),
		P99: ms(total.ValueAtQuantile(99)), P999: ms(total.ValueAtQuantile(99.9)),
		Max: ms(total.Max()), Mean: total.Mean() / 1000, ErrorSamples: m.samples, OtherCPU: otherCPU(cpuFrom, cpuTo),
	}
	s.RPS = float64(s.Requests) / l.duration.Seconds()
	s.ServerCPUUS = srvTo.perRequestUS(srvFrom, s.Requests)
	s.GeneratorCPUUS = genTo.perRequestUS(genFrom, s.Requests)
	s.ServerSwitches = srvTo.switchesPerRequest(srvFrom, s.Requests)
	s.GeneratorSwitches = genTo.switchesPerRequest(genFrom, s.Requests)
	if l.rate > 0 {
		// Requests due in the window but answered after it (a server that cannot keep up)
		// stretch the time they took.
		if last := time.Unix(0, m.lastDone.Load()); last.After(m.end) {
			s.RPS = float64(s.Requests) / last.Sub(m.measureFrom).Seconds()
		}
		s.TargetRPS = l.rate
		late, trip := newHist(), newHist()
		for i := range m.late {
			late.Merge(m.late[i])
			trip.Merge(m.trip[i])
		}
		s.LateP99, s.TripP99, s.TripMax = ms(late.ValueAtQuantile(99)), ms(trip.ValueAtQuantile(99)), ms(trip.Max())
		s.Slow, s.SlowTrip = m.slow.Load(), m.slowTrip.Load()
	}
	return s
}

func ms(us int64) float64 { return float64(us) / 1000 }

// meter gathers one load's outcomes from its workers.
type meter struct {
	measureFrom, end time.Time
	hists            []*hdrhistogram.Histogram // one per worker: no sharing on the hot path
	late, trip       []*hdrhistogram.Histogram // open loop: the latency's split, per worker
	slow, slowTrip   atomic.Int64              // open loop: latency, and round trip, over slowMs
	gaveUp           atomic.Bool               // open loop: a worker stopped, behind (missed)
	ok, errors       atomic.Int64
	missed           atomic.Int64
	lastDone         atomic.Int64 // open loop: latest answer to a measured request (UnixNano)
	mu               sync.Mutex
	samples          []string
}

// closedLoop: request, wait for the answer, repeat, until the end of the window. A request
// counts when it was sent and answered inside the measured window.
func (m *meter) closedLoop(ctx context.Context, hc *fasthttp.HostClient, l load, t target, w *worker) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	initRequest(req, l.addr, t)
	h := m.hists[w.id]
	for ctx.Err() == nil {
		t.prepare(req, w)
		w.seq++
		sent := time.Now()
		if !sent.Before(m.end) {
			return
		}
		err := hc.Do(req, resp)
		done := time.Now()
		m.outcome(resp, err)
		if !sent.Before(m.measureFrom) && done.Before(m.end) {
			_ = h.RecordValue(max(done.Sub(sent).Microseconds(), histMin))
		}
	}
}

// openLoop: a fixed schedule, request j due at start + j / rate. Each worker (one connection)
// takes the next request not yet taken (next), waits for its due time and sends it: a request
// due while every connection waits for an answer goes out on the first one free. With
// l.perConn, worker i of n sends requests j*n + i alone instead. A worker that is behind sends
// at once, and the latency counts from the due time. Requests due after the window are not
// sent; a worker still behind well after the window stops and counts what was never sent as
// missed.
func (m *meter) openLoop(ctx context.Context, hc *fasthttp.HostClient, l load, t target, w *worker, start time.Time, next *atomic.Int64) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	initRequest(req, l.addr, t)
	h := m.hists[w.id]
	interval := time.Duration(float64(time.Second) / l.rate) // between any two requests
	giveUp := m.end.Add(l.duration / 2)
	for j := 0; ctx.Err() == nil; j++ {
		n := int64(j*l.conns + w.id)
		if !l.perConn {
			n = next.Add(1) - 1
		}
		due := start.Add(time.Duration(n) * interval)
		if !due.Before(m.end) {
			return
		}
		now := time.Now()
		if now.After(giveUp) {
			switch {
			case l.perConn:
				every := interval * time.Duration(l.conns) // between this worker's requests
				m.missed.Add(int64(m.end.Sub(due)/every) + 1)
			case m.gaveUp.CompareAndSwap(false, true): // the first to stop counts the rest
				m.missed.Add(int64(m.end.Sub(due)/interval) + 1)
			}
			return
		}
		if wait := due.Sub(now); wait > 0 {
			time.Sleep(wait)
		}
		t.prepare(req, w)
		w.seq++
		sent := time.Now()
		err := hc.Do(req, resp)
		done := time.Now()
		m.outcome(resp, err)
		if !due.Before(m.measureFrom) {
			lat, trip := done.Sub(due), done.Sub(sent)
			_ = h.RecordValue(max(lat.Microseconds(), histMin))
			_ = m.late[w.id].RecordValue(max(sent.Sub(due).Microseconds(), histMin))
			_ = m.trip[w.id].RecordValue(max(trip.Microseconds(), histMin))
			if lat > slowMs*time.Millisecond {
				m.slow.Add(1)
				if trip > slowMs*time.Millisecond {
					m.slowTrip.Add(1)
				}
			}
			for last := m.lastDone.Load(); done.UnixNano() > last && !m.lastDone.CompareAndSwap(last, done.UnixNano()); {
				last = m.lastDone.Load()
			}
		}
	}
}

func initRequest(req *fasthttp.Request, addr string, t target) {
	req.Header.SetMethod(t.method)
	req.SetRequestURI("http://" + addr + t.uri)
}

// outcome counts one answer: 2xx is success, anything else (or no answer) an error.
func (m *meter) outcome(resp *fasthttp.Response, err error) {
	if err == nil {
		if st := resp.StatusCode(); st >= 200 && st <= 299 {
			m.ok.Add(1)
			return
		}
	}
	m.errors.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.samples) < 5 {
		if err != nil {
			m.samples = append(m.samples, "transport: "+err.Error())
		} else {
			m.samples = append(m.samples, fmt.Sprintf("status %d: %.200s", resp.StatusCode(), resp.Body()))
		}
	}
}
