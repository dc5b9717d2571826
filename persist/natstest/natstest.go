// Package natstest starts real NATS servers with JetStream for tests: one embedded server
// (Start, or Run for a server that outlives a test), and a three-node JetStream cluster
// (StartCluster). Their stores live in temp dirs; nothing is downloaded. The servers run with
// the server's defaults, as a stock nats-server does (DESIGN.md section 19): 1 MiB messages,
// atomic batches of 1,000 messages and 50 open batches per stream.
//
// Imports: github.com/nats-io/nats-server/v2 and the standard library; test code only imports it.
package natstest

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// MaxPayload is the test servers' max_payload: nats-server's default, which the gateway runs
// on (large media bodies go to an object store).
const MaxPayload = 1 << 20

// Server is one running NATS server with JetStream.
type Server struct {
	URL string

	mu   sync.Mutex
	srv  *server.Server
	opts server.Options
	dir  string
	own  bool // dir is the server's own temp dir, removed by Close
}

// Options are the few settings tests change.
type Options struct {
	// Dir is the JetStream store directory ("" = a new temp dir, removed by Close).
	Dir string
	// MaxStore bounds the JetStream file store (0 = the server's default, a share of the disk).
	MaxStore int64
	// MaxPayload is the server's max_payload (0 = its default, MaxPayload).
	MaxPayload int32
}

// Run starts an embedded server on a random loopback port.
func Run(o Options) (*Server, error) {
	s := &Server{dir: o.Dir}
	if s.dir == "" {
		dir, err := os.MkdirTemp("", "natstest-")
		if err != nil {
			return nil, err
		}
		s.dir, s.own = dir, true
	}
	s.opts = baseOptions(s.dir, -1)
	s.opts.JetStreamMaxStore = o.MaxStore
	s.opts.MaxPayload = o.MaxPayload
	if err := s.start(); err != nil {
		s.Close()
		return nil, err
	}
	s.URL = s.srv.ClientURL()
	// A restart listens on the same port, so clients reconnect to the same URL.
	s.opts.Port = s.srv.Addr().(*net.TCPAddr).Port
	return s, nil
}

// Start is Run for one test: the server stops at the test's end.
func Start(t testing.TB, o ...Options) *Server {
	t.Helper()
	var opts Options
	if len(o) > 0 {
		opts = o[0]
	}
	s, err := Run(opts)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

func baseOptions(dir string, port int) server.Options {
	return server.Options{
		Host: "127.0.0.1", Port: port, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: dir,
	}
}

func (s *Server) start() error {
	opts := s.opts
	srv, err := server.NewServer(&opts)
	if err != nil {
		return fmt.Errorf("nats server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(30 * time.Second) {
		srv.Shutdown()
		return errors.New("nats server: not ready after 30s")
	}
	s.srv = srv
	return nil
}

// Dir is the server's JetStream store directory.
func (s *Server) Dir() string { return s.dir }

// Counts are the messages the server has taken in from its clients (publishes, requests) and
// handed out to them (acks, replies, deliveries) since it started: a benchmark's round trips
// per operation, counted (server.Varz's in_msgs and out_msgs). Zero while the server is
// stopped.
func (s *Server) Counts() (in, out int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv == nil {
		return 0, 0
	}
	v, err := s.srv.Varz(nil)
	if err != nil {
		return 0, 0
	}
	return v.InMsgs, v.OutMsgs
}

// Stop shuts the server down (its store stays); Restart starts it again.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		s.srv.Shutdown()
		s.srv.WaitForShutdown()
		s.srv = nil
	}
}

// Restart starts a stopped server again on the same port and store.
func (s *Server) Restart() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return nil
	}
	var err error
	// The port was just released; another process may hold it for a moment.
	for range 50 {
		if err = s.start(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

// Close stops the server and removes its store if it made it.
func (s *Server) Close() {
	s.Stop()
	if s.own {
		os.RemoveAll(s.dir)
	}
}

// Cluster is a three-node JetStream cluster on loopback.
type Cluster struct {
	Servers []*Server
}

// ServerOf is the name of the server (n1, n2, ...) a client connection named name is on, ""
// if none: where a gateway's store connection landed ("gateway <prefix>"), to compare with
// its streams' leaders (a publish to a stream led elsewhere is routed to the leader).
func (c *Cluster) ServerOf(name string) string {
	for _, s := range c.Servers {
		s.mu.Lock()
		srv := s.srv
		s.mu.Unlock()
		if srv == nil {
			continue
		}
		z, err := srv.Connz(&server.ConnzOptions{Limit: 1 << 16})
		if err != nil {
			continue
		}
		for _, ci := range z.Conns {
			if ci.Name == name {
				return srv.Name()
			}
		}
	}
	return ""
}

// URLs is every node's client URL, comma-separated (what --nats takes).
func (c *Cluster) URLs() string {
	urls := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		urls[i] = s.URL
	}
	return strings.Join(urls, ",")
}

// StartCluster starts n (3 when 0) clustered JetStream servers and waits until JetStream has a
// meta leader that can place assets on all n (every peer online, with JetStream, its stats
// received: what the leader's placement requires, else a new R3 stream is refused with "no
// suitable peers for placement"); they stop at the test's end.
func StartCluster(t testing.TB, n int) *Cluster {
	t.Helper()
	c, err := RunCluster(n, t.TempDir)
	if err != nil {
		t.Fatalf("natstest: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// RunCluster is StartCluster outside a test (the bench): dir makes each server's store
// directory; Close stops the servers.
func RunCluster(n int, dir func() string) (*Cluster, error) {
	if n == 0 {
		n = 3
	}
	ports, err := freePortList(2 * n)
	if err != nil {
		return nil, err
	}
	routes := make([]string, n)
	for i := range n {
		routes[i] = "nats://127.0.0.1:" + strconv.Itoa(ports[n+i])
	}
	c := &Cluster{}
	for i := range n {
		s := &Server{dir: dir()}
		s.opts = baseOptions(s.dir, ports[i])
		s.opts.ServerName = fmt.Sprintf("n%d", i+1)
		s.opts.Cluster = server.ClusterOpts{Name: "natstest", Host: "127.0.0.1", Port: ports[n+i]}
		s.opts.Routes = server.RoutesFromStr(strings.Join(routes, ","))
		if err := s.start(); err != nil {
			c.Close()
			return nil, fmt.Errorf("node %d: %w", i+1, err)
		}
		s.URL = s.srv.ClientURL()
		c.Servers = append(c.Servers, s)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		peers := 0
		for _, s := range c.Servers {
			s.mu.Lock()
			if s.srv != nil && s.srv.JetStreamIsLeader() {
				peers = len(s.srv.JetStreamClusterPeers())
			}
			s.mu.Unlock()
		}
		if peers == n {
			return c, nil
		}
		if time.Now().After(deadline) {
			c.Close()
			return nil, fmt.Errorf("after 60s the JetStream meta leader can place on %d of %d peers", peers, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Close stops every server of the cluster.
func (c *Cluster) Close() {
	for _, s := range c.Servers {
		s.Close()
	}
}

func freePortList(n int) ([]int, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	ports := make([]int, n)
	for i := range ports {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		ports[i] = ln.Addr().(*net.TCPAddr).Port
	}
	return ports, nil
}
