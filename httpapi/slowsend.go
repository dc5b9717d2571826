package httpapi

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/internal/slowlog"
)

// The slow-send report (issue 32, the accept's tail; bench/README.md, fifteenth pass). The
// slow-commit report (persist/badger_slow.go) times the storage commit; this one times the
// whole of a v1 send's handler, from fasthttp's clock reading as it called the handler (the
// request's header and body read) to its answer written into the response buffer, and splits
// it into phases, each in ms:
//   - key: the body decoded, the API key checked and its call counted (a count past the key's
//     durable mark waits for the mark's commit);
//   - prepare: the message built and checked, its route and session resolved;
//   - allowance: the month's reservation (past the account's durable mark: its commit);
//   - commit: the outbox's commit (queued for the group commit, written, synced);
//   - answer: the message handed to its session, its event published, the answer encoded.
//
// A send whose handler took longer than slowSendThreshold is a slow one: counted on /metrics
// (gateway_http_slow_sends_total, and each phase's time summed over the slow ones,
// gateway_http_slow_send_phase_seconds_total), and logged at warn with its phases, Go's GC
// pauses during it and the machine's load, at most one line every 10 s unless it took twice
// as long as the longest logged in that time (slowlog.Gate); a line also gives how many slow
// sends there were since the last one and their phases summed. What the handler does not
// see is the time before fasthttp called it (the request in the kernel's socket buffer, the
// connection's goroutine waiting for a core) and after (the answer's write to the socket):
// set beside the client's latency (bench run's fixed-rate note), it is the rest. Cheap: five
// clock readings a send (ctx.Time is fasthttp's own); nothing more unless the send was slow.

// slowSendThreshold is the handler time over which a send is a slow one.
const slowSendThreshold = 100 * time.Millisecond

// sendTimes is when a v1 send's steps began (kept in its pooled request: no allocation).
type sendTimes struct {
	keyed time.Time // the key checked: the send's own work begins
	trace engine.SendTrace
}

// The phases of a send, in the order they run.
const (
	phaseKey = iota
	phasePrepare
	phaseAllowance
	phaseCommit
	phaseAnswer
	nPhases
)

var phaseNames = [nPhases]string{"key", "prepare", "allowance", "commit", "answer"}

// phases splits a send that began at start and ended at end: each step's time until the next
// step that was reached (a step not reached takes none).
func (t *sendTimes) phases(start, end time.Time) (p [nPhases]time.Duration) {
	steps := [nPhases]time.Time{start, t.keyed, t.trace.Reserve, t.trace.Commit, t.trace.Committed}
	prev, at := phaseKey, start
	for i := phasePrepare; i < nPhases; i++ {
		if steps[i].IsZero() || steps[i].Before(at) {
			continue
		}
		p[prev] = steps[i].Sub(at)
		prev, at = i, steps[i]
	}
	p[prev] = end.Sub(at)
	return p
}

// slowSends is the report.
type slowSends struct {
	threshold time.Duration
	log       *slog.Logger
	machine   func() []any
	gc        func(from, to time.Time) (n int, total, longest time.Duration)

	count atomic.Uint64
	sums  [nPhases]atomic.Int64 // ns, over the slow sends

	mu      sync.Mutex
	gate    slowlog.Gate
	since   int                    // slow sends since the last line
	sumSlow [nPhases]time.Duration // their phases summed
}

func newSlowSends(reg *prometheus.Registry, log *slog.Logger) (*slowSends, error) {
	r := &slowSends{threshold: slowSendThreshold, log: log, machine: slowlog.Machine, gc: slowlog.GCPauses}
	cs := []prometheus.Collector{prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_http_slow_sends_total",
		Help: "v1 sends (POST /api/v1/messages/send) whose handler took over 100 ms; logged at warn with their phases, at most every 10 s."},
		func() float64 { return float64(r.count.Load()) })}
	for i, name := range phaseNames {
		cs = append(cs, prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "gateway_http_slow_send_phase_seconds_total",
			Help:        "The time slow v1 sends (gateway_http_slow_sends_total) spent in each phase of their handler, summed.",
			ConstLabels: prometheus.Labels{"phase": name}},
			func() float64 { return float64(r.sums[i].Load()) / float64(time.Second) }))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// observe takes a send whose handler fasthttp called at ctx.Time(), now ending, with its
// steps' times; one reading of the monotonic clock when it was fast.
func (r *slowSends) observe(ctx *fasthttp.RequestCtx, t *sendTimes) {
	start := ctx.Time()
	if r == nil || start.IsZero() { // a RequestCtx not served by fasthttp's server
		return
	}
	took := time.Since(start) // the monotonic clock alone: half of time.Now's reading
	if took < r.threshold {
		return
	}
	end := start.Add(took)
	r.slow(string(ctx.Response.Header.PeekCanonical(requestIDKey)), ctx.ConnRequestNum(), start, end, t.phases(start, end))
}

// slow counts and (maybe) logs one slow send: request id, its connection's n-th request.
func (r *slowSends) slow(id string, n uint64, start, end time.Time, p [nPhases]time.Duration) {
	r.count.Add(1)
	for i, d := range p {
		r.sums[i].Add(int64(d))
	}
	d := end.Sub(start)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.since++
	for i, d := range p {
		r.sumSlow[i] += d
	}
	ok, unlogged := r.gate.Allow(end, d)
	if !ok {
		return
	}
	gcN, gcTotal, gcMax := r.gc(start, end)
	args := make([]any, 0, 48)
	args = append(args, "took_ms", slowlog.Ms(d), "threshold_ms", slowlog.Ms(r.threshold), "request_id", id, "conn_request", n,
		"started", start.UTC().Format(time.RFC3339Nano))
	for i, d := range p {
		args = append(args, phaseNames[i]+"_ms", slowlog.Ms(d))
	}
	args = append(args, "gc_pauses", gcN, "gc_pause_ms", slowlog.Ms(gcTotal), "gc_pause_max_ms", slowlog.Ms(gcMax),
		"slow_sends", r.since, "unlogged", unlogged)
	for i, d := range r.sumSlow {
		args = append(args, "sum_"+phaseNames[i]+"_ms", slowlog.Ms(d))
	}
	if r.machine != nil {
		args = append(args, r.machine()...)
	}
	r.log.Warn("slow send: a v1 send's handler took long", args...)
	r.since, r.sumSlow = 0, [nPhases]time.Duration{}
}
