package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/network/sim"
	"github.com/gateway/gateway/persist"
)

// gateNet is the simulated network whose sends wait while its gate is shut (a send in doubt:
// its outcome comes late), and which lets the test play the network's events into a session.
type gateNet struct {
	*sim.Network
	mu      sync.Mutex
	gate    chan struct{} // set: sends wait until it is closed
	waiting atomic.Int32
	sinks   map[string]func(network.Event)
}

func (n *gateNet) Open(id string, sink func(network.Event), opts ...network.Option) (network.Client, error) {
	c, err := n.Network.Open(id, sink, opts...)
	n.mu.Lock()
	n.sinks[id] = sink
	n.mu.Unlock()
	return gateClient{Client: c, n: n}, err
}

// shut makes the sends wait; the function returned lets them go.
func (n *gateNet) shut() (open func()) {
	g := make(chan struct{})
	n.mu.Lock()
	n.gate = g
	n.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			n.mu.Lock()
			n.gate = nil
			n.mu.Unlock()
			close(g)
		})
	}
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
	c.n.mu.Lock()
	g := c.n.gate
	c.n.mu.Unlock()
	if g != nil {
		c.n.waiting.Add(1)
		defer c.n.waiting.Add(-1)
		select {
		case <-g:
		case <-ctx.Done():
			return network.Receipt{}, ctx.Err()
		}
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
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Plans, cfg.DefaultPlan = Plans{"unlimited": {}}, "unlimited"
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Stop(context.Background()) })
	ctx := context.Background()
	u, err := e.Users.Create(ctx, NewUser{ID: "u1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Sessions.QR(ctx, u); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "linked", func() bool { return e.Sessions.Status(u.ID).Status == domain.StatusConnected })
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
