// Package cputime reads the process's CPU time, for the benchmarks that report CPU per
// operation beside the wall time (on a shared machine the rate is noisy; the CPU is not).
package cputime

import (
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
