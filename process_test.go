package main

// Tests that run the gateway binary as its own process: kill -9, SIGTERM, the CLI.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gateway/gateway/identity"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// gatewayBinary builds the gateway once per test run.
func gatewayBinary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gateway-bin-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "gateway")
		out, err := exec.Command("go", "build", "-o", binPath, ".").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// proc is a gateway process.
type proc struct {
	cmd    *exec.Cmd
	url    string
	stderr *strings.Builder
	mu     *sync.Mutex
}

func freeAddr(t testing.TB) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startProc starts `gateway serve` with args and waits until /readyz answers.
func startProc(t testing.TB, data string, args ...string) *proc {
	t.Helper()
	addr := freeAddr(t)
	cmd := exec.Command(gatewayBinary(t), append([]string{"serve", "--data", data, "--addr", addr, "--log-requests=false"}, args...)...)
	p := &proc{cmd: cmd, url: "http://" + addr, stderr: &strings.Builder{}, mu: &sync.Mutex{}}
	pr, pw := io.Pipe()
	cmd.Stderr = pw
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			p.mu.Lock()
			p.stderr.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
	}()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait(); pw.Close() })
	eventually(t, 20*time.Second, "gateway process ready", func() bool {
		res, err := http.Get(p.url + "/readyz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == 200
	})
	return p
}

func (p *proc) gw(t testing.TB, data string) *testGW {
	_, issuer, err := identity.NewDev(data)
	if err != nil {
		t.Fatal(err)
	}
	return &testGW{t: t, url: p.url, issuer: issuer, client: &http.Client{Timeout: 30 * time.Second}, cfg: config{data: data}}
}

func (p *proc) kill9(t testing.TB) {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = p.cmd.Wait()
}

// After kill -9 the daily counter resumes from its durable mark: the caller loses at most one
// block (100) of unused allowance, and the cap is never exceeded.
func TestKill9CounterResumesFromMark(t *testing.T) {
	data := t.TempDir()
	plans := writePlans(t, 300)
	p := startProc(t, data, "--plans", plans)
	tg := p.gw(t, data)
	admin := tg.token("root", "admin")
	tg.newClient("alice")
	raw := tg.newKey(admin, "alice", nil).str("rawKey")
	const before = 42
	for i := 0; i < before; i++ {
		want(t, tg.do("GET", "/api/v1/account", keyAuth(raw), nil), 200, "")
	}
	p.kill9(t)

	p = startProc(t, data, "--plans", plans)
	tg = p.gw(t, data)
	a := tg.do("GET", "/api/v1/account", keyAuth(raw), nil)
	want(t, a, 200, "")
	used := 300 - int(a.obj()["remaining_today"].(float64))
	if used < before+1 || used > before+1+100 {
		t.Fatalf("after kill -9 the day's count is %d, want between %d and %d", used, before+1, before+101)
	}
	granted := before + 1
	for tg.do("GET", "/api/v1/account", keyAuth(raw), nil).status == 200 {
		granted++
	}
	if granted > 300 {
		t.Fatalf("granted %d calls with a daily cap of 300", granted)
	}
}

// SIGTERM drains and stops cleanly, and the next start serves the same keys.
func TestSIGTERMGracefulShutdown(t *testing.T) {
	data := t.TempDir()
	p := startProc(t, data)
	tg := p.gw(t, data)
	admin := tg.token("root", "admin")
	tg.newClient("alice")
	raw := tg.newKey(admin, "alice", nil).str("rawKey")
	want(t, tg.do("GET", "/api/v1/account", keyAuth(raw), nil), 200, "")
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("exit after SIGTERM: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("no exit after SIGTERM")
	}
	p.mu.Lock()
	logs := p.stderr.String()
	p.mu.Unlock()
	if !strings.Contains(logs, `"msg":"stopped"`) {
		t.Fatalf("no clean stop in logs:\n%s", logs)
	}
	p = startProc(t, data)
	tg = p.gw(t, data)
	a := tg.do("GET", "/api/v1/account", keyAuth(raw), nil)
	if want(t, a, 200, ""); a.obj()["api_calls"] != float64(2) {
		t.Fatalf("after restart: %s", a.raw)
	}
}

func TestCLI(t *testing.T) {
	bin := gatewayBinary(t)
	out, err := exec.Command(bin, "version").Output()
	if err != nil || !strings.HasPrefix(string(out), "gateway ") {
		t.Fatalf("version: %q %v", out, err)
	}
	data := t.TempDir()
	tok, err := exec.Command(bin, "token", "--data", data, "--uid", "u1", "--role", "admin").Output()
	if err != nil || strings.Count(strings.TrimSpace(string(tok)), ".") != 2 {
		t.Fatalf("token: %q %v", tok, err)
	}
	if _, err := os.Stat(filepath.Join(data, "dev-idp.pem")); err != nil {
		t.Fatal(err)
	}
	if err := exec.Command(bin, "token", "--data", data).Run(); err == nil {
		t.Fatal("token without --uid succeeded")
	}
	if err := exec.Command(bin, "serve", "--fsync", "never").Run(); err == nil {
		t.Fatal("serve with a bad --fsync succeeded")
	}
	// Environment variables set flags.
	cmd := exec.Command(bin, "serve", "--data", t.TempDir())
	cmd.Env = append(os.Environ(), "GATEWAY_AUTH=ldap")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "--auth") {
		t.Fatalf("GATEWAY_AUTH not applied: %v %s", err, out)
	}
}
