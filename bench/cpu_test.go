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

func TestParseSwitchesSumsBothKinds(t *testing.T) {
	status := "Name:\tgateway\nState:\tS (sleeping)\nvoluntary_ctxt_switches:\t1200\nnonvoluntary_ctxt_switches:\t34\n"
	if got, ok := parseSwitches([]byte(status)); !ok || got != 1234 {
		t.Fatalf("got %v %v, want 1234", got, ok)
	}
	if _, ok := parseSwitches([]byte("Name:\tgateway\nvoluntary_ctxt_switches:\t1200\n")); ok {
		t.Fatal("one kind missing: want not ok")
	}
	if _, ok := parseSwitches([]byte("voluntary_ctxt_switches:\tx\nnonvoluntary_ctxt_switches:\t1\n")); ok {
		t.Fatal("a count that is not a number: want not ok")
	}
}

func TestProcSwitchesCountsThisProcesssThreads(t *testing.T) {
	if _, err := os.Stat("/proc/self/task"); err != nil {
		t.Skip("no /proc")
	}
	a := snapServer(os.Getpid())
	if !a.swOK || a.switches <= 0 {
		t.Fatalf("snapshot %+v: no switches read", a)
	}
	// A sleep parks this goroutine's thread in the kernel (a voluntary switch); poll until the
	// count has grown.
	var b serverCPU
	for range 100 {
		time.Sleep(time.Millisecond)
		if b = snapServer(os.Getpid()); b.switches > a.switches {
			break
		}
	}
	if got := b.switchesPerRequest(a, 1); got <= 0 {
		t.Fatalf("switches %v then %v: did not grow", a.switches, b.switches)
	}
	if a.switchesPerRequest(serverCPU{}, 1) != 0 || b.switchesPerRequest(a, 0) != 0 {
		t.Fatal("unknown snapshot or no requests: want 0")
	}
}
