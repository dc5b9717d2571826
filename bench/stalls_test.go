package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The note of a fixed-rate window reads the slow-commit lines logged in the window only, the
// longest first, with their phases and the store's state.
func TestStallNoteReadsTheWindowsStalls(t *testing.T) {
	log := filepath.Join(t.TempDir(), "gw.log")
	lines := []string{
		`{"time":"2026-11-30T11:40:59.000Z","level":"WARN","msg":"slow commits: a stall of the store's commit path","stall_ms":900,"commits":5}`,
		`{"time":"2026-11-30T11:41:10.738Z","level":"INFO","msg":"something else","stall_ms":5000}`,
		`{"time":"2026-11-30T11:41:10.738Z","level":"WARN","msg":"slow commits: a stall of the store's commit path","component":"badger","stall_ms":186.9,"commits":80,"queued_ms":7.8,"write_ms":0.2,"wait_ms":7,"gather_ms":0,"sync_ms":146.5,"answer_ms":19.7,"badger_l0_tables":1,"badger_l0_stall":5,"badger_memtables":2,"badger_memtables_max":4,"badger_tables_building":1,"badger_table_age_ms":1500,"gc_pause_max_ms":0,"load1":"20.13","cpu_some10":"94.89","io_some10":"11.14"}`,
		`{"time":"2026-11-30T11:41:20.794Z","level":"WARN","msg":"slow commits: a stall of the store's commit path","stall_ms":443.3,"commits":135,"sync_ms":64.7,"wait_ms":260.5}`,
		`not json`,
	}
	if err := os.WriteFile(log, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 11, 30, 11, 41, 0, 0, time.UTC)
	stalls, err := loggedStalls(log, from, from.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(stalls) != 2 {
		t.Fatalf("%d stalls read, want the 2 slow-commit lines in the window: %+v", len(stalls), stalls)
	}
	note := stallNote(215, stalls)
	for _, want := range []string{
		"215 slow commits (over 100 ms) in the window, 2 stalls logged",
		"; at 11:41:20.794 443 ms (135 commits; slowest: queued 0, write 0, wait 260",
		"tables building 0, no table yet,",
		"; at 11:41:10.738 187 ms (80 commits; slowest: queued 8, write 0, wait 7 of which gather 0, sync 146, answer 20; L0 1/5, memtables 2/4, tables building 1, newest table 1.5 s old, GC max 0.0 ms; load 20.13, PSI cpu 94.89 io 11.14)",
	} {
		if !strings.Contains(note, want) {
			t.Errorf("note lacks %q:\n%s", want, note)
		}
	}
	if strings.Index(note, "11:41:20") > strings.Index(note, "11:41:10") {
		t.Errorf("the longest stall is not first:\n%s", note)
	}
	if got := stallNote(0, nil); got != "no slow commit (over 100 ms) in the window" {
		t.Errorf("quiet window: %q", got)
	}
}

// The slow-send note gives the gateway's slow sends in the window with their phases summed,
// the longest logged first, and the generator's slow requests split by their round trip; a
// gateway without the report says so.
func TestSendNoteSetsTheHandlerBesideTheClient(t *testing.T) {
	log := filepath.Join(t.TempDir(), "gw.log")
	lines := []string{
		`{"time":"2026-11-30T11:40:59.000Z","level":"WARN","msg":"slow send: a v1 send's handler took long","took_ms":900}`,
		`{"time":"2026-11-30T11:41:10.738Z","level":"WARN","msg":"slow send: a v1 send's handler took long","took_ms":150.2,"key_ms":1,"prepare_ms":0.1,"allowance_ms":0,"commit_ms":140,"answer_ms":9,"gc_pause_max_ms":0.5,"load1":"2.10","cpu_some10":"30.00"}`,
		`{"time":"2026-11-30T11:41:20.000Z","level":"WARN","msg":"slow send: a v1 send's handler took long","took_ms":420,"key_ms":400,"commit_ms":20}`,
		`{"time":"2026-11-30T11:41:21.000Z","level":"WARN","msg":"slow commits: a stall of the store's commit path","stall_ms":5000}`,
	}
	if err := os.WriteFile(log, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	from := time.Date(2026, 11, 30, 11, 41, 0, 0, time.UTC)
	sends, err := loggedSends(log, from, from.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if len(sends) != 2 {
		t.Fatalf("%d slow sends read, want the 2 in the window: %+v", len(sends), sends)
	}
	g := &stats{Slow: 1200, SlowTrip: 100, LateP99: 250, TripP99: 12.5, TripMax: 430}
	note := sendNote([]float64{20, 0.5, 0.1, 0, 2.5, 0.2}, sends, g)
	for _, want := range []string{
		"20 sends' handlers took over 100 ms, 3.3 s in all: key 0.5 prepare 0.1 allowance 0.0 commit 2.5 answer 0.2",
		"; at 11:41:20.000 420 ms (key 400, prepare 0, allowance 0, commit 20, answer 0, GC max 0.0 ms; load , PSI cpu )",
		"; at 11:41:10.738 150 ms (key 1, prepare 0, allowance 0, commit 140, answer 9, GC max 0.5 ms; load 2.10, PSI cpu 30.00)",
		"; the generator: 1200 requests over 100 ms, 100 of them with a round trip over 100 ms",
		"late p99 250.0 ms, round trip p99 12.5 ms, max 430",
	} {
		if !strings.Contains(note, want) {
			t.Errorf("note lacks %q:\n%s", want, note)
		}
	}
	if got := sendNote(nil, nil, nil); !strings.Contains(got, "no slow-send report") {
		t.Errorf("a gateway without the report: %q", got)
	}
	if got := sendNote(make([]float64, 6), nil, nil); got != "no send's handler took over 100 ms" {
		t.Errorf("quiet window: %q", got)
	}
}
