package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/network/sim"
	"github.com/gateway/gateway/persist"
)

// refusingNetwork is a network whose sends fail for good (not on the network) while refuse
// is set.
type refusingNetwork struct {
	network.Network
	refuse atomic.Bool
}

func (n *refusingNetwork) Open(sessionID string, sink func(network.Event), opts ...network.Option) (network.Client, error) {
	c, err := n.Network.Open(sessionID, sink, opts...)
	if err != nil {
		return nil, err
	}
	return refusingClient{Client: c, refuse: &n.refuse}, nil
}

type refusingClient struct {
	network.Client
	refuse *atomic.Bool
}

func (c refusingClient) Send(ctx context.Context, m domain.Message) (network.Receipt, error) {
	if c.refuse.Load() {
		return network.Receipt{}, fmt.Errorf("refused: %w", network.ErrNotOnNetwork)
	}
	return c.Client.Send(ctx, m)
}

// toldUnrecorded starts an engine whose events are all kept (toldEvents) and sends message
// told-1, which fails (its event committed, its status kept beside it) while its record fails:
// pending on disk, tracked no more. It returns the engine, a send of told-1 again waiting
// wait, which the network now takes, the outbox and the network.
func toldUnrecorded(t *testing.T) (*Engine, func(wait time.Duration) (domain.OutboxEntry, error), *failingOutbox, *sim.Network) {
	t.Helper()
	return toldUnrecordedFor(t, 0)
}

// toldUnrecordedFor is toldUnrecorded whose store, when tryAgain is not 0, goes on refusing
// records, the record's first try again (recordAgain) coming after tryAgain.
func toldUnrecordedFor(t *testing.T, tryAgain time.Duration) (*Engine, func(wait time.Duration) (domain.OutboxEntry, error), *failingOutbox, *sim.Network) {
	t.Helper()
	mem := persist.NewMemory()
	ev, _ := toldEvents(t, mem)
	recs := persist.NewRecords(mem)
	r := recordsOf(recs)
	failing := &failingOutbox{Outbox: recs.Outbox}
	r.Outbox = failing
	net, err := sim.Open(sim.Options{Dir: t.TempDir(), AutoPair: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { net.Close() })
	refusing := &refusingNetwork{Network: net}
	refusing.refuse.Store(true) // a send fails at once, for good
	e, u := startLinked(t, Config{Store: recs.Store, Records: r, Network: refusing, Events: ev})
	send := func(wait time.Duration) (domain.OutboxEntry, error) {
		return e.Messages.Send(context.Background(), SendRequest{UserID: u.ID, Origin: "api", Wait: wait,
			Message: domain.Message{ID: "told-1", To: "491510000404", Kind: domain.KindText, Text: "refused"}})
	}
	e.Messages.msgs.again.mu.Lock()
	e.Messages.msgs.again.wait = tryAgain / 2 // the first try again waits twice this, at least 250 ms
	e.Messages.msgs.again.mu.Unlock()
	failing.failing.Store(true) // the failure's record fails
	if _, err := send(0); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the failure told (its status kept), its record failed", func() bool {
		return finalsOf(t, mem, "told-1")["told-1"].Status == domain.MsgFailed && unrecorded(e.Messages.msgs, "told-1")
	})
	failing.failing.Store(tryAgain > 0)
	refusing.refuse.Store(false) // sent again, it would go now
	return e, send, failing, net
}

