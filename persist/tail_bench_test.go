package persist

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

var (
	tailPreload  = flag.Int("tail.preload", 1_000_000, "BenchmarkAcceptTail: messages accepted and settled at full speed first")
	tailRate     = flag.Int("tail.rate", 3000, "BenchmarkAcceptTail: accepts a second in the open-loop window")
	tailDuration = flag.Duration("tail.duration", 30*time.Second, "BenchmarkAcceptTail: the open-loop window")
	tailFsync    = flag.String("tail.fsync", "batch", "BenchmarkAcceptTail: the store's --fsync mode")
	tailMemTable = flag.Int64("tail.memtable", 0, "BenchmarkAcceptTail: Badger's memtable size in bytes (0: DefaultMemTableSize)")
	tailDumps    = flag.String("tail.dumps", "", "BenchmarkAcceptTail: write a goroutine dump here while an accept waits over 200 ms (at most one each 500 ms)")
)

// BenchmarkAcceptTail is the accept's tail in process, as the bench's fixed-rate run sees it
// after the send runs (bench/README.md, "The accept's tail"): the outbox on Badger with
// -tail.fsync (batch or interval) and memtables of -tail.memtable bytes, preloaded with
// -tail.preload messages accepted and settled by 64 callers at full speed, then accepts at
// -tail.rate a second for -tail.duration, each started on its schedule (open loop) and its
// latency taken from its scheduled start, and a read every 2 ms likewise. It reports the
// latencies' percentiles, the accepts that waited over 200 ms, the syncs a second and how long
// the process waited for a core (on a shared machine, the floor under any tail):
// `go test -run X -bench AcceptTail -benchtime 1x ./persist -tail.preload 300000 -tail.rate 3000`.
func BenchmarkAcceptTail(b *testing.B) {
	// The store's warnings (the slow-commit report: what each stall waited on) go to stderr.
	kv, err := OpenBadger(b.TempDir(), BadgerOptions{Fsync: Fsync(*tailFsync), MemTableSize: *tailMemTable,
		Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		b.Fatal(err)
	}
	defer kv.Close()
	o := NewOutbox(kv)
	var seq atomic.Uint64
	var failed atomic.Int64
	fail := func(err error) {
		if failed.Add(1) == 1 {
			b.Errorf("first of the failed accepts: %v", err)
		}
	}
	send := func() error { return benchSend(o, seq.Add(1), func(error) {}) }
	for b.Loop() {
		start := time.Now()
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				for seq.Load() < uint64(*tailPreload) {
					if err := send(); err != nil {
						fail(err)
						return
					}
				}
			})
		}
		wg.Wait()
		o.Flush()
		b.Logf("preloaded %d messages in %s", seq.Load(), time.Since(start).Round(time.Millisecond))

		total := int(float64(*tailRate) * tailDuration.Seconds())
		lat := make([]time.Duration, total)
		every := time.Second / time.Duration(*tailRate)
		syncs, waited := kv.sync.syncs.Load(), runDelay()
		begin := time.Now()
		// Beside the accepts, a read every 2 ms on its schedule (as a status lookup): a
		// read takes Badger's DB lock too.
		reads := make([]time.Duration, 0, int(tailDuration.Seconds()*500))
		var readers sync.WaitGroup
		readers.Go(func() {
			for at := begin; at.Before(begin.Add(*tailDuration)); at = at.Add(2 * time.Millisecond) {
				if d := time.Until(at); d > 0 {
					time.Sleep(d)
				}
				if _, err := kv.Get([]byte("out/probe")); err != nil && !errors.Is(err, domain.ErrRecordNotFound) {
					fail(err)
				}
				reads = append(reads, time.Since(at))
			}
		})
		for i := range total {
			at := begin.Add(time.Duration(i) * every)
			if d := time.Until(at); d > 0 {
				time.Sleep(d)
			}
			wg.Go(func() {
				var t *time.Timer
				if *tailDumps != "" {
					t = time.AfterFunc(200*time.Millisecond, func() { dump(b, *tailDumps) })
				}
				if err := send(); err != nil {
					fail(err)
				}
				lat[i] = time.Since(at)
				if t != nil {
					t.Stop()
				}
			})
		}
		wg.Wait()
		readers.Wait()
		window := time.Since(begin).Seconds()
		b.ReportMetric(float64(kv.sync.syncs.Load()-syncs)/window, "syncs/s")
		// The time the process's threads were runnable but not running (other processes had
		// the cores), in ms a second: on a shared machine, the floor under any tail.
		b.ReportMetric(float64(runDelay()-waited)/1e6/window, "runqueue-ms/s")
		o.Flush()
		slices.Sort(reads)
		b.ReportMetric(float64(reads[len(reads)*99/100])/1e6, "read-p99-ms")
		b.ReportMetric(float64(reads[len(reads)-1])/1e6, "read-max-ms")
		slices.Sort(lat)
		pct := func(p float64) float64 { return float64(lat[int(p*float64(total-1))]) / 1e6 }
		over := total - sort200(lat)
		b.ReportMetric(pct(0.5), "p50-ms")
		b.ReportMetric(pct(0.99), "p99-ms")
		b.ReportMetric(pct(0.999), "p99.9-ms")
		b.ReportMetric(float64(lat[total-1])/1e6, "max-ms")
		b.ReportMetric(float64(over), "over200ms")
	}
}

// runDelay is the time the process's threads spent waiting on a run queue, in ns
// (/proc/self/task/*/schedstat, second field; 0 off Linux).
func runDelay() int64 {
	tasks, _ := filepath.Glob("/proc/self/task/*/schedstat")
	var total int64
	for _, t := range tasks {
		data, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		var run, wait int64
		if _, err := fmt.Sscan(string(data), &run, &wait); err == nil {
			total += wait
		}
	}
	return total
}

var lastDump atomic.Int64

// dump writes the goroutines' stacks into dir, unless it did less than 500 ms ago.
func dump(b *testing.B, dir string) {
	now := time.Now().UnixNano()
	last := lastDump.Load()
	if now-last < int64(500*time.Millisecond) || !lastDump.CompareAndSwap(last, now) {
		return
	}
	var buf bytes.Buffer
	// Each thread's state and kernel stack first (readable as root): a thread blocked in a
	// page fault or the file system's journal holds its P, which no goroutine dump shows.
	tasks, _ := filepath.Glob("/proc/self/task/*")
	for _, task := range tasks {
		stat, _ := os.ReadFile(task + "/stat")
		stack, _ := os.ReadFile(task + "/stack")
		fmt.Fprintf(&buf, "task %s\n%s\n", stat, stack)
	}
	pprof.Lookup("goroutine").WriteTo(&buf, 2)
	name := filepath.Join(dir, time.Now().UTC().Format("150405.000")+".txt")
	if err := os.WriteFile(name, buf.Bytes(), 0o600); err != nil {
		b.Error(err)
	}
}

// sort200 is how many of the sorted latencies are at most 200 ms.
func sort200(lat []time.Duration) int {
	n, _ := slices.BinarySearch(lat, 200*time.Millisecond+1)
	return n
}
