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
