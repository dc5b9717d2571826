package persist

import (
	"context"
	"encoding/binary"
	"sync/atomic"
	"testing"

	"github.com/dgraph-io/badger/v4"
)

// benchCommitters is how many goroutines per CPU commit at once (64 on 2 cores), about the
// concurrency of the gateway's send path at 64 connections.
const benchCommitters = 32

var benchValue = make([]byte, 100) // about the size of an outbox entry

// BenchmarkGroupCommit measures durable items/s through the group-committing writer with
// many concurrent committers, one item per Commit, on a real temp dir.
func BenchmarkGroupCommit(b *testing.B) {
	for _, fsync := range []Fsync{FsyncBatch, FsyncInterval} {
		b.Run(string(fsync), func(b *testing.B) {
			kv := openTestBadger(b, b.TempDir(), fsync)
			var seq atomic.Uint64
			b.SetParallelism(benchCommitters)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				key := make([]byte, 12)
				copy(key, "out/")
				for pb.Next() {
					binary.BigEndian.PutUint64(key[4:], seq.Add(1))
					if err := kv.Commit(context.Background(), Op{Key: key, Value: benchValue}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
			b.ReportMetric(float64(b.N)/float64(max(kv.txns.Load(), 1)), "items/txn")
		})
	}
}

// BenchmarkSingleCommit is the baseline: one synced Badger transaction per item (same Badger
// options, no group commit), from one goroutine and from many.
func BenchmarkSingleCommit(b *testing.B) {
	run := func(b *testing.B, parallel bool) {
		kv := openTestBadger(b, b.TempDir(), FsyncBatch)
		var seq atomic.Uint64
		commit := func(key []byte) error {
			binary.BigEndian.PutUint64(key[4:], seq.Add(1))
			return kv.db.Update(func(txn *badger.Txn) error { return txn.Set(key, benchValue) })
		}
		b.ResetTimer()
		if parallel {
			b.SetParallelism(benchCommitters)
			b.RunParallel(func(pb *testing.PB) {
				key := append(make([]byte, 0, 12), "out/\x00\x00\x00\x00\x00\x00\x00\x00"...)
				for pb.Next() {
					if err := commit(key); err != nil {
						b.Error(err)
						return
					}
				}
			})
		} else {
			key := append(make([]byte, 0, 12), "out/\x00\x00\x00\x00\x00\x00\x00\x00"...)
			for b.Loop() {
				if err := commit(key); err != nil {
					b.Fatal(err)
				}
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "items/s")
	}
	b.Run("serial", func(b *testing.B) { run(b, false) })
	b.Run("parallel", func(b *testing.B) { run(b, true) })
}
