package session

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/actors/internal/clocktest"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// The deliverer's hand-over, measured against the one it replaced (issue 21): a job through
// the session's long-lived worker, and the same job on a new goroutine per batch, the way pump
// did it before. A send's call chain grows its goroutine's stack (the sim's journal encoding,
// whatsmeow's protobuf and Signal code); a new goroutine grows it again on every batch, the
// worker once. Compare the two ns/op of one run:
//
//	go test -run XXX -bench Handover -benchtime 20000x ./actors/session

// deepClient is a network client whose send uses about 48 KiB of stack.
type deepClient struct{ fakeClient }

//go:noinline
func deep(n int) byte {
	var buf [1024]byte
	buf[n%len(buf)] = byte(n)
	if n == 0 {
		return buf[0]
	}
	return deep(n-1) + buf[(n*7)%len(buf)]
}

func (c *deepClient) Send(_ context.Context, m domain.Message) (network.Receipt, error) {
	deep(48)
	return network.Receipt{ID: m.ID}, nil
}

// relay is an actor that hands every batchDone to a channel.
type relay chan batchDone

func (r relay) Receive(c *actor.Context) {
	if m, ok := c.Message().(batchDone); ok {
		r <- m
	}
}

func BenchmarkHandover(b *testing.B) {
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		b.Fatal(err)
	}
	done := make(relay, 1)
	self := hw.Spawn(func() actor.Receiver { return done }, "relay")
	deps := Deps{Clock: testClock{clocktest.New(t0)}, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Deliveries: &nopDeliveries{}, SendTimeout: time.Minute}
	client := &deepClient{}
	batch := []item{{seq: 1, e: domain.OutboxEntry{ID: "m", Message: domain.Message{ID: "m", To: "15550000001", Kind: domain.KindText}}}}

	b.Run("worker", func(b *testing.B) {
		var inflight sync.WaitGroup
		w := newWorker(hw, self, deps, &inflight)
		defer w.stop()
		b.ReportAllocs()
		for b.Loop() {
			w.submit(job{client: client, send: batch})
			<-done
		}
	})
	b.Run("goroutine-per-batch", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			go func() { hw.Send(self, deliver(client, deps, batch)) }()
			<-done
		}
	})
}

type nopDeliveries struct{}

func (*nopDeliveries) Outcome(domain.OutboxEntry, error)   {}
func (*nopDeliveries) Receipt(string, domain.StatusChange) {}
func (*nopDeliveries) Failed(string, error, time.Time)     {}
