package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network/sim"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/natskv"
	"github.com/gateway/gateway/persist/natstest"
	"github.com/gateway/gateway/persist/outlog"
)

// BenchmarkBeginIdempotent is the look-up of an Idempotency-Key (on Badger on disk, and on an
// embedded NATS server: each read a round trip there; 20,000 keyed messages accepted before):
// new, a key never used (what a keyed send costs before its accept: every id a record may be
// under read, none there); replay, a key whose message was accepted today and is pending.
// badger-log is the outbox a lone gateway runs by default (persist.LogOutbox), on Badger.
// `go test -run X -bench BeginIdempotent -benchtime 20000x ./engine`.
func BenchmarkBeginIdempotent(b *testing.B) {
	for _, v := range []struct {
		name  string
		onLog bool
	}{{"badger", false}, {"badger-log", true}} {
		b.Run(v.name, func(b *testing.B) {
			db, err := persist.OpenBadger(b.TempDir(), persist.BadgerOptions{Fsync: persist.FsyncInterval})
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			benchBeginIdempotent(b, db, v.onLog)
		})
	}
	b.Run("nats", func(b *testing.B) {
		db, err := natskv.Open(context.Background(), natskv.Options{URL: natstest.Start(b).URL, Prefix: "idem", Replicas: 1})
		if err != nil {
			b.Fatal(err)
		}
		defer db.Close()
		benchBeginIdempotent(b, db, false)
	})
}

func benchBeginIdempotent(b *testing.B, db persist.KV, onLog bool) {
	recs := persist.NewRecords(db)
	net, err := sim.Open(sim.Options{Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer net.Close()
	records := recordsOf(recs)
	if onLog {
		lo, err := persist.OpenLogOutbox(b.TempDir(), db, persist.LogOutboxOptions{Sync: outlog.SyncInterval})
		if err != nil {
			b.Fatal(err)
		}
		defer lo.Close()
		records.Outbox = lo
	}
	e, err := New(Config{Store: recs.Store, Records: records, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Plans: Plans{"unlimited": {}}, DefaultPlan: "unlimited", Network: net})
	if err != nil {
		b.Fatal(err)
	}
	defer e.Stop(context.Background())
	ctx := context.Background()
	const stored = 20000
	for i := range stored {
		idem := Idem{KeyID: "k1", Key: fmt.Sprintf("stored-%d", i), At: time.Now()}
		en := domain.OutboxEntry{ID: idem.Derived(), UserID: "u1", CreatedAt: domain.MillisOf(time.Now()),
			Message: domain.Message{To: "491510000001", Kind: domain.KindText, Text: "stored"}}
		if err := records.Outbox.Accept(ctx, &en, "h"); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("new", func(b *testing.B) {
		for i := range b.N {
			_, found, release, err := e.Messages.BeginIdempotent(&Idem{KeyID: "k1", Key: fmt.Sprintf("new-%d", i), BodyHash: "h"})
			if err != nil || found {
				b.Fatal(found, err)
			}
			release()
		}
	})
	b.Run("replay", func(b *testing.B) {
		for i := range b.N {
			_, found, _, err := e.Messages.BeginIdempotent(&Idem{KeyID: "k1", Key: fmt.Sprintf("stored-%d", i%stored), BodyHash: "h"})
			if err != nil || !found {
				b.Fatal(found, err)
			}
		}
	})
}
