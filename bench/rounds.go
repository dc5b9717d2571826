package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// Rounds: on a shared 2-core machine one pair of windows (the gateway's, then bare's) moved a
// case's ratio by about ±0.1 from run to run, which a single pair cannot tell from the gateway.
// So `bench run` measures a closed-loop case at --conns in --rounds rounds per generator: each
// round one window per server (the gateway, bare, the floor), the order rotated round by round
// (gateway-bare-floor, bare-floor-gateway, floor-gateway-bare, ...) so no server always goes
// first after the others' backlog or always last as the machine's load drifts; the processes
// stay up across the rounds. Each round's ratios are taken within the round; a figure reported
// (the JSON's existing fields) is the median of its rounds, a ratio the median of the rounds'
// ratios, beside its lowest and highest (as `bench cluster` does, cluster.go roundOrder).

// round is one round of a case's windows with one generator: the servers in the order they
// were measured, their figures and the ratios within the round.
type round struct {
	Order []string `json:"order"` // "gateway", "bare", "floor", as measured
	figures
	Load      string  `json:"load"`      // the machine's 1-minute load average as the round began
	OtherCPU  float64 `json:"other_cpu"` // the largest share other processes used in its windows (-1 unknown)
	Disturbed bool    `json:"disturbed,omitempty"`
}

// Server names of a round's windows.
const (
	srvGateway = "gateway"
	srvBare    = "bare"
	srvFloor   = "floor"
)

// roundSeq is how far apart the workers' sequences of two rounds' windows start, so a case
// whose requests must be unique (an Idempotency-Key, an order id) never repeats one across its
// rounds; maxRounds of them stay below the profile window's profileSeq0.
const (
	roundSeq  = 100_000_000
	maxRounds = 20
)

// rotation is the order of servers in round i: servers rotated left by i.
func rotation(servers []string, i int) []string {
	n := len(servers)
	out := make([]string, n)
	for k := range n {
		out[k] = servers[(k+i)%n]
	}
	return out
}

// roundsFor is how many rounds a case is measured in: --rounds for the closed-loop cases of
// --rounds-cases at --conns, one for the rest (the sweep's other counts).
func (h *harness) roundsFor(c *benchCase, conns int) int {
	if conns != h.o.conns || !slices.Contains(h.o.roundsCases, c.id) {
		return 1
	}
	return max(1, h.o.rounds)
}

// caseRun is one closed-loop case's state over its rounds and generators.
type caseRun struct {
	g          *gatewayProc
	r          *result
	c          *benchCase
	captured   bareResponse
	l          load
	tgt        target
	recipients []string
	// delivered: the 2xx sends so far (the capture, the profile window, each gateway window);
	// unanswered: the requests wrk may have left unanswered at the gateway so far; errs: the
	// error answers so far (the delivery check allows for messages sent without a 2xx seen).
	delivered, unanswered, errs int64
	// prof, when set, measures the gateway's CPU over the bench generator's first gateway
	// window; split is the profile window's shares.
	prof  *windowProfile
	split *cpuFigures
}

// measureRounds measures the case with one generator (w nil: the bench's) in n rounds and
// returns the figures: the rounds' medians, with the rounds when more than one.
func (h *harness) measureRounds(ctx context.Context, cr *caseRun, w *wrkRun, n int) (*figures, error) {
	servers := []string{srvGateway, srvBare}
	if cr.c.durable {
		servers = append(servers, srvFloor)
	}
	var rounds []round
	var err error
	for i := range n {
		rd := round{Order: rotation(servers, i), Load: loadNow()}
		for _, s := range rd.Order {
			if ctx.Err() != nil {
				err = ctx.Err()
				break
			}
			switch s {
			case srvGateway:
				err = h.gatewayWindow(ctx, cr, w, i, n, &rd.figures)
			case srvBare:
				rd.Bare, err = h.serverWindow(ctx, cr, w, i, "")
			case srvFloor:
				rd.Floor, err = h.serverWindow(ctx, cr, w, i, cr.g.fsync)
			}
			if err != nil {
				break
			}
		}
		rd.finish()
		rounds = append(rounds, rd)
		if err != nil {
			break
		}
	}
	f := &figures{}
	f.fromRounds(rounds)
	return f, err
}

