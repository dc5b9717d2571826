package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/network/sim"
	"github.com/gateway/gateway/persist"
)

// gate holds what passes it while shut (a send, a commit) and counts what waits.
type gate struct {
	mu      sync.Mutex
	ch      chan struct{} // set: shut until closed
	waiting atomic.Int32
}

// shut holds what passes from now on; the function returned lets it go (once).
func (g *gate) shut() (open func()) {
	ch := make(chan struct{})
	g.mu.Lock()
	g.ch = ch
	g.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.ch = nil
			g.mu.Unlock()
			close(ch)
		})
	}
}

// pass waits while the gate is shut, within ctx.
func (g *gate) pass(ctx context.Context) error {
	g.mu.Lock()
	ch := g.ch
	g.mu.Unlock()
	if ch == nil {
		return nil
	}
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// gateNet is the simulated network whose sends wait while its gate is shut (a send in doubt:
// its outcome comes late), and which lets the test play the network's events into a session.
type gateNet struct {
	*sim.Network
	gate
	mu    sync.Mutex
	sinks map[string]func(network.Event)
}

func (n *gateNet) Open(id string, sink func(network.Event), opts ...network.Option) (network.Client, error) {
	c, err := n.Network.Open(id, sink, opts...)
	n.mu.Lock()
	n.sinks[id] = sink
	n.mu.Unlock()
	return gateClient{Client: c, n: n}, err
}

// emit plays ev as session sid's network reports it.
func (n *gateNet) emit(sid string, ev network.Event) {
	n.mu.Lock()
	sink := n.sinks[sid]
	n.mu.Unlock()
	sink(ev)
}

type gateClient struct {
	network.Client
	n *gateNet
}

func (c gateClient) Send(ctx context.Context, m domain.Message) (network.Receipt, error) {
	if err := c.n.pass(ctx); err != nil {
		return network.Receipt{}, err
	}
	return c.Client.Send(ctx, m)
}

// gatedEngine is an engine on recs over a gateNet, with user u1 whose session is linked.
func gatedEngine(t *testing.T, recs *persist.Records, cfg Config) (*Engine, domain.User, *gateNet) {
	t.Helper()
	s, err := sim.Open(sim.Options{Dir: t.TempDir(), AutoPair: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	net := &gateNet{Network: s, sinks: map[string]func(network.Event){}}
	t.Cleanup(func() { s.Close() })
	cfg.Store, cfg.Records, cfg.Network = recs.Store, recordsOf(recs), net
	e, u := startLinked(t, cfg)
	return e, u, net
}

// doneCh is a Done that reports its calls.
func doneCh() (network.Done, chan error) {
	ch := make(chan error, 2)
	return func(err error) { ch <- err }, ch
}

// toldOnce waits for a Done's one call, and fails t unless it came without an error.
func toldOnce(t *testing.T, what string, ch chan error) {
	t.Helper()
	select {
	case err := <-ch:
		if err != nil {
			t.Fatalf("%s: Done told %v", what, err)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("%s: Done not told within 5 s (the network would wait, then deliver it again)", what)
	}
	select {
	case err := <-ch:
		t.Fatalf("%s: Done told twice (then %v)", what, err)
	case <-time.After(10 * time.Millisecond):
	}
}

// A receipt that comes while its send is in doubt (its outcome late) is its own record at once
// and its Done told then, not held until the outcome (WhatsApp's connection and Meta's
// webhook waited on it); the outcome, when it lands, still reflects it. Edits, revokes and
// votes are told once recorded.
func TestReceiptBeforeOutcomeRecordedAtOnce(t *testing.T) {
	mem := persist.NewMemory()
	recs := persist.NewRecords(mem)
	e, u, net := gatedEngine(t, recs, Config{})
	ctx := context.Background()
	sid := e.Sessions.Status(u.ID).ID
	open := net.shut()
	t.Cleanup(open) // a failed test must not leave the engine's stop waiting on the send
	m, err := e.Messages.Send(ctx, SendRequest{UserID: u.ID, Origin: "api",
		Message: domain.Message{To: "4915100000001", Kind: domain.KindText, Text: "your order shipped"}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the send in flight", func() bool { return net.waiting.Load() > 0 })
	d, ch := doneCh()
	net.emit(sid, network.MessageReceipt{IDs: []string{m.ID}, Status: network.StatusRead, At: time.Now(), Done: d})
	toldOnce(t, "the read receipt of a send in doubt", ch)
	if _, err := mem.Get([]byte("outbox_receipt/" + m.ID + "/read")); err != nil {
		t.Fatalf("the receipt's Done told, its record: %v", err)
	}
	open()
	waitUntil(t, 10*time.Second, "the outcome written, read", func() bool {
		recs.Outbox.Flush()
		got, err := recs.Outbox.Get(m.ID)
		return err == nil && got.Status == domain.MsgRead
	})

	// A failure Meta reports while the send is in doubt: the same, and the outcome fails.
	open = net.shut()
	t.Cleanup(open)
	f, err := e.Messages.Send(ctx, SendRequest{UserID: u.ID, Origin: "api",
		Message: domain.Message{To: "4915100000004", Kind: domain.KindText, Text: "your order shipped"}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the second send in flight", func() bool { return net.waiting.Load() > 0 })
	d, ch = doneCh()
	net.emit(sid, network.MessageReceipt{IDs: []string{f.ID}, Status: network.StatusFailed, At: time.Now(), Err: domain.ErrOutsideServiceWindow, Done: d})
	toldOnce(t, "the failure of a send in doubt", ch)
	if _, err := mem.Get([]byte("outbox_receipt/" + f.ID + "/failed")); err != nil {
		t.Fatalf("the failure's Done told, its record: %v", err)
	}
	open()
	waitUntil(t, 10*time.Second, "the outcome written, failed", func() bool {
		recs.Outbox.Flush()
		got, err := recs.Outbox.Get(f.ID)
		return err == nil && got.Status == domain.MsgFailed && got.Code == domain.CodeOf(domain.ErrOutsideServiceWindow)
	})

	// An edit, a revoke, a vote: told once recorded on their message.
	o := network.Origin{ID: "IN1", From: "4915100000001", At: time.Now()}
	for _, ev := range []network.Event{
		network.Edited{Origin: o, Target: m.ID, Message: domain.Message{Kind: domain.KindText, Text: "your order left"}},
		network.PollVote{Origin: o, Poll: m.ID, Options: []string{"Yes"}},
		network.Revoked{Origin: o, Target: m.ID},
	} {
		d, ch := doneCh()
		ev, _ = network.WithDone(ev, d)
		net.emit(sid, ev)
		toldOnce(t, fmt.Sprintf("%T", ev), ch)
	}
}

// unclaim (resume's claim undone) tells what it held: a late failure held for the outcome.
func TestUnclaimTellsWhatItHeld(t *testing.T) {
	recs := persist.NewRecords(persist.NewMemory())
	e, _, _ := gatedEngine(t, recs, Config{})
	m := e.Messages.msgs
	if !m.track("UNCLAIMED1", nil, nil) {
		t.Fatal("not tracked")
	}
	d, ch := doneCh()
	m.Failed("UNCLAIMED1", errors.New("undeliverable"), time.Now(), d)
	m.unclaim("UNCLAIMED1")
	toldOnce(t, "a late failure held when resume's claim was undone", ch)
}

// heldSink is an EventSink whose commits wait while it is held, and which records the events
// committed.
type heldSink struct {
	gate
	mu        sync.Mutex
	committed []domain.EventType
}

func (s *heldSink) Prepare(uid string, ev domain.Event) (PreparedEvent, error) {
	t := ev.Type
	if d, ok := ev.Data.(domain.MessageStatusData); ok {
		t += domain.EventType("/" + d.Status)
	}
	return PreparedEvent{uid: uid, rec: domain.EventRecord{Type: t}}, nil
}

func (s *heldSink) Commit(ctx context.Context, ps []PreparedEvent) error {
	if err := s.pass(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range ps {
		s.committed = append(s.committed, p.rec.Type)
	}
	return nil
}

func (s *heldSink) Committed(PreparedEvent)                                     {}
func (s *heldSink) ReceiveMessage(context.Context, domain.InboundMessage) error { return nil }

func (s *heldSink) count(t domain.EventType) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.committed {
		if c == t {
			n++
		}
	}
	return n
}

// untold fails t if the Done is told within a while (what must not happen while its event's
// commit is held).
func untold(t *testing.T, what string, ch chan error) {
	t.Helper()
	select {
	case err := <-ch:
		t.Fatalf("%s: Done told (%v) before the event was committed", what, err)
	case <-time.After(200 * time.Millisecond):
	}
}

// A receipt's and a reaction's events are committed before their records, and the network's
// Done told only after both: a kill -9 between the two leaves the record unwritten and the
// network unacknowledged (it sends the receipt again, which publishes again), never the
// record kept and the event lost.
func TestReceiptAndReactionEventsBeforeTheirRecords(t *testing.T) {
	mem := persist.NewMemory()
	recs := persist.NewRecords(mem)
	sink := &heldSink{}
	e, u, net := gatedEngine(t, recs, Config{Events: sink})
	ctx := context.Background()
	sid := e.Sessions.Status(u.ID).ID
	m, err := e.Messages.Send(ctx, SendRequest{UserID: u.ID, Origin: "api",
		Message: domain.Message{To: "4915100000002", Kind: domain.KindText, Text: "your order shipped"}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the outcome written, and the simulated phone's delivery", func() bool {
		recs.Outbox.Flush()
		got, err := recs.Outbox.Get(m.ID)
		return err == nil && got.Status == domain.MsgDelivered
	})

	release := sink.shut()
	t.Cleanup(release)
	d, ch := doneCh()
	net.emit(sid, network.MessageReceipt{IDs: []string{m.ID}, Status: network.StatusRead, At: time.Now(), Done: d})
	waitUntil(t, 10*time.Second, "the read event's commit held", func() bool { return sink.waiting.Load() > 0 })
	untold(t, "the read receipt", ch)
	recs.Outbox.Flush()
	if _, err := mem.Get([]byte("outbox_receipt/" + m.ID + "/read")); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Fatalf("the read receipt's record written before its event: %v", err)
	}
	release()
	toldOnce(t, "the read receipt", ch)
	if _, err := mem.Get([]byte("outbox_receipt/" + m.ID + "/read")); err != nil {
		t.Fatalf("the read receipt's Done told, its record: %v", err)
	}
	if n := sink.count(domain.EventMessageStatus + "/read"); n != 1 {
		t.Fatalf("%d message.status read events committed", n)
	}

	release = sink.shut()
	t.Cleanup(release)
	d, ch = doneCh()
	net.emit(sid, network.Reaction{Origin: network.Origin{ID: "R1", From: "4915100000002", At: time.Now()}, Target: m.ID, Emoji: "👍", Done: d})
	waitUntil(t, 10*time.Second, "the reaction's event's commit held", func() bool { return sink.waiting.Load() > 0 })
	untold(t, "the reaction", ch)
	if n, err := recs.Notes.Notes(u.ID, m.ID); err != nil || len(n.Reactions) != 0 {
		t.Fatalf("the reaction recorded before its event: %+v %v", n, err)
	}
	release()
	toldOnce(t, "the reaction", ch)
	if n, err := recs.Notes.Notes(u.ID, m.ID); err != nil || len(n.Reactions) != 1 {
		t.Fatalf("the reaction's Done told, its record: %+v %v", n, err)
	}
	if sink.count(domain.EventMessageReaction) != 1 {
		t.Fatal("no message.reaction event committed")
	}
}

// A receipt (or a failure) recorded on its own before its send's outcome, by a process killed
// before the outcome: the boot sends the message again, and its outcome folds the receipt in,
// its record and its event (message.status read after sent; failed, with its code).
func TestReceiptRecordedBeforeAKillFoldedIntoTheOutcome(t *testing.T) {
	recs := persist.NewRecords(persist.NewMemory())
	sink := &heldSink{}
	e, u, net := gatedEngine(t, recs, Config{Events: sink})
	open := net.shut()
	t.Cleanup(open)
	m, err := e.Messages.Send(context.Background(), SendRequest{UserID: u.ID, Origin: "api",
		Message: domain.Message{To: "4915100000003", Kind: domain.KindText, Text: "your order shipped"}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the send in flight", func() bool { return net.waiting.Load() > 0 })
	// As the last process left it: the read receipt recorded, the message pending; this boot
	// sends it again.
	written := make(chan error, 1)
	recs.Outbox.Receipt(m.ID, domain.StatusChange{Status: domain.MsgRead, At: domain.MillisOf(time.Now())}, func(err error) { written <- err })
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	e.Messages.msgs.resumed(m.ID)
	open()
	waitUntil(t, 10*time.Second, "the outcome, read", func() bool {
		recs.Outbox.Flush()
		got, err := recs.Outbox.Get(m.ID)
		return err == nil && got.Status == domain.MsgRead
	})
	waitUntil(t, 10*time.Second, "the read event", func() bool { return sink.count(domain.EventMessageStatus+"/read") == 1 })

	// A failure recorded so: the outcome fails with its code, and says so.
	open = net.shut()
	t.Cleanup(open)
	f, err := e.Messages.Send(context.Background(), SendRequest{UserID: u.ID, Origin: "api",
		Message: domain.Message{To: "4915100000005", Kind: domain.KindText, Text: "your order shipped"}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the second send in flight", func() bool { return net.waiting.Load() > 0 })
	recs.Outbox.Receipt(f.ID, lateRecord(domain.ErrOutsideServiceWindow, time.Now()), func(err error) { written <- err })
	if err := <-written; err != nil {
		t.Fatal(err)
	}
	e.Messages.msgs.resumed(f.ID)
	open()
	waitUntil(t, 10*time.Second, "the outcome, failed", func() bool {
		recs.Outbox.Flush()
		got, err := recs.Outbox.Get(f.ID)
		return err == nil && got.Status == domain.MsgFailed && got.Code == domain.CodeOf(domain.ErrOutsideServiceWindow)
	})
	waitUntil(t, 10*time.Second, "the failed event", func() bool { return sink.count(domain.EventMessageStatus+"/failed") == 1 })
}

// Receipts of a message this process no longer holds in memory (after a restart, or once the
// recent ones were forgotten) are read against storage; its events never go back: a read
// whose record waits for its event's commit, then a delivered (Meta sends statuses in any
// order), publishes no message.status delivered after read.
func TestReceiptsOfAMessageReadFromStorageInOrder(t *testing.T) {
	recs := persist.NewRecords(persist.NewMemory())
	sink := &heldSink{}
	e, u, _ := gatedEngine(t, recs, Config{Events: sink})
	ctx := context.Background()
	t0 := time.Now().Add(-time.Minute)
	m := domain.OutboxEntry{ID: "FROMSTORAGE1", SessionID: e.Sessions.Status(u.ID).ID, UserID: u.ID, CreatedAt: domain.MillisOf(t0),
		Message: domain.Message{ID: "FROMSTORAGE1", To: "4915100000009", Kind: domain.KindText, Text: "your order shipped"}}
	m.SetStatus(domain.MsgQueued, t0)
	if err := recs.Outbox.Accept(ctx, &m, ""); err != nil {
		t.Fatal(err)
	}
	m.SetStatus(domain.MsgSent, t0.Add(time.Second))
	written := make(chan error, 1)
	recs.Outbox.Settle(m, func(err error) { written <- err })
	if err := <-written; err != nil {
		t.Fatal(err)
	}

	release := sink.shut()
	t.Cleanup(release)
	read, readCh := doneCh()
	delivered, deliveredCh := doneCh()
	e.Messages.msgs.Receipt(m.ID, domain.StatusChange{Status: domain.MsgRead, At: domain.MillisOf(t0.Add(3 * time.Second))}, read)
	waitUntil(t, 10*time.Second, "the read event's commit held", func() bool { return sink.waiting.Load() > 0 })
	e.Messages.msgs.Receipt(m.ID, domain.StatusChange{Status: domain.MsgDelivered, At: domain.MillisOf(t0.Add(2 * time.Second))}, delivered)
	release()
	toldOnce(t, "the read receipt", readCh)
	toldOnce(t, "the delivered receipt", deliveredCh)
	if n := sink.count(domain.EventMessageStatus + "/delivered"); n != 0 {
		t.Fatalf("%d message.status delivered events after read", n)
	}
	if n := sink.count(domain.EventMessageStatus + "/read"); n != 1 {
		t.Fatalf("%d message.status read events", n)
	}
	recs.Outbox.Flush()
	if got, err := recs.Outbox.Get(m.ID); err != nil || got.Status != domain.MsgRead {
		t.Fatalf("as it stands: %s %v, want read", got.Status, err)
	}
}
