package natskv_test

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/gateway/gateway/internal/cputime"
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

// BenchmarkPartitionCommits: BenchmarkPipelinedCommits's one-message commits from 64 callers
// on one server (R1, the server in this process), as a lone --store nats gateway makes them
// (the store: "lone") and as a cluster node does (64 fenced partition views: "node"), each
// in a store of its own with Uncached as a node sets it. cpu-µs/commit is the process's CPU per
// commit, the server's included; run each variant in its own process, alternated:
//
//	go test -c -o /tmp/natskv.test ./persist/natskv
//	/tmp/natskv.test -test.run '^$' -test.bench 'PartitionCommits/node$' -test.benchtime 40000x
func BenchmarkPartitionCommits(b *testing.B) {
	srv := natstest.Start(b)
	for _, name := range []string{"lone", "node"} {
		b.Run(name, func(b *testing.B) {
			s, err := natskv.Open(context.Background(), natskv.Options{
				URL: srv.URL, Prefix: fmt.Sprintf("pc%s%d", name, b.N), Partitions: 64, Uncached: persist.WriteOnceTables(),
			})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			commitFromCallers(b, s, name == "lone")
		})
	}
}

// BenchmarkReplicatedCommits: one-message commits from 64 callers on three clustered servers
// (R3), the servers in this process: "lone" as a lone --store nats gateway makes them (one
// records stream, no fences), "node" as a cluster node does (64 fenced partition views over
// --nats-streams records streams), by stream count and batch budget (MaxBatches). Its ns/op
// is wall time per commit (the rate: noisy on a shared machine); cpu-µs/commit is the
// process's CPU per commit, the servers' included, and groups and batches per commit are
// counts. Run each variant in its own process, alternated (bench/README.md, r3speed):
//
//	go test -c -o /tmp/natskv.test ./persist/natskv
//	/tmp/natskv.test -test.run '^$' -test.bench 'ReplicatedCommits/node/streams=3/batches=2$' -test.benchtime 20000x
func BenchmarkReplicatedCommits(b *testing.B) {
	c := natstest.StartCluster(b, 3)
	for _, v := range []struct {
		name             string
		streams, batches int
	}{{"lone", 1, 2}, {"node", 1, 2}, {"node", 3, 2}, {"node", 3, 1}} {
		b.Run(fmt.Sprintf("%s/streams=%d/batches=%d", v.name, v.streams, v.batches), func(b *testing.B) {
			s, err := natskv.Open(context.Background(), natskv.Options{
				URL: c.URLs(), Prefix: fmt.Sprintf("rb%s%d%d%d", v.name, v.streams, v.batches, b.N), Replicas: 3,
				Streams: v.streams, Partitions: 64, MaxBatches: v.batches,
			})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			leaders, conn := s.Leaders()
			b.Logf("leaders %v, connected to %s", leaders, conn)
			commitFromCallers(b, s, v.name == "lone")
		})
	}
}

// commitFromCallers makes b.N one-message commits from 64 callers on s (lone) or on 64 fenced
// partition views of it (a node's), and reports the process's CPU, groups and batches per
// commit.
func commitFromCallers(b *testing.B, s *natskv.Store, lone bool) {
	views := make([]persist.KV, 64)
	for p := range views {
		if lone {
			views[p] = s
		} else {
			views[p] = s.Partition(p, newOwner(b, s, p))
		}
	}
	value := make([]byte, 400)
	var n atomic.Int64
	cpu0 := cputime.Process()
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			i := n.Add(1)
			k := "outbox_status/" + strconv.FormatInt(i, 10)
			if err := views[i%64].Commit(ctx, persist.Op{Key: []byte(k), Value: value, TTL: persist.OutboxRetention}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/float64(b.N), "cpu-µs/commit")
	groups, batches := s.Stats()
	b.ReportMetric(float64(groups)/float64(b.N), "groups/commit")
	b.ReportMetric(float64(batches)/float64(b.N), "batches/commit")
}