// gatewayWindow measures the gateway in round i of n, then times its deliveries' drain (the
// per-recipient loss check after the last round only).
func (h *harness) gatewayWindow(ctx context.Context, cr *caseRun, w *wrkRun, i, n int, f *figures) error {
	if err := h.bare.set(cr.captured); err != nil { // the gateway's turn: nothing committed here
		return err
	}
	if err := h.settle(ctx, cr.g, cr.r); err != nil {
		return err
	}
	l := cr.l
	l.seq0 = uint64(i) * roundSeq
	prof := w == nil && i == 0 && cr.prof != nil
	if prof {
		l.onWindow = cr.prof.mark
	}
	gs, err := h.measureOn(ctx, cr.g.addr, cr.g.cmd.Process.Pid, l, cr.tgt, w.at(i))
	if err != nil {
		return err
	}
	ended := time.Now()
	f.Gateway = &gs
	cr.errs += gs.Errors
	if prof {
		cpu, err := cr.prof.finish(gs.Requests, "")
		if err != nil {
			cr.r.Notes = append(cr.r.Notes, "CPU per message not measured: "+err.Error())
		} else if cr.split != nil && cr.split.Components != nil {
			cpu.Profile, cpu.Components = cr.split.Profile, cr.split.Components
			cpu.split()
		}
		cr.r.CPU = cpu
	}
	if !cr.c.delivers {
		return nil
	}
	cr.delivered += gs.OK
	if w != nil {
		// wrk stops (after its warm-up, and at the end) with a request in flight on each
		// connection; the gateway may have accepted those.
		cr.unanswered += 2 * int64(l.conns)
	}
	f.DrainSeconds, f.DeliveredRPS, err = h.deliveries(ctx, cr.g, cr.c, cr.r, cr.recipients, cr.delivered, cr.unanswered, cr.errs, gs, ended, i == n-1)
	if err != nil && w != nil {
		return fmt.Errorf("wrk: %w", err)
	}
	return err
}

// serverWindow measures the bare server in round i: answering the captured bytes (commit
// ""), or as the floor, making one commit per request first (whose commits must have grown by
// at least its 2xx answers, or it measured nothing).
func (h *harness) serverWindow(ctx context.Context, cr *caseRun, w *wrkRun, i int, commit string) (*stats, error) {
	captured := cr.captured
	captured.Commit = commit
	if err := h.bare.set(captured); err != nil {
		return nil, err
	}
	if err := h.settle(ctx, cr.g, cr.r); err != nil {
		return nil, err
	}
	var before int64
	if commit != "" {
		var err error
		if before, err = h.bare.commits(); err != nil {
			return nil, err
		}
	}
	l := cr.l
	l.seq0 = uint64(i) * roundSeq
	s, err := h.measureOn(ctx, h.bare.addr, h.bare.cmd.Process.Pid, l, cr.tgt, w.at(i))
	if err != nil {
		return nil, err
	}
	cr.errs += s.Errors
	if commit != "" {
		after, err := h.bare.commits()
		if err != nil {
			return &s, err
		}
		if n := after - before; n < s.OK {
			return &s, fmt.Errorf("floor: %d answers but %d commits", s.OK, n)
		}
	}
	return &s, nil
}

// finish computes a round's ratios and its DISTURBED mark.
func (rd *round) finish() {
	rd.ratios()
	rd.OtherCPU = -1
	for _, s := range []*stats{rd.Gateway, rd.Bare, rd.Floor} {
		if s != nil {
			rd.OtherCPU = max(rd.OtherCPU, s.OtherCPU)
		}
	}
	rd.Disturbed = rd.OtherCPU > disturbed
}

