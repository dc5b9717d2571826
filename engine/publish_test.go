package engine

import (
	"context"
	"sync"
	"testing"

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
	p := newPublisher(sink, quietLog{})
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
	p.stop()
	wg.Wait()
	p.publish("alice", domain.Event{Type: domain.EventMessageStatus})
	p.stop() // twice: no panic either
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if sink.committed < 10 {
		t.Fatalf("%d events published, want at least the 10 queued before stop", sink.committed)
	}
}
