package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/persist"
)

// heldEventsEngine is an engine on memory storage whose events commit through a heldSink, its
// user, network, storage and records, and the user's session id.
func heldEventsEngine(t *testing.T) (*Engine, domain.User, *gateNet, *persist.Memory, *persist.Records, *heldSink, string) {
	t.Helper()
	mem := persist.NewMemory()
	recs := persist.NewRecords(mem)
	sink := &heldSink{}
	e, u, net := gatedEngine(t, recs, Config{Events: sink})
	return e, u, net, mem, recs, sink, e.Sessions.Status(u.ID).ID
}

// A send's outcome is recorded only once its events are committed: message.status sent and
// the receipts folded into it (a read that overtook the send), the delivered receipt that
// follows it (a network that does not wait for its record: the sim), and a failure reported
// after it (Meta's failed status). While the events' commit is held, the message is still
// pending on disk: a kill -9 then leaves it for the boot to send again under its id, which
// settles and publishes it again (the worst is an event twice). Written the other way round,
// the kill kept the outcome and lost its events for good.
func TestOutcomeRecordedOnlyOnceItsEventsAreCommitted(t *testing.T) {
	e, u, net, mem, recs, sink, sid := heldEventsEngine(t)
	absent := func(what, key string) {
		t.Helper()
		if _, err := mem.Get([]byte(key)); !errors.Is(err, domain.ErrRecordNotFound) {
			t.Fatalf("%s written while its events' commit is held: %v", what, err)
		}
	}

	// The send in doubt; a read receipt overtakes it (its own record at once, as before).
	open := net.shut()
	t.Cleanup(open)
	m, err := e.Messages.Send(context.Background(), SendRequest{UserID: u.ID, Origin: "api",
		Message: domain.Message{To: "4915100000007", Kind: domain.KindText, Text: "your order shipped"}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the send in flight", func() bool { return net.waiting.Load() > 0 })
	d, ch := doneCh()
	net.emit(sid, network.MessageReceipt{IDs: []string{m.ID}, Status: network.StatusRead, At: time.Now(), Done: d})
	toldOnce(t, "the early read receipt", ch)

	release := sink.shut()
	t.Cleanup(release)
	sent0 := e.metrics.sent.Load()
	open()
	waitUntil(t, 10*time.Second, "the outcome", func() bool { return e.metrics.sent.Load() > sent0 })
	waitUntil(t, 10*time.Second, "an event's commit held", func() bool { return sink.waiting.Load() > 0 })
	recs.Outbox.Flush()
	absent("the outcome", "outbox_status/"+m.ID)
	if got, err := recs.Outbox.Get(m.ID); err != nil || got.Status != domain.MsgQueued {
		t.Fatalf("the message as a boot would find it: %+v %v (want it pending: sent again under its id)", got.Status, err)
	}
	release()
	waitUntil(t, 10*time.Second, "the outcome recorded, read", func() bool {
		recs.Outbox.Flush()
		got, err := recs.Outbox.Get(m.ID)
		_, rerr := mem.Get([]byte("outbox_status/" + m.ID))
		return err == nil && rerr == nil && got.Status == domain.MsgRead
	})
	for _, st := range []domain.MessageStatus{domain.MsgSent, domain.MsgRead} {
		if n := sink.count(domain.EventMessageStatus + domain.EventType("/"+st)); n != 1 {
			t.Fatalf("%d message.status %s events committed, want 1", n, st)
		}
	}

	// A plain send: its outcome, then the sim's delivered receipt (no Done: the sim does not
	// wait for its record); neither recorded before its event.
	release = sink.shut()
	t.Cleanup(release)
	sent0 = e.metrics.sent.Load()
	p, err := e.Messages.Send(context.Background(), SendRequest{UserID: u.ID, Origin: "api",
		Message: domain.Message{To: "4915100000008", Kind: domain.KindText, Text: "your order shipped"}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the second outcome", func() bool { return e.metrics.sent.Load() > sent0 })
	recs.Outbox.Flush()
	absent("the second outcome", "outbox_status/"+p.ID)
	absent("the delivered receipt", "outbox_receipt/"+p.ID+"/delivered")
	release()
	waitUntil(t, 10*time.Second, "the second outcome recorded, delivered", func() bool {
		recs.Outbox.Flush()
		got, err := recs.Outbox.Get(p.ID)
		return err == nil && got.Status == domain.MsgDelivered
	})

	// A failure the network reports after the outcome (Meta's failed status): recorded, and its
	// Done told, only once message.status failed is committed.
	release = sink.shut()
	t.Cleanup(release)
	d, ch = doneCh()
	e.Messages.msgs.Failed(p.ID, domain.ErrOutsideServiceWindow, time.Now(), d)
	waitUntil(t, 10*time.Second, "the failed event's commit held", func() bool { return sink.waiting.Load() > 0 })
	untold(t, "the late failure", ch)
	recs.Outbox.Flush()
	if got, err := recs.Outbox.Get(p.ID); err != nil || got.Status != domain.MsgDelivered {
		t.Fatalf("the late failure recorded before its event: %+v %v", got.Status, err)
	}
	release()
	toldOnce(t, "the late failure", ch)
	if got, err := recs.Outbox.Get(p.ID); err != nil || got.Status != domain.MsgFailed {
		t.Fatalf("the late failure's Done told, its record: %+v %v", got.Status, err)
	}
	if n := sink.count(domain.EventMessageStatus + "/failed"); n != 1 {
		t.Fatalf("%d message.status failed events committed, want 1", n)
	}
}

// An engine stopping with outcomes whose events are still being committed writes them (and
// counts them into the account) before it stops: the events commit, then the outcomes.
func TestStopWritesOutcomesWaitingForTheirEvents(t *testing.T) {
	e, u, _, mem, recs, sink, _ := heldEventsEngine(t)
	release := sink.shut()
	t.Cleanup(release)
	sent0 := e.metrics.sent.Load()
	m, err := e.Messages.Send(context.Background(), SendRequest{UserID: u.ID, Origin: "api",
		Message: domain.Message{To: "4915100000009", Kind: domain.KindText, Text: "your order shipped"}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the outcome", func() bool { return e.metrics.sent.Load() > sent0 })
	stopped := make(chan struct{})
	go func() {
		e.Stop(context.Background())
		close(stopped)
	}()
	waitUntil(t, 10*time.Second, "the stop waiting for the events' commit", func() bool { return sink.waiting.Load() > 0 })
	release()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the engine did not stop")
	}
	if _, err := mem.Get([]byte("outbox_status/" + m.ID)); err != nil {
		t.Fatalf("the outcome not written by the stop: %v", err)
	}
	if n := sink.count(domain.EventMessageStatus + "/sent"); n != 1 {
		t.Fatalf("%d message.status sent events committed, want 1", n)
	}
	a, err := recs.Accounts.GetAccount(u.ID)
	if err != nil || a.Sent != 1 {
		t.Fatalf("the account after the stop: %+v %v (want the message counted)", a, err)
	}
}
