package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// wrk is the second load generator (DESIGN.md section 8): every closed-loop measurement is
// also made with wrk (-t1, Lua-scripted requests, the same connections), and of the two
// ratios the lower counts. A generator that saturates before the server makes every ratio
// look like 1: on this machine wrk drives bare fasthttp about 1.6 times as fast as the
// bench's Go generator.
//
// The requests are the case's own, rendered by the same prepare function into a pool file
// of raw HTTP requests (an 8-digit length, then the bytes) that the script reads one after
// another. A case whose requests must be unique (an Idempotency-Key, a webhook id and order)
// gets a pool larger than the gateway can answer in the time, and a request past its end goes
// to a path no server serves, so an exhausted pool shows as errors; the others cycle through
// theirs.

// wrkScript is the Lua script wrk runs: args[1] the pool file, args[2] "cycle" or "once".
const wrkScript = `
local f, cycle
function init(args)
  f = io.open(args[1], "rb")
  cycle = args[2] == "cycle"
end
function request()
  local n = f:read(8)
  if not n and cycle then
    f:seek("set", 0)
    n = f:read(8)
  end
  if not n then
    return "GET /__bench_pool_exhausted HTTP/1.1\r\nHost: bench\r\n\r\n"
  end
  return f:read(tonumber(n))
end
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('WRKJSON {"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,"status":%d,"timeout":%d,' ..
    '"p50":%d,"p90":%d,"p99":%d,"p999":%d,"max":%d,"mean":%f}\n',
    summary.requests, summary.duration, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(90), latency:percentile(99), latency:percentile(99.9),
    latency.max, latency.mean))
end
`

// wrkResult is what the script's done() prints.
type wrkResult struct {
	Requests   int64   `json:"requests"`
	DurationUS int64   `json:"duration_us"`
	Connect    int64   `json:"connect"`
	Read       int64   `json:"read"`
	Write      int64   `json:"write"`
	Status     int64   `json:"status"` // answers with a status over 399
	Timeout    int64   `json:"timeout"`
	P50        float64 `json:"p50"` // microseconds
	P90        float64 `json:"p90"`
	P99        float64 `json:"p99"`
	P999       float64 `json:"p999"`
	Max        float64 `json:"max"`
	Mean       float64 `json:"mean"`
}

// parseWrk finds the script's result line in wrk's output.
func parseWrk(out []byte) (wrkResult, error) {
	var r wrkResult
	for line := range strings.SplitSeq(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "WRKJSON "); ok {
			return r, json.Unmarshal([]byte(rest), &r)
		}
	}
	return r, fmt.Errorf("wrk printed no result: %.500s", out)
}

// wrkTool is wrk on this machine: its path and the script file (empty path: not found).
type wrkTool struct {
	path   string
	script string
	dir    string // where pools are written
}

// findWrk looks wrk up (an explicit path, or PATH) and writes the script into dir.
func findWrk(explicit, dir string) (*wrkTool, error) {
	path := explicit
	if path == "" || path == "auto" {
		p, err := exec.LookPath("wrk")
		if err != nil {
			return nil, errors.New("wrk not found on PATH: every ratio is measured with the bench's own generator only " +
				"(install it: apt-get install wrk, which `make bench` does when it can; or --wrk PATH)")
		}
		path = p
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("--wrk: %w", err)
	}
	script := filepath.Join(dir, "bench-wrk.lua")
	if err := os.WriteFile(script, []byte(wrkScript), 0o644); err != nil {
		return nil, err
	}
	return &wrkTool{path: path, script: script, dir: dir}, nil
}

// wrkWarmupWorker and wrkWorker are the worker ids the pools are rendered with: unique ids and
// order numbers derive from them, apart from the Go generator's (0 to maxConns-1) and the
// capture's.
const (
	wrkWarmupWorker = 991
	wrkWorker       = 992
)

// writePool renders n requests of t (as worker id) into a pool file and returns its path.
func (w *wrkTool) writePool(t target, addr string, run, id, n int, name string) (string, error) {
	return w.writePoolFrom(t, addr, run, id, 0, n, name)
}

