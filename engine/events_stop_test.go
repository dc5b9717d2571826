package engine_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/actors/webhook"
	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/media"
	"github.com/gateway/gateway/persist"
)

// Events.Stop may be called more than once, and from two goroutines at once (a node's
// shutdown and a partition handed over): the second call returns once the first has stopped
// everything, and neither panics (a broker's forwarder closed its drain channel twice).
func TestEventsStopTwice(t *testing.T) {
	ctx := context.Background()
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	guard := media.Guard{}
	ev, err := engine.NewEvents(engine.EventsConfig{Store: persist.NewWebhooks(persist.NewMemory()), Actors: hw,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Forward: &forwardRecorder{},
		Poster: webhook.NewHTTPPoster(guard.Dialer(5*time.Second), 0, 0), Guard: guard})
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Boot(ctx); err != nil {
		t.Fatal(err)
	}
	c, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() { ev.Stop(c) })
	}
	wg.Wait()
	ev.Stop(c) // and once more, after both
}
