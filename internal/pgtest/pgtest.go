// Package pgtest starts throwaway PostgreSQL servers for tests: Debian's `postgresql`
// binaries (/usr/lib/postgresql/<version>/bin, the newest; PGTEST_BIN names another
// directory), a cluster made by initdb in a temporary directory, listening on a free loopback
// port, trust authentication, fsync off. As root (initdb refuses root) the server runs as the
// `postgres` user (else `nobody`) through runuser.
//
// The rule for tests that need PostgreSQL: they skip only under `go test -short`; otherwise a
// server that cannot start (binaries missing, initdb failing) fails the test. `.ci/run`
// installs the package when it is missing, so CI never skips them.
//
// Use Start for a server of one's own (a test that stops or kills it), or DB for a fresh
// database on a server shared by the test binary; a package that uses DB calls StopShared
// from its TestMain after m.Run.
package pgtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Server is a running PostgreSQL cluster.
type Server struct {
	dir  string // the cluster's directory (data, socket, log)
	bin  string
	port int
	as   string // user the server runs as ("" = the current one)
	once sync.Once
}

// User is the cluster's superuser (trust authentication: no password).
const User = "gateway"

// Start starts a server of the test's own, stopped at the test's cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	if testing.Short() {
		t.Skip("PostgreSQL tests skip under -short")
	}
	s, err := start()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	t.Cleanup(s.Stop)
	return s
}

// URL is the connection URL of database db ("postgres" always exists).
func (s *Server) URL(db string) string {
	u := url.URL{Scheme: "postgres", User: url.User(User), Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)),
		Path: "/" + db, RawQuery: "sslmode=disable"}
	return u.String()
}

// Port is the server's TCP port.
func (s *Server) Port() int { return s.port }

var dbSeq atomic.Int64

// CreateDB makes a new empty database and returns its URL.
func (s *Server) CreateDB(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("test_%d_%d", os.Getpid(), dbSeq.Add(1))
	if out, err := s.run("psql", "-h", "127.0.0.1", "-p", strconv.Itoa(s.port), "-U", User, "-d", "postgres",
		"-v", "ON_ERROR_STOP=1", "-q", "-c", "CREATE DATABASE "+name); err != nil {
		t.Fatalf("pgtest: create database: %v\n%s", err, out)
	}
	return s.URL(name)
}

// Kill stops the server at once (as a crash would); Restart brings it back on the same port.
func (s *Server) Kill() error {
	out, err := s.run("pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "stop")
	if err != nil {
		return fmt.Errorf("pg_ctl stop: %v\n%s", err, out)
	}
	return nil
}

// Restart starts a stopped server again.
func (s *Server) Restart() error { return s.startServer() }

// Stop stops the server and removes its directory.
func (s *Server) Stop() {
	s.once.Do(func() {
		_ = s.Kill()
		_ = os.RemoveAll(s.dir)
	})
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

var (
	sharedMu  sync.Mutex
	shared    *Server
	sharedErr error
)

// DB returns the URL of a new database on the test binary's shared server (started on first
// use). Call StopShared from TestMain.
func DB(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("PostgreSQL tests skip under -short")
	}
	sharedMu.Lock()
	if shared == nil && sharedErr == nil {
		shared, sharedErr = start()
	}
	s, err := shared, sharedErr
	sharedMu.Unlock()
	if err != nil {
		t.Fatalf("pgtest: %v", err)
	}
	return s.CreateDB(t)
}

// StopShared stops the shared server, if one was started.
func StopShared() {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared != nil {
		shared.Stop()
		shared = nil
	}
}

// Bin finds the directory of the PostgreSQL server binaries.
func Bin() (string, error) {
	if dir := os.Getenv("PGTEST_BIN"); dir != "" {
		return dir, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p), nil
	}
	return "", fmt.Errorf("PostgreSQL server binaries not found (apt-get install postgresql, or set PGTEST_BIN); PostgreSQL tests skip only under -short")
}

func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

func start() (*Server, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	s := &Server{bin: bin}
	if os.Geteuid() == 0 {
		s.as = "nobody"
		if _, err := user.Lookup("postgres"); err == nil {
			s.as = "postgres"
		}
	}
	s.dir, err = os.MkdirTemp("", "pgtest-")
	if err != nil {
		return nil, err
	}
	if s.as != "" {
		u, err := user.Lookup(s.as)
		if err != nil {
			return nil, err
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(s.dir, uid, gid); err != nil {
			return nil, err
		}
	}
	if out, err := s.run("initdb", "-D", s.data(), "-U", User, "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		_ = os.RemoveAll(s.dir)
		return nil, fmt.Errorf("initdb: %v\n%s", err, out)
	}
	for attempt := 0; ; attempt++ {
		if s.port, err = freePort(); err == nil {
			if err = s.startServer(); err == nil {
				return s, nil
			}
		}
		if attempt == 2 {
			_ = os.RemoveAll(s.dir)
			return nil, err
		}
	}
}

// startServer runs pg_ctl start and waits until the server accepts connections.
func (s *Server) startServer() error {
	opts := strings.Join([]string{
		"-c listen_addresses=127.0.0.1", "-c port=" + strconv.Itoa(s.port),
		"-c unix_socket_directories=" + s.dir, "-c fsync=off", "-c synchronous_commit=off",
		"-c full_page_writes=off", "-c max_connections=300", "-c shared_buffers=32MB",
	}, " ")
	out, err := s.run("pg_ctl", "-D", s.data(), "-l", filepath.Join(s.dir, "log"), "-o", opts, "-w", "-t", "60", "start")
	if err != nil {
		log, _ := os.ReadFile(filepath.Join(s.dir, "log"))
		return fmt.Errorf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
	return nil
}

// run runs a PostgreSQL program, as the server's user when the test runs as root.
func (s *Server) run(prog string, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	path := filepath.Join(s.bin, prog)
	if _, err := os.Stat(path); err != nil {
		if p, lerr := exec.LookPath(prog); lerr == nil {
			path = p
		}
	}
	var cmd *exec.Cmd
	if s.as != "" {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", s.as, "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	var buf bytes.Buffer
	cmd.Stdout, cmd.Stderr = &buf, &buf
	err := cmd.Run()
	return buf.Bytes(), err
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
