package node

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestTuneGC(t *testing.T) {
	prevPercent := debug.SetGCPercent(100)
	prevLimit := debug.SetMemoryLimit(-1)
	t.Cleanup(func() {
		debug.SetGCPercent(prevPercent)
		debug.SetMemoryLimit(prevLimit)
	})
	dir := t.TempDir()
	limited := filepath.Join(dir, "memory.max")
	if err := os.WriteFile(limited, []byte("2147483648\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	unlimited := filepath.Join(dir, "memory.max.none")
	if err := os.WriteFile(unlimited, []byte("max\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(kv ...string) func(string) string {
		return func(k string) string {
			for i := 0; i+1 < len(kv); i += 2 {
				if kv[i] == k {
					return kv[i+1]
				}
			}
			return ""
		}
	}
	for _, tc := range []struct {
		name      string
		store     string
		getenv    func(string) string
		memMax    string
		want      GC
		wantLimit int64 // the runtime's limit after the call (math.MaxInt64: none)
	}{
		{"badger is left alone", "badger", env(), limited, GC{}, 1<<63 - 1},
		{"nats in a container", "nats", env(), limited, GC{Percent: 400, MemLimit: 1610612736}, 1610612736},
		{"nats, no container limit", "nats", env(), unlimited, GC{Percent: 400}, 1<<63 - 1},
		{"nats, not in a cgroup", "nats", env(), filepath.Join(dir, "absent"), GC{Percent: 400}, 1<<63 - 1},
		{"the operator's GOGC wins", "nats", env("GOGC", "150"), limited, GC{}, 1<<63 - 1},
		{"the operator's GOMEMLIMIT wins", "nats", env("GOMEMLIMIT", "1GiB"), limited, GC{Percent: 400}, 1<<63 - 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			debug.SetGCPercent(100)
			debug.SetMemoryLimit(1<<63 - 1)
			got := tuneGC(Config{Store: tc.store}, tc.getenv, tc.memMax)
			if got != tc.want {
				t.Fatalf("tuneGC = %+v, want %+v", got, tc.want)
			}
			wantPercent := 100
			if tc.want.Percent != 0 {
				wantPercent = tc.want.Percent
			}
			if p := debug.SetGCPercent(100); p != wantPercent {
				t.Errorf("GC percent %d, want %d", p, wantPercent)
			}
			if l := debug.SetMemoryLimit(-1); l != tc.wantLimit {
				t.Errorf("memory limit %d, want %d", l, tc.wantLimit)
			}
		})
	}
}
