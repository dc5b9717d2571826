package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// result is one case at one connection count under one gateway configuration.
type result struct {
	Phase  string `json:"phase"` // fsync=batch | fsync=interval | store=nats
	Case   string `json:"case"`
	CaseID string `json:"case_id"`
	Conns  int    `json:"conns"`
	Mode   string `json:"mode"` // closed | fixed-rate
	// RateBasis is the closed-loop peak a fixed rate is a fraction of: "gateway" (the
	// gateway's own) or "floor" (the floor's, when it is the lower: harness.go fixedRuns).
	RateBasis     string `json:"rate_basis,omitempty"`
	Sweep         bool   `json:"sweep,omitempty"`
	Skipped       string `json:"skipped,omitempty"`
	Failure       string `json:"failure,omitempty"`
	ResponseBytes int    `json:"response_bytes,omitempty"`
	// The bench's own generator's figures (in the JSON at this level), then wrk's: of the two
	// ratios the lower counts (counted).
	figures
	Wrk      *figures  `json:"wrk,omitempty"`
	WrkNote  string    `json:"wrk_note,omitempty"` // why wrk did not measure this case
	Delivery *delivery `json:"delivery,omitempty"`
	// sentBase is the gateway's gateway_messages_sent_total before the case sent anything
	// (-1: not read): the drain is timed by that counter (harness.go checkDeliveries).
	sentBase float64
	// CPU is the gateway's CPU per message over the measured window, by component from a
	// profile taken in a window of its own just before (the cases that deliver, at --conns;
	// per request for validate and status, where the access log's share shows on the
	// cheapest routes).
	CPU *cpuFigures `json:"cpu,omitempty"`
	// ProfileWindow is that window's load (the bench's generator at the gateway): not
	// measured, its answers are the run's all the same (its messages delivered, its errors).
	ProfileWindow *stats `json:"profile_window,omitempty"`
	// BareProfileWindow is bare's profile window's load (the same generator, at bare;
	// bareProfileWindow): not measured, its errors counted all the same.
	BareProfileWindow *stats   `json:"bare_profile_window,omitempty"`
	SettleSeconds     float64  `json:"settle_seconds"` // waited for an idle gateway before the measurements
	Notes             []string `json:"notes,omitempty"`
}

// figures are one generator's measurements of a case: the gateway, the bare server and, for
// the cases that write durably, the floor (the bare server making one commit per request).
type figures struct {
	Gateway *stats  `json:"gateway,omitempty"`
	Bare    *stats  `json:"bare,omitempty"`
	Ratio   float64 `json:"ratio,omitempty"` // gateway req/s over bare req/s
	// The floor's req/s over bare's, and the gateway's over the floor's.
	Floor             *stats  `json:"floor,omitempty"`
	FloorRatio        float64 `json:"floor_ratio,omitempty"`
	GatewayFloorRatio float64 `json:"gateway_floor_ratio,omitempty"`
	// For the cases that deliver: how long after the measured window the last message reached
	// the sim (the backlog), the delivered rate over the window plus that drain, and the
	// sustained ratios (the lesser of accepted and delivered rates) over bare and over the
	// floor (DESIGN.md 8).
	DrainSeconds        float64 `json:"drain_seconds,omitempty"`
	DeliveredRPS        float64 `json:"delivered_rps,omitempty"`
	SustainedRatio      float64 `json:"sustained_ratio,omitempty"`
	SustainedFloorRatio float64 `json:"sustained_floor_ratio,omitempty"`
	// Measured in rounds (rounds.go): the figures above are the rounds' medians, each ratio the
	// median of the rounds' ratios; RatioRanges holds each ratio's lowest and highest over the
	// rounds (by the ratio's JSON name), Rounds every round as measured.
	RatioRanges map[string][2]float64 `json:"ratio_ranges,omitempty"`
	Rounds      []round               `json:"rounds,omitempty"`
}

// ratios fills the ratios from the measurements.
func (f *figures) ratios() {
	if f.Gateway == nil || f.Bare == nil || f.Bare.RPS <= 0 {
		return
	}
	f.Ratio = f.Gateway.RPS / f.Bare.RPS
	sustained := 0.0
	if f.DeliveredRPS > 0 {
		sustained = min(f.Gateway.RPS, f.DeliveredRPS)
		f.SustainedRatio = sustained / f.Bare.RPS
	}
	if f.Floor != nil && f.Floor.RPS > 0 {
		f.FloorRatio = f.Floor.RPS / f.Bare.RPS
		f.GatewayFloorRatio = f.Gateway.RPS / f.Floor.RPS
		if sustained > 0 {
			f.SustainedFloorRatio = sustained / f.Floor.RPS
		}
	}
}

