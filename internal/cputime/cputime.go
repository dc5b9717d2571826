// Package cputime reads the process's CPU time, for the benchmarks that report CPU per
// operation beside the wall time (on a shared machine the rate is noisy; the CPU is not).
package cputime

import (
	"runtime/metrics"
	"syscall"
	"time"
)

// Process is the process's user and system CPU time so far (0 if it cannot be read).
func Process() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Runs is the process's goroutine runs so far (a start or a wake-up each), for the benchmarks
// and tests that count hand-offs: /sched/latencies samples one run in 8, so its count is
// scaled back.
func Runs() uint64 {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	var n uint64
	for _, c := range s[0].Value.Float64Histogram().Counts {
		n += c
	}
	return n * 8
}
