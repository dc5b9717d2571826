package main

import (
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// The generator and the two servers share the machine, by design. What else runs on it
// during a measurement (a test suite, a compiler) skews that measurement, and a ratio between
// two disturbed measurements means little. So each measurement records the share of the
// machine's CPU used by anything other than the generator and the server under test, from
// /proc (Linux; elsewhere it is not recorded).

// clockTicks is USER_HZ, the unit of /proc CPU times: 100 on every Linux architecture Go
// supports.
const clockTicks = 100

// cpuSnap is the machine's busy CPU time and our processes' CPU time at one instant.
type cpuSnap struct {
	at    time.Time
	busy  float64 // seconds, all CPUs
	procs float64 // seconds, the listed processes
	ok    bool
}

func snapCPU(pids ...int) cpuSnap {
	s := cpuSnap{at: time.Now()}
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return s
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return s
	}
	// user nice system idle iowait irq softirq steal: busy is all but idle and iowait.
	for _, i := range []int{1, 2, 3, 6, 7, 8} {
		v, _ := strconv.ParseFloat(f[i], 64)
		s.busy += v / clockTicks
	}
	for _, pid := range pids {
		t, ok := procCPU(pid)
		if !ok {
			return s
		}
		s.procs += t
	}
	s.ok = true
	return s
}

// procCPU is a process's user + system CPU seconds from /proc/<pid>/stat.
func procCPU(pid int) (float64, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseProcStat(b)
}

func parseProcStat(b []byte) (float64, bool) {
	// The command name (field 2) is in parentheses and may hold spaces: count from after it.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseFloat(f[11], 64)
	stime, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return (utime + stime) / clockTicks, true
}

// otherCPU is the share of the whole machine (0..1) used between two snapshots by processes
// other than the listed ones; -1 when unknown.
func otherCPU(a, b cpuSnap) float64 {
	if !a.ok || !b.ok {
		return -1
	}
	wall := b.at.Sub(a.at).Seconds() * float64(runtime.NumCPU())
	if wall <= 0 {
		return -1
	}
	other := (b.busy - a.busy) - (b.procs - a.procs)
	return min(max(other/wall, 0), 1)
}

// serverCPU is one process's CPU seconds and context switches at one instant (ok, swOK false:
// unknown).
type serverCPU struct {
	secs     float64
	ok       bool
	switches float64
	swOK     bool
}

func snapServer(pid int) serverCPU {
	if pid == 0 {
		return serverCPU{}
	}
	t, ok := procCPU(pid)
	sw, swOK := procSwitches(pid)
	return serverCPU{secs: t, ok: ok, switches: sw, swOK: swOK}
}

// procSwitches is how many times a process's threads have been switched out (voluntary and
// involuntary context switches, /proc/<pid>/task/*/status; a thread that exited between two
// readings takes its count with it: Go's threads seldom exit).
//
// Why: under the closed loop both processes share 2 cores, and what a request costs is mostly
// the kernel's (the loopback write wakes the other side, an idle core is woken, a thread parks
// in epoll): the same server's CPU per request moved by a third from window to window in the
// quiet runs (bench/README.md, fifteenth pass). Switches per request, beside CPU per request,
// say whether a costly window was one where the processes slept and were woken more per
// request.
func procSwitches(pid int) (float64, bool) {
	tasks, err := filepath.Glob("/proc/" + strconv.Itoa(pid) + "/task/*/status")
	if err != nil || len(tasks) == 0 {
		return 0, false
	}
	var n float64
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue // a thread that exited meanwhile
		}
		v, ok := parseSwitches(b)
		if !ok {
			return 0, false
		}
		n += v
	}
	return n, true
}

// parseSwitches is a /proc status file's voluntary_ctxt_switches plus
// nonvoluntary_ctxt_switches (ok false: either missing).
func parseSwitches(b []byte) (float64, bool) {
	var n float64
	found := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok || (k != "voluntary_ctxt_switches" && k != "nonvoluntary_ctxt_switches") {
			continue
		}
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil {
			return 0, false
		}
		n += x
		found++
	}
	return n, found == 2
}

// switchesPerRequest is the process's context switches since from per request (0 unknown).
func (to serverCPU) switchesPerRequest(from serverCPU, requests int64) float64 {
	if !from.swOK || !to.swOK || requests <= 0 {
		return 0
	}
	return (to.switches - from.switches) / float64(requests)
}

// perRequestUS is the CPU the process used since from, in µs per request (0 unknown).
func (to serverCPU) perRequestUS(from serverCPU, requests int64) float64 {
	if !from.ok || !to.ok || requests <= 0 {
		return 0
	}
	return (to.secs - from.secs) * 1e6 / float64(requests)
}
