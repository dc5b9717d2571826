package main

import (
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRouteMissingOnlyForNoSuchRoute(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   bool
	}{
		{404, `{"success":false,"error":"no such route","code":"not_found"}`, true},
		{404, `{"success":false,"error":"no such session","code":"session_not_found"}`, false},
		{404, `not json`, false},
		{200, `{"code":"not_found"}`, false},
		{405, `{"code":"method_not_allowed"}`, false},
	} {
		if got := routeMissing(tc.status, []byte(tc.body)); got != tc.want {
			t.Errorf("routeMissing(%d, %s) = %v", tc.status, tc.body, got)
		}
	}
}

func TestParseProcMetrics(t *testing.T) {
	text := `# HELP go_goroutines Number of goroutines.
# TYPE go_goroutines gauge
go_goroutines 28
go_memstats_heap_alloc_bytes 2.5355928e+07
go_memstats_heap_alloc_bytes_total 99
go_memstats_heap_inuse_bytes 2.6812416e+07
gateway_http_requests_total{route="x",status="200"} 5
process_resident_memory_bytes 2.525184e+07 1700000000000
go_gc_duration_seconds{quantile="0.5"} 0.0008
go_gc_duration_seconds_count 2
`
	m, err := parseProcMetrics([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	want := procMetrics{HeapAlloc: 25355928, HeapInuse: 26812416, RSS: 25251840, Goroutines: 28, GCs: 2}
	if m != want {
		t.Fatalf("got %+v, want %+v", m, want)
	}
	if _, err := parseProcMetrics([]byte("go_goroutines 3\n")); err == nil {
		t.Fatal("missing metrics: want an error")
	}
	want.AfterGC = true
	per := perItem(want, procMetrics{HeapAlloc: want.HeapAlloc + 2000, HeapInuse: want.HeapInuse, RSS: want.RSS + 4000, Goroutines: 48}, 10)
	if per != (procMetrics{HeapAlloc: 200, RSS: 400, Goroutines: 2}) {
		t.Fatalf("per item %+v", per)
	}
}

func TestUpdateReadmeReplacesOnlyTheFiguresBlock(t *testing.T) {
	path := filepath.Join(t.TempDir(), "README.md")
	before, after := "# bench\n\nmethod text\n\n", "\n\nmore text\n"
	if err := os.WriteFile(path, []byte(before+readmeBegin+"\nold figures\n"+readmeEnd+after), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := newReport("bench run", false, "gateway v1")
	rep.Finished = rep.Started.Add(time.Minute)
	rep.add(&result{Phase: "fsync=batch", Case: "validate", Conns: 64, Mode: "closed",
		figures: figures{Gateway: &stats{RPS: 40000, P50: 1, P90: 2, P99: 3, P999: 4}, Bare: &stats{RPS: 50000}, Ratio: 0.8}})
	rep.add(&result{Phase: "fsync=batch", Case: "webhook", Conns: 64, Skipped: "POST /api/ecom/webhook is not served yet (404)"})
	for range 2 {
		if err := updateReadme(path, rep); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := os.ReadFile(path)
	s := string(b)
	if !strings.HasPrefix(s, before+readmeBegin+"\n") || !strings.HasSuffix(s, readmeEnd+after) || strings.Contains(s, "old figures") {
		t.Fatalf("README outside the block changed, or the block was not replaced:\n%s", s)
	}
	for _, want := range []string{"| batch | validate | 64 | closed | 40000 |", "0.800", "webhook: POST /api/ecom/webhook is not served yet", "gateway v1"} {
		if !strings.Contains(s, want) {
			t.Fatalf("README lacks %q:\n%s", want, s)
		}
	}
	if err := os.WriteFile(path, []byte("no markers"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := updateReadme(path, rep); err == nil {
		t.Fatal("README without markers: want an error")
	}
}

func TestReportFailsOnCaseFailure(t *testing.T) {
	rep := newReport("x", true, "v")
	rep.add(&result{Case: "validate", Skipped: "not served"})
	if !rep.OK {
		t.Fatal("a skipped case is not a failure")
	}
	rep.add(&result{Case: "v1 send", Failure: "error responses"})
	if rep.OK || len(rep.Failures) != 1 {
		t.Fatalf("ok %v failures %v", rep.OK, rep.Failures)
	}
}

func TestParseRunFlags(t *testing.T) {
	o, err := parseRun([]string{"--quick", "--users", "5"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if o.duration != 2*time.Second || o.warmup != 500*time.Millisecond || o.users != 5 || o.results != "" || o.readme != "" {
		t.Fatalf("quick defaults: %+v", o)
	}
	o, err = parseRun([]string{"--quick", "--results", "out"}, io.Discard)
	if err != nil || o.results != "out" || o.users != 20 {
		t.Fatalf("quick with --results: %+v %v", o, err)
	}
	o, err = parseRun(nil, io.Discard)
	if err != nil || o.duration != 10*time.Second || o.users != 100 || len(o.cases) != len(benchCases) || len(o.sweep) != 4 || o.results == "" ||
		o.rateFraction != 0.5 || o.rateDuration != time.Minute || o.wrk != "auto" || !o.profile {
		t.Fatalf("defaults: %+v %v", o, err)
	}
	for _, bad := range [][]string{{"--cases", "nope"}, {"--fsync", "sometimes"}, {"--conns", "0"}, {"--sweep", "1,x"}, {"--users", "100000"}, {"extra"}} {
		if _, err := parseRun(bad, io.Discard); err == nil {
			t.Errorf("%v: want an error", bad)
		}
	}
	if _, err := parseScale([]string{"--sessions", "0"}, io.Discard); err == nil {
		t.Error("scale --sessions 0: want an error")
	}
}

// floorReport is a run with the floor measured on v1 send under both fsync modes (by both
// generators under batch), and on validate none (it does not write).
func floorReport() *report {
	rep := newReport("bench run", false, "gateway v1")
	rep.Finished = rep.Started.Add(time.Minute)
	batch := &result{Phase: "fsync=batch", Case: "v1 send", CaseID: "send", Conns: 64, Mode: "closed",
		figures: figures{Gateway: &stats{RPS: 20000}, Bare: &stats{RPS: 100000}, Floor: &stats{RPS: 30000, P50: 2, Errors: 1},
			DeliveredRPS: 20000, DrainSeconds: 0.1},
		Wrk: &figures{Gateway: &stats{RPS: 21000}, Bare: &stats{RPS: 150000}, Floor: &stats{RPS: 35000}, DeliveredRPS: 21000, DrainSeconds: 0.2},
		CPU: &cpuFigures{GatewayUS: 42, SimUS: 3, PerMessageUS: 45, Accepted: 100, Sent: 100, Components: []component{{Name: "HTTP", Share: 0.5, MicrosPerMsg: 22.5}, {Name: "sim (x)", Sim: true, Share: 0.07, MicrosPerMsg: 3}}}}
	batch.ratios()
	batch.Wrk.ratios()
	rep.add(batch)
	interval := &result{Phase: "fsync=interval", Case: "v1 send", CaseID: "send", Conns: 64, Mode: "closed",
		figures: figures{Gateway: &stats{RPS: 70000}, Bare: &stats{RPS: 100000}, Floor: &stats{RPS: 80000}, DeliveredRPS: 70000, DrainSeconds: 0.1}}
	interval.ratios()
	rep.add(interval)
	validate := &result{Phase: "fsync=batch", Case: "validate", CaseID: "validate", Conns: 64, Mode: "closed",
		figures: figures{Gateway: &stats{RPS: 50000}, Bare: &stats{RPS: 100000}}, Wrk: &figures{Gateway: &stats{RPS: 60000}, Bare: &stats{RPS: 150000}}}
	validate.ratios()
	validate.Wrk.ratios()
	rep.add(validate)
	rep.Targets = checkTargets(rep)
	return rep
}

func TestFloorInResultTableTargetsAndJSON(t *testing.T) {
	rep := floorReport()
	var out strings.Builder
	printResult(&out, rep.Results[0])
	for _, want := range []string{"   floor", "30000", "floor (wrk)", "35000",
		"floor (bare + one synced plain Badger transaction per request) 0.300 of bare, gateway 0.667 of the floor",
		"wrk: floor (bare + one synced plain Badger transaction per request) 0.233 of bare, gateway 0.600 of the floor",
		"CPU:", "42.0 without the sim"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printResult lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	printResult(&out, rep.Results[2])
	if strings.Contains(out.String(), "floor") {
		t.Errorf("a case without a floor prints one:\n%s", out.String())
	}

	md := summaryTable(rep, true)
	for _, want := range []string{
		"| bare req/s | ratio | floor req/s | gateway/floor | wrk req/s | wrk bare | wrk ratio | wrk floor | wrk gateway/floor | delivered/sent |",
		"| batch | v1 send | 64 | closed | 20000 | 0.000 | 0.000 | 1 | 100000 | 0.200 | 30000 | 0.667 | 21000 | 150000 | 0.140 | 35000 | 0.600 |",
		"| batch | validate | 64 | closed | 50000 | 0.000 | 0.000 | 0 | 100000 | 0.500 |  |  | 60000 | 150000 | 0.400 |  |  |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("summary table lacks %q:\n%s", want, md)
		}
	}
	fig := figuresMarkdown(rep)
	for _, want := range []string{"\nfloor: the bare server making one commit per request to plain Badger", "of the two ratios the lower counts",
		"**42.0 µs per message without the sim**", "| HTTP | 50.0 % | 22.5 |", "| sim (x), apart | 7.0 % | 3.0 |"} {
		if !strings.Contains(fig, want) {
			t.Errorf("README figures lack %q:\n%s", want, fig)
		}
	}

	lines := strings.Join(targetLines(rep), "\n")
	for _, want := range []string{
		// The lower of the two generators counts: wrk's 0.600 of the floor, not the Go generator's 0.667.
		"v1 send, fsync=batch: sustained at 64 conns >= 0.80 of the floor, backlog drained within 2 s: 0.600 (NOT met; a bare server with one synced plain Badger transaction per request: 0.233 of bare)",
		"v1 send, fsync=batch: gateway CPU per accepted and delivered message <= 50 µs (the sim apart: 3.0 µs): 42.000 (met)",
		"v1 send, fsync=interval: sustained at 64 conns >= 0.80 of the floor, backlog drained within 2 s: 0.875 (met; the bench's generator only (no wrk))",
		"v1 send, fsync=interval: sustained at 64 conns >= 0.50 of bare: 0.700 (met; the bench's generator only (no wrk))",
		"validate: at 64 conns >= 0.90 of bare (the lower of both generators): 0.400 (NOT met)",
	} {
		if !strings.Contains(lines, want) {
			t.Errorf("targets lack %q:\n%s", want, lines)
		}
	}

	b, err := json.Marshal(rep)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Results []struct {
			Floor             *stats   `json:"floor"`
			FloorRatio        float64  `json:"floor_ratio"`
			GatewayFloorRatio float64  `json:"gateway_floor_ratio"`
			Wrk               *figures `json:"wrk"`
		} `json:"results"`
		Targets []targetCheck `json:"targets"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if r := back.Results[0]; r.Floor == nil || r.Floor.RPS != 30000 || r.FloorRatio != 0.3 || r.GatewayFloorRatio == 0 || r.Wrk == nil || r.Wrk.Floor.RPS != 35000 {
		t.Fatalf("floor not in the JSON result: %+v", r)
	}
	if back.Results[2].Floor != nil || back.Targets[0].FloorFsync != "batch" || back.Targets[0].Generators != "go+wrk" {
		t.Fatalf("JSON targets or non-durable result wrong: %+v %+v", back.Results[2], back.Targets)
	}
}

// The open-loop runs: at a share of the gateway's peak, and, when the floor's peak is the
// lower, the gateway and the floor again at a share of the floor's, which is where their
// p99s are compared (a floor behind its schedule measures its own backlog).
func TestFixedRunsAndTheirTargets(t *testing.T) {
	runs := fixedRuns(0.5, 20000, &stats{RPS: 8000})
	if len(runs) != 2 || runs[0] != (fixedRun{rate: 10000, basis: rateBasisGateway}) || runs[1] != (fixedRun{rate: 4000, basis: rateBasisFloor, floor: true}) {
		t.Fatalf("floor slower than the gateway: %+v", runs)
	}
	for _, floor := range []*stats{nil, {RPS: 30000}} {
		if runs := fixedRuns(0.5, 20000, floor); len(runs) != 1 || runs[0] != (fixedRun{rate: 10000, basis: rateBasisGateway, floor: true}) {
			t.Fatalf("floor %+v: %+v", floor, runs)
		}
	}

	rep := newReport("bench run", false, "gateway v1")
	rep.Config = map[string]any{"rate_duration": "1m0s"}
	rep.add(&result{Phase: "fsync=batch", Case: "v1 send", CaseID: "send", Conns: 256, Mode: "fixed-rate", RateBasis: rateBasisGateway,
		figures: figures{Gateway: &stats{RPS: 10000, TargetRPS: 10000, P99: 30}}})
	rep.add(&result{Phase: "fsync=batch", Case: "v1 send", CaseID: "send", Conns: 256, Mode: "fixed-rate", RateBasis: rateBasisFloor,
		figures: figures{Gateway: &stats{RPS: 4000, TargetRPS: 4000, P99: 12}, Floor: &stats{RPS: 4000, TargetRPS: 4000, P99: 10}}})
	rep.Targets = checkTargets(rep)
	lines := strings.Join(targetLines(rep), "\n")
	for _, want := range []string{
		"v1 send, fsync=batch: accept p99 < 20 ms at 10000 req/s (open loop, 60 s): 30.000 (NOT met",
		"v1 send, fsync=batch: accept p99 at 4000 req/s (open loop, 60 s, a share of the floor's peak, the lower) <= 1.5 x the floor's at the same rate (10.000 ms): 1.200 (met",
	} {
		if !strings.Contains(lines, want) {
			t.Errorf("targets lack %q:\n%s", want, lines)
		}
	}
	if n := strings.Count(lines, "accept p99"); n != 2 {
		t.Errorf("want 2 accept p99 targets, got %d:\n%s", n, lines)
	}
	md := summaryTable(rep, true)
	if !strings.Contains(md, "| fixed 4000/s (floor's) |") {
		t.Errorf("summary table does not say the floor's share:\n%s", md)
	}
}

// The profile's own window is not measured, but its error answers are the run's: counted (the
// run fails on them) and shown, as the measured windows' are.
func TestProfileWindowErrorsCount(t *testing.T) {
	r := &result{Case: "v1 send", figures: figures{Gateway: &stats{Requests: 10, OK: 10}}}
	r.ProfileWindow = &stats{Requests: 10, OK: 8, Errors: 2, ErrorSamples: []string{"status 500: boom"}}
	if n := r.errorCount(); n != 2 {
		t.Fatalf("errorCount %d, want the profile window's 2", n)
	}
	var b strings.Builder
	printResult(&b, r)
	if !strings.Contains(b.String(), "error: status 500: boom") {
		t.Fatalf("the profile window's error not shown:\n%s", b.String())
	}
}

// Bare's profile window, likewise.
func TestBareProfileWindowErrorsCount(t *testing.T) {
	r := &result{Case: "validate", figures: figures{Gateway: &stats{Requests: 10, OK: 10}}}
	r.BareProfileWindow = &stats{Requests: 10, OK: 7, Errors: 3, ErrorSamples: []string{"status 502: bare"}}
	if n := r.errorCount(); n != 3 {
		t.Fatalf("errorCount %d, want bare's profile window's 3", n)
	}
	var b strings.Builder
	printResult(&b, r)
	if !strings.Contains(b.String(), "error: status 502: bare") {
		t.Fatalf("bare's profile window's error not shown:\n%s", b.String())
	}
}

// The README's CPU paragraph lists the gateway's CPU a request in each round's window, by
// generator, beside the window's rate; without rounds it lists none.
func TestCPUByRoundInTheFigures(t *testing.T) {
	rep := floorReport()
	if fig := figuresMarkdown(rep); strings.Contains(fig, "each round's window") {
		t.Fatalf("a run without rounds lists rounds' CPU:\n%s", fig)
	}
	r := rep.Results[0]
	r.Rounds = []round{
		{figures: figures{Gateway: &stats{RPS: 17984, ServerCPUUS: 69.9}}},
		{figures: figures{Gateway: &stats{RPS: 29709, ServerCPUUS: 40.9}}},
	}
	r.Wrk.Rounds = []round{
		{figures: figures{Gateway: &stats{RPS: 18216, ServerCPUUS: 74.3}}},
		{figures: figures{Gateway: &stats{RPS: 23025, ServerCPUUS: 58.5}}},
	}
	want := "The gateway's CPU a request in each round's window (µs, its own /proc CPU time, the sim included), beside the window's rate: " +
		"the bench's generator 69.9 at 17984 req/s, 40.9 at 29709 req/s; wrk 74.3 at 18216 req/s, 58.5 at 23025 req/s."
	if fig := figuresMarkdown(rep); !strings.Contains(fig, want) {
		t.Fatalf("README figures lack %q:\n%s", want, fig)
	}
}
