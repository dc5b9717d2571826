package main

// Faults of the NATS store, on the real binary: the NATS server stopped and started again, and a
// full records stream. The NATS server runs as its own process here (built from the
// nats-server module the go.mod pins), so it can die and come back while the gateway runs.

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// natsServerBinary builds nats-server (the version go.mod pins) once per test run.
func natsServerBinary(t testing.TB) string { return natsBinary.get(t) }

// natsProc is a nats-server process with JetStream; stop and start keep its port and store.
type natsProc struct {
	t    testing.TB
	conf string
	url  string
	cmd  *exec.Cmd
}

func startNATSProc(t testing.TB) *natsProc {
	t.Helper()
	dir := t.TempDir()
	addr := freeAddr(t)
	conf := filepath.Join(dir, "nats.conf")
	// What deploy/nats.conf sets for the gateway: messages large enough for an outbox record
	// holding --media-max-bytes of media.
	cfg := fmt.Sprintf("listen: %q\nmax_payload: 32MB\njetstream {\n  store_dir: %q\n}\n", addr, filepath.Join(dir, "js"))
	if err := os.WriteFile(conf, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	n := &natsProc{t: t, conf: conf, url: "nats://" + addr}
	n.start()
	t.Cleanup(func() { n.kill() })
	return n
}

func (n *natsProc) start() {
	n.t.Helper()
	n.cmd = exec.Command(natsServerBinary(n.t), "-c", n.conf)
	if err := n.cmd.Start(); err != nil {
		n.t.Fatal(err)
	}
	eventually(n.t, 20*time.Second, "nats-server listening", func() bool {
		c, err := net.DialTimeout("tcp", strings.TrimPrefix(n.url, "nats://"), time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

func (n *natsProc) kill() {
	if n.cmd != nil && n.cmd.Process != nil {
		_ = n.cmd.Process.Signal(syscall.SIGKILL)
		_ = n.cmd.Wait()
		n.cmd = nil
	}
}

// The NATS server dies (kill -9) under a running gateway and comes back: meanwhile sends answer
// 503 storage_unavailable with Retry-After and /readyz is not ready, while what the gateway
// holds in memory (the key's and the account's counters) is still read; afterwards sends
// succeed again without restarting the gateway, and every message accepted before, during or
// after is delivered exactly once.
func TestNATSServerRestart(t *testing.T) {
	n := startNATSProc(t)
	data := t.TempDir()
	p := startProc(t, data, "--store", "nats", "--nats", n.url, "--nats-prefix", "restart")
	tg := p.gw(t, data)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	send := func(to string) resp {
		return tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": to, "message": "hi " + to})
	}
	want(t, send("15550900001"), 200, "")

	n.kill()
	var refused resp
	eventually(t, 20*time.Second, "sends refused while NATS is down", func() bool {
		refused = send("15550900002")
		if refused.status == 200 {
			t.Fatalf("a send was accepted while NATS was down: %s", refused.raw)
		}
		return refused.status == 503
	})
	want(t, refused, 503, "storage_unavailable")
	if refused.header.Get("Retry-After") == "" {
		t.Fatalf("503 without Retry-After: %v", refused.header)
	}
	if r := tg.do("GET", "/readyz", nil, nil); r.status != 503 {
		t.Fatalf("/readyz while NATS is down: %d %s", r.status, r.raw)
	}
	a := tg.do("GET", "/api/v1/account", keyAuth(s.key), nil)
	want(t, a, 200, "")
	// Some time down, longer than the lease's renewal period.
	time.Sleep(3 * time.Second)
	want(t, send("15550900003"), 503, "storage_unavailable")

	n.start()
	eventually(t, 30*time.Second, "sends accepted again", func() bool {
		r := send("15550900004")
		if r.status != 200 && r.status != 503 {
			t.Fatalf("send after NATS came back: %d %s", r.status, r.raw)
		}
		return r.status == 200
	})
	want(t, tg.do("GET", "/readyz", nil, nil), 200, "")
	for _, to := range []string{"15550900001", "15550900004"} {
		eventually(t, 20*time.Second, to+" delivered", func() bool { return len(tg.simMessages(to)) >= 1 })
	}
	// Nothing refused was sent; nothing accepted was sent twice.
	for to, want := range map[string]int{"15550900001": 1, "15550900002": 0, "15550900003": 0, "15550900004": 1} {
		if got := len(tg.simMessages(to)); got != want {
			t.Fatalf("%s received %d messages, want %d", to, got, want)
		}
	}
	if p.cmd.ProcessState != nil {
		t.Fatal("the gateway exited")
	}
}

// A records stream that reaches its max_bytes refuses writes with 503 storage_unavailable and
// Retry-After; the gateway stays up, reads go on, and every message it accepted is delivered
// exactly once.
func TestNATSFullStream(t *testing.T) {
	data := t.TempDir()
	args := append(storeArgs(data, nil), "--nats-max-bytes", "256KiB")
	if testStore != "nats" {
		n := startNATSProc(t)
		args = []string{"--store", "nats", "--nats", n.url, "--nats-prefix", "full", "--nats-max-bytes", "256KiB"}
	}
	p := startProc(t, data, args...)
	tg := p.gw(t, data)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	var accepted []string
	var full resp
	for i := 0; ; i++ {
		if i == 5000 {
			t.Fatal("5000 sends accepted: the stream never filled")
		}
		to := fmt.Sprintf("1555091%04d", i)
		r := tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": to, "message": strings.Repeat("x", 400)})
		if r.status == 200 {
			accepted = append(accepted, to)
			continue
		}
		full = r
		break
	}
	want(t, full, 503, "storage_unavailable")
	if full.header.Get("Retry-After") == "" {
		t.Fatalf("503 without Retry-After: %v", full.header)
	}
	if len(accepted) == 0 {
		t.Fatal("no send was accepted before the stream filled")
	}
	want(t, tg.do("GET", "/api/v1/account", keyAuth(s.key), nil), 200, "")
	for _, to := range accepted {
		eventually(t, 30*time.Second, to+" delivered", func() bool { return len(tg.simMessages(to)) >= 1 })
	}
	for _, to := range accepted {
		if got := len(tg.simMessages(to)); got != 1 {
			t.Fatalf("%s received %d messages", to, got)
		}
	}
	res, err := http.Get(p.url + "/healthz")
	if err != nil {
		t.Fatalf("the gateway is gone: %v", err)
	}
	res.Body.Close()
	t.Logf("%d sends accepted before the stream filled", len(accepted))
}
