package main

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// TestLogSinkReadsBetweenWindows: the gateway's output file read in pieces, a line split
// across two reads, access-log lines in either format counted and dropped, the rest kept, and
// the bytes read freed on disk.
func TestLogSinkReadsBetweenWindows(t *testing.T) {
	dir := t.TempDir()
	kept, err := os.Create(filepath.Join(dir, "gw.log"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.OpenFile(filepath.Join(dir, "gw.log.out"), os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	l := &logSink{file: kept, raw: raw}
	access := `{"level":"INFO","msg":"request","route":"/api/admin/apikeys/validate","status":200}` + "\n"
	write := func(s string) {
		t.Helper()
		if _, err := raw.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"level":"INFO","msg":"gateway listening"}` + "\n")
	for range 20000 { // about 1.7 MB: more than one read's buffer
		write(access)
	}
	write(`time=x level=INFO msg=request route=/api/client/status status=200` + "\n" + `{"level":"ERROR","msg":"half`)
	l.catchUp()
	if n := l.requests.Load(); n != 20001 {
		t.Fatalf("after the first read: %d access-log lines, want 20001", n)
	}
	if st, err := raw.Stat(); err == nil {
		if blocks := st.Sys().(*syscall.Stat_t).Blocks * 512; blocks > 64<<10 {
			t.Logf("the file system kept %d bytes of %d read (no hole punched)", blocks, st.Size())
		}
	}
	write(` a line"}` + "\n" + access + `{"level":"WARN","msg":"no newline at the exit"}`)
	l.close()
	if n := l.requests.Load(); n != 20002 {
		t.Fatalf("at the exit: %d access-log lines, want 20002", n)
	}
	b, err := os.ReadFile(filepath.Join(dir, "gw.log"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"level":"INFO","msg":"gateway listening"}` + "\n" + `{"level":"ERROR","msg":"half a line"}` + "\n" + `{"level":"WARN","msg":"no newline at the exit"}`
	if string(b) != want {
		t.Fatalf("kept:\n%s\nwant:\n%s", b, want)
	}
	l.catchUp() // closed: nothing to read, no panic
}