// counted is a ratio as it counts: the lower of the two generators' (the bench's own alone
// when wrk did not measure).
func (r *result) counted(get func(*figures) float64) float64 {
	v, _ := r.countedOf(get)
	return v
}

// countedOf is counted and the generator's figures it came from.
func (r *result) countedOf(get func(*figures) float64) (float64, *figures) {
	v, f := get(&r.figures), &r.figures
	if r.Wrk != nil {
		if w := get(r.Wrk); w > 0 && (v <= 0 || w < v) {
			v, f = w, r.Wrk
		}
	}
	return v, f
}

// cpuFigures is the gateway's CPU per message over one measured window.
type cpuFigures struct {
	WindowSeconds float64 `json:"window_seconds"`
	CPUSeconds    float64 `json:"cpu_seconds"` // the gateway process, over the window
	Accepted      int64   `json:"accepted"`    // 2xx answers in the window
	Sent          int64   `json:"sent"`        // messages the network took in the window
	// PerMessageUS is CPUSeconds over the lesser of Accepted and Sent, the sim (embedded in
	// the gateway's process) included; SimUS its share; GatewayUS the rest, the target's.
	PerMessageUS float64     `json:"us_per_message"`
	SimUS        float64     `json:"sim_us_per_message"`
	GatewayUS    float64     `json:"gateway_us_per_message"`
	Writes       float64     `json:"storage_writes_per_message,omitempty"`
	WriteBytes   float64     `json:"storage_bytes_per_message,omitempty"`
	Profile      string      `json:"profile,omitempty"`
	Components   []component `json:"components,omitempty"`
}

// report is a whole `bench run`, as written to bench/results.
type report struct {
	Started  time.Time      `json:"started"`
	Finished time.Time      `json:"finished"`
	Command  string         `json:"command"`
	Quick    bool           `json:"quick"`
	Gateway  string         `json:"gateway_version"`
	Machine  machine        `json:"machine"`
	Config   map[string]any `json:"config"`
	Results  []*result      `json:"results"`
	Targets  []targetCheck  `json:"targets,omitempty"`
	// AccessLogLines: access-log lines each phase's gateway wrote (it runs on its defaults).
	AccessLogLines map[string]int64 `json:"access_log_lines,omitempty"`
	Failures       []string         `json:"failures,omitempty"`
	OK             bool             `json:"ok"`
}

func newReport(command string, quick bool, gw string) *report {
	return &report{Started: time.Now().UTC(), Command: command, Quick: quick, Gateway: gw, Machine: thisMachine(), OK: true, AccessLogLines: map[string]int64{}}
}

func (r *report) add(res *result) {
	r.Results = append(r.Results, res)
	if res.Failure != "" {
		r.fail(fmt.Sprintf("%s %s @%d (%s): %s", res.Phase, res.Case, res.Conns, res.Mode, res.Failure))
	}
}

func (r *report) fail(msg string) {
	r.Failures = append(r.Failures, msg)
	r.OK = false
}

// write stores the report as JSON under dir and returns the path.
func (r *report) write(dir, suffix string) (string, error) {
	return writeJSONFile(dir, r.Started, suffix, r)
}

func writeJSONFile(dir string, t time.Time, suffix string, v any) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return "", err
	}
	path := resultsPath(dir, t, suffix)
	return path, os.WriteFile(path, append(b, '\n'), 0o644)
}

// machine is where the figures came from.
type machine struct {
	CPU    string `json:"cpu"`
	Cores  int    `json:"cores"`
	Memory string `json:"memory"`
	OS     string `json:"os"`
	Kernel string `json:"kernel"`
	Go     string `json:"go"`
	// Load is /proc/loadavg when the run started: other work on the machine (a test suite
	// running beside the benchmark) shows here and makes every figure of the run noisy.
	Load string `json:"loadavg_at_start"`
}

func (m machine) String() string {
	return fmt.Sprintf("%s, %d cores, %s RAM, %s %s", m.CPU, m.Cores, m.Memory, m.OS, m.Kernel)
}

func thisMachine() machine {
	m := machine{CPU: "unknown CPU", Cores: runtime.NumCPU(), Memory: "?", OS: runtime.GOOS + "/" + runtime.GOARCH, Go: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		if _, err := fmt.Sscanf(string(b), "MemTotal: %d kB", &kb); err == nil {
			m.Memory = fmt.Sprintf("%.1f GiB", float64(kb)/(1<<20))
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) >= 3 {
			m.Load = strings.Join(f[:3], " ")
		}
	}
	return m
}

