package natskv_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/kvtest"
	"github.com/gateway/gateway/persist/natskv"
	"github.com/gateway/gateway/persist/natstest"
)

// On a replicated stream a commit's conditions hold or fail as the stream leader has the keys,
// never as a follower behind has them: a direct get is answered by any replica (a client's
// own server first), and one that has not applied another connection's commit a moment
// before would fail an IfPresent on the record it created (an inbox entry's removal: the
// entry stays and is delivered again) or an IfAbsent on the record it deleted. Readers on
// every server of the cluster: at least two of them followers of the stream.
func TestConditionsSeeTheLastCommits(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-node cluster: not in -short")
	}
	c := natstest.StartCluster(t, 3)
	open := func(url string) *natskv.Store {
		s, err := natskv.Open(context.Background(), natskv.Options{URL: url, Prefix: "cond", Replicas: 3, Streams: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	writer := open(c.URLs())
	var readers []*natskv.Store
	for _, srv := range c.Servers {
		readers = append(readers, open(srv.URL))
	}
	ctx := context.Background()
	for i := range 150 {
		key := fmt.Sprintf("k/%04d", i)
		kvtest.MustCommit(t, writer, kvtest.Put(key, "v"))
		for j, r := range readers {
			if err := r.Commit(ctx, persist.IfPresentOp([]byte(key)), kvtest.Put(fmt.Sprintf("%s/%d", key, j), "r")); err != nil {
				t.Fatalf("commit %d, reader on server %d: IfPresent of the record just written: %v", i, j+1, err)
			}
		}
		kvtest.MustCommit(t, writer, persist.Op{Key: []byte(key), Delete: true})
		for j, r := range readers {
			if err := r.Commit(ctx, persist.IfAbsentOp([]byte(key)), kvtest.Put(fmt.Sprintf("%s/%d", key, j), "a")); err != nil {
				t.Fatalf("commit %d, reader on server %d: IfAbsent of the record just deleted: %v", i, j+1, err)
			}
		}
	}
}
