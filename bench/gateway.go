package main

import (
	"bufio"
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
	// Its output goes through a pipe, as to a log collector: access-log lines are counted and
	// dropped (gigabytes over a run), the rest kept in the log file.
	out := &logSink{file: logf}
	pr, pw, err := os.Pipe()
	if err != nil {
		logf.Close()
		return nil, 0, err
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	// The store is the phase's (--store flags in s.extra), never the caller's GATEWAY_STORE.
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GATEWAY_STORE=") })
	cmd.Env = append(env, s.env...)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		logf.Close()
		return nil, 0, fmt.Errorf("start gateway: %w", err)
	}
	pw.Close() // the child holds its end
	drained := make(chan struct{})
	go func() { out.drain(pr); pr.Close(); logf.Close(); close(drained) }()
	g := &gatewayProc{bin: s.bin, data: s.data, addr: addr, logPath: s.log, fsync: s.fsync, pprof: s.pprof, cmd: cmd, exited: make(chan struct{}), api: newAPIClient(addr), out: out}
	go func() { g.waitErr = cmd.Wait(); <-drained; close(g.exited) }()
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
			return fmt.Errorf("gateway exited before ready (%v); log %s:\n%s", g.waitErr, g.logPath, tail(g.logPath, 20))
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("gateway not ready after %v; log %s:\n%s", total, g.logPath, tail(g.logPath, 20))
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
		return time.Since(start), fmt.Errorf("gateway exited with %v; log %s:\n%s", g.waitErr, g.logPath, tail(g.logPath, 20))
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

// logSink reads the gateway's output: access-log lines are counted, everything else is kept
// in the log file.
type logSink struct {
	file     *os.File
	requests atomic.Int64 // access-log lines seen
}

// accessLine marks an access-log line in either log format.
var accessLine = [][]byte{[]byte(`"msg":"request"`), []byte(" msg=request ")}

func (l *logSink) drain(r io.Reader) {
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		line, err := br.ReadSlice('\n')
		if len(line) > 0 {
			if bytes.Contains(line, accessLine[0]) || bytes.Contains(line, accessLine[1]) {
				l.requests.Add(1)
			} else {
				_, _ = l.file.Write(line)
			}
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}
