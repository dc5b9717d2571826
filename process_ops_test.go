package main

// Operations, tested on the real binary: start-up failures, starting without the identity
// provider, bodies refused before they are read, a full data disk.

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Every start-up failure exits 1 with one line naming the cause, and no stack trace. The
// cases at the default log level show that no log line comes before it: an issuer URL or an
// address that can never work is refused before anything is opened, and the data dir is
// opened before the identity provider is contacted.
func TestStartupFailuresExit1(t *testing.T) {
	bin := gatewayBinary(t)
	held := t.TempDir()
	startProc(t, held) // holds held/db's lock
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	idpDown := "http://" + deadAddr(t)
	type startCase struct {
		name  string
		args  []string
		env   string
		cause string
		info  bool // at the default log level: nothing logged before the line
	}
	second := startCase{"second gateway on the same data dir", []string{"--data", held}, "", "Another process is using this Badger database", false}
	lockedDown := startCase{"locked data dir, provider down", []string{"--data", held}, "", "Another process is using this Badger database", true}
	if testStore == "nats" {
		second.name, second.args, second.cause = "second gateway on the same NATS prefix", storeArgs(held, nil), "another gateway holds this NATS prefix"
		lockedDown.name, lockedDown.args, lockedDown.cause = "held NATS prefix, provider down", storeArgs(held, nil), "another gateway holds this NATS prefix"
	}
	lockedDown.args = append(lockedDown.args, "--auth", "oidc", "--oidc-issuer", idpDown, "--oidc-audience", "gw")
	for _, tc := range []startCase{
		second,
		{"missing --plans file", []string{"--plans", "/nonexistent/plans.json"}, "", "plans: open /nonexistent/plans.json", false},
		{"short GATEWAY_SECRET_KEY", nil, "GATEWAY_SECRET_KEY=c2hvcnQ=", "GATEWAY_SECRET_KEY: the secret key must be 32 bytes", false},
		{"unwritable --data", []string{"--data", filepath.Join(file, "data")}, "", "data dir: mkdir " + file + ": not a directory", false},
		{"issuer that can never be used", []string{"--auth", "oidc", "--oidc-issuer", "http://idp.example.com/", "--oidc-audience", "gw"}, "", "must be https", false},
		{"data disk under --min-free-disk", []string{"--min-free-disk", "1000000GiB"}, "", "under the floor", false},
		{"issuer with port 99999", []string{"--auth", "oidc", "--oidc-issuer", "http://127.0.0.1:99999/dex", "--oidc-audience", "gw"}, "", "port 99999 is not 1 to 65535", true},
		{"issuer with port 0", []string{"--auth", "oidc", "--oidc-issuer", "http://127.0.0.1:0/dex", "--oidc-audience", "gw"}, "", "port 0 is not 1 to 65535", true},
		{"issuer with a query and fragment", []string{"--auth", "oidc", "--oidc-issuer", "http://localhost:15556/dex?x=1#f", "--oidc-audience", "gw"}, "", "no query or fragment", true},
		{"address taken", []string{"--addr", taken.Addr().String()}, "", "address already in use", true},
		{"--min-free-disk under what Badger may still write", []string{"--min-free-disk", "256MiB"}, "",
			"--min-free-disk 256 MiB is under the 588 MiB Badger may still write after writes stop with 32 MiB memtables", false},
		{"--events-subject-prefix NATS does not take", []string{"--events-nats", "nats://127.0.0.1:1", "--events-subject-prefix", "a.*"}, "",
			`--events-subject-prefix "a.*"`, true},
		{"events under the records' subjects", []string{"--store", "nats", "--nats", "nats://127.0.0.1:1", "--events-nats", "nats://127.0.0.1:1"}, "",
			`--events-subject-prefix "gateway.events" is under --nats-prefix "gateway"`, true},
		lockedDown,
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"serve", "--data", t.TempDir(), "--addr", "127.0.0.1:0"}
			if !tc.info {
				args = append(args, "--log-level", "error")
			}
			args = append(args, tc.args...)
			cmd := exec.Command(bin, args...)
			cmd.Env = os.Environ()
			if tc.env != "" {
				cmd.Env = append(cmd.Env, tc.env)
			}
			start := time.Now()
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 {
				t.Fatalf("exit: %v, want status 1; output:\n%s", err, out)
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			if len(lines) != 1 || !strings.HasPrefix(lines[0], "gateway: ") || !strings.Contains(lines[0], tc.cause) {
				t.Fatalf("output is not one line naming %q:\n%s", tc.cause, out)
			}
			if strings.Contains(string(out), "goroutine ") || strings.Contains(string(out), "panic") {
				t.Fatalf("stack trace in the output:\n%s", out)
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %v to fail", d)
			}
		})
	}
}

