package pgtest

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	StopShared()
	os.Exit(code)
}

// A server starts, makes databases on demand, survives a kill and a restart, and its
// directory goes at Stop.
func TestServerLifecycle(t *testing.T) {
	s := Start(t)
	u1, u2 := s.CreateDB(t), s.CreateDB(t)
	if u1 == u2 {
		t.Fatalf("two databases with one URL %s", u1)
	}
	if out, err := s.run("psql", "-d", u1, "-v", "ON_ERROR_STOP=1", "-qAt", "-c", "SELECT 40+2"); err != nil || string(out) != "42\n" {
		t.Fatalf("query: %q, %v", out, err)
	}
	if err := s.Kill(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.run("psql", "-d", u1, "-qAt", "-c", "SELECT 1"); err == nil {
		t.Fatal("query after Kill succeeded")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if out, err := s.run("psql", "-d", u1, "-qAt", "-c", "SELECT 1"); err != nil || string(out) != "1\n" {
		t.Fatalf("query after Restart: %q, %v", out, err)
	}
	s.Stop()
	if _, err := os.Stat(s.dir); !os.IsNotExist(err) {
		t.Fatalf("cluster directory kept after Stop: %v", err)
	}
}

func TestSharedDB(t *testing.T) {
	a, b := DB(t), DB(t)
	if a == b {
		t.Fatal("DB returned one database twice")
	}
}
