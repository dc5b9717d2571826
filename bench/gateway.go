package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"
)

// gatewayProc is one gateway process on loopback, started from the binary under test.
type gatewayProc struct {
	bin     string
	data    string
	addr    string
	logPath string
	fsync   string // batch | interval
	pprof   string // its --pprof address ("" = none)
	cmd     *exec.Cmd
	exited  chan struct{} // closed when the process has exited and its output is drained
	waitErr error
	api     *apiClient
	out     *logSink
}

// gatewaySpec is how to start a gateway.
type gatewaySpec struct {
	bin   string
	data  string   // data dir (created by the gateway)
	log   string   // file for its stderr/stdout
	fsync string   // batch | interval
	pprof string   // --pprof address ("" = none)
	extra []string // more serve flags
	env   []string // more environment (GOGC=...)
}

// startGateway starts `gateway serve` on a free loopback port and waits for /readyz.
func startGateway(ctx context.Context, s gatewaySpec) (*gatewayProc, time.Duration, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, 0, err
	}
	logf, err := os.OpenFile(s.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, 0, err
	}
	if err := writePlans(s.data); err != nil {
		logf.Close()
		return nil, 0, err
	}
	// The gateway's defaults (DESIGN.md section 8): info logs and the access log on. Only
	// what the run needs is set, and a loopback pprof address for the profile.
	args := append([]string{"serve",
		"--data", s.data, "--addr", addr, "--network", "sim", "--auth", "dev", "--fsync", s.fsync,
		"--plans", plansPath(s.data), "--default-plan", benchPlan,
	}, s.extra...)
	if s.pprof != "" {
		args = append(args, "--pprof", s.pprof)
	}
	cmd := exec.Command(s.bin, args...)
	// Its output goes to a file, as a production gateway's goes to a log file or journald; no
	// process reads it while a generator measures (a reader in the bench's process was the
	// generator's cost, paid against the gateway only). Between measurements and at the exit
	// the harness reads what was appended: access-log lines are counted and their bytes freed
	// (gigabytes over a run), everything else is kept in the log file.
	outf, err := os.OpenFile(s.log+".out", os.O_CREATE|os.O_RDWR|os.O_TRUNC|os.O_APPEND, 0o600)
	if err != nil {
		logf.Close()
		return nil, 0, err
	}
	out := &logSink{file: logf, raw: outf}
	cmd.Stdout, cmd.Stderr = outf, outf
	// The store is the phase's (--store flags in s.extra), never the caller's GATEWAY_STORE.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GATEWAY_STORE=") })
	cmd.Env = append(env, s.env...)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		outf.Close()
		logf.Close()
		return nil, 0, fmt.Errorf("start gateway: %w", err)
	}
	g := &gatewayProc{bin: s.bin, data: s.data, addr: addr, logPath: s.log, fsync: s.fsync, pprof: s.pprof, cmd: cmd, exited: make(chan struct{}), api: newAPIClient(addr), out: out}
	go func() { g.waitErr = cmd.Wait(); out.close(); close(g.exited) }()
	if err := g.waitReady(ctx, 2*time.Minute); err != nil {
		g.kill()
		return nil, 0, err
	}
	return g, time.Since(start), nil
}

// benchPlan caps requests and messages far above what a run sends, so the counting code paths
// (daily cap, monthly allowance) run without ever refusing.
const benchPlan = "bench"

func plansPath(data string) string { return data + ".plans.json" }

func writePlans(data string) error {
	plans := fmt.Sprintf(`{%q: {"rate_limit": 1000000000, "monthly_messages": 1000000000}}`, benchPlan)
	return os.WriteFile(plansPath(data), []byte(plans), 0o600)
}

// freeAddr picks a free loopback port. Another process could take it before the gateway
// binds; startGateway then fails loudly rather than measuring the wrong server.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitReady polls /readyz until it answers 200, the process exits, or the deadline passes.
func (g *gatewayProc) waitReady(ctx context.Context, total time.Duration) error {
	deadline := time.Now().Add(total)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		if st, _, err := g.api.do("GET", "/readyz", nil, nil); err == nil && st == 200 {
			return nil
		}
		select {
		case <-g.exited:
			return fmt.Errorf("gateway exited before ready (%v); log %s:\n%s", g.waitErr, g.logPath, g.logTail())
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gateway not ready after %v; log %s:\n%s", total, g.logPath, g.logTail())
		}
	}
}

// stop sends SIGTERM and waits for a graceful exit (SIGKILL after the timeout).
func (g *gatewayProc) stop(timeout time.Duration) (time.Duration, error) {
	start := time.Now()
	g.api.close()
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return 0, err
	}
	select {
	case <-g.exited:
	case <-time.After(timeout):
		g.kill()
		return time.Since(start), fmt.Errorf("gateway did not stop within %v: killed", timeout)
	}
	var exit *exec.ExitError
	if g.waitErr != nil && !errors.As(g.waitErr, &exit) {
		return time.Since(start), g.waitErr
	}
	if g.waitErr != nil {
		return time.Since(start), fmt.Errorf("gateway exited with %v; log %s:\n%s", g.waitErr, g.logPath, g.logTail())
	}
	return time.Since(start), nil
}

func (g *gatewayProc) kill() {
	_ = g.cmd.Process.Kill()
	<-g.exited
	g.api.close()
}

