package httpapi

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gateway/gateway/engine"
)

// A send's phases run from one step reached to the next; a step not reached (an error before
// it, or an idempotent replay) gives its time to the phase before.
func TestSendPhasesSplitAtTheStepsReached(t *testing.T) {
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	ms := time.Millisecond
	all := sendTimes{keyed: at(2), trace: engine.SendTrace{Reserve: at(5), Commit: at(45), Committed: at(145)}}
	if got, want := all.phases(t0, at(150)), [nPhases]time.Duration{2 * ms, 3 * ms, 40 * ms, 100 * ms, 5 * ms}; got != want {
		t.Errorf("every step: %v, want %v", got, want)
	}
	keyOnly := sendTimes{keyed: at(120)}
	if got, want := keyOnly.phases(t0, at(130)), [nPhases]time.Duration{120 * ms, 10 * ms, 0, 0, 0}; got != want {
		t.Errorf("refused after the key: %v, want %v", got, want)
	}
	noAllowance := sendTimes{keyed: at(1), trace: engine.SendTrace{Commit: at(3), Committed: at(200)}}
	if got, want := noAllowance.phases(t0, at(201)), [nPhases]time.Duration{1 * ms, 2 * ms, 0, 197 * ms, 1 * ms}; got != want {
		t.Errorf("without a reservation step: %v, want %v", got, want)
	}
	if got, want := (&sendTimes{}).phases(t0, at(110)), [nPhases]time.Duration{110 * ms}; got != want {
		t.Errorf("no step: %v, want %v", got, want)
	}
}

// jsonLines are a JSON log's lines.
func jsonLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for line := range strings.SplitSeq(strings.TrimSpace(log), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// Every slow send is counted with its phases on /metrics; the first is logged with its
// phases, the next within 10 s only when twice as long as the longest logged, with the slow
// sends since the last line and their phases summed.
func TestSlowSendsCountedAndLoggedRateLimited(t *testing.T) {
	var buf bytes.Buffer // the report logs from the caller's goroutine
	reg := prometheus.NewRegistry()
	r, err := newSlowSends(reg, slog.New(slog.NewJSONHandler(&buf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	r.machine = func() []any { return []any{"load1", "1.00"} }
	r.gc = func(from, to time.Time) (int, time.Duration, time.Duration) {
		return 1, 4 * time.Millisecond, 4 * time.Millisecond
	}
	t0 := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	ms := time.Millisecond
	send := func(start, took time.Duration, p [nPhases]time.Duration) {
		r.slow("req-1", 3, t0.Add(start), t0.Add(start+took), p)
	}
	send(0, 300*ms, [nPhases]time.Duration{10 * ms, 0, 0, 280 * ms, 10 * ms})
	send(time.Second, 150*ms, [nPhases]time.Duration{140 * ms, 0, 0, 10 * ms, 0})    // within 10 s: counted
	send(2*time.Second, 700*ms, [nPhases]time.Duration{600 * ms, 0, 0, 100 * ms, 0}) // twice the longest: logged
	lines := jsonLines(t, buf.String())
	if len(lines) != 2 {
		t.Fatalf("%d lines, want 2: %v", len(lines), lines)
	}
	want := map[string]any{"level": "WARN", "took_ms": 300.0, "request_id": "req-1", "conn_request": 3.0, "key_ms": 10.0, "commit_ms": 280.0,
		"answer_ms": 10.0, "gc_pauses": 1.0, "gc_pause_max_ms": 4.0, "slow_sends": 1.0, "unlogged": 0.0, "sum_commit_ms": 280.0, "load1": "1.00"}
	for k, v := range want {
		if lines[0][k] != v {
			t.Errorf("first line: %s = %v, want %v (%v)", k, lines[0][k], v, lines[0])
		}
	}
	want = map[string]any{"took_ms": 700.0, "key_ms": 600.0, "slow_sends": 2.0, "unlogged": 1.0, "sum_key_ms": 740.0, "sum_commit_ms": 110.0}
	for k, v := range want {
		if lines[1][k] != v {
			t.Errorf("second line: %s = %v, want %v (%v)", k, lines[1][k], v, lines[1])
		}
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			got[mf.GetName()+labelsOf(m)] = m.GetCounter().GetValue()
		}
	}
	for k, v := range map[string]float64{"gateway_http_slow_sends_total": 3, "gateway_http_slow_send_phase_seconds_total{phase=key}": 0.75,
		"gateway_http_slow_send_phase_seconds_total{phase=commit}": 0.39, "gateway_http_slow_send_phase_seconds_total{phase=answer}": 0.01} {
		if d := got[k] - v; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
}

func labelsOf(m *dto.Metric) string {
	var b strings.Builder
	for _, l := range m.GetLabel() {
		b.WriteString("{" + l.GetName() + "=" + l.GetValue() + "}")
	}
	return b.String()
}

// A served v1 send is timed from fasthttp's clock reading to its answer, its key's check
// between: with every send slow (a threshold of 0), one send is counted once, its phases each
// at least 0 and summing to a time under the client's own.
func TestServedSendIsTimed(t *testing.T) {
	a, raw, _ := hotFixture(t)
	a.srv.slowSends.threshold = 0
	began := time.Now()
	if r := a.do(t, "POST", "/api/v1/messages/send", "", map[string]string{"x-api-key": raw},
		`{"phone":"15550001234","message":"timed"}`); r.status != 200 {
		t.Fatalf("send: %d %s", r.status, r.body)
	}
	took := time.Since(began)
	if n := a.srv.slowSends.count.Load(); n != 1 {
		t.Fatalf("%d slow sends counted, want 1", n)
	}
	var sum int64
	for i := range a.srv.slowSends.sums {
		d := a.srv.slowSends.sums[i].Load()
		if d < 0 {
			t.Errorf("phase %s: %v", phaseNames[i], time.Duration(d))
		}
		sum += d
	}
	if sum <= 0 || time.Duration(sum) > took {
		t.Errorf("phases sum to %v; the client's round trip took %v", time.Duration(sum), took)
	}
	if a.srv.slowSends.sums[phaseKey].Load() <= 0 || a.srv.slowSends.sums[phaseAnswer].Load() <= 0 {
		t.Errorf("key %v, answer %v: each a time", time.Duration(a.srv.slowSends.sums[phaseKey].Load()), time.Duration(a.srv.slowSends.sums[phaseAnswer].Load()))
	}
}
