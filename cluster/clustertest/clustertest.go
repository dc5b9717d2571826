// Package clustertest starts NATS servers with JetStream for the cluster's tests (the server is
// embedded from github.com/nats-io/nats-server/v2, the same version CI and users run): one
// server, or three routed into one cluster with clustered JetStream, so R3 streams and their
// leader elections are the real thing. A server can be killed and restarted on the same ports
// and store directory, which is how tests lose one NATS server of three. The servers run with
// nats-server's default limits, as a stock server does (1 MiB messages, atomic batches of 1,000
// messages, 50 open batches per stream: DESIGN.md section 19); the shape follows natstest
// (StartCluster, URLs), with a process mode beside it.
//
// StartProcesses runs the same cluster as nats-server processes (built once from the module's
// nats-server, the version go.mod pins) whose Kill is a SIGKILL: no leader steps down first, so
// the streams a killed server led hold a real election (4-9 s in nats-server's raft). An
// in-process server's Kill is a Shutdown, which hands its leaderships over first.
//
// Only tests import it (the gateway binary never links the server). It imports no package of
// the gateway.
package clustertest

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Cluster is a set of NATS servers started by StartCluster or StartProcesses.
type Cluster struct {
	t    testing.TB
	name string

	mu      sync.Mutex
	opts    []*server.Options
	servers []*server.Server // nil while killed
	// process mode (StartProcesses): the command line of each server, and its process
	args  [][]string
	procs []*exec.Cmd
}

// StartCluster starts n NATS servers with JetStream on loopback (n = 1: a single server; n > 1: one
// cluster whose servers route to each other) and waits until JetStream answers. They are shut
// down by t's cleanup.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c := newCluster(t, n)
	t.Cleanup(c.Shutdown)
	for i := range c.opts {
		c.start(i)
	}
	c.WaitReady(60 * time.Second)
	return c
}

// StartProcesses is StartCluster with each server a nats-server process (see the package doc).
func StartProcesses(t testing.TB, n int) *Cluster {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: the process suites (here NATS servers killed and restarted) are skipped")
	}
	bin := Binary(t)
	c := newCluster(t, n)
	var routes []string
	for _, o := range c.opts {
		if o.Cluster.Port != 0 {
			routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", o.Cluster.Port))
		}
	}
	for _, o := range c.opts {
		conf := fmt.Sprintf("server_name: %s\nlisten: 127.0.0.1:%d\njetstream { store_dir: %q }\n", o.ServerName, o.Port, o.StoreDir)
		if len(routes) > 0 {
			conf += fmt.Sprintf("cluster { name: %s, listen: 127.0.0.1:%d, routes: [%s] }\n", c.name, o.Cluster.Port, strings.Join(routes, ", "))
		}
		file := filepath.Join(t.TempDir(), "nats.conf")
		if err := os.WriteFile(file, []byte(conf), 0o600); err != nil {
			t.Fatal(err)
		}
		c.args = append(c.args, []string{bin, "-c", file})
		c.procs = append(c.procs, nil)
	}
	t.Cleanup(c.Shutdown)
	for i := range c.args {
		c.startProc(i)
	}
	c.WaitReady(60 * time.Second)
	return c
}

func newCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	if n < 1 {
		t.Fatalf("clustertest: %d servers", n)
	}
	c := &Cluster{t: t, name: "gw-test"}
	// All ports from one call: two calls could each be handed a port the other had just
	// closed, and a server's client and route listeners would then collide (a server never
	// ready: seen in CI).
	ports := freePorts(t, 2*n)
	clientPorts, routePorts := ports[:n], ports[n:]
	var routes []*url.URL
	if n > 1 {
		for _, p := range routePorts {
			routes = append(routes, &url.URL{Scheme: "nats-route", Host: fmt.Sprintf("127.0.0.1:%d", p)})
		}
	}
	for i := 0; i < n; i++ {
		o := &server.Options{
			ServerName: fmt.Sprintf("n%d", i+1),
			Host:       "127.0.0.1",
			Port:       clientPorts[i],
			JetStream:  true,
			StoreDir:   t.TempDir(),
			NoLog:      true,
			NoSigs:     true,
			// Small store limits: tests never need more, and 2-core CI machines run several at once.
			JetStreamMaxMemory: 256 << 20,
			JetStreamMaxStore:  1 << 30,
		}
		if n > 1 {
			o.Cluster = server.ClusterOpts{Name: c.name, Host: "127.0.0.1", Port: routePorts[i]}
			o.Routes = routes
		}
		c.opts = append(c.opts, o)
		c.servers = append(c.servers, nil)
	}
	return c
}

var (
	binOnce sync.Once
	binPath string
	binErr  error
)

