package natskv_test

import (
	"context"
	"fmt"
	"testing"

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
