package engine_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/actors/webhook"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/media"
	"github.com/gateway/gateway/persist"
)

// BenchmarkSignedDeliveries measures events out end to end (DESIGN.md section 8: at least 10k
// signed webhook deliveries/s to a local receiver): publishers commit events (Badger on disk,
// --fsync batch, group commit), the subscriptions' actors sign and POST them to a fasthttp
// receiver on loopback that verifies every signature, and the clock stops when the last one
// is accepted. One op = one event published to one subscription and delivered.
//
//	go test -run XXX -bench SignedDeliveries -benchtime 30000x ./engine
//
// BENCH_FSYNC=interval opens Badger in --fsync interval mode; BENCH_MEMKV=1 uses the memory KV
// and BENCH_NOPPOST=1 a poster that sends nothing (to isolate the actors' own cost).
func BenchmarkSignedDeliveries(b *testing.B) {
	for _, subs := range []int{1, 16, 64} {
		for _, backlog := range []bool{false, true} {
			name := fmt.Sprintf("live/subscriptions=%d", subs)
			if backlog {
				name = fmt.Sprintf("backlog/subscriptions=%d", subs)
			}
			b.Run(name, func(b *testing.B) { benchDeliveries(b, subs, backlog) })
		}
	}
}

// benchDeliveries: live, publishers and deliveries run together (the clock runs from the first
// publish to the last delivery); backlog, every event is committed first with the receiver
// down, as after an outage, and the clock runs from the receiver's return to the last delivery.
func benchDeliveries(b *testing.B, nsubs int, backlog bool) {
	kv, err := openBenchKV(b)
	if err != nil {
		b.Fatal(err)
	}
	defer kv.Close()
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		b.Fatal(err)
	}
	guard := media.Guard{AllowPrivate: true}
	ev, err := engine.NewEvents(engine.EventsConfig{
		Store: persist.NewWebhooks(kv), Actors: hw, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Poster: benchPoster(guard), Guard: guard, MaxSubscriptions: 1,
		Policy: webhook.Policy{BaseBackoff: 20 * time.Millisecond, MaxBackoff: 20 * time.Millisecond},
	})
	if err != nil {
		b.Fatal(err)
	}
	if err := ev.Boot(context.Background()); err != nil {
		b.Fatal(err)
	}

	// The receiver verifies every signature, as a receiver should.
	var delivered, badSig atomic.Int64
	nopCount.Store(0)
	var down atomic.Bool
	down.Store(backlog)
	nopDown.Store(backlog)
	var keys sync.Map // webhook path "/u<i>" → key
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		if down.Load() {
			ctx.SetStatusCode(503)
			return
		}
		k, _ := keys.Load(string(ctx.Path()))
		mac := hmac.New(sha256.New, k.([]byte))
		mac.Write(ctx.Request.Header.Peek("webhook-id"))
		mac.Write([]byte{'.'})
		mac.Write(ctx.Request.Header.Peek("webhook-timestamp"))
		mac.Write([]byte{'.'})
		mac.Write(ctx.Request.Body())
		sig := ctx.Request.Header.Peek("webhook-signature")
		if !hmac.Equal(sig, []byte("v1,"+base64.StdEncoding.EncodeToString(mac.Sum(nil)))) {
			badSig.Add(1)
		}
		delivered.Add(1)
		ctx.SetStatusCode(204)
	}}
	go srv.Serve(ln)
	defer srv.Shutdown()

	users := make([]string, nsubs)
	for i := range users {
		users[i] = fmt.Sprintf("u%d", i)
		sub, err := ev.Subscribe(context.Background(), users[i], "http://"+ln.Addr().String()+"/"+users[i], []domain.EventType{domain.EventMessageStatus})
		if err != nil {
			b.Fatal(err)
		}
		key, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(sub.Secret, "whsec_"))
		keys.Store("/"+users[i], key)
	}

	const publishers = 256
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var next atomic.Int64
	var wg sync.WaitGroup
	for range publishers {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				err := ev.Publish(context.Background(), users[i%int64(nsubs)], domain.Event{Type: domain.EventMessageStatus,
					Data: domain.MessageStatusData{MessageID: fmt.Sprintf("m%d", i), To: "15550001111", SessionID: "s1", Status: "sent", At: time.Now()}})
				if err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	published := time.Since(start)
	if backlog {
		down.Store(false)
		nopDown.Store(false)
		start = time.Now()
	}
	for delivered.Load()+nopCount.Load() < int64(b.N) {
		time.Sleep(200 * time.Microsecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(float64(b.N)/published.Seconds(), "published/s")
	if n := badSig.Load(); n != 0 {
		b.Fatalf("%d deliveries failed signature verification", n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	ev.Stop(ctx)
	cancel()
}

func openBenchKV(b *testing.B) (persist.KV, error) {
	if os.Getenv("BENCH_MEMKV") != "" {
		return persist.NewMemory(), nil
	}
	fsync := persist.FsyncBatch
	if os.Getenv("BENCH_FSYNC") == "interval" {
		fsync = persist.FsyncInterval
	}
	return persist.OpenBadger(filepath.Join(b.TempDir(), "db"), persist.BadgerOptions{Fsync: fsync})
}

type nopPoster struct{ n *atomic.Int64 }

var nopCount atomic.Int64

var nopDown atomic.Bool

func (p nopPoster) Post(context.Context, string, webhook.Headers, []byte) (int, error) {
	if nopDown.Load() {
		return 503, nil
	}
	p.n.Add(1)
	return 204, nil
}

func benchPoster(guard media.Guard) webhook.Poster {
	if os.Getenv("BENCH_NOPPOST") != "" {
		return nopPoster{&nopCount}
	}
	return webhook.NewHTTPPoster(guard.Dialer(5*time.Second), 0, 0)
}
