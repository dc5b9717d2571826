package main

import (
	"os"
	"testing"
	"time"
)

func TestParseProcStatSkipsTheCommandName(t *testing.T) {
	// utime 250 and stime 50 ticks are fields 14 and 15; the name holds a space and a ')'.
	line := "4242 (gate way) x) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 300 1000 200"
	got, ok := parseProcStat([]byte(line))
	if !ok || got != 3.0 {
		t.Fatalf("got %v %v, want 3 CPU seconds", got, ok)
	}
	if _, ok := parseProcStat([]byte("4242 (short) S 1")); ok {
		t.Fatal("truncated stat line: want not ok")
	}
}

func TestOtherCPUExcludesTheListedProcesses(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc")
	}
	a := snapCPU(os.Getpid())
	for end := time.Now().Add(150 * time.Millisecond); time.Now().Before(end); {
		// Burn CPU in this process: it is listed, so it must not count as other.
	}
	b := snapCPU(os.Getpid())
	if !a.ok || !b.ok || b.procs <= a.procs {
		t.Fatalf("snapshots %+v %+v: this process's CPU did not grow", a, b)
	}
	if o := otherCPU(a, b); o < 0 || o > 1 {
		t.Fatalf("other CPU %v out of range", o)
	}
	if otherCPU(a, cpuSnap{}) != -1 {
		t.Fatal("unknown snapshot: want -1")
	}
}
