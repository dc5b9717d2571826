package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"
)

// The gateway's slow-commit report (persist/badger_slow.go) beside a fixed-rate window: how
// many of its commits waited over 100 ms in the window (gateway_storage_slow_commits_total),
// and the stalls it logged then with what they waited on, so a tail in the window is read with
// its cause (bench/README.md, "Fourteenth pass: the accept's stalls").

// slowStall is one logged stall, the fields the note gives.
type slowStall struct {
	Time                                                            time.Time `json:"time"`
	Stall                                                           float64   `json:"stall_ms"`
	Commits                                                         int       `json:"commits"`
	Queued, Write, Wait, Gather, Sync, Answer                       float64
	L0, L0Stall, Memtables, MemtablesMax, Building, TableAge, GCMax float64
	Load, CPU, IO                                                   string
}

// UnmarshalJSON reads a slow-commit line's fields.
func (s *slowStall) UnmarshalJSON(b []byte) error {
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	num := func(k string) float64 { v, _ := m[k].(float64); return v }
	str := func(k string) string { v, _ := m[k].(string); return v }
	t, err := time.Parse(time.RFC3339Nano, str("time"))
	if err != nil {
		return err
	}
	*s = slowStall{Time: t, Stall: num("stall_ms"), Commits: int(num("commits")),
		Queued: num("queued_ms"), Write: num("write_ms"), Wait: num("wait_ms"), Gather: num("gather_ms"), Sync: num("sync_ms"), Answer: num("answer_ms"),
		L0: num("badger_l0_tables"), L0Stall: num("badger_l0_stall"), Memtables: num("badger_memtables"), MemtablesMax: num("badger_memtables_max"),
		Building: num("badger_tables_building"), TableAge: num("badger_table_age_ms"), GCMax: num("gc_pause_max_ms"),
		Load: str("load1"), CPU: str("cpu_some10"), IO: str("io_some10")}
	return nil
}

