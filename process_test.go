package main

// Tests that run the gateway binary as its own process: kill -9, SIGTERM, the CLI.

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gateway/gateway/identity"
)

// builtBinary is a build made once per test run: the gateway (pkg ""), or another main package
// of the module's dependencies (nats-server).
type builtBinary struct {
	pkg, name string
	flags     []string // go build's flags beside -o
	once      sync.Once
	path      string
	err       error
}

var (
	// The gateway as the Dockerfile builds it (static, -trimpath), so TestDockerfile's build of
	// the same binary only links.
	plainBinary = builtBinary{flags: []string{"-trimpath"}}
	natsBinary  = builtBinary{pkg: "github.com/nats-io/nats-server/v2", name: "nats-server"}
)

// builtDirs holds the directories of the binaries built in this run, removed when it ends
// (each gateway build is 45 MB: left in the temp dir, a day of test runs filled the disk).
var builtDirs sync.Map

// removeBuilt removes the binaries this run built (TestMain, after the tests).
func removeBuilt() {
	builtDirs.Range(func(dir, _ any) bool {
		_ = os.RemoveAll(dir.(string))
		return true
	})
}

// gatewayBinary builds the gateway once per test run. Every process suite builds its binary
// with builtBinary.get, so -short (make test-short) skips them all in that one place.
func gatewayBinary(t testing.TB) string {
	t.Helper()
	return plainBinary.get(t)
}

// prebuild builds the process suites' gateway binaries in the background at the lowest CPU
// priority (TestMain, unless -short): the in-process tests that run first leave a core mostly
// idle, so the first process test finds its binary built instead of waiting for a clean
// cache's compile. A test that needs a binary still being built waits for it (sync.Once).
func prebuild() {
	go func() {
		_, _ = plainBinary.buildAt(true)
		_, _ = fakeWABinary.buildAt(true)
	}()
}

// get builds the binary (once) and returns its path.
func (b *builtBinary) get(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the process suites build and run the gateway binary")
	}
	path, err := b.build()
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// build builds the binary (once) and returns its path; TestMain calls it where no test is
// there to fail.
func (b *builtBinary) build() (string, error) { return b.buildAt(false) }