// printResult prints one run as it finishes.
func printResult(w io.Writer, r *result) {
	mode := fmt.Sprintf("%d conns", r.Conns)
	if r.Mode == "fixed-rate" && r.Gateway != nil {
		mode += fmt.Sprintf(", fixed rate %.0f req/s (open loop, %s)", r.Gateway.TargetRPS, rateBasisWords(r.RateBasis))
	}
	fmt.Fprintf(w, "\n-- %s  %s  (%s)\n", r.Phase, r.Case, mode)
	if r.Skipped != "" {
		fmt.Fprintf(w, "   skipped: %s\n", r.Skipped)
		return
	}
	if r.Gateway != nil {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "   server\treq/s\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\terrors\tother CPU\tµs CPU/req\tgenerator µs/req\tswitches/req\t")
		row := func(name string, s *stats) {
			if s != nil {
				fmt.Fprintf(tw, "   %s\t%.0f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%d\t%s\t%s\t%s\t%s\t\n", name, s.RPS, s.P50, s.P90, s.P99, s.P999, s.Max, s.Errors, pct(s.OtherCPU), cpuUS(s.ServerCPUUS), cpuUS(s.GeneratorCPUUS), switchesText(s))
			}
		}
		row("gateway", r.Gateway)
		row("bare", r.Bare)
		row("floor", r.Floor)
		if r.Wrk != nil {
			row("gateway (wrk)", r.Wrk.Gateway)
			row("bare (wrk)", r.Wrk.Bare)
			row("floor (wrk)", r.Wrk.Floor)
		}
		tw.Flush()
	}
	var notes []string
	for _, g := range []struct {
		name string
		f    *figures
	}{{"", &r.figures}, {"wrk: ", r.Wrk}} {
		f := g.f
		if f == nil || f.Gateway == nil {
			continue
		}
		if len(f.Rounds) > 1 {
			notes = append(notes, fmt.Sprintf("%smedians of %d rounds", g.name, len(f.Rounds)))
		}
		if f.Bare != nil {
			notes = append(notes, fmt.Sprintf("%sratio %.3f%s", g.name, f.Ratio, spreadOf(f, "ratio")))
		}
		if f.Floor != nil && f.Bare != nil { // not on a fixed-rate run: no bare, no ratios
			notes = append(notes, fmt.Sprintf("%sfloor (bare + %s) %.3f of bare, gateway %.3f%s of the floor",
				g.name, floorWords(fsyncOf(r)), f.FloorRatio, f.GatewayFloorRatio, spreadOf(f, "gateway_floor_ratio")))
		}
		if f.DeliveredRPS > 0 {
			notes = append(notes, fmt.Sprintf("%sdelivered %.0f/s (backlog drained %.2fs after the window)", g.name, f.DeliveredRPS, f.DrainSeconds))
			if f.SustainedRatio > 0 {
				notes = append(notes, fmt.Sprintf("%ssustained ratio %.3f%s", g.name, f.SustainedRatio, spreadOf(f, "sustained_ratio")))
			}
			if f.SustainedFloorRatio > 0 {
				notes = append(notes, fmt.Sprintf("%ssustained %.3f%s of the floor", g.name, f.SustainedFloorRatio, spreadOf(f, "sustained_floor_ratio")))
			}
		}
	}
	if r.WrkNote != "" {
		notes = append(notes, "wrk: "+r.WrkNote)
	}
	if d := r.Delivery; d != nil {
		notes = append(notes, fmt.Sprintf("delivered %d of %d sent (lost %d, duplicates %d)", d.Delivered, d.OK, d.Lost, d.Duplicates))
	}
	if r.Gateway != nil && r.Gateway.Missed > 0 {
		notes = append(notes, fmt.Sprintf("%d scheduled requests never sent (overloaded)", r.Gateway.Missed))
	}
	if o := r.otherCPU(); o > disturbed {
		notes = append(notes, fmt.Sprintf("DISTURBED: other processes used %s of the machine", pct(o)))
	}
	if r.SettleSeconds >= 1 {
		notes = append(notes, fmt.Sprintf("waited %.1fs for an idle gateway", r.SettleSeconds))
	}
	if len(notes) > 0 {
		fmt.Fprintf(w, "   %s\n", strings.Join(notes, "; "))
	}
	printRounds(w, r)
	if c := r.CPU; c != nil {
		fmt.Fprintf(w, "   CPU: %.2f s over %.1f s for %d accepted, %d sent: %.1f µs per message, %.1f without the sim (%.1f); %.1f storage writes, %.0f bytes per message\n",
			c.CPUSeconds, c.WindowSeconds, c.Accepted, c.Sent, c.PerMessageUS, c.GatewayUS, c.SimUS, c.Writes, c.WriteBytes)
		if len(c.Components) > 0 {
			printComponents(w, c.Components, "     ")
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "   note: %s\n", n)
	}
	if r.Failure != "" {
		fmt.Fprintf(w, "   FAILED: %s\n", r.Failure)
	}
	var samples []string
	for _, s := range append(r.allStats(), r.ProfileWindow, r.BareProfileWindow) {
		samples = append(samples, sampleOf(s)...)
	}
	for _, s := range samples {
		fmt.Fprintf(w, "   error: %s\n", s)
	}
}