// ratioFields are the ratios of a figures, by their JSON names.
var ratioFields = []struct {
	name string
	get  func(*figures) float64
	set  func(*figures, float64)
}{
	{"ratio", func(f *figures) float64 { return f.Ratio }, func(f *figures, v float64) { f.Ratio = v }},
	{"floor_ratio", func(f *figures) float64 { return f.FloorRatio }, func(f *figures, v float64) { f.FloorRatio = v }},
	{"gateway_floor_ratio", func(f *figures) float64 { return f.GatewayFloorRatio }, func(f *figures, v float64) { f.GatewayFloorRatio = v }},
	{"sustained_ratio", func(f *figures) float64 { return f.SustainedRatio }, func(f *figures, v float64) { f.SustainedRatio = v }},
	{"sustained_floor_ratio", func(f *figures) float64 { return f.SustainedFloorRatio }, func(f *figures, v float64) { f.SustainedFloorRatio = v }},
}

// fromRounds sets f to the medians of its rounds: each server's figures the median of its
// windows' (medianStats), each ratio the median of the rounds' ratios (each taken within its
// round, not of the medians) with its lowest and highest, the drain and the delivered rate
// their medians. One round: its figures as they are.
func (f *figures) fromRounds(rounds []round) {
	*f = figures{}
	if len(rounds) == 0 {
		return
	}
	if len(rounds) == 1 {
		*f = rounds[0].figures
		return
	}
	pick := func(get func(*round) *stats) *stats {
		var ss []*stats
		for i := range rounds {
			ss = append(ss, get(&rounds[i]))
		}
		return medianStats(ss)
	}
	f.Gateway = pick(func(r *round) *stats { return r.Gateway })
	f.Bare = pick(func(r *round) *stats { return r.Bare })
	f.Floor = pick(func(r *round) *stats { return r.Floor })
	f.DrainSeconds = medianOf(rounds, func(r *figures) float64 { return r.DrainSeconds })
	f.DeliveredRPS = medianOf(rounds, func(r *figures) float64 { return r.DeliveredRPS })
	for _, rf := range ratioFields {
		vs := valuesOf(rounds, rf.get)
		if len(vs) == 0 {
			continue
		}
		rf.set(f, median(vs))
		if f.RatioRanges == nil {
			f.RatioRanges = map[string][2]float64{}
		}
		f.RatioRanges[rf.name] = [2]float64{slices.Min(vs), slices.Max(vs)}
	}
	f.Rounds = rounds
}

// valuesOf are the rounds' positive values of get (0: not measured in that round).
func valuesOf(rounds []round, get func(*figures) float64) []float64 {
	var vs []float64
	for i := range rounds {
		if v := get(&rounds[i].figures); v > 0 {
			vs = append(vs, v)
		}
	}
	return vs
}

func medianOf(rounds []round, get func(*figures) float64) float64 {
	return median(valuesOf(rounds, get))
}

// medianStats is one server's windows over the rounds as one: the rates, latencies and CPU per
// request their medians (each figure on its own); the counts of answers, errors and missed
// requests their totals (every round's errors count, and fail the run, as one window's did);
// the other processes' share the largest (any disturbed window shows); the error samples all
// of them, the first few. Nil windows (not measured) are left out; none: nil.
func medianStats(ss []*stats) *stats {
	ss = slices.DeleteFunc(slices.Clone(ss), func(s *stats) bool { return s == nil })
	switch len(ss) {
	case 0:
		return nil
	case 1:
		c := *ss[0]
		return &c
	}
	m := func(get func(*stats) float64) float64 {
		var vs []float64
		for _, s := range ss {
			if v := get(s); v > 0 {
				vs = append(vs, v)
			}
		}
		return median(vs)
	}
	out := stats{
		RPS: m(func(s *stats) float64 { return s.RPS }), TargetRPS: m(func(s *stats) float64 { return s.TargetRPS }),
		P50: m(func(s *stats) float64 { return s.P50 }), P90: m(func(s *stats) float64 { return s.P90 }),
		P99: m(func(s *stats) float64 { return s.P99 }), P999: m(func(s *stats) float64 { return s.P999 }),
		Max: m(func(s *stats) float64 { return s.Max }), Mean: m(func(s *stats) float64 { return s.Mean }),
		ServerCPUUS: m(func(s *stats) float64 { return s.ServerCPUUS }), GeneratorCPUUS: m(func(s *stats) float64 { return s.GeneratorCPUUS }),
		ServerSwitches: m(func(s *stats) float64 { return s.ServerSwitches }), GeneratorSwitches: m(func(s *stats) float64 { return s.GeneratorSwitches }),
		OtherCPU: -1,
	}
	var reqs []float64
	for _, s := range ss {
		reqs = append(reqs, float64(s.Requests))
		out.Errors += s.Errors
		out.OK += s.OK
		out.Missed += s.Missed
		out.OtherCPU = max(out.OtherCPU, s.OtherCPU)
		out.ErrorSamples = append(out.ErrorSamples, s.ErrorSamples...)
	}
	out.Requests = int64(median(reqs))
	if len(out.ErrorSamples) > 10 {
		out.ErrorSamples = out.ErrorSamples[:10]
	}
	return &out
}

