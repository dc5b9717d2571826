package main

import (
	"os"
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

// serverCPU is one process's CPU seconds at one instant (ok false: unknown).
type serverCPU struct {
	secs float64
	ok   bool
}

func snapServer(pid int) serverCPU {
	if pid == 0 {
		return serverCPU{}
	}
	t, ok := procCPU(pid)
	return serverCPU{t, ok}
}

// perRequestUS is the CPU the process used since from, in µs per request (0 unknown).
func (to serverCPU) perRequestUS(from serverCPU, requests int64) float64 {
	if !from.ok || !to.ok || requests <= 0 {
		return 0
	}
	return (to.secs - from.secs) * 1e6 / float64(requests)
}
