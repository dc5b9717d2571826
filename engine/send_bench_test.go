package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime/metrics"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/actors/webhook"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/internal/cputime"
	"github.com/gateway/gateway/media"
	"github.com/gateway/gateway/network/sim"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/outlog"
)

// BenchmarkSendPath is the accept path without HTTP: 64 callers authorize a key and accept a
// message (Badger on disk, --fsync batch or interval), against the storage floor measured in the
// same run (the same callers committing one entry of the same size each, nothing else). One op
// is one message accepted; the deliverers send on the sim meanwhile. cpu-µs/msg is the process's
// CPU time from the first accept until every message is sent, over the messages: the figure the
// bench's CPU per message measures, without HTTP (the sim included), and one that other work
// on a shared machine does not move much.
// `go test -run X -bench SendPath/interval/send -benchtime 20000x ./engine`.
func BenchmarkSendPath(b *testing.B) {
	for _, fsync := range []persist.Fsync{persist.FsyncBatch, persist.FsyncInterval} {
		b.Run(string(fsync)+"/floor", func(b *testing.B) {
			db, err := persist.OpenBadger(b.TempDir(), persist.BadgerOptions{Fsync: fsync})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			val := make([]byte, 300)
			var n atomic.Int64
			parallel(b, 64, func() {
				k := fmt.Appendf(nil, "outbox_pending/%d", n.Add(1))
				if err := db.Commit(context.Background(), persist.Op{Key: k, Value: val}); err != nil {
					b.Error(err)
				}
			})
		})
		b.Run(string(fsync)+"/send", func(b *testing.B) { benchSend(b, fsync, false) })
		// The outbox on its own log (--outbox log: persist.LogOutbox).
		b.Run(string(fsync)+"/send-log", func(b *testing.B) { benchSendOn(b, fsync, false, true) })
		// 100 sessions, as `bench run`'s gateway has: a burst is a message or two a session.
		b.Run(string(fsync)+"/send-log-100", func(b *testing.B) { benchSendUsers(b, fsync, false, true, 100) })
		// The same, each send with an Idempotency-Key of its own (looked up, then committed with
		// the message, as the v1 routes do).
		b.Run(string(fsync)+"/send-log-100-idem", func(b *testing.B) { benchSendIdem(b, fsync, false, true, 100, true) })
		// Every user's events journaled (a stream open lately): each message's status events
		// are committed, and its outcome recorded once they are (settleAfterEvents).
		b.Run(string(fsync)+"/journaled", func(b *testing.B) { benchSend(b, fsync, true) })
	}
}

// benchSend is BenchmarkSendPath's send: with journaled, every user's events are journaled.
func benchSend(b *testing.B, fsync persist.Fsync, journaled bool) {
	benchSendOn(b, fsync, journaled, false)
}

// benchSendOn is benchSend, the outbox on its own log when onLog.
func benchSendOn(b *testing.B, fsync persist.Fsync, journaled, onLog bool) {
	benchSendUsers(b, fsync, journaled, onLog, 20)
}

// benchSendUsers is benchSendOn over users users (a session each).
func benchSendUsers(b *testing.B, fsync persist.Fsync, journaled, onLog bool, users int) {
	benchSendIdem(b, fsync, journaled, onLog, users, false)
}