// spreadOf is a ratio's rounds as text: " (lowest-highest, n rounds)", "" for one round.
func spreadOf(f *figures, name string) string {
	if f == nil || len(f.Rounds) < 2 {
		return ""
	}
	rg, ok := f.RatioRanges[name]
	if !ok {
		return ""
	}
	return fmt.Sprintf(" (%.3f-%.3f, %d rounds)", rg[0], rg[1], len(f.Rounds))
}

// generatorRounds is one generator's figures of a case, by the generator's name.
type generatorRounds struct {
	name string
	f    *figures
}

// inRounds are the generators that measured r in rounds (two or more), the bench's own first.
func (r *result) inRounds() []generatorRounds {
	var out []generatorRounds
	for _, g := range []generatorRounds{{"the bench's generator", &r.figures}, {"wrk", r.Wrk}} {
		if g.f != nil && len(g.f.Rounds) >= 2 {
			out = append(out, g)
		}
	}
	return out
}

// printRounds prints, for each generator measured in rounds, one line listing every round:
// its servers in the order measured with their req/s, its ratios, its load and its mark.
func printRounds(w io.Writer, r *result) {
	for _, g := range r.inRounds() {
		var parts []string
		for i, rd := range g.f.Rounds {
			var srv []string
			for _, s := range rd.Order {
				st := map[string]*stats{srvGateway: rd.Gateway, srvBare: rd.Bare, srvFloor: rd.Floor}[s]
				if st != nil {
					srv = append(srv, fmt.Sprintf("%s %.0f", s, st.RPS))
				}
			}
			p := fmt.Sprintf("#%d %s: ratio %.3f", i+1, strings.Join(srv, ", "), rd.Ratio)
			if rd.GatewayFloorRatio > 0 {
				p += fmt.Sprintf(", of the floor %.3f", rd.GatewayFloorRatio)
			}
			if rd.SustainedFloorRatio > 0 {
				p += fmt.Sprintf(", sustained of the floor %.3f", rd.SustainedFloorRatio)
			}
			p += ", load " + rd.Load
			if rd.Disturbed {
				p += fmt.Sprintf(", DISTURBED (other processes %s)", pct(rd.OtherCPU))
			}
			parts = append(parts, p)
		}
		fmt.Fprintf(w, "   rounds, %s: %s\n", g.name, strings.Join(parts, "; "))
	}
}

// at is the wrk run for round i: its pools (a case of unique requests has a pair per round,
// the others one pair for every round); nil stays nil (the bench's generator).
func (w *wrkRun) at(i int) *wrkRun {
	if w == nil {
		return nil
	}
	c := *w
	p := w.pools[min(i, len(w.pools)-1)]
	c.warmupPool, c.pool = p[0], p[1]
	return &c
}

// removePools deletes the run's pool files.
func (w *wrkRun) removePools() {
	for _, p := range w.pools {
		os.Remove(p[0])
		os.Remove(p[1])
	}
}
