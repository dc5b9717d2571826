package persist

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

// kvImpl is one implementation under the contract suites.
type kvImpl struct {
	name string
	open func(t *testing.T) KV
}

// kvImpls lists every KV implementation: the memory one and Badger on disk in both fsync
// modes. Each open gives a fresh, empty store closed at the end of the test.
func kvImpls() []kvImpl {
	return []kvImpl{
		{"memory", func(t *testing.T) KV {
			m := NewMemory()
			t.Cleanup(func() { m.Close() })
			return m
		}},
		{"badger-batch", func(t *testing.T) KV { return openTestBadger(t, t.TempDir(), FsyncBatch) }},
		{"badger-interval", func(t *testing.T) KV { return openTestBadger(t, t.TempDir(), FsyncInterval) }},
	}
}

func openTestBadger(t testing.TB, dir string, fsync Fsync) *Badger {
	t.Helper()
	b, err := OpenBadger(dir, BadgerOptions{Fsync: fsync})
	if err != nil {
		t.Fatalf("OpenBadger: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// waitFor polls cond every few milliseconds until it holds or the deadline passes.
func waitFor(t *testing.T, total time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(total)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", total, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func put(key, value string) Op { return Op{Key: []byte(key), Value: []byte(value)} }
func del(key string) Op        { return Op{Key: []byte(key), Delete: true} }

func mustCommit(t *testing.T, kv KV, ops ...Op) {
	t.Helper()
	if err := kv.Commit(context.Background(), ops...); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

func wantValue(t *testing.T, kv KV, key, want string) {
	t.Helper()
	got, err := kv.Get([]byte(key))
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if string(got) != want {
		t.Fatalf("Get(%q) = %q, want %q", key, got, want)
	}
}

func wantAbsent(t *testing.T, kv KV, key string) {
	t.Helper()
	if got, err := kv.Get([]byte(key)); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Fatalf("Get(%q) = %q, %v; want ErrNotFound", key, got, err)
	}
}

func scanKeys(t *testing.T, kv KV, prefix string) []string {
	t.Helper()
	var keys []string
	if err := kv.Scan([]byte(prefix), func(k, _ []byte) error {
		keys = append(keys, string(k))
		return nil
	}); err != nil {
		t.Fatalf("Scan(%q): %v", prefix, err)
	}
	return keys
}