// allStats are every measurement of a result, both generators'.
func (r *result) allStats() []*stats {
	out := []*stats{r.Gateway, r.Bare, r.Floor}
	if r.Wrk != nil {
		out = append(out, r.Wrk.Gateway, r.Wrk.Bare, r.Wrk.Floor)
	}
	return slices.DeleteFunc(out, func(s *stats) bool { return s == nil })
}

// errorCount is every error of a result's measurements, and of the profile windows.
func (r *result) errorCount() int64 {
	var n int64
	for _, s := range append(r.allStats(), r.ProfileWindow, r.BareProfileWindow) {
		if s != nil {
			n += s.Errors
		}
	}
	return n
}

// disturbed: a measurement during which other processes used more than this share of the
// machine is flagged; its figures (and any ratio built on them) are not to be trusted.
const disturbed = 0.10

// otherCPU is the larger share of the machine other processes used during the run's
// measurements (-1 unknown).
func (r *result) otherCPU() float64 {
	o := -1.0
	for _, s := range r.allStats() {
		o = max(o, s.OtherCPU)
	}
	return o
}

// fsyncOf is the fsync mode of a result's phase.
func fsyncOf(r *result) string {
	return strings.TrimPrefix(strings.TrimPrefix(r.Phase, "fsync="), "store=")
}

// floorWords says what the floor does per request under an fsync mode.
func floorWords(mode string) string {
	if mode == "nats" {
		return "one JetStream commit per request"
	}
	if mode == "interval" {
		return "one plain Badger transaction per request, not synced"
	}
	return "one synced plain Badger transaction per request"
}

func pct(f float64) string {
	if f < 0 {
		return "?"
	}
	return fmt.Sprintf("%.0f%%", f*100)
}

// cpuUS is a server's CPU per request, or "?" when it was not measured.
// switchesText is a window's context switches per request, the server's then the generator's
// ("?" unknown).
func switchesText(s *stats) string {
	f := func(v float64) string {
		if v <= 0 {
			return "?"
		}
		return fmt.Sprintf("%.2f", v)
	}
	return f(s.ServerSwitches) + " / " + f(s.GeneratorSwitches)
}

func cpuUS(us float64) string {
	if us <= 0 {
		return "?"
	}
	return fmt.Sprintf("%.1f", us)
}

func sampleOf(s *stats) []string {
	if s == nil {
		return nil
	}
	return s.ErrorSamples
}

