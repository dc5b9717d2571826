package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/persist/natstest"
)

// harness runs the cases of one `bench run` against one gateway at a time and the bare server.
type harness struct {
	o       runOptions
	out     io.Writer
	bare    *bareProc
	rep     *report
	run     int      // runs so far: makes recipients and request ids unique per run
	wrk     *wrkTool // nil: wrk does not measure (wrkNote says why)
	wrkNote string
	work    string
}

// runBench is `bench run`: one gateway per --fsync mode, each freshly provisioned; under the
// first mode every case, the connection sweep and the fixed-rate run; under the others the
// send cases (at --conns and at the sweep's largest count).
func runBench(ctx context.Context, o runOptions, out io.Writer) error {
	work, cleanup, err := workDir(o.gateway, "gateway-bench-", o.keep, out)
	if err != nil {
		return err
	}
	defer cleanup()
	natsURL := ""
	if slices.Contains(o.stores, "nats") {
		// A real NATS server with JetStream, embedded in this process, its store in the work
		// dir (on the gateway's file system, like Badger's).
		srv, err := natstest.Run(natstest.Options{Dir: filepath.Join(work, "nats")})
		if err != nil {
			return err
		}
		defer srv.Close()
		natsURL = srv.URL
	}
	bare, err := startBare(work, natsURL)
	if err != nil {
		return err
	}
	defer bare.stop()
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	h := &harness{o: o, out: out, bare: bare, rep: newReport(o.command, o.quick, gatewayVersion(o.gateway)), work: work}
	if o.wrk == "off" {
		h.wrkNote = "not run (--wrk off)"
	} else if h.wrk, err = findWrk(o.wrk, work); err != nil {
		h.wrkNote = err.Error()
		fmt.Fprintf(out, "WARNING: %s\n", err)
	}
	h.rep.Config = map[string]any{
		"duration": o.duration.String(), "warmup": o.warmup.String(), "conns": o.conns, "sweep": o.sweep,
		"rate_fraction": o.rateFraction, "rate_duration": o.rateDuration.String(), "rate_per_conn": o.ratePerConn, "users": o.users, "cases": o.cases, "fsync": o.fsync,
		"wrk": h.wrk != nil, "rounds": o.rounds, "rounds_cases": o.roundsCases,
	}
	fmt.Fprintf(out, "gateway %s; %s (load average %s); %d users; %v per case after %v warm-up\n", h.rep.Gateway, h.rep.Machine, h.rep.Machine.Load, o.users, o.duration, o.warmup)
	var phases []phaseSpec
	if slices.Contains(o.stores, "badger") {
		for i, mode := range o.fsync {
			phases = append(phases, phaseSpec{name: "fsync=" + mode, fsync: mode, all: i == 0, sweep: i == 0})
		}
	}
	if natsURL != "" {
		// Every case again with the records on JetStream, beside Badger's; the floor is one
		// commit per request to a records stream on the same server.
		phases = append(phases, phaseSpec{name: "store=nats", fsync: "batch", floor: "nats", all: true,
			extra: []string{"--store", "nats", "--nats", natsURL, "--nats-prefix", "bench"}})
	}
	for _, ph := range phases {
		if err := h.phase(ctx, work, ph); err != nil {
			h.rep.fail(fmt.Sprintf("%s: %v", ph.name, err))
			fmt.Fprintf(out, "\nFAILED %s: %v\n", ph.name, err)
		}
		if ctx.Err() != nil {
			break
		}
	}
	h.rep.Finished = time.Now().UTC()
	h.rep.Targets = checkTargets(h.rep)
	printSummary(out, h.rep)
	if o.results != "" {
		path, err := h.rep.write(o.results, "")
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "results: %s\n", path)
	}
	if o.readme != "" {
		if err := updateReadme(o.readme, h.rep); err != nil {
			return err
		}
		fmt.Fprintf(out, "figures updated in %s\n", o.readme)
	}
	if !h.rep.OK {
		return errFailed
	}
	return ctx.Err()
}

// phaseSpec is one gateway of a run: its fsync mode and store flags, the floor its durable
// cases are measured against (the fsync mode, or "nats"), whether it runs every case (else the
// send cases) and the sweep and fixed-rate run (else the send cases at the sweep's largest
// count only).
type phaseSpec struct {
	name, fsync, floor string
	extra              []string
	all, sweep         bool
}

