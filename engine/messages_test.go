package engine

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network/sim"
	"github.com/gateway/gateway/persist"
)

// countingOutbox counts the reads of messages back from storage.
type countingOutbox struct {
	*persist.Outbox
	gets atomic.Int64
}

func (c *countingOutbox) Get(id string) (domain.OutboxEntry, error) {
	c.gets.Add(1)
	return c.Outbox.Get(id)
}

// A receipt for a message whose outcome was just written is applied from memory (the last
// few thousand settled messages are kept, without their bodies) and recorded beside the
// outcome: it reads nothing back from storage.
func TestReceiptsAfterTheOutcomeNeedNoRead(t *testing.T) {
	recs := persist.NewRecords(persist.NewMemory())
	ob := &countingOutbox{Outbox: recs.Outbox}
	e, u := linkedEngine(t, recs, ob)
	ctx := context.Background()
	var ids []string
	for i := range 20 {
		m, err := e.Messages.Send(ctx, SendRequest{UserID: u.ID, Origin: "api",
			Message: domain.Message{To: fmt.Sprintf("4915100000%02d", i), Kind: domain.KindText, Text: "hi"}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, m.ID)
	}
	waitUntil(t, 10*time.Second, "outcomes written", func() bool {
		for _, id := range ids {
			sh := e.Messages.msgs.shard(id)
			sh.mu.Lock()
			p := sh.m[id]
			durable := p != nil && p.durable
			sh.mu.Unlock()
			if !durable {
				return false
			}
		}
		return true
	})
	before := ob.gets.Load()
	at := time.Now().UTC().Truncate(time.Millisecond)
	for _, id := range ids {
		e.Messages.msgs.Receipt(id, domain.StatusChange{Status: domain.MsgRead, At: domain.MillisOf(at)}, nil)
	}
	if n := ob.gets.Load() - before; n != 0 {
		t.Fatalf("%d reads from storage for %d receipts after their outcomes", n, len(ids))
	}
	ob.Flush()
	for _, id := range ids {
		m, err := e.Messages.Get(u.ID, id)
		if err != nil || m.Status != domain.MsgRead || m.Message.Text != "hi" {
			t.Fatalf("%s: %+v %v", id, m, err)
		}
	}
}

// linkedEngine is an engine on recs, its outbox read through ob, with user u1, whose session
// is linked on a simulated network; it stops with the test.
func linkedEngine(t *testing.T, recs *persist.Records, ob Outbox) (*Engine, domain.User) {
	t.Helper()
	r := recordsOf(recs)
	r.Outbox = ob
	return linkedEngineOn(t, recs, r)
}

// A partition's engine keeps its share of the settled messages a gateway keeps for their
// receipts (a node of 64 partitions keeps 4,096 in all, not 64 × 4,096: the live heap the
// garbage collector marks on every cycle), and its share of the events queue.
func TestPartitionEngineKeepsItsShare(t *testing.T) {
	if q := (Config{Partitions: 64}).share(publishQueue, publishQueueLeast); q != publishQueueLeast {
		t.Fatalf("events queue of one partition of 64: %d, want %d", q, publishQueueLeast)
	}
	if q := (Config{}).share(publishQueue, publishQueueLeast); q != publishQueue {
		t.Fatalf("events queue of a single node: %d, want %d", q, publishQueue)
	}
	recs := persist.NewRecords(persist.NewMemory())
	e, u := linkedEngineWith(t, recs, recordsOf(recs), 64)
	ctx := context.Background()
	const sent = 3 * recentPerShard
	for i := range sent {
		if _, err := e.Messages.Send(ctx, SendRequest{UserID: u.ID, Origin: "api",
			Message: domain.Message{To: fmt.Sprintf("491510000%03d", i), Kind: domain.KindText, Text: "hi"}}); err != nil {
			t.Fatal(err)
		}
	}
	kept := func() (n, durable int) {
		for i := range e.Messages.msgs.shards {
			sh := &e.Messages.msgs.shards[i]
			sh.mu.Lock()
			for _, p := range sh.m {
				n++
				if p.durable {
					durable++
				}
			}
			sh.mu.Unlock()
		}
		return n, durable
	}
	waitUntil(t, 20*time.Second, "every outcome written", func() bool {
		n, durable := kept()
		return e.Messages.msgs.depth.Load() == 0 && n == durable
	})
	if n, _ := kept(); n != recentPerShard || len(e.Messages.msgs.shards) != 1 {
		t.Fatalf("a partition of 64 keeps %d settled messages of %d in %d shards, want %d in 1", n, sent, len(e.Messages.msgs.shards), recentPerShard)
	}
}

// linkedEngineOn is linkedEngine on typed stores r (some of them wrapped by the test).
func linkedEngineOn(t *testing.T, recs *persist.Records, r Records) (*Engine, domain.User) {
	t.Helper()
	return linkedEngineWith(t, recs, r, 0)
}

// linkedEngineWith is linkedEngineOn for an engine running one partition of partitions (0:
// a single node's engine).
func linkedEngineWith(t *testing.T, recs *persist.Records, r Records, partitions int) (*Engine, domain.User) {
	t.Helper()
	net, err := sim.Open(sim.Options{Dir: t.TempDir(), AutoPair: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { net.Close() })
	return startLinked(t, Config{Store: recs.Store, Records: r, Network: net, Partitions: partitions})
}

// startLinked starts an engine on cfg (with no logs and an unlimited plan), with user u1 whose
// session is linked on cfg's network (a simulated one, or one over it); it stops with the test.
func startLinked(t *testing.T, cfg Config) (*Engine, domain.User) {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Plans, cfg.DefaultPlan = Plans{"unlimited": {}}, "unlimited"
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop(context.Background()) })
	return e, linkU1(t, e)
}

