package persist

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/internal/cputime"
	"github.com/gateway/gateway/persist/outlog"
)

// BenchmarkLogOutboxSend is the log outbox alone on the send path: 64 callers accept a message
// each (its id minted, as a v1 send's) and settle it as sent once the accept returns, with
// --fsync interval, the engine, the sessions and the network apart: the figures the outbox's
// own cuts move (issue 32), with less of the engine's noise. cpu-µs/msg is the process's CPU
// until every outcome is written; sched-runs/msg the goroutine runs (starts and wake-ups;
// /sched/latencies counts one in 8).
// `go test -run X -bench LogOutboxSend -benchtime 200000x ./persist`.
func BenchmarkLogOutboxSend(b *testing.B) {
	kv, err := OpenBadger(b.TempDir(), BadgerOptions{Fsync: FsyncInterval})
	if err != nil {
		b.Fatal(err)
	}
	defer kv.Close()
	lo, err := OpenLogOutbox(b.TempDir(), kv, LogOutboxOptions{Sync: outlog.SyncInterval})
	if err != nil {
		b.Fatal(err)
	}
	defer lo.Close()
	if _, err := lo.Pending(); err != nil {
		b.Fatal(err)
	}
	var settled sync.WaitGroup
	settled.Add(b.N)
	done := func(err error) {
		if err != nil {
			b.Error(err)
		}
		settled.Done()
	}
	var next atomic.Int64
	cpu0, runs0, st0 := cputime.Process(), cputime.Runs(), lo.LogStats()
	b.ResetTimer()
	var callers sync.WaitGroup
	for c := range 64 {
		callers.Go(func() {
			uid := fmt.Sprintf("user-%02d", c%100)
			for n := next.Add(1); n <= int64(b.N); n = next.Add(1) {
				now := time.Now()
				e := domain.OutboxEntry{SessionID: "sess-" + uid, UserID: uid, Origin: "api", From: "4915112345678",
					Message:   domain.Message{To: "4915100001042", Kind: domain.KindText, Text: "Your order 1042 has shipped and is on its way to you."},
					CreatedAt: domain.MillisOf(now), History: make([]domain.StatusChange, 0, 2)}
				e.SetStatus(domain.MsgQueued, now)
				if err := lo.Accept(context.Background(), &e, ""); err != nil {
					b.Error(err)
					settled.Done()
					continue
				}
				e.NetworkID, e.SentAt, e.Attempts = e.ID, domain.MillisOf(now), 1
				e.SetStatus(domain.MsgSent, now)
				lo.Settle(e, done)
			}
		})
	}
	callers.Wait()
	settled.Wait()
	b.StopTimer()
	b.ReportMetric(float64((cputime.Process()-cpu0).Nanoseconds())/float64(b.N)/1e3, "cpu-µs/msg")
	b.ReportMetric(float64(cputime.Runs()-runs0)/float64(b.N), "sched-runs/msg")
	reportLogStats(b, st0, lo.LogStats())
}

// reportLogStats reports the log's writer's rounds a message, what a round carried (records,
// slot writes and syncs), and the writer's wakes by a caller that found it idle, a message
// (outlog.Stats): the count behind issue 32's leader/follower question.
func reportLogStats(b *testing.B, s0, s outlog.Stats) {
	n, rounds := float64(b.N), float64(s.Rounds-s0.Rounds)
	b.ReportMetric(rounds/n, "rounds/msg")
	if rounds > 0 {
		b.ReportMetric(float64(s.Carried-s0.Carried)/rounds, "carried/round")
	}
	b.ReportMetric(float64(s.Wakes-s0.Wakes)/n, "wakes/msg")
}