// phase starts a gateway as spec says, provisions it and runs its share of the cases.
func (h *harness) phase(ctx context.Context, work string, spec phaseSpec) error {
	first := spec.sweep
	mode := strings.TrimPrefix(strings.TrimPrefix(spec.name, "fsync="), "store=")
	ids := h.o.cases
	if !spec.all {
		ids = slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return id != "send" && id != "send-idem" })
		if len(ids) == 0 {
			return nil
		}
	}
	name := spec.name
	var err error
	data := dataDir(work, "gateway-"+mode)
	logPath := data + ".log"
	pprofAddr := ""
	if h.o.profile {
		if pprofAddr, err = freeAddr(); err != nil {
			return err
		}
	}
	g, boot, err := startGateway(ctx, gatewaySpec{bin: h.o.gateway, data: data, log: logPath, fsync: spec.fsync, pprof: pprofAddr, extra: spec.extra})
	if err != nil {
		return err
	}
	if spec.floor != "" {
		g.fsync = spec.floor
	}
	defer func() {
		if _, err := g.stop(time.Minute); err != nil {
			h.rep.fail(fmt.Sprintf("%s: stop: %v", name, err))
		}
		// The gateway runs on its defaults, the access log on: its lines are the proof.
		n := g.out.requests.Load()
		h.rep.AccessLogLines[name] = n
		fmt.Fprintf(h.out, "   %s: the gateway wrote %d access-log lines (request logging on, its default)\n", name, n)
	}()
	t0 := time.Now()
	needStores := slices.Contains(ids, "webhook") || slices.Contains(ids, "webhook-route")
	fl, err := provision(ctx, g, provisionOptions{users: h.o.users, concurrency: 8, scan: true, keys: true, stores: needStores})
	if err != nil {
		return fmt.Errorf("provision: %w (gateway log %s)", err, logPath)
	}
	fmt.Fprintf(h.out, "\n== %s: gateway ready in %v; %d users linked and keyed in %v\n", name, boot.Round(time.Millisecond), len(fl.users), time.Since(t0).Round(time.Millisecond))
	if needStores && !fl.stores {
		fmt.Fprintf(h.out, "   %s\n", fl.storesNote)
	}

	results := map[string]*result{}
	for _, id := range ids {
		results[id] = h.runCase(ctx, g, fl, name, caseByID(id), h.o.conns, fixedRun{})
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}

	// The sweep and the fixed-rate run use v1 send; until that route is served, the first
	// API-key case that is (so the machinery runs and the report says which case it used).
	sweepCase := ""
	for _, id := range []string{"send", "account", "validate"} {
		if r := results[id]; r != nil && r.Skipped == "" && r.Failure == "" {
			sweepCase = id
			break
		}
	}
	if sweepCase == "" {
		return nil
	}
	sweep := h.o.sweep
	if !first {
		sweep = nil
		if len(h.o.sweep) > 0 && slices.Max(h.o.sweep) != h.o.conns && sweepCase == "send" {
			sweep = []int{slices.Max(h.o.sweep)}
		}
	}
	peak, peakConns := results[sweepCase].Gateway.RPS, h.o.conns
	for _, conns := range sweep {
		if conns == h.o.conns {
			continue // measured above
		}
		r := h.runCase(ctx, g, fl, name, caseByID(sweepCase), conns, fixedRun{})
		r.Sweep = true
		if r.Gateway != nil && r.Failure == "" && r.Gateway.RPS > peak {
			peak, peakConns = r.Gateway.RPS, conns
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	results[sweepCase].Sweep = len(sweep) > 0
	// The fixed-rate runs use the connection count the peak was reached with, so the schedule
	// is limited by the servers' speed, not by too few connections to carry it.
	if first && h.o.rateFraction > 0 && peak > 0 {
		for _, f := range fixedRuns(h.o.rateFraction, peak, results[sweepCase].Floor) {
			h.runCase(ctx, g, fl, name, caseByID(sweepCase), peakConns, f)
			if ctx.Err() != nil {
				break
			}
		}
	}
	return ctx.Err()
}

// fixedRun is an open-loop run at a fixed rate (rate 0: a closed loop).
type fixedRun struct {
	rate float64
	// basis is the peak the rate is a fraction of: rateBasisGateway or rateBasisFloor.
	basis string
	// floor: the floor is measured on the same schedule after the gateway (a durable case).
	floor bool
}

// The peak a fixed rate is a fraction of.
const (
	rateBasisGateway = "gateway"
	rateBasisFloor   = "floor"
)

// fixedRuns are the open-loop runs of a phase. The first is at fraction of the gateway's
// closed-loop peak (DESIGN.md section 8's accept p99). Its latency is compared with the floor's
// at the same rate, which makes sense only where the floor can carry that rate: when the
// floor's own closed-loop peak (the bench's generator, at --conns) is lower than the
// gateway's, the floor would fall behind its schedule and its p99 would measure its backlog.
// Then a second run puts the gateway and the floor each on fraction of the lower peak, the
// floor's, and that one holds the comparison.
func fixedRuns(fraction, peak float64, floor *stats) []fixedRun {
	own := fixedRun{rate: fraction * peak, basis: rateBasisGateway, floor: true}
	if floor == nil || floor.RPS <= 0 || floor.RPS >= peak {
		return []fixedRun{own}
	}
	own.floor = false
	return []fixedRun{own, {rate: fraction * floor.RPS, basis: rateBasisFloor, floor: true}}
}

// runCase measures one case at one connection count: against the gateway, then (closed loop
// only) against the bare server answering the same bytes and, for the cases that write, the
// floor; all of it with the bench's generator, then again with wrk. Deliveries are checked
// after each generator's gateway run.
func (h *harness) runCase(ctx context.Context, g *gatewayProc, fl *fleet, phase string, c *benchCase, conns int, fixed fixedRun) *result {
	h.run++
	rate := fixed.rate
	r := &result{Phase: phase, Case: c.name, CaseID: c.id, Conns: conns, Mode: "closed"}
	if rate > 0 {
		r.Mode, r.RateBasis = "fixed-rate", fixed.basis
	}
	defer func() {
		h.rep.add(r)
		printResult(h.out, r)
	}()
	if c.needs == "stores" && !fl.stores {
		r.Skipped = fl.storesNote
		return r
	}
	r.sentBase = -1
	if c.delivers {
		if v, err := scrapeCounters(g.api, "gateway_messages_sent_total"); err == nil {
			r.sentBase = v[0]
		}
	}
	tgt, recipients := c.build(fl, h.run)
	captured, err := capture(g.api, tgt, h.run)
	switch {
	case err != nil:
		r.Failure = "capture: " + err.Error()
		return r
	case routeMissing(captured.Status, []byte(captured.Body)):
		r.Skipped = fmt.Sprintf("%s %s is not served yet (404)", c.method, c.path)
		return r
	case captured.Status < 200 || captured.Status > 299:
		r.Failure = fmt.Sprintf("capture: status %d: %.300s", captured.Status, captured.Body)
		return r
	}
	captured.Path = c.path
	r.ResponseBytes = len(captured.Body)

	duration := h.o.duration
	if rate > 0 {
		duration = h.o.rateDuration
	}
	l := load{addr: g.addr, conns: conns, warmup: h.o.warmup, duration: duration, rate: rate, timeout: h.o.timeout, run: h.run, pid: g.cmd.Process.Pid, perConn: h.o.ratePerConn}
	// CPU per message: the gateway's process over the measured window (the bench generator's
	// first), split by the shares of a profile taken in a window of its own just before (the
	// profiler's signals cost the gateway CPU that bare's windows and wrk's do not pay:
	// measured in the window, they lowered the bench generator's ratios alone).
	cr := &caseRun{g: g, r: r, c: c, captured: captured, l: l, tgt: tgt, recipients: recipients, delivered: 1} // the capture's message
	if h.o.profile && (c.delivers || c.id == "validate" || c.id == "status") && rate == 0 && conns == h.o.conns && g.pprof != "" {
		if err := h.settle(ctx, g, r); err != nil {
			r.Failure = err.Error()
			return r
		}
		pw := &windowProfile{g: g, duration: duration, perRequest: !c.delivers}
		pl := l
		pl.onWindow, pl.seq0 = pw.mark, profileSeq0
		ps := measure(ctx, pl, tgt)
		// Not measured, but its answers are the run's: its messages delivered, its errors
		// counted (errorCount: the run fails on them, and the delivery checks allow for them).
		r.ProfileWindow = &ps
		cr.delivered += ps.OK
		cr.errs += ps.Errors
		var err error
		if cr.split, err = pw.finish(ps.Requests, h.profilePath(phase, c.id)); err != nil {
			r.Notes = append(r.Notes, "CPU per message not split: "+err.Error())
		}
		cr.prof = &windowProfile{g: g, duration: duration, perRequest: !c.delivers, counting: true}
		if note := h.bareProfileWindow(ctx, cr, pl, phase); note != "" {
			r.Notes = append(r.Notes, note)
		}
	}
	if rate > 0 {
		h.fixedRate(ctx, cr, fixed)
	} else {
		// The gateway, bare and (durable cases) the floor in rounds, the bench's generator's
		// then wrk's (rounds.go); deliveries checked after each gateway window.
		n := h.roundsFor(c, conns)
		own, err := h.measureRounds(ctx, cr, nil, n)
		r.figures = *own
		if err != nil {
			r.Failure = err.Error()
		}
		if ctx.Err() == nil && r.Failure == "" {
			if err := h.measureWrk(ctx, cr, n); err != nil && r.Failure == "" {
				r.Failure = err.Error()
			}
		}
	}
	if r.Failure == "" && r.errorCount() > 0 {
		r.Failure = "error responses"
	}
	return r
}

// fixedRate measures the gateway on the fixed-rate run's schedule (the bench's generator, one
// window), its deliveries, then (a durable case, when asked) the floor on the same schedule.
func (h *harness) fixedRate(ctx context.Context, cr *caseRun, fixed fixedRun) {
	r, c := cr.r, cr.c
	if err := h.settle(ctx, cr.g, r); err != nil {
		r.Failure = err.Error()
		return
	}
	slowBefore, slowErr := scrapeCounters(cr.g.api, "gateway_storage_slow_commits_total")
	sendsBefore, sendsErr := scrapeCounters(cr.g.api, slowSendCounters...)
	began := time.Now()
	gs := measure(ctx, cr.l, cr.tgt)
	ended := time.Now()
	r.Gateway = &gs
	slowAfter, err := scrapeCounters(cr.g.api, "gateway_storage_slow_commits_total")
	sendsAfter, sendsErr2 := scrapeCounters(cr.g.api, slowSendCounters...)
	if c.delivers {
		var err error
		r.DrainSeconds, r.DeliveredRPS, err = h.checkDeliveries(ctx, cr.g, c, r, cr.recipients, cr.delivered+gs.OK, 0, gs, ended)
		if err != nil {
			r.Failure = err.Error()
		}
	}
	if err == nil && slowErr == nil && cr.g.logPath != "" {
		// The gateway's slow commits in the window and the stalls it logged (stalls.go), read
		// from its output once the window is over.
		cr.g.out.catchUp()
		stalls, _ := loggedStalls(cr.g.logPath, began, ended.Add(slowLogLag))
		r.Notes = append(r.Notes, stallNote(slowAfter[0]-slowBefore[0], stalls))
	}
	if c.id == "send" && cr.g.logPath != "" {
		// The slow sends' phases beside the generator's slow requests (stalls.go).
		var counted []float64
		if sendsErr == nil && sendsErr2 == nil {
			for i := range sendsAfter {
				counted = append(counted, sendsAfter[i]-sendsBefore[i])
			}
		}
		sends, _ := loggedSends(cr.g.logPath, began, ended.Add(slowLogLag))
		r.Notes = append(r.Notes, sendNote(counted, sends, &gs))
	}
	if fixed.floor && c.durable && ctx.Err() == nil && r.Failure == "" {
		// The floor at the same schedule: its p99 is what the gateway's is held against.
		if err := h.measureFloorAt(ctx, cr.g, r, cr.captured, cr.l, cr.tgt); err != nil {
			r.Failure = err.Error()
		}
	}
}

// profileSeq0 is where the profile window's sequences start: half of the 10^10 a worker's
// order ids leave room for (putOrderID), far past any measured window's.
const profileSeq0 = 5_000_000_000

// checkDeliveries waits until every message answered 2xx so far (want) reached the sim, once,
// and returns the drain after the window and the delivered rate over window plus drain.
//
// The drain is timed by the gateway's gateway_messages_sent_total (the messages the network
// took: the embedded sim's answers) reaching its value before the case plus want, polled every
// 10 ms; then the sim's messages are read per recipient, untimed, for loss and duplicates. Timing
// the per-recipient read itself measured the read: each GET lists every message of the phase to
// that recipient, about 8 µs an id, so its first pass took 1.66 s after wrk's window where the
// counter had reached the count 4.2 ms after it (branch hotcpu). Should that read find a message
// missing, it polls on and the drain is the time it found them all. wrk may leave a request on
// each connection unanswered and the gateway may send those: the counter can then reach the
// count while up to that many answered messages are still queued (a few ms of the drain).
func (h *harness) checkDeliveries(ctx context.Context, g *gatewayProc, c *benchCase, r *result, recipients []string, want, unanswered int64, s stats, ended time.Time) (float64, float64, error) {
	return h.deliveries(ctx, g, c, r, recipients, want, unanswered, r.errorCount()+s.Errors, s, ended, true)
}

// deliveries is checkDeliveries with the error answers so far given (errs) and, when not
// final (a round before a case's last), the drain timed by the counter alone: the
// per-recipient read for loss and duplicates is left to the last round's check, which counts
// every round's messages (without the counter, every round reads).
func (h *harness) deliveries(ctx context.Context, g *gatewayProc, c *benchCase, r *result, recipients []string, want, unanswered, errs int64, s stats, ended time.Time, final bool) (float64, float64, error) {
	wait := 10 * time.Second
	if c.async {
		wait = time.Minute
	}
	window := h.o.duration.Seconds()
	if r.Mode == "fixed-rate" {
		window = h.o.rateDuration.Seconds()
	}
	var drained time.Time
	if r.sentBase >= 0 && !c.async {
		drained = waitSent(ctx, g.api, r.sentBase+float64(want), ended.Add(wait))
	}
	if !drained.IsZero() && !final {
		drain := drained.Sub(ended).Seconds()
		return drain, float64(s.Requests) / (window + drain), nil
	}
	if !drained.IsZero() {
		d, err := checkDeliveries(ctx, g.api, recipients, want, errs, unanswered, 0)
		if err == nil {
			r.Delivery = d
			drain := drained.Sub(ended).Seconds()
			return drain, float64(s.Requests) / (window + drain), nil
		}
		if d.Duplicates > 0 || d.Lost == 0 {
			r.Delivery = d
			return 0, 0, err
		}
		// Counted as sent, not all at the sim yet: poll as without the counter.
	}
	d, err := checkDeliveries(ctx, g.api, recipients, want, errs, unanswered, wait)
	r.Delivery = d
	if err != nil {
		return 0, 0, err
	}
	drain := time.Since(ended).Seconds()
	// Accepted within the window, then delivered by the end of the drain.
	return drain, float64(s.Requests) / (window + drain), nil
}

// measureFloorAt measures the floor alone on the fixed-rate run's schedule (the bench's
// generator: an open loop; wrk has none), so the gateway's accept latency at a rate is read
// beside a server that does nothing but the commit at that rate.
func (h *harness) measureFloorAt(ctx context.Context, g *gatewayProc, r *result, captured bareResponse, l load, tgt target) error {
	captured.Commit = g.fsync
	if err := h.bare.set(captured); err != nil {
		return err
	}
	if err := h.settle(ctx, g, r); err != nil {
		return err
	}
	fs, err := h.measureOn(ctx, h.bare.addr, h.bare.cmd.Process.Pid, l, tgt, nil)
	if err != nil {
		return err
	}
	r.Floor = &fs
	return nil
}

// measureOn measures one server with the bench's generator (w nil) or wrk.
func (h *harness) measureOn(ctx context.Context, addr string, pid int, l load, tgt target, w *wrkRun) (stats, error) {
	if w == nil {
		l.addr, l.pid = addr, pid
		return measure(ctx, l, tgt), nil
	}
	return h.wrk.measure(ctx, wrkLoad{addr: addr, conns: l.conns, warmup: l.warmup, duration: l.duration, timeout: l.timeout,
		warmupPool: w.warmupPool, pool: w.pool, cycle: w.cycle || pid != w.gatewayPID, pid: pid})
}

// wrkRun is a case's request pools for wrk.
type wrkRun struct {
	warmupPool, pool string
	// pools: the warm-up and measured pools of each round (one pair for every round when the
	// requests may repeat); at(i) sets warmupPool and pool to round i's
	pools      [][2]string
	cycle      bool // the requests need not be unique: cycle through the pools
	gatewayPID int  // against the gateway a pool of unique requests never cycles
}

// measureWrk measures the case again with wrk, in n rounds: the gateway (with its deliveries),
// the bare server and the floor.
func (h *harness) measureWrk(ctx context.Context, cr *caseRun, n int) error {
	r, c, l := cr.r, cr.c, cr.l
	if h.wrk == nil {
		r.WrkNote = h.wrkNote
		return nil
	}
	w := &wrkRun{cycle: !c.unique, gatewayPID: cr.g.cmd.Process.Pid}
	// A pool of unique requests holds more than the gateway can answer meanwhile: twice what
	// the bench's generator measured, and at least 6,000 a second, over wrk's run (whole
	// seconds). The floor matters where the bench's generator is slow for its own reasons
	// (few connections on a busy machine: 783/s where wrk drove the same gateway at 5,449/s).
	warmN, size := 2048, 8192
	if c.unique {
		rps := max(2*r.Gateway.RPS, 6000)
		if l.duration < 2*time.Second {
			// A quick run's fraction of a second says little of what wrk reaches in its whole
			// second (in a clean clone's CI it drove 2.7 times the bench's generator at 4
			// connections and ran a 10,000-request pool out), and a pool this size is cheap.
			rps = max(4*r.Gateway.RPS, 25000)
		}
		warmN = int(rps*wholeSeconds(h.o.warmup)) + 2000
		size = int(rps*wholeSeconds(l.duration)) + 2000
	}
	defer w.removePools()
	pairs := 1
	if c.unique {
		pairs = n // a round's requests must not repeat another's
	}
	for i := range pairs {
		seq0 := uint64(i) * roundSeq
		warm, err := h.wrk.writePoolFrom(cr.tgt, cr.g.addr, h.run, wrkWarmupWorker, seq0, warmN, fmt.Sprintf("warmup-r%d", i))
		if err != nil {
			return err
		}
		w.pools = append(w.pools, [2]string{warm, ""})
		if w.pools[i][1], err = h.wrk.writePoolFrom(cr.tgt, cr.g.addr, h.run, wrkWorker, seq0, size, fmt.Sprintf("measure-r%d", i)); err != nil {
			return err
		}
	}
	f, err := h.measureRounds(ctx, cr, w, n)
	r.Wrk = f
	return err
}

// profilePath is where a run's gateway profile is kept: beside the results, or in the work dir.
func (h *harness) profilePath(phase, caseID string) string {
	dir := h.o.results
	if dir == "" {
		dir = h.work
	}
	name := strings.NewReplacer("=", "-", "/", "-").Replace(phase) + "-" + caseID
	return filepath.Join(dir, h.rep.Started.UTC().Format("2006-01-02T150405Z")+"-"+name+"-cpu.prof")
}

// settleLimit bounds the wait for an idle gateway before a measurement.
const settleLimit = 30 * time.Second

// settle waits for the gateway to go idle and notes in r when it did not.
func (h *harness) settle(ctx context.Context, g *gatewayProc, r *result) error {
	g.out.catchUp() // the gateway's output so far, read before the next window, never in it
	if h.o.settle == 0 {
		return nil
	}
	waited, idle, err := settle(ctx, g.api, h.o.settle, settleLimit)
	r.SettleSeconds += waited.Seconds()
	if err == nil && !idle {
		r.Notes = append(r.Notes, fmt.Sprintf("gateway still busy (over %.0f%% of a core) after %v: measured anyway", settleIdle*100, settleLimit))
	}
	return err
}

// capture sends one request of the target through the harness's client and returns the
// answer as the bare server will replay it. Headers that describe the connection or the
// moment (Date, Content-Length, ...) are left to the bare server's own fasthttp.
func capture(api *apiClient, t target, run int) (bareResponse, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	initRequest(req, api.addr, t)
	t.prepare(req, &worker{id: captureWorker, run: run})
	if err := api.hc.Do(req, resp); err != nil {
		return bareResponse{}, err
	}
	out := bareResponse{Status: resp.StatusCode(), Body: string(resp.Body())}
	for k, v := range resp.Header.All() {
		switch strings.ToLower(string(k)) {
		case "date", "content-length", "connection", "server", "transfer-encoding":
			continue
		}
		out.Headers = append(out.Headers, [2]string{string(k), string(v)})
	}
	return out, nil
}

// delivery is the no-message-lost check of one run: every 2xx send (capture and warm-up
// included) must be delivered by the sim exactly once.
type delivery struct {
	OK         int64 `json:"ok_responses"`
	Delivered  int64 `json:"delivered"`
	Duplicates int64 `json:"duplicates"`
	Lost       int64 `json:"lost"`
}

// checkDeliveries polls the sim's delivered messages to the run's recipients until they add
// up to ok or wait passes. unanswered is how many requests the generator may have left without
// reading their answer when it stopped (wrk closes its connections with requests in flight):
// those messages may be delivered without a 2xx the generator saw.
func checkDeliveries(ctx context.Context, api *apiClient, recipients []string, ok, errs, unanswered int64, wait time.Duration) (*delivery, error) {
	deadline := time.Now().Add(wait)
	for {
		d := &delivery{OK: ok}
		for _, to := range recipients {
			st, body, err := api.do("GET", "/api/dev/sim/messages?to="+to, nil, nil)
			if err := want2xx("GET /api/dev/sim/messages", st, body, err); err != nil {
				return d, err
			}
			var m struct {
				Messages []struct {
					ID string `json:"id"`
				} `json:"messages"`
			}
			if err := json.Unmarshal(body, &m); err != nil {
				return d, fmt.Errorf("GET /api/dev/sim/messages: %w", err)
			}
			seen := make(map[string]struct{}, len(m.Messages))
			for _, msg := range m.Messages {
				seen[msg.ID] = struct{}{}
			}
			d.Delivered += int64(len(m.Messages))
			d.Duplicates += int64(len(m.Messages) - len(seen))
		}
		d.Lost = max(ok-d.Delivered, 0)
		switch {
		case d.Duplicates > 0:
			return d, fmt.Errorf("%d messages delivered twice", d.Duplicates)
		case d.Delivered > ok+unanswered && errs == 0:
			return d, fmt.Errorf("%d messages delivered without a successful response", d.Delivered-ok)
		case d.Lost == 0:
			return d, nil
		case time.Now().After(deadline):
			return d, fmt.Errorf("%d of %d successfully sent messages not delivered after %v", d.Lost, ok, wait)
		}
		select {
		case <-ctx.Done():
			return d, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// resultsPath is bench/results/<UTC date and time><suffix>.json.
func resultsPath(dir string, t time.Time, suffix string) string {
	return filepath.Join(dir, t.UTC().Format("2006-01-02T150405Z")+suffix+".json")
}

// wholeSeconds is d rounded up to whole seconds (wrk's unit), at least one.
func wholeSeconds(d time.Duration) float64 {
	return float64(max(1, (d+time.Second-1)/time.Second))
}

// waitSent polls the gateway's gateway_messages_sent_total every 10 ms until it reaches n, and
// returns when it did; zero at the deadline, on a failed read or when ctx ends.
func waitSent(ctx context.Context, api *apiClient, n float64, deadline time.Time) time.Time {
	for {
		v, err := scrapeCounters(api, "gateway_messages_sent_total")
		now := time.Now()
		switch {
		case err != nil:
			return time.Time{}
		case v[0] >= n:
			return now
		case now.After(deadline):
			return time.Time{}
		}
		select {
		case <-ctx.Done():
			return time.Time{}
		case <-time.After(10 * time.Millisecond):
		}
	}
}
