package session

import (
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/gateway/gateway/domain"
)

// BenchmarkEnqueue: messages from their accept to their outcome through a linked session whose
// fake client answers at once (recording nothing), 64 producers: pushed into the session's queue as the engine does
// since issue 32 (no actor message, no goroutine; the worker picks them), and handed to the
// actor as Enqueue messages (the actor's mailbox, a burst goroutine of hollywood's, the actor
// then waking the worker). Compare the two ns/op of one run:
//
//	go test -run XXX -bench Enqueue -benchtime 100000x ./actors/session
func BenchmarkEnqueue(b *testing.B) {
	for _, how := range []string{"push", "actor-message"} {
		b.Run(how, func(b *testing.B) {
			r := newRig(b, "447700900001", domain.Pacing{})
			r.out.countOnly = true
			r.client().lean = true
			phone, _ := r.client().Paired()
			const producers = 64
			es := make([]domain.OutboxEntry, b.N)
			for i := range es {
				id := fmt.Sprintf("m%07d", i)
				es[i] = domain.OutboxEntry{ID: id, UserID: "u1", From: phone, Message: domain.Message{ID: id, To: fmt.Sprintf("1555%07d", i%1000), Kind: domain.KindText, Text: id}}
				es[i].SetStatus(domain.MsgQueued, t0)
			}
			b.ReportAllocs()
			b.ResetTimer()
			var wg sync.WaitGroup
			for p := range producers {
				wg.Go(func() {
					for i := p; i < len(es); i += producers {
						if how == "push" {
							r.queue.Push(es[i])
						} else {
							r.hw.Send(r.pid, &Enqueue{Entry: es[i]})
						}
					}
				})
			}
			wg.Wait()
			for r.out.n.Load() < int64(b.N) {
				runtime.Gosched()
			}
		})
	}
}
