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
	Phase         string  `json:"phase"` // fsync=batch | fsync=interval
	Case          string  `json:"case"`
	CaseID        string  `json:"case_id"`
	Conns         int     `json:"conns"`
	Mode          string  `json:"mode"` // closed | fixed-rate
	Sweep         bool    `json:"sweep,omitempty"`
	Skipped       string  `json:"skipped,omitempty"`
	Failure       string  `json:"failure,omitempty"`
	ResponseBytes int     `json:"response_bytes,omitempty"`
	Gateway       *stats  `json:"gateway,omitempty"`
	Bare          *stats  `json:"bare,omitempty"`
	Ratio         float64 `json:"ratio,omitempty"` // gateway req/s over bare req/s
	// For the cases that write durably: the bare server again, making one Badger commit per
	// request (the phase's fsync mode) before answering (the floor), its req/s over bare's,
	// and the gateway's req/s over the floor's.
	Floor             *stats    `json:"floor,omitempty"`
	FloorRatio        float64   `json:"floor_ratio,omitempty"`
	GatewayFloorRatio float64   `json:"gateway_floor_ratio,omitempty"`
	Delivery          *delivery `json:"delivery,omitempty"`
	// For the cases that deliver: how long after the measured window the last message reached
	// the sim (the backlog), the delivered rate over the window plus that drain, and the
	// sustained ratio: the lesser of accepted and delivered rates over bare (DESIGN.md 8).
	DrainSeconds   float64  `json:"drain_seconds,omitempty"`
	DeliveredRPS   float64  `json:"delivered_rps,omitempty"`
	SustainedRatio float64  `json:"sustained_ratio,omitempty"`
	SettleSeconds  float64  `json:"settle_seconds"` // waited for an idle gateway before the measurements
	Notes          []string `json:"notes,omitempty"`
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
	Failures []string       `json:"failures,omitempty"`
	OK       bool           `json:"ok"`
}

func newReport(command string, quick bool, gw string) *report {
	return &report{Started: time.Now().UTC(), Command: command, Quick: quick, Gateway: gw, Machine: thisMachine(), OK: true}
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
		mode += fmt.Sprintf(", fixed rate %.0f req/s (open loop)", r.Gateway.TargetRPS)
	}
	fmt.Fprintf(w, "\n-- %s  %s  (%s)\n", r.Phase, r.Case, mode)
	if r.Skipped != "" {
		fmt.Fprintf(w, "   skipped: %s\n", r.Skipped)
		return
	}
	if r.Gateway != nil {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "   server\treq/s\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\terrors\tother CPU\t")
		row := func(name string, s *stats) {
			fmt.Fprintf(tw, "   %s\t%.0f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%d\t%s\t\n", name, s.RPS, s.P50, s.P90, s.P99, s.P999, s.Max, s.Errors, pct(s.OtherCPU))
		}
		row("gateway", r.Gateway)
		if r.Bare != nil {
			row("bare", r.Bare)
		}
		if r.Floor != nil {
			row("floor", r.Floor)
		}
		tw.Flush()
	}
	var notes []string
	if r.Bare != nil {
		notes = append(notes, fmt.Sprintf("ratio %.3f", r.Ratio))
	}
	if r.Floor != nil {
		notes = append(notes, fmt.Sprintf("floor (bare + %s) %.3f of bare, gateway %.3f of the floor",
			floorWords(fsyncOf(r)), r.FloorRatio, r.GatewayFloorRatio))
	}
	if r.DeliveredRPS > 0 {
		notes = append(notes, fmt.Sprintf("delivered %.0f/s (backlog drained %.2fs after the window)", r.DeliveredRPS, r.DrainSeconds))
		if r.SustainedRatio > 0 {
			notes = append(notes, fmt.Sprintf("sustained ratio %.3f", r.SustainedRatio))
		}
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
	for _, n := range r.Notes {
		fmt.Fprintf(w, "   note: %s\n", n)
	}
	if r.Failure != "" {
		fmt.Fprintf(w, "   FAILED: %s\n", r.Failure)
	}
	for _, s := range slices.Concat(sampleOf(r.Gateway), sampleOf(r.Bare), sampleOf(r.Floor)) {
		fmt.Fprintf(w, "   error: %s\n", s)
	}
}

// disturbed: a measurement during which other processes used more than this share of the
// machine is flagged; its figures (and any ratio built on them) are not to be trusted.
const disturbed = 0.10

// otherCPU is the larger share of the machine other processes used during the run's
// measurements (-1 unknown).
func (r *result) otherCPU() float64 {
	o := -1.0
	for _, s := range []*stats{r.Gateway, r.Bare, r.Floor} {
		if s != nil {
			o = max(o, s.OtherCPU)
		}
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
		return "one commit per request, synced every 100 ms"
	}
	return "one synced commit per request"
}

func pct(f float64) string {
	if f < 0 {
		return "?"
	}
	return fmt.Sprintf("%.0f%%", f*100)
}

func sampleOf(s *stats) []string {
	if s == nil {
		return nil
	}
	return s.ErrorSamples
}

