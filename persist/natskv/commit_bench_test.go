package natskv_test

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/natskv"
	"github.com/gateway/gateway/persist/natstest"
)

// BenchmarkPipelinedCommits: one-message commits from 64 callers on one server (the
// pipelined path: a send's accept, an outcome), the server in this process. Its ns/op is the
// client's and the server's CPU per commit together; the server's part is the same for any
// client, so two clients' figures differ by what each costs.
func BenchmarkPipelinedCommits(b *testing.B) {
	srv := natstest.Start(b)
	s, err := natskv.Open(context.Background(), natskv.Options{URL: srv.URL, Prefix: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	value := make([]byte, 400)
	var n atomic.Int64
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			k := "outbox_status/" + strconv.FormatInt(n.Add(1), 10)
			if err := s.Commit(ctx, persist.Op{Key: []byte(k), Value: value, TTL: persist.OutboxRetention}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
