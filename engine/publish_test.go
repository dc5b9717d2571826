package engine

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

// countingSink takes every event at once and counts what was committed.
type countingSink struct {
	mu        sync.Mutex
	committed int
}

func (s *countingSink) Prepare(uid string, ev domain.Event) (PreparedEvent, error) {
	return PreparedEvent{}, nil
}
func (s *countingSink) Commit(context.Context, []PreparedEvent) error { return nil }
func (s *countingSink) Committed(PreparedEvent) {
	s.mu.Lock()
	s.committed++
	s.mu.Unlock()
}
func (s *countingSink) ReceiveMessage(context.Context, domain.InboundMessage) error { return nil }

type quietLog struct{}

func (quietLog) Warn(string, ...any) {}

// A change reported while or after the publisher stops (a campaign's send still in flight when a
// cluster node stops its partition) is published or dropped, never a panic; what was queued
// before stop is published.
func TestPublisherAfterStop(t *testing.T) {
	sink := &countingSink{}
	p := newPublisher(sink, quietLog{}, publishQueue)
	for range 10 {
		p.publish("alice", domain.Event{Type: domain.EventMessageStatus})
	}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 200 {
				p.publish("alice", domain.Event{Type: domain.EventMessageStatus})
			}
		})
	}
	p.stop(context.Background())
	wg.Wait()
	p.publish("alice", domain.Event{Type: domain.EventMessageStatus})
	p.stop(context.Background()) // twice: no panic either
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if sink.committed < 10 {
		t.Fatalf("%d events published, want at least the 10 queued before stop", sink.committed)
	}
}

// refusingSink refuses every commit as a fenced partition's view does.
type refusingSink struct {
	countingSink
	tries atomic.Int64
}

func (s *refusingSink) Commit(ctx context.Context, _ []PreparedEvent) error {
	s.tries.Add(1)
	if err := ctx.Err(); err != nil {
		return err
	}
	return domain.ErrNodeUnavailable
}

// A stop bounded by its context returns when it ends, though storage keeps refusing the events
// (a fenced partition's engine stopping; a failed boot's): the events are dropped, not retried
// for ever behind the stop (the next start of the partition on this node waits for it).
func TestPublisherStopBounded(t *testing.T) {
	sink := &refusingSink{}
	p := newPublisher(sink, quietLog{}, publishQueue)
	p.publish("alice", domain.Event{Type: domain.EventMessageStatus})
	for sink.tries.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	returnsWithin(t, "stop", p.stop)
	if n := sink.committed; n != 0 {
		t.Fatalf("%d refused events handed on as committed", n)
	}
}

// A drain (an engine's stop waiting for the events its outcomes' records wait for) is bounded
// by its context too, also with the queue full behind a commit storage keeps refusing.
func TestPublisherDrainBounded(t *testing.T) {
	sink := &refusingSink{}
	p := newPublisher(sink, quietLog{}, 1)
	defer p.stop(context.Background())
	defer p.cancel() // the refused batch is dropped at once
	p.publish("alice", domain.Event{Type: domain.EventMessageStatus})
	for sink.tries.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	p.publish("alice", domain.Event{Type: domain.EventMessageStatus}) // fills the queue
	returnsWithin(t, "drain", p.drain)
}

// returnsWithin fails t unless f, given a context of 100 ms, returns within 10 s.
func returnsWithin(t *testing.T, what string, f func(context.Context)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	done := make(chan struct{})
	go func() { f(ctx); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not return within 10 s of its 100 ms context ending", what)
	}
}
