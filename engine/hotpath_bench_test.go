package engine

import (
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"
)

// The actor hot path (DESIGN.md section 2): hollywood's Request against a reply channel carried
// in the message, on a trivial actor. `go test -run X -bench ActorRoundTrip ./engine`.

type echoReq struct{ reply chan int }

type echo struct{}

func (echo) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case *echoReq:
		m.reply <- 1
	case int:
		c.Respond(m)
	}
}

func benchEngine(b *testing.B) (*actor.Engine, *actor.PID) {
	e, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		b.Fatal(err)
	}
	pid := e.Spawn(func() actor.Receiver { return echo{} }, "echo", actor.WithInboxSize(8))
	b.Cleanup(func() { <-e.Poison(pid).Done() })
	return e, pid
}

func BenchmarkActorRoundTrip(b *testing.B) {
	b.Run("Request", func(b *testing.B) {
		e, pid := benchEngine(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if _, err := e.Request(pid, 1, time.Second).Result(); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
	b.Run("ReplyChannel", func(b *testing.B) {
		e, pid := benchEngine(b)
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			m := &echoReq{reply: make(chan int, 1)} // pooled per caller, as Keys.Authorize does
			for pb.Next() {
				e.Send(pid, m)
				<-m.reply
			}
		})
	})
}