// summaryTable renders every run as one table (text for the terminal, markdown for README):
// the bench's generator's figures, then wrk's.
func summaryTable(rep *report, markdown bool) string {
	var b bytes.Buffer
	cols := []string{"fsync", "case", "conns", "mode", "req/s", "p50 ms", "p99 ms", "errors", "bare req/s", "ratio",
		"floor req/s", "gateway/floor", "wrk req/s", "wrk bare", "wrk ratio", "wrk floor", "wrk gateway/floor", "delivered/sent", "other CPU"}
	var tw *tabwriter.Writer
	line := func(cells []string) {
		if markdown {
			fmt.Fprintf(&b, "| %s |\n", strings.Join(cells, " | "))
		} else {
			fmt.Fprintf(tw, "%s\t\n", strings.Join(cells, "\t"))
		}
	}
	if !markdown {
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	}
	line(cols)
	if markdown {
		seps := make([]string, len(cols))
		for i := range seps {
			seps[i] = "---"
			if i >= 2 && i != 3 && i != len(cols)-1 {
				seps[i] = "---:"
			}
		}
		line(seps)
	}
	num := func(s *stats) string {
		if s == nil {
			return ""
		}
		return fmt.Sprintf("%.0f", s.RPS)
	}
	// A ratio measured in rounds: the median, then the rounds' lowest-highest.
	ratio := func(f *figures, name string, v float64) string {
		if v <= 0 {
			return ""
		}
		if rg, ok := f.RatioRanges[name]; ok && len(f.Rounds) > 1 {
			return fmt.Sprintf("%.3f (%.2f-%.2f)", v, rg[0], rg[1])
		}
		return fmt.Sprintf("%.3f", v)
	}
	for _, r := range rep.Results {
		if r.Skipped != "" || r.Gateway == nil {
			continue
		}
		mode := r.Mode
		if r.Mode == "fixed-rate" {
			mode = fmt.Sprintf("fixed %.0f/s", r.Gateway.TargetRPS)
			if r.RateBasis == rateBasisFloor {
				mode += " (floor's)"
			}
		} else if r.Sweep {
			mode = "closed (sweep)"
		}
		del := ""
		if d := r.Delivery; d != nil {
			del = fmt.Sprintf("%d/%d", d.Delivered, d.OK)
		}
		w := r.Wrk
		if w == nil {
			w = &figures{}
		}
		g := r.Gateway
		line([]string{fsyncOf(r), r.Case, fmt.Sprint(r.Conns), mode, fmt.Sprintf("%.0f", g.RPS),
			fmt.Sprintf("%.3f", g.P50), fmt.Sprintf("%.3f", g.P99), fmt.Sprint(r.errorCount()),
			num(r.Bare), ratio(&r.figures, "ratio", r.Ratio), num(r.Floor), ratio(&r.figures, "gateway_floor_ratio", r.GatewayFloorRatio),
			num(w.Gateway), num(w.Bare), ratio(w, "ratio", w.Ratio), num(w.Floor), ratio(w, "gateway_floor_ratio", w.GatewayFloorRatio), del, pct(r.otherCPU())})
	}
	if tw != nil {
		tw.Flush()
	}
	return b.String()
}

// skippedLines lists the skipped cases, once each.
func skippedLines(rep *report) []string {
	seen := map[string]bool{}
	var out []string
	for _, r := range rep.Results {
		if r.Skipped == "" || seen[r.Case] {
			continue
		}
		seen[r.Case] = true
		out = append(out, fmt.Sprintf("%s: %s", r.Case, r.Skipped))
	}
	return out
}

func printSummary(w io.Writer, rep *report) {
	fmt.Fprintf(w, "\n== summary (%s, gateway %s)\n", rep.Finished.Sub(rep.Started).Round(time.Second), rep.Gateway)
	fmt.Fprint(w, summaryTable(rep, false))
	for _, s := range targetLines(rep) {
		fmt.Fprintf(w, "target   %s\n", s)
	}
	for _, s := range skippedLines(rep) {
		fmt.Fprintf(w, "skipped  %s\n", s)
	}
	for _, f := range rep.Failures {
		fmt.Fprintf(w, "FAILED   %s\n", f)
	}
	if rep.OK {
		fmt.Fprintln(w, "OK: no errors, no message lost")
	}
}

// The README's figures live between these markers; a run replaces what is between its pair.
const (
	readmeBegin      = "<!-- figures:begin (written by bench run --readme) -->"
	readmeEnd        = "<!-- figures:end -->"
	readmeScaleBegin = "<!-- scale:begin (written by bench scale --readme) -->"
	readmeScaleEnd   = "<!-- scale:end -->"
)

func updateReadme(path string, rep *report) error {
	return replaceBlock(path, readmeBegin, readmeEnd, figuresMarkdown(rep))
}

// replaceBlock replaces the text between begin and end in the file.
func replaceBlock(path, begin, end, content string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i, j := bytes.Index(old, []byte(begin)), bytes.Index(old, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s: no %q ... %q block", path, begin, end)
	}
	var b bytes.Buffer
	b.Write(old[:i+len(begin)])
	b.WriteString("\n")
	b.WriteString(content)
	b.Write(old[j:])
	return os.WriteFile(path, b.Bytes(), 0o644)
}