// An unreachable identity provider is not a start-up failure: the gateway starts, is ready,
// and /readyz reports the provider.
func TestStartsWithIdentityProviderDown(t *testing.T) {
	down := deadAddr(t)
	p := startProc(t, t.TempDir(), "--auth", "oidc", "--oidc-issuer", "http://"+down, "--oidc-audience", "gw")
	res, err := http.Get(p.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body strings.Builder
	_, _ = bufio.NewReader(res.Body).WriteTo(&body)
	if res.StatusCode != 200 || !strings.Contains(body.String(), `"identity":"unavailable"`) {
		t.Fatalf("/readyz: %d %s", res.StatusCode, body.String())
	}
	p.mu.Lock()
	logs := p.stderr.String()
	p.mu.Unlock()
	if !strings.Contains(logs, `"level":"WARN","msg":"identity provider unreachable`) || !strings.Contains(logs, "connection refused") {
		t.Fatalf("no WARN with the cause in the logs:\n%s", logs)
	}
}

func TestServeHelpListsEveryVariable(t *testing.T) {
	out, _ := exec.Command(gatewayBinary(t), "serve", "--help").CombinedOutput()
	cfg, err := parseServe(nil, &strings.Builder{})
	if err != nil {
		t.Fatal(err)
	}
	_ = cfg
	for _, name := range []string{"GATEWAY_ADDR", "GATEWAY_DATA", "GATEWAY_MIN_FREE_DISK", "GATEWAY_CORS_ORIGINS",
		"GATEWAY_OIDC_ISSUER", "GATEWAY_OIDC_ALLOW_ANONYMOUS", "GATEWAY_SECRET_KEY", "GATEWAY_MEDIA_MAX_BYTES"} {
		if !strings.Contains(string(out), name) {
			t.Errorf("serve --help does not name %s:\n%s", name, out)
		}
	}
}

// rssBytes is a process's resident memory.
func rssBytes(t testing.TB, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// 40 concurrent anonymous 21 MiB bodies to 1 MiB routes: those with a Content-Length are
// refused from their headers, and resident memory grows by less than 64 MiB (it grew by about
// 540 MiB when the server read every body up to the media routes' cap first). A chunked body
// has no length to refuse it by: it is read up to the route's limit (1 MiB) in pooled blocks
// and refused there, so it costs at most the limit: 40 of them grow resident memory by less
// than 50 MiB (fasthttp's own reader doubled its buffer past the limit, about 3 MiB each).
func TestLargeBodiesRefusedBeforeRead(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	for _, tc := range []struct {
		name    string
		chunked bool
		limit   int64
	}{{"content-length", false, 64 << 20}, {"chunked", true, 50 << 20}} {
		t.Run(tc.name, func(t *testing.T) {
			p := startProc(t, t.TempDir())
			before, peak, refused := blastBodies(t, p, 40, 21<<20, tc.chunked)
			grew := peak - before
			t.Logf("RSS %d MiB before, peak %d MiB (+%d MiB); %d/40 answered 413", before>>20, peak>>20, grew>>20, refused)
			if grew >= tc.limit {
				t.Fatalf("resident memory grew by %d MiB, want under %d", grew>>20, tc.limit>>20)
			}
			if refused != 40 {
				t.Fatalf("%d of 40 answered 413", refused)
			}
		})
	}
}

// blastBodies sends n concurrent bodies of size bytes, half to the validate route and half
// to the webhook receiver (both 1 MiB), and returns the server's RSS before and at its peak,
// and how many were answered 413.
func blastBodies(t *testing.T, p *proc, n, size int, chunked bool) (before, peak int64, refused int64) {
	pid := p.cmd.Process.Pid
	host := strings.TrimPrefix(p.url, "http://")
	before = rssBytes(t, pid)
	var (
		wg       sync.WaitGroup
		top      atomic.Int64
		answered atomic.Int64
		stopPeek = make(chan struct{})
		peeked   = make(chan struct{})
	)
	go func() {
		defer close(peeked)
		for {
			if r := rssBytes(t, pid); r > top.Load() {
				top.Store(r)
			}
			select {
			case <-stopPeek:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	chunk := make([]byte, 64<<10)
	for i := range n {
		path := "/api/admin/apikeys/validate"
		if i%2 == 1 {
			path = "/api/ecom/webhook"
		}
		wg.Go(func() {
			c, err := net.Dial("tcp", host)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			hdr := "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
			if chunked {
				hdr += "Transfer-Encoding: chunked\r\n\r\n"
			} else {
				hdr += "Content-Length: " + strconv.Itoa(size) + "\r\n\r\n"
			}
			go func() {
				if _, err := c.Write([]byte(hdr)); err != nil {
					return
				}
				for sent := 0; sent < size; sent += len(chunk) {
					var err error
					if chunked {
						_, err = fmt.Fprintf(c, "%x\r\n%s\r\n", len(chunk), chunk)
					} else {
						_, err = c.Write(chunk)
					}
					if err != nil {
						return // the server closed: expected
					}
				}
			}()
			line, err := bufio.NewReader(c).ReadString('\n')
			if err == nil && strings.Contains(line, " 413 ") {
				answered.Add(1)
			} else {
				t.Errorf("%s (chunked %v): %q %v", path, chunked, line, err)
			}
		})
	}
	wg.Wait()
	close(stopPeek)
	<-peeked
	return before, top.Load(), answered.Load()
}

// The data dir on a small tmpfs (root only) that fills during sends: clients get 503
// storage_unavailable with Retry-After (never a reset, never a false success), /readyz is not
// ready, the process stays up; once space is freed sends succeed again, and every accepted
// message is delivered exactly once.
func TestFullDiskProcess(t *testing.T) {
	p, data, floor := startOnSmallDisk(t)
	t.Cleanup(func() {
		if t.Failed() {
			p.mu.Lock()
			lines := strings.Split(p.stderr.String(), "\n")
			p.mu.Unlock()
			t.Logf("gateway stderr (last lines):\n%s", strings.Join(lines[max(0, len(lines)-30):], "\n"))
			if f := os.Getenv("GATEWAY_TEST_STDERR"); f != "" {
				_ = os.WriteFile(f, []byte(strings.Join(lines, "\n")), 0o600)
			}
		}
	})
	tg := p.gw(t, data)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)

	// Someone else's file takes the disk down to 32 MiB over the floor...
	filler := fillDisk(t, data, floor+32<<20)

	// ...then, while 4 clients send, down to 8 MiB.
	var (
		mu       sync.Mutex
		accepted = map[string]string{} // message id → recipient
		refused  atomic.Int64
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	client := &http.Client{Timeout: 30 * time.Second}
	send := func(to string) (int, string, string) {
		body := fmt.Sprintf(`{"phone":%q,"message":"hello"}`, to)
		req, _ := http.NewRequest("POST", p.url+"/api/v1/messages/send", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("x-api-key", s.key)
		res, err := client.Do(req)
		if err != nil {
			t.Errorf("send to %s: %v (a reset or a refused connection)", to, err)
			return 0, "", ""
		}
		defer res.Body.Close()
		var raw strings.Builder
		_, _ = bufio.NewReader(res.Body).WriteTo(&raw)
		r := resp{status: res.StatusCode, header: res.Header, raw: []byte(raw.String())}
		return r.status, r.str("message_id") + r.str("code"), res.Header.Get("Retry-After")
	}
	for w := range 4 {
		wg.Go(func() {
			for i := 0; !stop.Load(); i++ {
				to := fmt.Sprintf("1555%02d%05d", w, i)
				status, idOrCode, retry := send(to)
				switch {
				case status == 200:
					mu.Lock()
					accepted[idOrCode] = to
					mu.Unlock()
				case status == 503 && idOrCode == "storage_unavailable" && retry != "":
					refused.Add(1)
				case status == 0:
					return
				default:
					t.Errorf("send to %s: %d %s", to, status, idOrCode)
					return
				}
			}
		})
	}
	eventually(t, 5*time.Second, "sends accepted before the disk fills", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(accepted) >= 20
	})
	t0 := time.Now()
	fillDisk(t, data, 8<<20)
	t.Logf("filled in %v", time.Since(t0))
	eventually(t, 10*time.Second, "sends refused with 503 storage_unavailable", func() bool { return refused.Load() >= 20 })
	res, err := http.Get(p.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 503 {
		t.Fatalf("/readyz %d on a full disk, want 503", res.StatusCode)
	}

	// Space returns: sends are accepted again, without a restart.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	before := len(accepted)
	eventually(t, 10*time.Second, "sends accepted again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(accepted) > before+20
	})
	stop.Store(true)
	wg.Wait()
	if err := p.cmd.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("the process died: %v", err)
	}
	t.Logf("recovered at %v", time.Since(t0))
	// Every accepted message was delivered, once.
	for id, to := range accepted {
		eventually(t, 10*time.Second, "delivery of "+id, func() bool {
			got := tg.simMessages(to)
			if len(got) > 1 {
				t.Fatalf("%s delivered %d times", to, len(got))
			}
			return len(got) == 1 && got[0]["id"] == id
		})
	}
	t.Logf("%d sends accepted (%d before space returned), %d refused with 503 storage_unavailable; checked at %v", len(accepted), before, refused.Load(), time.Since(t0))
}