// writePoolFrom is writePool with the worker's sequence starting at seq0 (a round's: see
// roundSeq).
func (w *wrkTool) writePoolFrom(t target, addr string, run, id int, seq0 uint64, n int, name string) (string, error) {
	path := filepath.Join(w.dir, fmt.Sprintf("pool-%d-%s.bin", run, name))
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	req := fasthttp.AcquireRequest()
	defer fasthttp.ReleaseRequest(req)
	initRequest(req, addr, t)
	wk := &worker{id: id, run: run, seq: seq0}
	var raw bytes.Buffer
	rw := bufio.NewWriter(&raw)
	for range n {
		t.prepare(req, wk)
		wk.seq++
		raw.Reset()
		if err := req.Write(rw); err != nil { // request line, headers with Host and Content-Length, body
			f.Close()
			return "", err
		}
		if err := rw.Flush(); err != nil {
			f.Close()
			return "", err
		}
		fmt.Fprintf(bw, "%08d", raw.Len())
		bw.Write(raw.Bytes())
	}
	if err := bw.Flush(); err != nil {
		f.Close()
		return "", err
	}
	return path, f.Close()
}

// wrkLoad is one wrk measurement: a warm-up run, then the measured run, each from its own pool.
type wrkLoad struct {
	addr             string
	conns            int
	warmup, duration time.Duration
	timeout          time.Duration
	warmupPool, pool string
	cycle            bool
	pid              int // the server under test, for OtherCPU
}

// measureWrk runs wrk and returns the measured run's figures as stats (OK and Errors count
// both runs, as the Go generator's do).
func (w *wrkTool) measure(ctx context.Context, l wrkLoad) (stats, error) {
	mode := "once"
	if l.cycle {
		mode = "cycle"
	}
	// run runs wrk once; cpu is wrk's own CPU time, switches its context switches (its
	// rusage; 0 unknown).
	var switches float64
	run := func(d time.Duration, pool string) (r wrkResult, cpu time.Duration, err error) {
		secs := int(wholeSeconds(d))
		args := []string{"-t1", "-c" + strconv.Itoa(l.conns), "-d" + strconv.Itoa(secs) + "s",
			"--timeout", strconv.Itoa(max(1, int(l.timeout/time.Second))) + "s", "-s", w.script,
			"http://" + l.addr + "/", "--", pool, mode}
		cmd := exec.CommandContext(ctx, w.path, args...)
		out, err := cmd.CombinedOutput()
		if cmd.ProcessState != nil {
			cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
			if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
				switches = float64(ru.Nvcsw + ru.Nivcsw)
			}
		}
		if err != nil {
			return r, cpu, fmt.Errorf("wrk: %v: %.500s", err, out)
		}
		r, err = parseWrk(out)
		return r, cpu, err
	}
	var s stats
	if l.warmup > 0 {
		wr, _, err := run(l.warmup, l.warmupPool)
		if err != nil {
			return s, err
		}
		s.Errors += wr.Connect + wr.Read + wr.Write + wr.Status + wr.Timeout
		s.OK += wr.Requests - wr.Status
	}
	from, srvFrom := snapCPU(os.Getpid(), l.pid), snapServer(l.pid)
	r, wrkCPU, err := run(l.duration, l.pool)
	to, srvTo := snapCPU(os.Getpid(), l.pid), snapServer(l.pid)
	if err != nil {
		return s, err
	}
	s.Requests = r.Requests
	if r.DurationUS > 0 {
		s.RPS = float64(r.Requests) / (float64(r.DurationUS) / 1e6)
	}
	s.ServerCPUUS = srvTo.perRequestUS(srvFrom, r.Requests)
	s.ServerSwitches = srvTo.switchesPerRequest(srvFrom, r.Requests)
	if r.Requests > 0 && wrkCPU > 0 {
		s.GeneratorCPUUS = wrkCPU.Seconds() * 1e6 / float64(r.Requests)
		s.GeneratorSwitches = switches / float64(r.Requests)
	}
	s.P50, s.P90, s.P99, s.P999, s.Max, s.Mean = r.P50/1000, r.P90/1000, r.P99/1000, r.P999/1000, r.Max/1000, r.Mean/1000
	errs := r.Connect + r.Read + r.Write + r.Status + r.Timeout
	s.Errors += errs
	s.OK += r.Requests - r.Status
	if errs > 0 {
		s.ErrorSamples = append(s.ErrorSamples, fmt.Sprintf("wrk: connect %d, read %d, write %d, status over 399 %d, timeout %d (a pool of unique requests that ran out, because wrk drove the gateway over twice as fast as the bench's generator and over 6,000/s, shows as 404s)",
			r.Connect, r.Read, r.Write, r.Status, r.Timeout))
	}
	// wrk has exited by the second snapshot: its CPU comes from its rusage.
	to.procs += wrkCPU.Seconds()
	s.OtherCPU = otherCPU(from, to)
	return s, nil
}