// token mints a dev ID token with `gateway token` (the same signing key as the server).
func mintToken(bin, data, uid, role string) (string, error) {
	args := []string{"token", "--data", data, "--uid", uid, "--ttl", "6h",
		"--name", "Bench " + uid, "--email", uid + "@bench.example.com"}
	if role != "" {
		args = append(args, "--role", role)
	}
	var out, errb bytes.Buffer
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("gateway token --uid %s: %v: %s", uid, err, strings.TrimSpace(errb.String()))
	}
	tok := strings.TrimSpace(out.String())
	if tok == "" {
		return "", fmt.Errorf("gateway token --uid %s printed nothing", uid)
	}
	return tok, nil
}

// gatewayVersion is what `gateway version` prints.
func gatewayVersion(bin string) string {
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		return "unknown"
	}
	return strings.TrimSpace(string(out))
}

// tail returns the last n lines of a file (for error reports).
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// apiClient makes the harness's own (non-measured) calls: provisioning, captures, checks.
type apiClient struct {
	addr string
	hc   *fasthttp.HostClient
}

func newAPIClient(addr string) *apiClient {
	return &apiClient{addr: addr, hc: &fasthttp.HostClient{
		Addr: addr, MaxConns: 64, MaxIdemponentCallAttempts: 1,
		ReadTimeout: 60 * time.Second, WriteTimeout: 60 * time.Second,
		MaxConnWaitTimeout: 60 * time.Second, NoDefaultUserAgentHeader: true,
	}}
}

// header is one request header.
type header struct{ name, value string }

func bearer(tok string) header { return header{"Authorization", "Bearer " + tok} }

// do sends one request and returns the status and a copy of the body.
func (a *apiClient) do(method, path string, hdrs []header, body []byte) (int, []byte, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	a.fill(req, method, path, hdrs, body)
	if err := a.hc.Do(req, resp); err != nil {
		return 0, nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	return resp.StatusCode(), append([]byte(nil), resp.Body()...), nil
}

func (a *apiClient) fill(req *fasthttp.Request, method, path string, hdrs []header, body []byte) {
	req.Header.SetMethod(method)
	req.SetRequestURI("http://" + a.addr + path)
	for _, h := range hdrs {
		req.Header.Set(h.name, h.value)
	}
	if body != nil {
		req.Header.SetContentType("application/json")
		req.SetBody(body)
	}
}

func (a *apiClient) close() { a.hc.CloseIdleConnections() }

// workDir makes the run's scratch directory.
// workDir checks the gateway binary and makes a fresh work dir; cleanup removes it unless keep
// (then its path is printed).
func workDir(gateway, prefix string, keep bool, out io.Writer) (dir string, cleanup func(), err error) {
	if _, err := os.Stat(gateway); err != nil {
		return "", nil, fmt.Errorf("--gateway: %w (build it first: go build -o %s .)", err, gateway)
	}
	if dir, err = os.MkdirTemp("", prefix); err != nil {
		return "", nil, err
	}
	if keep {
		fmt.Fprintf(out, "work dir (kept): %s\n", dir)
		return dir, func() {}, nil
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

func dataDir(work, name string) string { return filepath.Join(work, name) }

// logTail returns the last lines of the gateway's log (for error reports), read up to now.
func (g *gatewayProc) logTail() string {
	g.out.catchUp()
	return tail(g.logPath, 20)
}

// logSink reads the gateway's output file: access-log lines are counted and their bytes
// freed, everything else is kept in the log file. It reads only when asked (catchUp), never
// while a generator measures.
type logSink struct {
	mu       sync.Mutex
	file     *os.File // the kept lines
	raw      *os.File // the gateway's stdout and stderr (append-only); nil once closed
	read     int64    // bytes of raw read so far
	partial  []byte   // a line not yet ended
	buf      []byte
	requests atomic.Int64 // access-log lines seen
}

// accessLine marks an access-log line in either log format.
var accessLine = [][]byte{[]byte(`"msg":"request"`), []byte(" msg=request ")}

// catchUp reads what the gateway appended since the last call, then frees the bytes read.
func (l *logSink) catchUp() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.raw == nil {
		return
	}
	if l.buf == nil {
		l.buf = make([]byte, 1<<20)
	}
	for {
		n, err := l.raw.ReadAt(l.buf, l.read)
		l.read += int64(n)
		chunk := l.buf[:n]
		for len(chunk) > 0 {
			i := bytes.IndexByte(chunk, '\n')
			if i < 0 {
				l.partial = append(l.partial, chunk...)
				break
			}
			line := chunk[:i+1]
			if len(l.partial) > 0 {
				line = append(l.partial, line...)
				l.partial = l.partial[:0]
			}
			l.line(line)
			chunk = chunk[i+1:]
		}
		if err != nil || n == 0 {
			break
		}
	}
	// Give the disk back (the file keeps its size and the gateway its append offset); a file
	// system without holes keeps the bytes until the work dir goes.
	_ = syscall.Fallocate(int(l.raw.Fd()), fallocPunchHole|fallocKeepSize, 0, l.read)
}

// fallocate(2)'s modes (linux/falloc.h), which package syscall does not name.
const (
	fallocKeepSize  = 0x01
	fallocPunchHole = 0x02
)

func (l *logSink) line(line []byte) {
	if bytes.Contains(line, accessLine[0]) || bytes.Contains(line, accessLine[1]) {
		l.requests.Add(1)
		return
	}
	_, _ = l.file.Write(line)
}

// close reads the rest once the gateway has exited, then closes both files.
func (l *logSink) close() {
	l.catchUp()
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.partial) > 0 {
		l.line(l.partial)
	}
	l.raw.Close()
	l.file.Close()
	l.raw = nil
}
