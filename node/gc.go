package node

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// natsGCPercent is the collector's target for a process serving --store nats. Its records live
// in the NATS server's process, so its own live heap is small (tens of MB: keys, counters,
// sessions, the pages being gathered) and at Go's default of 100 it collected every few MB
// allocated: 4-9 µs of CPU a sent message, against 0.3 on Badger, whose tables and caches make
// a large live heap that spaces its collections out by themselves (bench/README.md, "the lone
// NATS gateway's own CPU per message" and "a garbage collection target for --store nats").
// 400 lets the heap grow to five times what is live between collections.
const natsGCPercent = 400

// GC is what TuneGC set: the collector's target and the soft memory limit, each 0 when it left
// the runtime's own (an operator's GOGC or GOMEMLIMIT, or a store that does not need it).
type GC struct {
	Percent  int
	MemLimit int64
}

// TuneGC sets the collector for a process serving c: on --store nats the target above, unless
// the operator set GOGC; and then, unless GOMEMLIMIT is set, a soft memory limit of three
// quarters of the container's (cgroup v2 memory.max), so that the larger target never takes
// the heap past what the container allows: near the limit the runtime collects as often as it
// must. It is process-wide, so it is main's to call once, not Open's (tests run many nodes).
func TuneGC(c Config) GC {
	return tuneGC(c, os.Getenv, "/sys/fs/cgroup/memory.max")
}

func tuneGC(c Config, getenv func(string) string, memMax string) GC {
	var g GC
	if c.Store != "nats" || getenv("GOGC") != "" {
		return g
	}
	debug.SetGCPercent(natsGCPercent)
	g.Percent = natsGCPercent
	if getenv("GOMEMLIMIT") != "" {
		return g
	}
	if limit := cgroupMemory(memMax); limit > 0 {
		g.MemLimit = limit / 4 * 3
		debug.SetMemoryLimit(g.MemLimit)
	}
	return g
}

// cgroupMemory reads a cgroup v2 memory.max: its limit in bytes, or 0 when there is none
// ("max") or the file cannot be read (not in a cgroup v2 container, another OS).
func cgroupMemory(path string) int64 {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}
