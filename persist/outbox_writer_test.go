package persist

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

// sharedKV is one partition's KV of a store whose outboxes share one writer (as natskv's views).
type sharedKV struct {
	*Memory
	w *OutcomeWriter
}

func (k *sharedKV) OutcomeWriter() *OutcomeWriter { return k.w }

// gatedCommitter commits each part through its KV, holding the parts of held while gate is
// open.
type gatedCommitter struct {
	held KV
	gate chan struct{}
	mu   sync.Mutex
	hold int // parts of held waiting at the gate
}

func (c *gatedCommitter) CommitParts(ctx context.Context, parts []Part, errs []error) {
	for i, p := range parts {
		if p.KV == c.held {
			c.mu.Lock()
			c.hold++
			c.mu.Unlock()
			<-c.gate
		}
		errs[i] = p.KV.Commit(ctx, p.Ops...)
	}
}

func (c *gatedCommitter) waiting() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.hold
}

// A shared writer holds an outbox's later writes while its batch is in flight (its outcomes
// land in the order they came), and the other outboxes' writes go on meanwhile.
func TestSharedWriterOrderPerOutbox(t *testing.T) {
	mem := NewMemory()
	c := &gatedCommitter{gate: make(chan struct{})}
	w := NewOutcomeWriter(c, false)
	kvA, kvB := &sharedKV{mem, w}, &sharedKV{mem, w}
	c.held = kvA
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	a, b := outboxAt(kvA, t0.Add(time.Minute)), outboxAt(kvB, t0.Add(time.Minute))
	answered := make(chan string, 8)
	settle := func(o *Outbox, id string, st domain.MessageStatus) {
		e := queued(id, t0)
		e.SetStatus(st, t0.Add(time.Second))
		o.Settle(e, func(err error) {
			if err != nil {
				t.Errorf("%s %s: %v", id, st, err)
			}
			answered <- id + " " + st
		})
	}
	settle(a, "m1", domain.MsgFailed)
	for c.waiting() == 0 {
		time.Sleep(time.Millisecond) // poll: a's first batch reaches the store
	}
	settle(a, "m1", domain.MsgSent) // its second outcome: must wait for the first
	for w.parked.Load() == 0 {
		time.Sleep(time.Millisecond) // poll: the writer waits, its only queued write a's
	}
	settle(b, "m2", domain.MsgSent) // queued while the writer waits: must not wait for a
	select {
	case got := <-answered:
		if got != "m2 sent" {
			t.Fatalf("answered first: %q, want b's outcome while a's batch is held", got)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("b's outcome waited for a's held batch")
	}
	select {
	case got := <-answered:
		t.Fatalf("answered %q while a's batch is held", got)
	case <-time.After(20 * time.Millisecond):
	}
	if c.waiting() != 1 {
		t.Fatalf("%d of a's batches reached the store, want 1 (its next waits)", c.waiting())
	}
	close(c.gate)
	for _, want := range []string{"m1 failed", "m1 sent"} {
		if got := <-answered; got != want {
			t.Fatalf("answered %q, want %q", got, want)
		}
	}
	a.Flush()
	b.Flush()
	for o, id := range map[*Outbox]string{a: "m1", b: "m2"} {
		got, err := o.status.Get(id)
		if err != nil || got.Status != domain.MsgSent {
			t.Fatalf("%s's outcome: %+v, %v; want sent (the later outcome last)", id, got, err)
		}
	}
}