// loggedStalls reads the slow-commit lines of a gateway's JSON log logged between from and to.
func loggedStalls(logPath string, from, to time.Time) ([]slowStall, error) {
	f, err := os.Open(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []slowStall
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), `"slow commits`) {
			continue
		}
		var s slowStall
		if err := json.Unmarshal(line, &s); err != nil || s.Time.Before(from) || s.Time.After(to) {
			continue
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// stallNote is the note of a window's slow commits: their count, then the longest logged
// stalls (at most 3) with their slowest commit's phases and the store's state.
func stallNote(slow float64, stalls []slowStall) string {
	if slow <= 0 && len(stalls) == 0 {
		return "no slow commit (over 100 ms) in the window"
	}
	note := fmt.Sprintf("%.0f slow commits (over 100 ms) in the window, %d stalls logged", slow, len(stalls))
	slices.SortFunc(stalls, func(a, b slowStall) int { return cmp.Compare(b.Stall, a.Stall) })
	for _, s := range stalls[:min(3, len(stalls))] {
		table := "no table yet" // the report's age is 0 when the tree has no table file
		if s.TableAge > 0 {
			table = fmt.Sprintf("newest table %.1f s old", s.TableAge/1000)
		}
		note += fmt.Sprintf("; at %s %.0f ms (%d commits; slowest: queued %.0f, write %.0f, wait %.0f of which gather %.0f, sync %.0f, answer %.0f; L0 %.0f/%.0f, memtables %.0f/%.0f, tables building %.0f, %s, GC max %.1f ms; load %s, PSI cpu %s io %s)",
			s.Time.UTC().Format("15:04:05.000"), s.Stall, s.Commits, s.Queued, s.Write, s.Wait, s.Gather, s.Sync, s.Answer,
			s.L0, s.L0Stall, s.Memtables, s.MemtablesMax, s.Building, table, s.GCMax, s.Load, s.CPU, s.IO)
	}
	return note
}

// slowLogLag: a stall at the window's end is logged once a fast commit closes it, or at
// Close; lines this long after the window are still read as its.
const slowLogLag = time.Second

// slowMs: a request whose latency is over this many ms is a slow one (the gateway's slow-send
// report's threshold, and its slow-commit report's).
const slowMs = 100

// The gateway's slow-send report (httpapi/slowsend.go) beside a fixed-rate window: its sends
// whose handler took over 100 ms, with their phases summed, set against the generator's slow
// requests and how their latency split (load.go): a tail the handler does not hold was spent
// before fasthttp called it or after it answered, or in the generator (bench/README.md,
// "Fifteenth pass: the accept's tail outside the commit").

// sendPhases are the slow-send report's phases, in its order.
var sendPhases = []string{"key", "prepare", "allowance", "commit", "answer"}

// slowSendCounters are the gateway's slow-send counters: the count, then each phase's seconds.
var slowSendCounters = func() []string {
	out := []string{"gateway_http_slow_sends_total"}
	for _, p := range sendPhases {
		out = append(out, `gateway_http_slow_send_phase_seconds_total{phase="`+p+`"}`)
	}
	return out
}()

// slowSend is one logged slow send, the fields the note gives.
type slowSend struct {
	Time   time.Time
	Took   float64
	Phases []float64 // ms, in sendPhases' order
	GCMax  float64
	Load   string
	CPU    string
}

// loggedSends reads the slow-send lines of a gateway's JSON log logged between from and to.
func loggedSends(logPath string, from, to time.Time) ([]slowSend, error) {
	f, err := os.Open(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []slowSend
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if !strings.Contains(string(line), `"slow send:`) {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			continue
		}
		num := func(k string) float64 { v, _ := m[k].(float64); return v }
		str := func(k string) string { v, _ := m[k].(string); return v }
		t, err := time.Parse(time.RFC3339Nano, str("time"))
		if err != nil || t.Before(from) || t.After(to) {
			continue
		}
		s := slowSend{Time: t, Took: num("took_ms"), GCMax: num("gc_pause_max_ms"), Load: str("load1"), CPU: str("cpu_some10")}
		for _, p := range sendPhases {
			s.Phases = append(s.Phases, num(p+"_ms"))
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// sendNote is the note of a window's slow sends: the gateway's (the counters' change over the
// window: the count, then each phase's seconds; the longest logged, at most 2), then the
// generator's (its slow requests and how their latency split).
func sendNote(counted []float64, sends []slowSend, g *stats) string {
	note := "no send's handler took over 100 ms"
	switch {
	case len(counted) != len(sendPhases)+1:
		note = "no slow-send report on the gateway's /metrics (a build before it)"
	case counted[0] > 0:
		var total float64
		for _, v := range counted[1:] {
			total += v
		}
		note = fmt.Sprintf("%.0f sends' handlers took over 100 ms, %.1f s in all:", counted[0], total)
		for i, p := range sendPhases {
			note += fmt.Sprintf(" %s %.1f", p, counted[i+1])
		}
	}
	slices.SortFunc(sends, func(a, b slowSend) int { return cmp.Compare(b.Took, a.Took) })
	for _, s := range sends[:min(2, len(sends))] {
		note += fmt.Sprintf("; at %s %.0f ms (", s.Time.UTC().Format("15:04:05.000"), s.Took)
		for i, p := range sendPhases {
			note += fmt.Sprintf("%s %.0f, ", p, s.Phases[i])
		}
		note += fmt.Sprintf("GC max %.1f ms; load %s, PSI cpu %s)", s.GCMax, s.Load, s.CPU)
	}
	if g != nil {
		note += fmt.Sprintf("; the generator: %d requests over 100 ms, %d of them with a round trip over 100 ms (the rest waited to be sent behind a slow answer on their connection); late p99 %.1f ms, round trip p99 %.1f ms, max %.0f",
			g.Slow, g.SlowTrip, g.LateP99, g.TripP99, g.TripMax)
	}
	return note
}