// A DELETE of a message told failed whose record the store still refuses answers 503 at once:
// it asked the session (which no longer has it) and waited for the record, up to three times,
// each wait until the record's next try, 30 s apart while the store refuses it; its client
// timed out.
func TestDeleteOfAnUnrecordedFailureAnswers503AtOnce(t *testing.T) {
	e, _, _, _ := toldUnrecordedFor(t, 20*time.Second)
	answered := make(chan error, 1)
	go func() {
		_, err := e.Messages.Delete(context.Background(), "u1", "told-1", SendRequest{})
		answered <- err
	}()
	select {
	case err := <-answered:
		if !errors.Is(err, domain.ErrUnavailable) {
			t.Fatalf("DELETE answered %v (want 503: its failure is not recorded yet)", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("DELETE of a message whose failure's record the store refuses has not answered in 5 s")
	}
}

// A DELETE of a message told failed that comes while its record is being tried again (the
// try's commit in flight, the store still refusing it) answers 503 at once too: it found the
// failure marked unrecorded no more, asked the session and waited for the record, which
// failed, then for the next try (30 s away), three times.
func TestDeleteDuringAnUnrecordedFailuresTryAgainAnswers503AtOnce(t *testing.T) {
	e, _, failing, _ := toldUnrecordedFor(t, 20*time.Second)
	hold := make(chan struct{})
	failing.hold.Store(&hold)
	released := false
	release := func() {
		if !released {
			released = true
			close(hold)
		}
	}
	t.Cleanup(release)
	go e.Messages.msgs.recordAgain() // the try again, now: its commit held
	waitUntil(t, 5*time.Second, "the record tried again, its commit in flight", func() bool { return failing.held.Load() > 0 })
	answered := make(chan error, 1)
	go func() {
		_, err := e.Messages.Delete(context.Background(), "u1", "told-1", SendRequest{})
		answered <- err
	}()
	waitUntil(t, 5*time.Second, "the DELETE answered or waiting for the record", func() bool {
		if len(answered) > 0 {
			return true
		}
		sh := e.Messages.msgs.shard("told-1")
		sh.mu.Lock()
		defer sh.mu.Unlock()
		p := sh.m["told-1"]
		return p != nil && len(p.waiters) > 0
	})
	release() // the try fails: the next is 30 s away
	select {
	case err := <-answered:
		if !errors.Is(err, domain.ErrUnavailable) {
			t.Fatalf("DELETE answered %v (want 503: its failure is not recorded yet)", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("DELETE during the try again of a failure's record has not answered in 5 s")
	}
}

// unrecorded tells whether message id's outcome was settled and its record failed: tracked
// no more, or kept as unrecorded.
func unrecorded(m *messages, id string) bool {
	sh := m.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	p := sh.m[id]
	return p == nil || p.unrecorded
}

// A failure whose record failed (the store refused it for a while) is recorded once the store
// takes writes again, by the process that told it, its waiters answered then: it was left
// pending for the next boot, meanwhile read "queued" and a DELETE answered 503 for as long as
// the process ran, and a boot more than 7 days later (when its kept status had expired) sent
// the message told failed.
func TestUnrecordedFailureRecordedOnceTheStoreIsBack(t *testing.T) {
	e, _, failing, net := toldUnrecorded(t)
	waitUntil(t, 10*time.Second, "the failure recorded", func() bool {
		failing.Outbox.Flush()
		got, err := failing.Outbox.Get("told-1")
		return err == nil && got.Status == domain.MsgFailed
	})
	if n := net.DeliveredCount(); n != 0 {
		t.Fatalf("%d delivered", n)
	}
	if n := e.metrics.failed.Load(); n != 1 {
		t.Fatalf("the failed-messages metric %d, want 1", n)
	}
}

// A message whose failure was told (its event committed, the status kept beside it) and whose
// record then failed stays pending on disk, tracked no more; a send again under its id (a
// caller's retry, an Idempotency-Key's replay: resume) settles it as told, as a boot does,
// and does not send it: the webhook, the stream and the broker were told "failed", and a
// client that sent a new message on that would have the recipient get two.
func TestToldFailureNotSentByARetryOfItsID(t *testing.T) {
	_, send, failing, net := toldUnrecorded(t)
	if _, err := send(0); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the message settled", func() bool {
		failing.Outbox.Flush()
		got, err := failing.Outbox.Get("told-1")
		return err == nil && got.Final()
	})
	got, _ := failing.Outbox.Get("told-1")
	if got.Status != domain.MsgFailed || net.DeliveredCount() != 0 {
		t.Fatalf("a message told failed was recorded %s after a send again of its id, %d delivered (want failed, none)",
			got.Status, net.DeliveredCount())
	}
}

// A send again under its id that waits for a message told failed whose record failed is
// answered as a failure is (its code: 4xx) once the record lands (recorded again: recordAgain;
// settled as told by resume before that); it was answered the engine's internal errToldFinal,
// a 500.
func TestWaitForAToldFailureAnswersItsFailure(t *testing.T) {
	_, send, _, _ := toldUnrecorded(t)
	got, err := send(5 * time.Second)
	if got.Status != domain.MsgFailed || !errors.Is(err, domain.ErrRecipientNotOnNetwork) {
		t.Fatalf("a send again that waited answered %s, %v (want failed, recipient_not_on_network)", got.Status, err)
	}
}

// A send that waits for a message the boot is settling as its told failure (settleTold: its
// record held) is answered that failure (its code: 4xx) once the record lands; it was answered
// the engine's internal errToldFinal, a 500.
func TestWaitDuringTheBootsSettleAnswersTheFailure(t *testing.T) {
	mem := persist.NewMemory()
	dir := t.TempDir()
	ctx := context.Background()
	open := func() network.Network {
		net, err := sim.Open(sim.Options{Dir: dir, AutoPair: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { net.Close() })
		n := &refusingNetwork{Network: net}
		n.refuse.Store(true)
		return n
	}
	send := func(e *Engine, wait time.Duration) (domain.OutboxEntry, error) {
		return e.Messages.Send(ctx, SendRequest{UserID: "u1", Origin: "api", Wait: wait,
			Message: domain.Message{ID: "told-1", To: "491510000404", Kind: domain.KindText, Text: "refused"}})
	}
	ev1, stop1 := toldEvents(t, mem)
	outcomeRecordHeld = true // the process is killed between the failure's event and its record
	t.Cleanup(func() { outcomeRecordHeld = false })
	recs := persist.NewRecords(mem)
	e1, _ := startLinked(t, Config{Store: recs.Store, Records: recordsOf(recs), Network: open(), Events: ev1})
	if _, err := send(e1, 0); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the failure told, its status kept", func() bool {
		return finalsOf(t, mem, "told-1")["told-1"].Status == domain.MsgFailed
	})
	e1.Stop(ctx)
	stop1()
	outcomeRecordHeld = false

	recs2 := persist.NewRecords(mem) // the restart, whose settle of the told failure is held
	r2 := recordsOf(recs2)
	held := &heldOutbox{Outbox: r2.Outbox}
	r2.Outbox = held
	release := held.shut()
	t.Cleanup(release)
	ev2, _ := toldEvents(t, mem)
	e2, err := New(Config{Store: recs2.Store, Records: r2, Network: open(), Events: ev2,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Plans: Plans{"unlimited": {}}, DefaultPlan: "unlimited"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e2.Stop(ctx) })
	waitUntil(t, 10*time.Second, "the boot's settle held, the session linked", func() bool {
		return held.waiting.Load() > 0 && e2.Sessions.Status("u1").Status == domain.StatusConnected
	})
	type result struct {
		m   domain.OutboxEntry
		err error
	}
	answered := make(chan result, 1)
	go func() {
		m, err := send(e2, 10*time.Second)
		answered <- result{m, err}
	}()
	waitUntil(t, 10*time.Second, "the send waiting", func() bool {
		sh := e2.Messages.msgs.shard("told-1")
		sh.mu.Lock()
		defer sh.mu.Unlock()
		p := sh.m["told-1"]
		return p != nil && len(p.waiters) > 0
	})
	release()
	res := <-answered
	if res.m.Status != domain.MsgFailed || !errors.Is(res.err, domain.ErrRecipientNotOnNetwork) {
		t.Fatalf("a send that waited for the boot's settle answered %s, %v (want failed, recipient_not_on_network)", res.m.Status, res.err)
	}
}