// summaryTable renders every run as one table (text for the terminal, markdown for README).
func summaryTable(rep *report, markdown bool) string {
	var b bytes.Buffer
	cols := []string{"fsync", "case", "conns", "mode", "req/s", "p50 ms", "p90 ms", "p99 ms", "p99.9 ms", "errors", "bare req/s", "ratio", "floor req/s", "gateway/floor", "delivered/sent", "other CPU"}
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
	for _, r := range rep.Results {
		if r.Skipped != "" || r.Gateway == nil {
			continue
		}
		fsync := fsyncOf(r)
		mode := r.Mode
		if r.Mode == "fixed-rate" {
			mode = fmt.Sprintf("fixed %.0f/s", r.Gateway.TargetRPS)
		} else if r.Sweep {
			mode = "closed (sweep)"
		}
		bare, ratio := "", ""
		if r.Bare != nil {
			bare, ratio = fmt.Sprintf("%.0f", r.Bare.RPS), fmt.Sprintf("%.3f", r.Ratio)
		}
		floor, overFloor := "", ""
		if r.Floor != nil {
			floor, overFloor = fmt.Sprintf("%.0f", r.Floor.RPS), fmt.Sprintf("%.3f", r.GatewayFloorRatio)
		}
		del := ""
		if d := r.Delivery; d != nil {
			del = fmt.Sprintf("%d/%d", d.Delivered, d.OK)
		}
		g := r.Gateway
		line([]string{fsync, r.Case, fmt.Sprint(r.Conns), mode, fmt.Sprintf("%.0f", g.RPS),
			fmt.Sprintf("%.3f", g.P50), fmt.Sprintf("%.3f", g.P90), fmt.Sprintf("%.3f", g.P99), fmt.Sprintf("%.3f", g.P999),
			fmt.Sprint(g.Errors + errorsOf(r.Bare) + errorsOf(r.Floor)), bare, ratio, floor, overFloor, del, pct(r.otherCPU())})
	}
	if tw != nil {
		tw.Flush()
	}
	return b.String()
}

func errorsOf(s *stats) int64 {
	if s == nil {
		return 0
	}
	return s.Errors
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
		b.WriteString("\nfloor: the bare server making one Badger commit per request (the row's fsync mode) before answering; gateway/floor: the gateway's req/s over it.\n")
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
	// For a ratio target on a case that writes durably: the floor's req/s over bare's in the
	// same run, under FloorFsync (what a server doing nothing but the commit reached).
	Floor      float64 `json:"floor_ratio,omitempty"`
	FloorFsync string  `json:"floor_fsync,omitempty"`
}

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
	ratio := func(name, phase, caseID string, least float64) {
		if r := find(phase, caseID, 64, "closed"); r != nil && r.Bare != nil {
			out = append(out, withFloor(targetCheck{Target: fmt.Sprintf("%s: ratio at 64 conns >= %.2f", name, least), Got: r.Ratio, Met: r.Ratio >= least, Disturbed: r.otherCPU() > disturbed}, r))
		}
	}
	// Sustained: accepted AND delivered in the same window, the backlog drained within 2 s.
	sustained := func(name, phase, caseID string, least, drain float64) {
		if r := find(phase, caseID, 64, "closed"); r != nil && r.Bare != nil && r.SustainedRatio > 0 {
			out = append(out, withFloor(targetCheck{Target: fmt.Sprintf("%s: sustained ratio at 64 conns >= %.2f, backlog drained within %.0f s", name, least, drain),
				Got: r.SustainedRatio, Met: r.SustainedRatio >= least && r.DrainSeconds <= drain, Disturbed: r.otherCPU() > disturbed}, r))
		}
	}
	sustained("v1 send, fsync=batch", "fsync=batch", "send", 0.5, 2)
	sustained("v1 send, fsync=interval", "fsync=interval", "send", 0.6, 2)
	ratio("validate", "fsync=batch", "validate", 0.85)
	ratio("client status", "fsync=batch", "status", 0.85)
	ratio("webhook route", "fsync=batch", "webhook-route", 0.6)
	sustained("webhook end to end", "fsync=batch", "webhook", 0.35, 60)
	if r := find("fsync=batch", "send", 0, "fixed-rate"); r != nil {
		out = append(out, targetCheck{Target: fmt.Sprintf("v1 send, fsync=batch: p99 < 10 ms at %.0f req/s (fixed rate)", r.Gateway.TargetRPS), Got: r.Gateway.P99, Met: r.Gateway.P99 < 10 && r.Gateway.Missed == 0, Disturbed: r.otherCPU() > disturbed})
	}
	return out
}

// withFloor notes the floor of r (when it was measured) on a ratio target.
func withFloor(t targetCheck, r *result) targetCheck {
	if r.Floor != nil && r.FloorRatio > 0 {
		t.Floor, t.FloorFsync = r.FloorRatio, fsyncOf(r)
	}
	return t
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
		if t.Disturbed {
			mark += "; measured while other processes used the machine: not conclusive"
		}
		out = append(out, fmt.Sprintf("%s: %.3f (%s)", t.Target, t.Got, mark))
	}
	return out
}