func figuresMarkdown(rep *report) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run %s UTC (%s), gateway `%s`, on %s; Go %s.\n\n", rep.Started.Format("2006-01-02 15:04"),
		rep.Finished.Sub(rep.Started).Round(time.Second), rep.Gateway, rep.Machine, rep.Machine.Go)
	fmt.Fprintf(&b, "Command: `%s`. Load average when it started: %s (anything near or above 2 on 2 cores means\nother work shared the machine and the figures are noisy).\n\n", strings.TrimSpace(rep.Command), rep.Machine.Load)
	b.WriteString(summaryTable(rep, true))
	if hasFloor(rep) {
		b.WriteString("\nfloor: the bare server making one commit per request to plain Badger (its default options, one transaction per request, concurrent ones batched by Badger; synced per commit with batch, not synced with interval) before answering; gateway/floor: the gateway's req/s over it. wrk: the same measurements with wrk (-t1, the same connections, the case's requests from a Lua script); of the two ratios the lower counts.\n")
	}
	if t := cpuMarkdown(rep); t != "" {
		b.WriteString(t)
	}
	if t := targetLines(rep); len(t) > 0 {
		b.WriteString("\nTargets (DESIGN.md section 8; reported, not enforced):\n\n")
		for _, l := range t {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	if s := skippedLines(rep); len(s) > 0 {
		b.WriteString("\nSkipped (route not served yet by this gateway):\n\n")
		for _, l := range s {
			fmt.Fprintf(&b, "- %s\n", l)
		}
	}
	if len(rep.Failures) > 0 {
		b.WriteString("\nFailures:\n\n")
		for _, f := range rep.Failures {
			fmt.Fprintf(&b, "- %s\n", f)
		}
	}
	fmt.Fprintf(&b, "\nFull results: `bench/results/%s`\n", filepath.Base(resultsPath("", rep.Started, "")))
	return b.String()
}

func hasFloor(rep *report) bool {
	for _, r := range rep.Results {
		if r.Floor != nil && r.Skipped == "" {
			return true
		}
	}
	return false
}

// targetCheck is one of DESIGN.md section 8's figures, checked against this run. Speed targets are
// reported, never failed on: absolute speed depends on the machine and its load.
type targetCheck struct {
	Target    string  `json:"target"`
	Got       float64 `json:"got"`
	Met       bool    `json:"met"`
	Disturbed bool    `json:"disturbed,omitempty"` // other processes took over 10% of the machine meanwhile
	// Generators: which measured it ("go", "go+wrk": the lower of the two counts).
	Generators string `json:"generators,omitempty"`
	// For a target on a case that writes durably: the floor's req/s over bare's in the same
	// run, under FloorFsync (what a server doing nothing but the commit reached).
	Floor      float64 `json:"floor_ratio,omitempty"`
	FloorFsync string  `json:"floor_fsync,omitempty"`
	// Rounds: a ratio measured in rounds (rounds.go), Got the median of the counted
	// generator's rounds' ratios, Lowest and Highest that generator's rounds' lowest and highest.
	Rounds  int     `json:"rounds,omitempty"`
	Lowest  float64 `json:"lowest,omitempty"`
	Highest float64 `json:"highest,omitempty"`
}

// Targets of DESIGN.md section 8.
const (
	targetSendFloor     = 0.8  // sustained send over the floor, both fsync modes
	targetSendBare      = 0.5  // sustained send over bare, --fsync interval
	targetCPUus         = 50.0 // gateway CPU per accepted and delivered message, the sim apart
	targetRouteFloor    = 0.8  // webhook route over the floor
	targetWebhookFloor  = 0.5  // webhook end to end (sustained) over the floor
	targetReadBare      = 0.9  // validate, client status over bare, both generators
	targetFixedP99ms    = 20.0 // accept p99 at 50 % of the closed-loop peak, open loop
	targetFixedP99Floor = 1.5  // the same p99 over the floor's at the same rate (issue 32)
	targetFixedFraction = 0.5
)

// checkTargets evaluates the targets whose runs happened.
func checkTargets(rep *report) []targetCheck {
	var out []targetCheck
	find := func(phase, caseID string, conns int, mode string) *result {
		for _, r := range rep.Results {
			if r.Phase == phase && r.CaseID == caseID && (conns == 0 || r.Conns == conns) && r.Mode == mode && r.Gateway != nil && r.Skipped == "" {
				return r
			}
		}
		return nil
	}
	// ratio is a ratio target's figure (the lower generator's) with its rounds' range.
	ratio := func(t targetCheck, r *result, get func(*figures) float64) targetCheck {
		v, f := r.countedOf(get)
		t.Got = v
		if vs := valuesOf(f.Rounds, get); len(f.Rounds) > 1 && len(vs) > 0 {
			t.Rounds, t.Lowest, t.Highest = len(f.Rounds), slices.Min(vs), slices.Max(vs)
		}
		return t
	}
	add := func(t targetCheck, r *result) {
		t.Disturbed = r.otherCPU() > disturbed
		t.Generators = "go"
		if r.Wrk != nil && r.Wrk.Gateway != nil {
			t.Generators = "go+wrk"
		}
		if r.counted(func(f *figures) float64 { return f.FloorRatio }) > 0 {
			t.Floor, t.FloorFsync = r.counted(func(f *figures) float64 { return f.FloorRatio }), fsyncOf(r)
		}
		out = append(out, t)
	}
	drained := func(r *result, limit float64) bool {
		ok := r.DrainSeconds <= limit
		if r.Wrk != nil && r.Wrk.DeliveredRPS > 0 {
			ok = ok && r.Wrk.DrainSeconds <= limit
		}
		return ok
	}
	// Sustained: accepted AND delivered in the same window, the backlog drained in time.
	for _, phase := range []string{"fsync=batch", "fsync=interval"} {
		r := find(phase, "send", 64, "closed")
		if r == nil || r.Bare == nil {
			continue
		}
		name := "v1 send, " + phase
		if get := func(f *figures) float64 { return f.SustainedFloorRatio }; r.counted(get) > 0 {
			t := ratio(targetCheck{Target: fmt.Sprintf("%s: sustained at 64 conns >= %.2f of the floor, backlog drained within 2 s", name, targetSendFloor)}, r, get)
			t.Met = t.Got >= targetSendFloor && drained(r, 2)
			add(t, r)
		}
		if phase == "fsync=interval" {
			if get := func(f *figures) float64 { return f.SustainedRatio }; r.counted(get) > 0 {
				t := ratio(targetCheck{Target: fmt.Sprintf("%s: sustained at 64 conns >= %.2f of bare", name, targetSendBare)}, r, get)
				t.Met = t.Got >= targetSendBare && drained(r, 2)
				add(t, r)
			}
		}
		if c := r.CPU; c != nil && c.GatewayUS > 0 && c.Sent > 0 {
			add(targetCheck{Target: fmt.Sprintf("%s: gateway CPU per accepted and delivered message <= %.0f µs (the sim apart: %.1f µs)", name, targetCPUus, c.SimUS),
				Got: c.GatewayUS, Met: c.GatewayUS <= targetCPUus}, r)
		}
	}
	if r := find("fsync=batch", "webhook-route", 64, "closed"); r != nil && r.Bare != nil {
		if get := func(f *figures) float64 { return f.GatewayFloorRatio }; r.counted(get) > 0 {
			t := ratio(targetCheck{Target: fmt.Sprintf("webhook route: at 64 conns >= %.2f of the floor", targetRouteFloor)}, r, get)
			t.Met = t.Got >= targetRouteFloor
			add(t, r)
		}
	}
	if r := find("fsync=batch", "webhook", 64, "closed"); r != nil && r.Bare != nil {
		if get := func(f *figures) float64 { return f.SustainedFloorRatio }; r.counted(get) > 0 {
			t := ratio(targetCheck{Target: fmt.Sprintf("webhook end to end: sustained at 64 conns >= %.2f of the floor, backlog drained within 60 s", targetWebhookFloor)}, r, get)
			t.Met = t.Got >= targetWebhookFloor && drained(r, 60)
			add(t, r)
		}
	}
	for _, c := range []struct{ id, name string }{{"validate", "validate"}, {"status", "client status"}} {
		if r := find("fsync=batch", c.id, 64, "closed"); r != nil && r.Bare != nil {
			t := ratio(targetCheck{Target: fmt.Sprintf("%s: at 64 conns >= %.2f of bare (the lower of both generators)", c.name, targetReadBare)}, r, func(f *figures) float64 { return f.Ratio })
			t.Met = t.Got >= targetReadBare
			add(t, r)
		}
	}
	for _, r := range rep.Results {
		if r.Phase != "fsync=batch" || r.CaseID != "send" || r.Mode != "fixed-rate" || r.Gateway == nil || r.Skipped != "" {
			continue
		}
		if r.RateBasis != rateBasisFloor { // "" in results written before the basis was recorded
			add(targetCheck{Target: fmt.Sprintf("v1 send, fsync=batch: accept p99 < %.0f ms at %.0f req/s (open loop, %.0f s)", targetFixedP99ms, r.Gateway.TargetRPS, rep.rateSeconds()),
				Got: r.Gateway.P99, Met: r.Gateway.P99 < targetFixedP99ms && r.Gateway.Missed == 0}, r)
		}
		if f := r.Floor; f != nil && f.P99 > 0 {
			floorNote := ""
			if f.Missed > 0 {
				floorNote = fmt.Sprintf("; the floor left %d scheduled requests unsent: it cannot carry this rate, so this compares nothing", f.Missed)
			}
			add(targetCheck{Target: fmt.Sprintf("v1 send, fsync=batch: accept p99 at %.0f req/s (open loop, %.0f s, %s) <= %.1f x the floor's at the same rate (%.3f ms%s)",
				r.Gateway.TargetRPS, rep.rateSeconds(), rateBasisWords(r.RateBasis), targetFixedP99Floor, f.P99, floorNote),
				Got: r.Gateway.P99 / f.P99, Met: r.Gateway.P99 <= targetFixedP99Floor*f.P99 && r.Gateway.Missed == 0 && f.Missed == 0}, r)
		}
	}
	return out
}

// rateBasisWords says which closed-loop peak a fixed rate is a fraction of.
func rateBasisWords(basis string) string {
	if basis == rateBasisFloor {
		return "a share of the floor's peak, the lower"
	}
	return "a share of the gateway's peak"
}

// rateSeconds is the fixed-rate run's measured time.
func (rep *report) rateSeconds() float64 {
	if d, ok := rep.Config["rate_duration"].(string); ok {
		if v, err := time.ParseDuration(d); err == nil {
			return v.Seconds()
		}
	}
	return 0
}

func targetLines(rep *report) []string {
	var out []string
	for _, t := range rep.Targets {
		mark := "met"
		if !t.Met {
			mark = "NOT met"
			if t.Floor > 0 {
				mark += fmt.Sprintf("; a bare server with %s: %.3f of bare", floorWords(t.FloorFsync), t.Floor)
			}
		}
		if t.Rounds > 1 {
			mark = fmt.Sprintf("median of %d rounds, lowest-highest %.3f-%.3f; %s", t.Rounds, t.Lowest, t.Highest, mark)
		}
		if t.Generators == "go" {
			mark += "; the bench's generator only (no wrk)"
		}
		if t.Disturbed {
			mark += "; measured while other processes used the machine: not conclusive"
		}
		out = append(out, fmt.Sprintf("%s: %.3f (%s)", t.Target, t.Got, mark))
	}
	return out
}

// cpuMarkdown is the CPU-per-message table of every profiled run (README).
func cpuMarkdown(rep *report) string {
	var b strings.Builder
	for _, r := range rep.Results {
		c := r.CPU
		if c == nil {
			continue
		}
		if c.Sent == 0 {
			fmt.Fprintf(&b, "\nCPU per request, %s %s at %d conns: %.2f s of the gateway's CPU over %.0f s, %d answered: **%.1f µs per request**. By component, from a profile taken in a window of its own just before (`%s`):\n\n",
				fsyncOf(r), r.Case, r.Conns, c.CPUSeconds, c.WindowSeconds, c.Accepted, c.PerMessageUS, c.Profile)
		} else {
			fmt.Fprintf(&b, "\nCPU per message, %s %s at %d conns: %.2f s of the gateway's CPU over %.0f s, %d accepted and %d sent: **%.1f µs per message without the sim** (%.1f with it); %.1f storage writes and %.0f bytes per message. By component, from a profile taken in a window of its own just before (`%s`):\n\n",
				fsyncOf(r), r.Case, r.Conns, c.CPUSeconds, c.WindowSeconds, c.Accepted, c.Sent, c.GatewayUS, c.PerMessageUS, c.Writes, c.WriteBytes, c.Profile)
		}
		b.WriteString("| component | share | µs per message |\n|---|---:|---:|\n")
		for _, comp := range c.Components {
			if comp.Sim {
				continue
			}
			fmt.Fprintf(&b, "| %s | %.1f %% | %.1f |\n", comp.Name, comp.Share*100, comp.MicrosPerMsg)
		}
		fmt.Fprintf(&b, "| **the gateway** | | **%.1f** |\n", c.GatewayUS)
		for _, comp := range c.Components {
			if comp.Sim {
				fmt.Fprintf(&b, "| %s, apart | %.1f %% | %.1f |\n", comp.Name, comp.Share*100, comp.MicrosPerMsg)
			}
		}
		if c.Sent > 0 {
			b.WriteString(roundsCPU(r))
		}
	}
	return b.String()
}

// roundsCPU is a line of the gateway's CPU a request in each round's window beside the
// window's rate, by generator ("" without rounds): the figure above is one window's, and a
// message's CPU falls as the rate rises (more requests share each wake-up, log round and
// delivery burst), so the rounds show how much of it is the window's rate (bench/README.md,
// "Twenty-first look").
func roundsCPU(r *result) string {
	var parts []string
	for _, g := range r.inRounds() {
		var each []string
		for _, rd := range g.f.Rounds {
			if s := rd.Gateway; s != nil && s.ServerCPUUS > 0 {
				each = append(each, fmt.Sprintf("%.1f at %.0f req/s", s.ServerCPUUS, s.RPS))
			}
		}
		if len(each) > 0 {
			parts = append(parts, g.name+" "+strings.Join(each, ", "))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "\nThe gateway's CPU a request in each round's window (µs, its own /proc CPU time, the sim included), beside the window's rate: " +
		strings.Join(parts, "; ") + ".\n"
}
