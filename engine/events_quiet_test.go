package engine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gateway/gateway/actors/webhook"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/internal/cputime"
	"github.com/gateway/gateway/persist"
)

// quietEvents is an events facet on the memory KV with watchers w, stopped at the test's end.
func quietEvents(tb testing.TB, w *engine.Watchers) *engine.Events {
	h := newEvents(tb, persist.NewMemory(), true, webhook.Policy{}, w)
	tb.Cleanup(h.stop)
	return h.ev
}

// TestQuietSeesEachTaker: Quiet looks at no lock while nobody has a subscription and nobody
// streamed lately; it still sees a user's subscription and a stream's mark as they come and
// go, for that user alone.
func TestQuietSeesEachTaker(t *testing.T) {
	ctx := context.Background()
	w := engine.NewWatchers()
	ev := quietEvents(t, w)
	if !ev.Quiet("u1") || !ev.Quiet("u2") {
		t.Fatal("quiet with no subscription and no stream: want true")
	}
	sub, err := ev.Subscribe(ctx, "u1", "http://127.0.0.1:9/a", []domain.EventType{domain.EventMessageStatus})
	if err != nil {
		t.Fatal(err)
	}
	if ev.Quiet("u1") {
		t.Fatal("u1 has a subscription: Quiet(u1) = true")
	}
	if !ev.Quiet("u2") {
		t.Fatal("u2 has none: Quiet(u2) = false")
	}
	if err := ev.Delete(ctx, "u1", sub.ID); err != nil {
		t.Fatal(err)
	}
	if !ev.Quiet("u1") {
		t.Fatal("u1's subscription deleted: Quiet(u1) = false")
	}
	// A mark that lapsed keeps nothing; one ahead keeps that user's events.
	w.Mark("u2", time.Now().Add(-time.Minute))
	if !ev.Quiet("u2") {
		t.Fatal("u2's mark lapsed: Quiet(u2) = false")
	}
	w.Mark("u1", time.Now().Add(time.Hour))
	if ev.Quiet("u1") {
		t.Fatal("u1 streamed lately: Quiet(u1) = true")
	}
	if !ev.Quiet("u3") {
		t.Fatal("u3 never streamed: Quiet(u3) = false")
	}
}

// BenchmarkEventsQuiet is the look a message's every status event makes (the publisher's
// takes), from 2 goroutines a core, over 20 users: with nobody subscribed or streaming (the
// lone gateway's send path in the bench), and with one subscription and one stream's mark of
// another user.
//
//	go test -run X -bench EventsQuiet -benchtime 2000000x ./engine
func BenchmarkEventsQuiet(b *testing.B) {
	users := make([]string, 20)
	for i := range users {
		users[i] = fmt.Sprintf("u%02d", i)
	}
	for _, others := range []bool{false, true} {
		name := "none"
		if others {
			name = "another-user's"
		}
		b.Run(name, func(b *testing.B) {
			w := engine.NewWatchers()
			ev := quietEvents(b, w)
			if others {
				if _, err := ev.Subscribe(context.Background(), "x", "http://127.0.0.1:9/a", []domain.EventType{domain.EventMessageStatus}); err != nil {
					b.Fatal(err)
				}
				w.Mark("y", time.Now().Add(time.Hour))
			}
			b.SetParallelism(2)
			start := cputime.Process()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				i := 0
				for pb.Next() {
					if !ev.Quiet(users[i%len(users)]) {
						b.Error("not quiet")
						return
					}
					i++
				}
			})
			b.ReportMetric(float64((cputime.Process()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}