// linkU1 creates user u1 on e and links its session, on e's network.
func linkU1(t *testing.T, e *Engine) domain.User {
	t.Helper()
	ctx := context.Background()
	u, err := e.Users.Create(ctx, NewUser{ID: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Sessions.QR(ctx, u); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "linked", func() bool { return e.Sessions.Status(u.ID).Status == domain.StatusConnected })
	return u
}

// A sent message's status history lies in its pending record (pending.hist), made with the
// record: no allocation of its own (issue 32: one a message in the send path's profile, in
// queuedEntry). Its room is two statuses, as before, so the deliverer's sent appends in place
// and the first receipt appends into a new array.
func TestSendHistoryInItsRecord(t *testing.T) {
	recs := persist.NewRecords(persist.NewMemory())
	e, u := linkedEngine(t, recs, recs.Outbox)
	m, err := e.Messages.Send(context.Background(), SendRequest{UserID: u.ID, Origin: "api",
		Message: domain.Message{To: "491510000001", Kind: domain.KindText, Text: "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.History) != 1 || cap(m.History) != 2 || m.History[0].Status != domain.MsgQueued {
		t.Fatalf("history %+v (cap %d), want queued with room for one more", m.History, cap(m.History))
	}
	sh := e.Messages.msgs.shard(m.ID)
	sh.mu.Lock()
	p := sh.m[m.ID]
	sh.mu.Unlock()
	if p == nil {
		t.Fatal("the sent message has no record")
	}
	if &m.History[0] != &p.hist[0] {
		t.Fatal("the history lies outside the message's record: an allocation of its own")
	}
}

// An outbox's refusal of a message too large for it is answered as such (413), not as the
// storage's failure (503 with Retry-After), which a client would retry for ever.
func TestAcceptErr(t *testing.T) {
	for _, c := range []struct {
		err  error
		code string
	}{
		{fmt.Errorf("outlog record of 17000000 bytes: %w", domain.ErrMediaTooLarge), "media_too_large"},
		{fmt.Errorf("disk full"), "unavailable"},
	} {
		if got := domain.CodeOf(acceptErr(c.err)); got != c.code {
			t.Errorf("acceptErr(%v): code %q, want %q", c.err, got, c.code)
		}
	}
}
