package persist

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/internal/cputime"
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

// BenchmarkOutboxWrites is the outbox's write path as the send path drives it: 64 callers
// accept a message each (body, pending mark, history entry in one commit) and settle it (the
// outcome through the background writer), on Badger with --fsync interval, so the figure is
// CPU, not the disk. cpu-µs/msg is the process's CPU time (every goroutine: Badger's writer,
// its memtable flushes and compactions) over the messages. Badger's shape as configured
// (shape.go) beside its variants and the options before issue 21:
// `go test -run X -bench OutboxWrites -benchtime 600000x ./persist`.
func BenchmarkOutboxWrites(b *testing.B) {
	type variant struct {
		name string
		tune func(badger.Options) badger.Options
	}
	variants := []variant{
		{"as configured", nil},
		{"memtable=64MiB", func(o badger.Options) badger.Options { return shapeFor(64 << 20).apply(o) }},
		{"memtable=16MiB", func(o badger.Options) badger.Options { return shapeFor(16 << 20).apply(o) }},
		{"values in the tree", func(o badger.Options) badger.Options { return o.WithValueThreshold(1 << 20) }},
		{"before: 64 MiB memtables, level 0 at 5 and 15, tables doubling, values in the tree", func(o badger.Options) badger.Options {
			o = o.WithMemTableSize(64 << 20).WithValueThreshold(1 << 20).WithNumLevelZeroTables(5).WithNumLevelZeroTablesStall(15).
				WithBaseLevelSize(10 << 20).WithBaseTableSize(2 << 20).WithValueLogFileSize(128 << 20)
			o.TableSizeMultiplier = 2
			return o
		}},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			kv, err := OpenBadger(b.TempDir(), BadgerOptions{Fsync: FsyncInterval, tune: v.tune})
			if err != nil {
				b.Fatal(err)
			}
			defer kv.Close()
			o := NewOutbox(kv)
			var seq atomic.Uint64
			start := cputime.Process()
			b.SetParallelism(benchCommitters)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if err := benchSend(o, seq.Add(1), func(err error) {
						if err != nil {
							b.Error(err)
						}
					}); err != nil {
						b.Error(err)
						return
					}
				}
			})
			o.Flush()
			b.StopTimer()
			b.ReportMetric(float64((cputime.Process()-start).Nanoseconds())/float64(b.N)/1e3, "cpu-µs/msg")
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// benchSend accepts message n through o and settles it as sent, as the send path does; its id
// derives from n, in no order, as random ones.
func benchSend(o *Outbox, n uint64, settled func(error)) error {
	var idb [10]byte
	binary.BigEndian.PutUint64(idb[:8], n*0x9E3779B97F4A7C15)
	id := "3EB0" + strings.ToUpper(hex.EncodeToString(idb[:]))
	now := time.Now()
	e := domain.OutboxEntry{ID: id, SessionID: fmt.Sprintf("sess-%02d", n%100), UserID: fmt.Sprintf("user-%02d", n%100),
		Origin: "api", From: "4915112345678", Message: domain.Message{ID: id, To: fmt.Sprintf("49151%07d", n%100000), Kind: domain.KindText,
			Text: "Hi Ana, your order #1001 has shipped. Track it at https://example.com/t/1001 - thanks for shopping with us!"},
		CreatedAt: domain.MillisOf(now)}
	e.SetStatus(domain.MsgQueued, now)
	if err := o.Accept(context.Background(), &e, ""); err != nil {
		return err
	}
	e.NetworkID, e.SentAt, e.Attempts = id, domain.MillisOf(now), 1
	e.SetStatus(domain.MsgSent, now)
	o.Settle(e, settled)
	return nil
}
