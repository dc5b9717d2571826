package natskv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gateway/gateway/persist/kvtest"
	"github.com/gateway/gateway/persist/natskv"
	"github.com/gateway/gateway/persist/natstest"
)

// On a replicated stream a scan sees every commit acknowledged before it began, even one
// another connection made a moment before (a direct get may be answered by a follower that has
// not applied it yet; the scan then asks again: scan in natskv.go). A new owner of a partition
// scans right after the old owner's last commits.
func TestScanSeesTheLastCommits(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-node cluster: not in -short")
	}
	c := natstest.StartCluster(t, 3)
	open := func() *natskv.Store {
		s, err := natskv.Open(context.Background(), natskv.Options{URL: c.URLs(), Prefix: "fresh", Replicas: 3})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	writer, reader := open(), open()
	for i := range 300 {
		key := fmt.Sprintf("k/%04d", i)
		if err := writer.Commit(context.Background(), kvtest.Put(key, "v")); err != nil {
			t.Fatal(err)
		}
		n, last := 0, ""
		if err := reader.Scan([]byte("k/"), func(k, _ []byte) error { n, last = n+1, string(k); return nil }); err != nil {
			t.Fatal(err)
		}
		if n != i+1 || last != key {
			t.Fatalf("commit %d: the scan saw %d keys, the last %q", i, n, last)
		}
	}
}

// On a replicated stream, a scan since a time after the last record under its prefix reads
// nothing and answers at once: the newest record, written before that time, is not one the scan
// must wait for a replica to show (a partition's boot recounts its allowances from the outcomes
// of the last minute; with none written since, every acquire failed "the replicas did not catch
// up" in make test-cluster).
func TestScanSinceAfterTheLastRecordOnReplicas(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-node cluster: not in -short")
	}
	c := natstest.StartCluster(t, 3)
	s, err := natskv.Open(context.Background(), natskv.Options{URL: c.URLs(), Prefix: "sincer3", Replicas: 3, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for i := range 3 {
		kvtest.MustCommit(t, s, kvtest.Put(fmt.Sprintf("out/%d", i), "old"))
	}
	after := time.Now().Add(time.Second)
	began := time.Now()
	n := 0
	if err := s.ScanSince([]byte("out/"), after, func(_, _ []byte) error { n++; return nil }); err != nil {
		t.Fatalf("ScanSince after the last record: %v", err)
	}
	if n != 0 {
		t.Fatalf("ScanSince after the last record read %d records", n)
	}
	if d := time.Since(began); d > time.Second {
		t.Fatalf("ScanSince after the last record took %v", d)
	}
}