// Binary is a nats-server binary of the version go.mod pins, built once per test process
// (go build of github.com/nats-io/nats-server/v2: it needs the go command, as tests do).
func Binary(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gateway-nats-server-")
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(dir, "nats-server")
		out, err := exec.Command("go", "build", "-o", binPath, "github.com/nats-io/nats-server/v2").CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("clustertest: go build nats-server: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

func (c *Cluster) startProc(i int) {
	c.t.Helper()
	cmd := exec.Command(c.args[i][0], c.args[i][1:]...)
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("clustertest: nats-server %d: %v", i, err)
	}
	c.mu.Lock()
	c.procs[i] = cmd
	c.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", c.opts[i].Port), time.Second)
		if err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("clustertest: nats-server %d does not listen: %v", i, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func freePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("clustertest: free port: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		l.Close()
	}
	return ports
}

func (c *Cluster) start(i int) {
	c.t.Helper()
	s, err := server.NewServer(c.opts[i])
	if err != nil {
		c.t.Fatalf("clustertest: server %d: %v", i, err)
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		s.Shutdown()
		c.t.Fatalf("clustertest: server %d not ready", i)
	}
	c.mu.Lock()
	c.servers[i] = s
	c.mu.Unlock()
}

// N is the number of servers (running or killed).
func (c *Cluster) N() int { return len(c.opts) }

// URLs is every server's client URL, comma-separated (what nats.Connect and --nats take).
func (c *Cluster) URLs() string { return strings.Join(c.ClientURLs(), ",") }

// ClientURLs are the servers' client URLs, one each.
func (c *Cluster) ClientURLs() []string {
	var out []string
	for _, o := range c.opts {
		out = append(out, fmt.Sprintf("nats://127.0.0.1:%d", o.Port))
	}
	return out
}

// Name is server i's name (what StreamInfo reports as a leader or replica).
func (c *Cluster) Name(i int) string { return c.opts[i].ServerName }

// Connect connects to the cluster (any server; it reconnects to the others for ever) and
// closes the connection at cleanup.
func (c *Cluster) Connect(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	opts = append([]nats.Option{nats.MaxReconnects(-1), nats.ReconnectWait(100 * time.Millisecond),
		nats.Timeout(2 * time.Second), nats.ReconnectJitter(0, 0)}, opts...)
	nc, err := nats.Connect(c.URLs(), opts...)
	if err != nil {
		t.Fatalf("clustertest: connect: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// Kill stops server i at once (its clients move to the others): a SIGKILL in process mode, a
// Shutdown (which steps its leaderships down first) in process. Restart brings it back.
func (c *Cluster) Kill(i int) {
	if c.procs != nil {
		c.mu.Lock()
		cmd := c.procs[i]
		c.procs[i] = nil
		c.mu.Unlock()
		if cmd != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
		return
	}
	c.mu.Lock()
	s := c.servers[i]
	c.servers[i] = nil
	c.mu.Unlock()
	if s != nil {
		s.Shutdown()
		s.WaitForShutdown()
	}
}

// Restart starts a killed server i again on its ports and store directory.
func (c *Cluster) Restart(i int) {
	c.t.Helper()
	if c.procs != nil {
		c.mu.Lock()
		running := c.procs[i] != nil
		c.mu.Unlock()
		if !running {
			c.startProc(i)
		}
		return
	}
	c.mu.Lock()
	running := c.servers[i] != nil
	c.mu.Unlock()
	if !running {
		c.start(i)
	}
}

// Shutdown stops every server (cleanup does it too).
func (c *Cluster) Shutdown() {
	for i := range c.opts {
		c.Kill(i)
	}
}

// WaitReady waits until JetStream answers an account-info request through every running
// server (a clustered JetStream has elected its meta leader).
func (c *Cluster) WaitReady(within time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(within)
	for i := range c.opts {
		c.mu.Lock()
		running := c.servers[i] != nil || (c.procs != nil && c.procs[i] != nil)
		c.mu.Unlock()
		if !running {
			continue
		}
		var lastErr error
		for {
			if lastErr = c.accountInfo(i); lastErr == nil {
				break
			}
			if time.Now().After(deadline) {
				c.t.Fatalf("clustertest: JetStream not ready on server %d within %v: %v", i, within, lastErr)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

func (c *Cluster) accountInfo(i int) error {
	nc, err := nats.Connect(c.ClientURLs()[i], nats.Timeout(time.Second), nats.NoReconnect())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_, err = js.AccountInfo(ctx)
	return err
}

// StreamLeader is the index of the server leading stream (-1 if none answers now).
func (c *Cluster) StreamLeader(js jetstream.JetStream, stream string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return -1
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil {
		return -1
	}
	for i := range c.opts {
		if c.opts[i].ServerName == info.Cluster.Leader {
			return i
		}
	}
	return -1
}