// benchSendIdem is benchSendUsers, each send with an Idempotency-Key of its own when idem.
func benchSendIdem(b *testing.B, fsync persist.Fsync, journaled, onLog bool, users int, idem bool) {
	db, err := persist.OpenBadger(b.TempDir(), persist.BadgerOptions{Fsync: fsync})
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	net, err := sim.Open(sim.Options{Dir: b.TempDir(), AutoPair: time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	defer net.Close()
	ctx := context.Background()
	cfg := Config{
		Store: persist.NewRecords(db).Store, Records: recordsOf(persist.NewRecords(db)), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Plans: Plans{"unlimited": {}}, DefaultPlan: "unlimited", Network: net,
	}
	var logStats func() outlog.Stats // the log outbox's writer's (onLog)
	if onLog {
		lo, err := persist.OpenLogOutbox(b.TempDir(), db, persist.LogOutboxOptions{Sync: outlog.Sync(fsync)})
		if err != nil {
			b.Fatal(err)
		}
		defer lo.Close()
		cfg.Records.Outbox = lo
		logStats = lo.LogStats
	}
	if journaled {
		cfg.Events = journalingEvents(b, db, users)
	}
	e, err := New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer e.Stop(context.Background())
	keys := make([][]byte, users)
	for i := range keys {
		u, err := e.Users.Create(ctx, NewUser{ID: fmt.Sprintf("u%02d", i)})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := e.Sessions.QR(ctx, u); err != nil {
			b.Fatal(err)
		}
		_, raw, err := e.Keys.Create(ctx, KeyRequest{UserID: u.ID, Name: "k", Scopes: []string{ScopeText}})
		if err != nil {
			b.Fatal(err)
		}
		keys[i] = []byte(raw)
		waitUntil(b, 10*time.Second, "linked", func() bool { return e.Sessions.Status(u.ID).Status == domain.StatusConnected })
	}
	var n atomic.Int64
	txns0, writes0, _ := db.WriteStats()
	syncs0 := db.Syncs()
	sent0, cpu0 := e.metrics.sent.Load(), cputime.Process()
	sched0 := readSched()
	var st0 outlog.Stats
	if logStats != nil {
		st0 = logStats()
	}
	parallel(b, 64, func() {
		i := n.Add(1)
		g, err := e.Keys.Authorize(keys[i%int64(users)], ScopeText)
		if err != nil {
			b.Error(err)
			return
		}
		r := SendRequest{UserID: g.Key.UserID, Origin: "api", Message: domain.Message{
			To: fmt.Sprintf("4915%08d", i%1000), Kind: domain.KindText, Text: "Your order 1042 has shipped and is on its way to you."}}
		if idem {
			k := &Idem{KeyID: g.Key.ID, Key: strconv.FormatInt(i, 10), BodyHash: "h"}
			_, found, release, err := e.Messages.BeginIdempotent(k)
			if err != nil || found {
				b.Error(err, found)
				return
			}
			defer release()
			r.Message.ID, r.IdemID, r.Idem = k.Derived(), k.ID(), domain.IdemRecord{BodyHash: k.BodyHash}
		}
		if _, err = e.Messages.Send(ctx, r); err != nil {
			b.Error(err)
		}
	})
	waitUntil(b, time.Minute, "every message sent", func() bool { return e.metrics.sent.Load()-sent0 >= int64(b.N) })
	if onLog {
		// What the log outbox leaves to its checkpoint (every 5 s in the engine) is part of a
		// message's cost: the outlog_pos records of ids of their own.
		if err := cfg.Records.Outbox.Checkpoint(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/float64(b.N), "cpu-µs/msg")
	sched := readSched()
	b.ReportMetric(float64(sched.created-sched0.created)/float64(b.N), "goroutines/msg")
	b.ReportMetric(float64(sched.runs-sched0.runs)/float64(b.N), "sched-runs/msg")
	txns, writes, _ := db.WriteStats()
	b.ReportMetric(float64(writes-writes0)/float64(b.N), "writes/msg")
	b.ReportMetric(float64(txns-txns0)/float64(b.N), "txns/msg")
	b.ReportMetric(float64(db.Syncs()-syncs0)/float64(b.N), "syncs/msg")
	if logStats != nil {
		// The log's writer: its rounds a message, what a round carried (records, slot writes,
		// syncs), and its wakes by a caller that found it idle, a message (outlog.Stats).
		st := logStats()
		rounds := float64(st.Rounds - st0.Rounds)
		b.ReportMetric(rounds/float64(b.N), "log-rounds/msg")
		if rounds > 0 {
			b.ReportMetric(float64(st.Carried-st0.Carried)/rounds, "log-carried/round")
		}
		b.ReportMetric(float64(st.Wakes-st0.Wakes)/float64(b.N), "log-wakes/msg")
	}
}

// parallel runs b.N calls of fn on c goroutines and reports ops/s.
func parallel(b *testing.B, c int, fn func()) {
	b.ResetTimer()
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range c {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				fn()
			}
		})
	}
	wg.Wait()
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "ops/s")
}

// journalingEvents is an events facet on db that journals the events of users u00.. (as if each
// had a stream open lately): every event is committed, none delivered.
func journalingEvents(b *testing.B, db persist.KV, users int) *Events {
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		b.Fatal(err)
	}
	w := NewWatchers()
	for i := range users {
		w.Mark(fmt.Sprintf("u%02d", i), time.Now().Add(time.Hour))
	}
	guard := media.Guard{}
	ev, err := NewEvents(EventsConfig{
		Store: persist.NewWebhooks(db), Actors: hw, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Poster: webhook.NewHTTPPoster(guard.Dialer(time.Second), 0, 0), Guard: guard, Watchers: w,
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := ev.Boot(context.Background()); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { ev.Stop(context.Background()) })
	return ev
}

// schedCounts are the runtime's goroutines started and goroutine runs (a start or a wake-up
// each: the count of /sched/latencies, which samples one run in 8 and is scaled back here).
type schedCounts struct{ created, runs uint64 }

func readSched() schedCounts {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}, {Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	var runs uint64
	for _, c := range s[1].Value.Float64Histogram().Counts {
		runs += c
	}
	return schedCounts{created: s[0].Value.Uint64(), runs: runs * 8}
}
