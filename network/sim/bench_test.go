package sim

import (
	"context"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// benchClients opens count sessions paired by auto-pair and waits until they are online.
func benchClients(b *testing.B, n *Network, count int) []network.Client {
	b.Helper()
	cs := make([]network.Client, count)
	for i := range cs {
		c, err := n.Open("s"+strconv.Itoa(i), nil)
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Connect(context.Background()); err != nil {
			b.Fatal(err)
		}
		cs[i] = c
	}
	for _, c := range cs {
		if !poll(func() bool { _, ok := c.(*client).online(); return ok }) {
			b.Fatal("session not online")
		}
	}
	return cs
}

// BenchmarkSendParallel: many senders (8 per core) on 64 sessions, each message a new id.
func BenchmarkSendParallel(b *testing.B) {
	n := openSim(b, Options{AutoPair: time.Nanosecond})
	cs := benchClients(b, n, 64)
	var next atomic.Int64
	b.SetParallelism(8)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			i := next.Add(1)
			m := domain.Message{ID: "m" + strconv.FormatInt(i, 10), To: "1555000" + strconv.FormatInt(1000+i%1000, 10),
				Kind: domain.KindText, Text: "Your order #1001 has shipped."}
			if _, err := cs[i%int64(len(cs))].Send(ctx, m); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	if n.DeliveredCount() != next.Load() {
		b.Fatalf("delivered %d of %d", n.DeliveredCount(), next.Load())
	}
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	if c := n.DeliveredCount(); c > 100000 {
		b.ReportMetric(float64(ms.HeapAlloc)/float64(c), "heapB/delivery")
	}
}

// BenchmarkResend: re-sends of delivered ids (the outbox replay after a crash).
func BenchmarkResend(b *testing.B) {
	n := openSim(b, Options{AutoPair: time.Nanosecond})
	c := benchClients(b, n, 1)[0]
	ctx := context.Background()
	for i := range 1000 {
		c.Send(ctx, domain.Message{ID: "m" + strconv.Itoa(i), To: "15550001000", Kind: domain.KindText, Text: "x"})
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := c.Send(ctx, domain.Message{ID: "m" + strconv.Itoa(i%1000), To: "15550001000", Kind: domain.KindText, Text: "x"}); err != nil {
			b.Fatal(err)
		}
	}
	if n.DeliveredCount() != 1000 {
		b.Fatalf("re-sends delivered: %d", n.DeliveredCount())
	}
}

// BenchmarkIdleSessions reports the heap of a paired, connected, idle client.
func BenchmarkIdleSessions(b *testing.B) {
	const count = 10000
	for b.Loop() {
		n := openSim(b, Options{AutoPair: time.Nanosecond})
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		cs := benchClients(b, n, count)
		if !poll(func() bool { return runtime.NumGoroutine() < 100 }) {
			b.Fatalf("%d goroutines left with idle clients", runtime.NumGoroutine())
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/count, "heapB/session")
		runtime.KeepAlive(cs)
		n.Close()
	}
}
