package whatsapp

import (
	"bytes"
	"log/slog"
	"os"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"
)

func TestPseudoVersionTime(t *testing.T) {
	for v, want := range map[string]string{
		"v0.0.0-20260821141805-33cfac511629":        "2026-08-21T14:18:05Z",
		"v0.10.1-0.20260820140024-eb612d936fde":     "2026-08-20T14:00:24Z",
		"v1.2.4-rc.1.0.20250102030405-abcdefabcdef": "2025-01-02T03:04:05Z",
	} {
		got, err := pseudoVersionTime(v)
		if err != nil || got.Format(time.RFC3339) != want {
			t.Errorf("%s: %v, %v; want %s", v, got, err, want)
		}
	}
	for _, v := range []string{"v0.10.0", "v1.2.3-rc1", ""} {
		if _, err := pseudoVersionTime(v); err == nil {
			t.Errorf("%q read as a pseudo-version", v)
		}
	}
}

// The pinned whatsmeow (go.mod) is found in a build's module information, with its date
// (test binaries carry none: the process test reads the real binary's /metrics); past 30
// days the start logs a WARN naming the README's procedure, before that nothing.
func TestLibraryAgeWarning(t *testing.T) {
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*go\.mau\.fi/whatsmeow (v\S+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("whatsmeow not in go.mod")
	}
	pinned := string(m[1])
	version, date, ok := libraryIn(&debug.BuildInfo{Deps: []*debug.Module{
		{Path: "go.mau.fi/util", Version: "v0.10.0"}, {Path: libraryModule, Version: pinned},
	}})
	if !ok || version != pinned || date.IsZero() {
		t.Fatalf("libraryIn = %q, %v, %v", version, date, ok)
	}
	// The patched copy under third_party/ (go.mod's replace by directory) is the pinned version.
	version, _, ok = libraryIn(&debug.BuildInfo{Deps: []*debug.Module{
		{Path: libraryModule, Version: pinned, Replace: &debug.Module{Path: "./third_party/go.mau.fi/whatsmeow", Version: "(devel)"}},
	}})
	if !ok || version != pinned {
		t.Fatalf("libraryIn with a directory replace = %q, %v", version, ok)
	}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	warnAge(log, version, date, date.Add(29*24*time.Hour))
	if buf.Len() != 0 {
		t.Fatalf("warned at 29 days: %s", buf.String())
	}
	warnAge(log, version, date, date.Add(45*24*time.Hour))
	if out := buf.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "45 days old") || !strings.Contains(out, "Bumping whatsmeow") || !strings.Contains(out, pinned) {
		t.Fatalf("warning: %s", out)
	}
}
