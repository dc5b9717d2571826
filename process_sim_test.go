package main

// The simulated network as its own process (`gateway sim`), used by gateway processes through
// --sim-url: the network every node of a cluster shares.

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// startSimProc starts `gateway sim` on addr with its state in data, and waits for /healthz.
func startSimProc(t testing.TB, addr, data string) *proc {
	t.Helper()
	cmd := dieWithTest(exec.Command(gatewayBinary(t), "sim", "--addr", addr, "--data", data, "--log-format", "text"))
	logf, err := os.Create(filepath.Join(t.TempDir(), "sim.log")) // read on a failure
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logf
	p := &proc{cmd: cmd, url: "http://" + addr, stderr: &strings.Builder{}, mu: &sync.Mutex{}}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("gateway sim's log, its last %d of %d lines:\n%s", min(len(lines), 40), len(lines), strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	})
	// Ready once its own log says it listens on addr (another test's server may have taken
	// the freed port and would answer in its place) and /healthz answers.
	eventually(t, 20*time.Second, "sim process ready", func() bool {
		b, _ := os.ReadFile(logf.Name())
		return strings.Contains(string(b), `msg="sim network listening" addr=`+addr) && answers(p.url+"/healthz", 200)
	})
	return p
}

// Two gateway processes share one sim process: a session linked on one is scanned through
// the dev routes of that node, what it sends shows in the other node's dev routes, a
// restarted node gets its session back connected (the pairing lives in the sim), and the
// dev routes answer 503 with Retry-After while the sim is down.
func TestSharedSimProcess(t *testing.T) {
	simAddr, simData := freeAddr(t), t.TempDir()
	sp := startSimProc(t, simAddr, simData)
	simURL := "http://" + simAddr
	data1, data2 := t.TempDir(), t.TempDir()
	p1 := startProc(t, data1, "--sim-url", simURL)
	p2 := startProc(t, data2, "--sim-url", simURL)
	g1, g2 := p1.gw(t, data1), p2.gw(t, data2)

	admin := g1.token("root", "admin")
	s := g1.newSender(admin, "alice", "447700900001", nil) // scanned through node 1's proxy
	r := g1.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": "447700900777", "message": "shared"})
	want(t, r, 200, "")
	// Node 2 reads the sim's deliveries through its own dev routes.
	got := g2.simDelivered("447700900777", 1)
	if len(got) != 1 || got[0]["text"] != "shared" || got[0]["from"] != "447700900001" {
		t.Fatalf("node 2 sees %v", got)
	}
	// A dev route the proxy knows nothing of still reaches the sim (its own 404, its code).
	want(t, g2.do("POST", "/api/dev/sim/no-such-control", nil, map[string]any{}), 404, "not_found")
	want(t, g2.do("POST", "/api/dev/sim/latency", nil, map[string]any{"ms": -1}), 400, "validation_failed")
	// Controls added to the sim later (issue 18's refusals) pass through the same way.
	want(t, g2.do("POST", "/api/dev/sim/refuse", nil, map[string]any{"to": "447700900778", "code": 0}), 200, "")
	want(t, g2.do("POST", "/api/dev/sim/ban", nil, map[string]any{"sessionId": "no-such-session"}), 404, "session_not_found")

	// kill -9 node 1 and start it again: its session reconnects to the same phone.
	p1.kill9(t)
	p1 = startProc(t, data1, "--sim-url", simURL)
	g1 = p1.gw(t, data1)
	g1.waitStatus(s.tok, "CONNECTED")
	r = g1.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": "447700900777", "message": "again"})
	want(t, r, 200, "")
	if got := g2.simDelivered("447700900777", 2); got[1]["text"] != "again" {
		t.Fatalf("after node 1's restart node 2 sees %v", got)
	}

	// The sim goes away: dev routes are 503 with Retry-After, never a 5xx crash.
	_ = sp.cmd.Process.Signal(syscall.SIGTERM)
	_ = sp.cmd.Wait()
	r = g2.do("GET", "/api/dev/sim/messages?to=447700900777", nil, nil)
	want(t, r, 503, "unavailable")
	if r.header.Get("Retry-After") == "" {
		t.Fatal("503 without Retry-After")
	}
	// It comes back on the same data: what it delivered is still there.
	startSimProc(t, simAddr, simData)
	if got := g2.simMessages("447700900777"); len(got) != 2 {
		t.Fatalf("after the sim's restart: %v", got)
	}
}

// serve refuses --cluster without what every node must share (the NATS store, the secret key,
// one sim process) and the sim's own flags with --sim-url, with a message that says why.
func TestClusterFlagsRefused(t *testing.T) {
	bin := gatewayBinary(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--cluster"}, "--cluster needs --store nats"},
		{[]string{"--cluster", "--store", "nats", "--nats", "nats://127.0.0.1:1"}, "--cluster needs GATEWAY_SECRET_KEY"},
		{[]string{"--sim-url", "http://127.0.0.1:1", "--sim-latency", "5ms"}, "--sim-latency belongs to `gateway sim`"},
		{[]string{"--sim-url", "127.0.0.1:1"}, "want http://host:port"},
		{[]string{"--sim-url", "http://127.0.0.1:1", "--network", "whatsapp"}, "--sim-url needs --network sim"},
	} {
		cmd := exec.Command(bin, append([]string{"serve", "--data", t.TempDir()}, c.args...)...)
		for _, kv := range os.Environ() { // not the suite's GATEWAY_STORE=nats (make test-nats)
			if !strings.HasPrefix(kv, "GATEWAY_") {
				cmd.Env = append(cmd.Env, kv)
			}
		}
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("serve %v: %v, %s; want an error saying %q", c.args, err, out, c.want)
		}
	}
}
