package engine

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
)

// An outcome reported after the engine stopped (a send in flight past the stop's deadline, a
// campaign's send on its own goroutine: publisher.mu's comment) while the user's events are
// taken: its event is dropped, so its record is not written (the message stays pending, sent
// again at the next boot), and Outcome returns. It must not deadlock on its shard's lock:
// publishThen tells then(errEventDropped) at once on a closed publisher, and Outcome called it
// with the shard's lock held, while settled takes the same lock.
func TestOutcomeAfterStopDoesNotDeadlock(t *testing.T) {
	e, u, _, _, _, _, sid := heldEventsEngine(t)
	e.Stop(context.Background())
	entry := domain.OutboxEntry{ID: NewMessageID(), UserID: u.ID, SessionID: sid,
		Message: domain.Message{To: "4915100000010", Kind: domain.KindText, Text: "late"}}
	entry.SetStatus(domain.MsgSent, time.Now())
	returned := make(chan struct{})
	go func() {
		e.Messages.msgs.Outcome(entry, nil)
		close(returned)
	}()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("Outcome after the engine stopped did not return: deadlocked on its shard's lock")
	}
	free := make(chan struct{})
	go func() {
		e.Messages.msgs.tracked(entry.ID)
		close(free)
	}()
	select {
	case <-free:
	case <-time.After(5 * time.Second):
		t.Fatal("the message's shard lock held for good")
	}
}

// A stop is bounded by its context also while another goroutine waits to queue an event (the
// queue full behind a commit storage keeps refusing: a fenced partition's engine, a send past
// the stop's deadline reporting its outcome). That sender holds mu's read lock while it waits
// for room, stop waited for mu before it cancelled the commits, and the commits (the only way
// room is made) retried until that cancel: the stop hung for good.
func TestPublisherStopBoundedWithASenderWaiting(t *testing.T) {
	sink := &refusingSink{}
	p := newPublisher(sink, quietLog{}, 1)
	p.publish("alice", domain.Event{Type: domain.EventMessageStatus})
	for sink.tries.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	p.publish("alice", domain.Event{Type: domain.EventMessageStatus})    // fills the queue
	go p.publish("alice", domain.Event{Type: domain.EventMessageStatus}) // waits for room
	for p.mu.TryLock() {                                                 // until the sender holds the read lock, waiting for room
		p.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	returnsWithin(t, "stop", p.stop)
}

// An engine stopping past its deadline while the events queue is full (storage slow or
// refusing: a fenced partition) and an outcome waits for room: the outcome holds its shard's
// lock while it waits; the publisher's goroutine, told that the commit in flight ended, tells
// the outcomes of that batch, and one of the same shard (settled) took that lock: neither went
// on, and the stop never returned.
func TestStopPastDeadlineWithAnOutcomeWaitingForRoom(t *testing.T) {
	e, u, _, _, _, sink, sid := heldEventsEngine(t)
	m := e.Messages.msgs
	entry := func(id string) domain.OutboxEntry {
		en := domain.OutboxEntry{ID: id, UserID: u.ID, SessionID: sid,
			Message: domain.Message{To: "4915100000011", Kind: domain.KindText, Text: "x"}}
		en.SetStatus(domain.MsgSent, time.Now())
		return en
	}
	release := sink.shut()
	t.Cleanup(release)
	first := NewMessageID()
	m.Outcome(entry(first), nil) // its event's commit held
	waitUntil(t, 10*time.Second, "the first outcome's event in a commit", func() bool { return sink.waiting.Load() > 0 })
	for len(e.pub.ch) < cap(e.pub.ch) {
		e.pub.publish(u.ID, domain.Event{Type: domain.EventSessionStatus})
	}
	second := NewMessageID()
	for m.shard(second) != m.shard(first) {
		second = NewMessageID()
	}
	go m.Outcome(entry(second), nil) // waits for room, its shard's lock held
	sh := m.shard(second)
	for sh.mu.TryLock() {
		sh.mu.Unlock()
		time.Sleep(time.Millisecond)
	}
	returnsWithin(t, "the publisher's stop", e.pub.stop)
}

// A fenced partition's engine (its storage refusing every commit, events too) whose events
// queue filled with the outcomes of its last sends stops within its context: an outcome
// waiting for room holds its shard's lock and the publisher's read lock, so the stop must end
// the commits before it takes the publisher's lock (it hung there), and the dropped events'
// outcomes must be told off the publisher's goroutine (their settled took the shard lock the
// waiting outcome holds: a partition's engine has few shards).
func TestFencedEngineStopsWithItsEventsQueueFull(t *testing.T) {
	mem := persist.NewMemory()
	recs := persist.NewRecords(mem)
	sink := &refusingSink{}
	e, u, _ := gatedEngine(t, recs, Config{Events: sink, Partitions: 64})
	// Sends until the queue is full: the last accepts and outcomes wait for room.
	var full atomic.Bool
	for range 4 {
		go func() {
			for !full.Load() {
				_, _ = e.Messages.Send(context.Background(), SendRequest{UserID: u.ID, Origin: "api",
					Message: domain.Message{To: "4915100000012", Kind: domain.KindText, Text: "x"}})
			}
		}()
	}
	waitUntil(t, 10*time.Second, "the events queue full, a change waiting for room", func() bool {
		return len(e.pub.ch) == cap(e.pub.ch) && readLocked(&e.pub.mu)
	})
	full.Store(true)
	waitUntil(t, 10*time.Second, "an outcome waiting for room with its shard's lock", func() bool {
		return readLocked(&e.Messages.msgs.shards[0].mu)
	})
	returnsWithin(t, "the engine's stop", e.Stop)
}

// readLocked tells whether someone holds mu (a sender of the publisher holds its read lock
// while it waits for room in the queue).
func readLocked(mu interface {
	TryLock() bool
	Unlock()
}) bool {
	if mu.TryLock() {
		mu.Unlock()
		return false
	}
	return true
}