// buildAt is build, the compiler niced to the lowest priority when low (and nice is there).
func (b *builtBinary) buildAt(low bool) (string, error) {
	b.once.Do(func() {
		pkg, name := cmp.Or(b.pkg, "."), cmp.Or(b.name, "gateway")
		dir, err := os.MkdirTemp("", name+"-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, name)
		builtDirs.Store(dir, true)
		args := append(append([]string{"build"}, b.flags...), "-o", b.path, pkg)
		cmd := exec.Command("go", args...)
		if low {
			if nice, err := exec.LookPath("nice"); err == nil {
				// Killed with the test binary: a short run that ends first leaves no build behind.
				cmd = dieWithTest(exec.Command(nice, append([]string{"-n", "19", "go"}, args...)...))
			}
		}
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			b.err = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	})
	return b.path, b.err
}

// proc is a gateway process.
type proc struct {
	cmd    *exec.Cmd
	url    string
	stderr *strings.Builder
	mu     *sync.Mutex
}

func freeAddr(t testing.TB) string {
	addr, err := freeLoopbackAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// deadAddr is a loopback address where nothing listens for as long as the test runs: a socket
// bound to it and never listening holds it, so no other test's server can take it (a freed
// port can be) and a connection to it is refused.
func deadAddr(t testing.TB) string {
	t.Helper()
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}

// freeLoopbackAddr is a loopback address free a moment ago (freeAddr without a test), on a port
// below the kernel's ephemeral range when it has room there, never the same one twice in a
// test binary. A process killed and started again on its address leaves the port free while
// it is down: a port the kernel picks (an httptest server's, a connection's own end) comes from
// the ephemeral range, so it cannot take one from below it, and no other freeAddr hands it out
// again (a port of the ephemeral range was taken so once: process_test.go, proc.listening).
func freeLoopbackAddr() (string, error) {
	if addr, ok := lowPorts.next(); ok {
		return addr, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// lowPorts hands out loopback ports between lowPortsFrom and the start of the kernel's
// ephemeral range (net.ipv4.ip_local_port_range), each once, from a random place (test
// binaries running side by side rarely meet; one that does finds the port bound and moves on).
var lowPorts portPicker

const lowPortsFrom = 20000

type portPicker struct {
	once  sync.Once
	mu    sync.Mutex
	hi    int // the ports are [lowPortsFrom, hi); 0 when the range could not be read or leaves no room
	start int // the first port's place in the range
	given int
}

func (p *portPicker) init() {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	var first, last int
	if err == nil {
		_, err = fmt.Sscan(string(b), &first, &last)
	}
	if err != nil || first-lowPortsFrom < 1000 {
		return
	}
	p.hi = first
	p.start = int(time.Now().UnixNano() % int64(p.hi-lowPortsFrom))
}

// next is a free loopback address from the range, or false when there is none.
func (p *portPicker) next() (string, bool) {
	p.once.Do(p.init)
	p.mu.Lock()
	defer p.mu.Unlock()
	for n := p.hi - lowPortsFrom; p.given < n; {
		port := lowPortsFrom + (p.start+p.given)%n
		p.given++
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue // another program's
		}
		_ = ln.Close()
		return addr, true
	}
	return "", false
}

// answers reports whether GET url answers status (false while nothing answers there).
func answers(url string, status int) bool {
	res, err := http.Get(url)
	if err != nil {
		return false
	}
	res.Body.Close()
	return res.StatusCode == status
}

// startProc starts `gateway serve` with args and waits until /readyz answers.
func startProc(t testing.TB, data string, args ...string) *proc {
	t.Helper()
	return startProcBin(t, gatewayBinary(t), data, args...)
}

// startProcBin is startProc with another build of the gateway. The address is free when
// chosen but not held, so another process may take it first: a start that fails on it is made
// again at a new address. A start that is not ready in time fails with the process's log.
func startProcBin(t testing.TB, bin, data string, args ...string) *proc {
	t.Helper()
	return startProcEnv(t, bin, data, nil, args...)
}

// startProcEnv is startProcBin with env (NAME=value) added to the process's environment, so a
// test that runs beside others sets a variable (a fault point) for its own process only, where
// t.Setenv would set it for every process started meanwhile.
func startProcEnv(t testing.TB, bin, data string, env []string, args ...string) *proc {
	t.Helper()
	args = append(args, storeArgs(data, args)...)
	args = append(args, outboxArgs(args)...)
	for attempt := 1; ; attempt++ {
		p := launchProc(t, bin, data, env, args)
		if p.ready(t, attempt < 3) {
			return p
		}
	}
}

// ready waits up to 30 s for /readyz: false when the process lost its address to another
// (and retry allows starting again), a failure with its log when it exits or is not ready.
// An answer counts once the process has logged that it listens on its address: another
// program that took the address first (an httptest server answering 200 to any path) would
// pass for the gateway otherwise.
func (p *proc) ready(t testing.TB, retry bool) bool {
	t.Helper()
	const wait = 30 * time.Second
	start := time.Now()
	for !p.listening() || !answers(p.url+"/readyz", 200) {
		log := p.log()
		if retry && strings.Contains(log, "address already in use") {
			_ = p.cmd.Wait()
			return false
		}
		if gone := exited(p.cmd.Process.Pid); gone || time.Since(start) > wait {
			t.Fatalf("gateway process not ready at %s (exited: %v, %v after its start); its log ends:\n%s",
				p.url, gone, time.Since(start).Round(time.Millisecond), log[max(0, len(log)-4000):])
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

// launchProc starts `gateway serve` at a free address, its stderr kept in p.
func launchProc(t testing.TB, bin, data string, env, args []string) *proc {
	addr := freeAddr(t)
	cmd := dieWithTest(exec.Command(bin, append([]string{"serve", "--data", data, "--addr", addr, "--log-requests=false"}, args...)...))
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
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
	return p
}

// listening reports whether the process logged that it listens on its own address (main.go's
// "gateway listening", written once the address is bound).
func (p *proc) listening() bool {
	log := p.log()
	i := strings.Index(log, "gateway listening")
	if i < 0 {
		return false
	}
	line, _, _ := strings.Cut(log[i:], "\n")
	return strings.Contains(line, strings.TrimPrefix(p.url, "http://"))
}

// log is what the process wrote to stderr so far.
func (p *proc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// exited reports whether process pid has ended (a zombie not yet waited for included).
func exited(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the command's closing parenthesis: "pid (comm) S ...".
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] == 'Z' || s[i+2] == 'X'
}

func (p *proc) gw(t testing.TB, data string) *testGW {
	_, issuer, err := identity.NewDev(data)
	if err != nil {
		t.Fatal(err)
	}
	return &testGW{t: t, gwState: &gwState{url: p.url, issuer: issuer, client: &http.Client{Timeout: 30 * time.Second}, data: data}}
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
	// The log reader may still be draining the pipe after the exit.
	eventually(t, 5*time.Second, "a clean stop in the logs", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return strings.Contains(p.stderr.String(), `"msg":"stopped"`)
	})
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

// metric reads one unlabelled sample from /metrics.
func (tg *testGW) metric(name string) float64 {
	tg.t.Helper()
	r := tg.do("GET", "/metrics", nil, nil)
	for _, line := range strings.Split(string(r.raw), "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			var f float64
			fmt.Sscan(v, &f)
			return f
		}
	}
	return -1
}

// Messages accepted into the outbox survive a kill -9 in flight: after the restart every one is
// delivered, exactly once.
func TestKill9AcceptedMessagesDeliveredOnce(t *testing.T) {
	data := t.TempDir()
	p := startProc(t, data)
	tg := p.gw(t, data)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	want(t, tg.do("POST", "/api/dev/sim/latency", nil, map[string]any{"ms": 60000}), 200, "")

	const n = 20
	for i := 0; i < n; i++ {
		go func() {
			// These requests die with the process; their outcome is checked at the sim.
			req, _ := http.NewRequest("POST", p.url+"/api/v1/messages/send", strings.NewReader(fmt.Sprintf(`{"phone":"1555020%04d","message":"m%d"}`, i, i)))
			req.Header.Set("x-api-key", s.key)
			if res, err := http.DefaultClient.Do(req); err == nil {
				res.Body.Close()
			}
		}()
	}
	eventually(t, 10*time.Second, "all messages accepted into the outbox", func() bool {
		return tg.metric("gateway_outbox_pending") == n
	})
	p.kill9(t)

	p = startProc(t, data)
	tg = p.gw(t, data)
	eventually(t, 20*time.Second, "every accepted message delivered", func() bool {
		for i := 0; i < n; i++ {
			if len(tg.simMessages(fmt.Sprintf("1555020%04d", i))) == 0 {
				return false
			}
		}
		return tg.metric("gateway_outbox_pending") == 0
	})
	for i := 0; i < n; i++ {
		got := tg.simMessages(fmt.Sprintf("1555020%04d", i))
		if len(got) != 1 || got[0]["text"] != fmt.Sprintf("m%d", i) {
			t.Fatalf("number %d got %v", i, got)
		}
	}
	eventually(t, 5*time.Second, "messagesSent to count the recovered messages", func() bool {
		return tg.account(s.key)["messagesSent"] == float64(n)
	})
	// And once more after a second restart: nothing is sent twice.
	p.kill9(t)
	p = startProc(t, data)
	tg = p.gw(t, data)
	tg.waitStatus(tg.token("alice", ""), "CONNECTED")
	for i := 0; i < n; i++ {
		if got := tg.simMessages(fmt.Sprintf("1555020%04d", i)); len(got) != 1 {
			t.Fatalf("number %d got %d messages after a second restart", i, len(got))
		}
	}
}

// Async campaigns killed mid-way finish after the restart: every number gets exactly one
// message, and the details list each number once.
func TestKill9CampaignsResume(t *testing.T) {
	data := t.TempDir()
	p := startProc(t, data)
	tg := p.gw(t, data)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	const campaigns, per = 3, 50
	ids := make([]string, campaigns)
	numbers := make([][]string, campaigns)
	for c := 0; c < campaigns; c++ {
		for i := 0; i < per; i++ {
			numbers[c] = append(numbers[c], fmt.Sprintf("1555%d%06d", c+1, i))
		}
		r := tg.bulk(s.key, map[string]any{"numbers": numbers[c], "message": fmt.Sprintf("campaign %d", c), "delay": 0.02, "async": true})
		want(t, r, 202, "")
		ids[c] = r.str("campaign_id")
	}
	eventually(t, 20*time.Second, "campaigns mid-way", func() bool {
		c := tg.do("GET", "/api/v1/campaigns/"+ids[campaigns-1], keyAuth(s.key), nil).obj()
		return c["total_processed"].(float64) >= 10
	})
	p.kill9(t)

	p = startProc(t, data)
	tg = p.gw(t, data)
	for _, id := range ids {
		eventually(t, 60*time.Second, "campaign "+id+" completed", func() bool {
			return tg.do("GET", "/api/v1/campaigns/"+id, keyAuth(s.key), nil).str("status") == "completed"
		})
	}
	for c, id := range ids {
		r := tg.do("GET", "/api/v1/campaigns/"+id, keyAuth(s.key), nil).obj()
		details := r["details"].([]any)
		if len(details) != per || r["successful"] != float64(per) {
			t.Fatalf("campaign %d: %d details, %v successful", c, len(details), r["successful"])
		}
		for i, d := range details {
			if d.(map[string]any)["number"] != numbers[c][i] {
				t.Fatalf("campaign %d detail %d is %v, want %s", c, i, d, numbers[c][i])
			}
		}
		for _, n := range numbers[c] {
			if got := tg.simMessages(n); len(got) != 1 {
				t.Fatalf("%s received %d messages", n, len(got))
			}
		}
	}
	// messagesSent is written behind (README: Allowance). With the outbox in Badger (at most
	// every 20 ms, one write in flight) a kill -9 may lose the increments of that window: at 3
	// campaigns of 50 a second, about 3 per 20 ms, so at most a few times that. On the log
	// outbox (the default) and on NATS (every second) the boot recounts what the kill left out
	// from the outcome records, so the count is exact. The allowance itself stays safe on all.
	a := tg.account(s.key)
	lost := 0
	if testStore != "nats" && os.Getenv("GATEWAY_OUTBOX") == "badger" {
		lost = 12
	}
	if sent := int(a["messagesSent"].(float64)); sent > campaigns*per || sent < campaigns*per-lost {
		t.Fatalf("messagesSent %d, want %d (at most %d lost by the kill)", sent, campaigns*per, lost)
	}
	if rem := int(a["remaining_month"].(float64)); rem > 1000-campaigns*per {
		t.Fatalf("remaining_month %d after %d messages: the crash gave allowance back", rem, campaigns*per)
	}
}

// TestFreeAddrBelowTheEphemeralRange: freeAddr's ports lie below the kernel's ephemeral range
// (where no port the kernel picks can take one while its process is down), each handed out
// once, each free.
func TestFreeAddrBelowTheEphemeralRange(t *testing.T) {
	lowPorts.once.Do(lowPorts.init)
	if lowPorts.hi == 0 {
		t.Skip("the ephemeral range leaves no room below it here (or /proc is not Linux's)")
	}
	seen := map[string]bool{}
	for range 200 {
		addr := freeAddr(t)
		if seen[addr] {
			t.Fatalf("%s handed out twice", addr)
		}
		seen[addr] = true
		_, port, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		n, err := strconv.Atoi(port)
		if err != nil {
			t.Fatal(err)
		}
		if n < lowPortsFrom || n >= lowPorts.hi {
			t.Fatalf("%s outside [%d, %d)", addr, lowPortsFrom, lowPorts.hi)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("%s is not free: %v", addr, err)
		}
		_ = ln.Close()
	}
}
