package main

// Faults of the NATS store, on the real binary: the NATS server stopped and started again, and a
// full records stream. The NATS server runs as its own process here (built from the
// nats-server module the go.mod pins), so it can die and come back while the gateway runs.

import (
	"encoding/base64"
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

// startNATS starts cmd (a nats-server listening on addr) with its output in a file of its own
// and waits until the server answers and that output says it is ready: a server that lost its
// freed port to another test's exits, and the one answering there is not it.
func startNATS(t testing.TB, cmd *exec.Cmd, addr string) {
	t.Helper()
	out, err := os.Create(filepath.Join(t.TempDir(), "nats.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "nats-server listening", func() bool {
		if b, _ := os.ReadFile(out.Name()); !strings.Contains(string(b), "Server is ready") {
			return false
		}
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
}

func startNATSProc(t testing.TB) *natsProc {
	t.Helper()
	dir := t.TempDir()
	addr := freeAddr(t)
	conf, err := writeNATSConf(dir, addr)
	if err != nil {
		t.Fatal(err)
	}
	n := &natsProc{t: t, conf: conf, url: "nats://" + addr}
	n.start()
	t.Cleanup(func() { n.kill() })
	return n
}

// writeNATSConf writes a nats-server configuration listening on addr with its JetStream store
// under dir, everything else nats-server's defaults (a stock server: 1 MiB messages), and
// returns its path.
func writeNATSConf(dir, addr string) (string, error) {
	conf := filepath.Join(dir, "nats.conf")
	cfg := fmt.Sprintf("listen: %q\njetstream {\n  store_dir: %q\n}\n", addr, filepath.Join(dir, "js"))
	return conf, os.WriteFile(conf, []byte(cfg), 0o600)
}

func (n *natsProc) start() {
	n.t.Helper()
	n.cmd = dieWithTest(exec.Command(natsServerBinary(n.t), "-c", n.conf))
	startNATS(n.t, n.cmd, strings.TrimPrefix(n.url, "nats://"))
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
	sideBySide(t)
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

// A stock nats-server, started with no configuration file at all (JetStream on from the
// command line; 1 MiB messages, the server's default batch limits): the gateway starts on it
// (no max_payload refusal), the routes of every SPEC section answer, and a 16 MiB image is
// accepted, delivered whole, and read back after a restart (its media lives in a JetStream
// object store, the outbox record holds a reference: DESIGN.md section 19).
func TestNATSStockServer(t *testing.T) {
	dir := t.TempDir()
	addr := freeAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	n := &natsProc{t: t, url: "nats://" + addr}
	n.cmd = dieWithTest(exec.Command(natsServerBinary(t), "-js", "-a", host, "-p", port, "-sd", filepath.Join(dir, "js")))
	t.Cleanup(n.kill)
	startNATS(t, n.cmd, addr)
	data := t.TempDir()
	args := []string{"--store", "nats", "--nats", n.url, "--nats-prefix", "stock"}
	p := startProc(t, data, args...)
	tg := p.gw(t, data)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)

	// A route of each SPEC section: admin keys, client dashboard, v1 API, store, sim.
	want(t, tg.do("GET", "/api/admin/apikeys", bearerAuth(admin), nil), 200, "")
	want(t, tg.do("POST", "/api/admin/apikeys/validate", nil, map[string]any{"rawKey": s.key}), 200, "")
	want(t, tg.do("GET", "/api/client/status", bearerAuth(s.tok), nil), 200, "")
	want(t, tg.do("GET", "/api/client/apikeys", bearerAuth(s.tok), nil), 200, "")
	want(t, tg.do("GET", "/api/v1/account", keyAuth(s.key), nil), 200, "")
	text := tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": "15550700001", "message": "hello"})
	want(t, text, 200, "")
	want(t, tg.do("GET", "/api/v1/messages/"+text.str("message_id"), keyAuth(s.key), nil), 200, "")
	want(t, tg.do("GET", "/api/client/messages", bearerAuth(s.tok), nil), 200, "")
	want(t, tg.do("POST", "/api/v1/messages/send-bulk", keyAuth(s.key), map[string]any{"numbers": []string{"15550700002", "15550700003"}, "message": "bulk", "delay": 0, "async": true}), 202, "")
	want(t, tg.do("GET", "/api/client/store", bearerAuth(s.tok), nil), 200, "")

	// 16 MiB of image, exactly --media-max-bytes' default.
	img := append(jpegBytes(t), make([]byte, 16<<20)...)[:16<<20]
	big := tg.do("POST", "/api/v1/messages/send-image", keyAuth(s.key), map[string]any{"to": "15550700009", "image": "data:image/jpeg;base64," + base64.StdEncoding.EncodeToString(img)})
	want(t, big, 200, "")
	id := big.str("message_id")
	eventually(t, 30*time.Second, "the 16 MiB image delivered", func() bool { return len(tg.simMessages("15550700009")) == 1 })
	if got := tg.simMessages("15550700009")[0]; got["bytes"] != float64(16<<20) || got["id"] != id {
		t.Fatalf("delivered %v, want %d bytes of message %s", got, 16<<20, id)
	}
	for _, to := range []string{"15550700001", "15550700002", "15550700003"} {
		eventually(t, 20*time.Second, to+" delivered", func() bool { return len(tg.simMessages(to)) == 1 })
	}
	// After a restart the message reads back from its record and its media object.
	p.cmd.Process.Signal(syscall.SIGTERM)
	_ = p.cmd.Wait()
	p = startProc(t, data, args...)
	tg = p.gw(t, data)
	r := tg.do("GET", "/api/v1/messages/"+id, keyAuth(s.key), nil)
	want(t, r, 200, "")
	if r.str("status") == "" {
		t.Fatalf("the media message after a restart: %s", r.raw)
	}
}
