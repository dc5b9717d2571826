package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/actors/webhook"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/media"
	"github.com/gateway/gateway/network/sim"
	"github.com/gateway/gateway/persist"
)

// brokerTakesAll is a broker that takes every event at once (EventForwarder): with it every
// user's events are taken, so a failed or cancelled status is kept with its event.
type brokerTakesAll struct{}

func (brokerTakesAll) Forward(_ context.Context, evs []domain.EventRecord) (int, error) {
	return len(evs), nil
}

// toldEvents is an events facet on kv forwarding every event (brokerTakesAll), booted, and
// stopped by the function returned or with the test (after the engine that uses it: cleanups
// run last first).
func toldEvents(t *testing.T, kv persist.KV) (*Events, func()) {
	t.Helper()
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	guard := media.Guard{}
	ev, err := NewEvents(EventsConfig{Store: persist.NewWebhooks(kv), Actors: hw, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Forward: brokerTakesAll{}, Poster: webhook.NewHTTPPoster(guard.Dialer(time.Second), 0, 0), Guard: guard})
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Boot(context.Background()); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() { once.Do(func() { ev.Stop(context.Background()) }) }
	t.Cleanup(stop)
	return ev, stop
}

// finalsOf reads the failed or cancelled statuses kept (event_final) of user u1's messages ids.
func finalsOf(t *testing.T, kv persist.KV, ids ...string) map[string]domain.FinalStatus {
	t.Helper()
	es := make([]domain.OutboxEntry, len(ids))
	for i, id := range ids {
		es[i] = domain.OutboxEntry{ID: id, UserID: "u1"}
	}
	got, err := persist.NewWebhooks(kv).FinalStatuses(es)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// A message told failed (its event committed, its status kept beside it) whose record a kill -9
// lost (the fault point holds it) is settled failed by the next boot, not sent again, and
// counted in the failed-messages metric of the process that settled it, as a failure is. Once
// a failure's record is written its kept status is deleted (in the same commit): no boot
// reads it any more.
func TestToldFailureSettledAtBootCountedAndItsKeptStatusGone(t *testing.T) {
	mem := persist.NewMemory()
	recs := persist.NewRecords(mem)
	dir := t.TempDir()
	ctx := context.Background()
	const refusing = "4915100000404"
	open := func() *sim.Network {
		net, err := sim.Open(sim.Options{Dir: dir, AutoPair: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { net.Close() })
		net.SetUnregistered([]string{refusing}) // a send fails at once, for good
		return net
	}
	net1 := open()
	ev1, stop1 := toldEvents(t, mem)
	outcomeRecordHeld = true // the process is killed between the outcome's events and its record
	t.Cleanup(func() { outcomeRecordHeld = false })
	e1, u := startLinked(t, Config{Store: recs.Store, Records: recordsOf(recs), Network: net1, Events: ev1})
	m, err := e1.Messages.Send(ctx, SendRequest{UserID: u.ID, Origin: "api",
		Message: domain.Message{To: refusing, Kind: domain.KindText, Text: "refused"}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the failure's event committed, its status kept", func() bool {
		return finalsOf(t, mem, m.ID)[m.ID].Status == domain.MsgFailed
	})
	e1.Stop(ctx)
	stop1()
	outcomeRecordHeld = false
	if got, err := recs.Outbox.Get(m.ID); err != nil || got.Status != domain.MsgQueued {
		t.Fatalf("the message the kill left: %+v %v (want it pending)", got.Status, err)
	}

	recs2 := persist.NewRecords(mem) // the restart's stores, on what the kill left
	ev2, _ := toldEvents(t, mem)
	e2, err := New(Config{Store: recs2.Store, Records: recordsOf(recs2), Network: open(), Events: ev2,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Plans: Plans{"unlimited": {}}, DefaultPlan: "unlimited"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e2.Stop(ctx) })
	waitUntil(t, 10*time.Second, "the message settled failed", func() bool {
		recs2.Outbox.Flush()
		got, err := recs2.Outbox.Get(m.ID)
		return err == nil && got.Status == domain.MsgFailed && e2.Messages.msgs.depth.Load() == 0
	})
	if n := e2.metrics.failed.Load(); n != 1 {
		t.Fatalf("the failed-messages metric after the boot settled the message failed: %d, want 1", n)
	}
	if f := finalsOf(t, mem, m.ID); len(f) != 0 {
		t.Fatalf("the kept status outlives the failure's record: %+v", f)
	}

	// A failure in a process that lives on: its kept status goes with its record too.
	waitUntil(t, 10*time.Second, "linked again", func() bool { return e2.Sessions.Status(u.ID).Status == domain.StatusConnected })
	f, err := e2.Messages.Send(ctx, SendRequest{UserID: u.ID, Origin: "api",
		Message: domain.Message{To: refusing, Kind: domain.KindText, Text: "refused again"}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the second failure recorded", func() bool {
		recs2.Outbox.Flush()
		got, err := recs2.Outbox.Get(f.ID)
		return err == nil && got.Status == domain.MsgFailed
	})
	if got := finalsOf(t, mem, f.ID); len(got) != 0 {
		t.Fatalf("the kept status outlives the failure's record: %+v", got)
	}
	if n := e2.metrics.failed.Load(); n != 2 {
		t.Fatalf("failed-messages metric %d, want 2", n)
	}
}

// heldOutbox is an outbox whose outcomes' records wait while its gate is shut (a kill -9 then
// loses them).
// startOnOutbox starts a linked engine on records in mem whose outbox is wrap's (of persist's),
// on a sim network.
func startOnOutbox(t *testing.T, mem *persist.Memory, wrap func(*persist.Outbox) Outbox) (*Engine, domain.User, *sim.Network) {
	t.Helper()
	recs := persist.NewRecords(mem)
	r := recordsOf(recs)
	r.Outbox = wrap(recs.Outbox)
	net, err := sim.Open(sim.Options{Dir: t.TempDir(), AutoPair: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { net.Close() })
	e, u := startLinked(t, Config{Store: recs.Store, Records: r, Network: net})
	return e, u, net
}

type heldOutbox struct {
	Outbox
	gate
}

func (o *heldOutbox) Settle(e domain.OutboxEntry, done func(error)) {
	go func() {
		_ = o.pass(context.Background())
		o.Outbox.Settle(e, done)
	}()
}

// A failure or a cancellation is told to whoever waits for it (a send's waiter, a DELETE) only
// once its record is durable, also without an events sink (no webhook, stream or broker keeps
// it with an event). Told first, a kill -9 before the record had the boot send the message
// again: a second send of a message the caller was told had failed (and may have sent again
// itself), or the send of one it cancelled. While the record is held, a waiter's wait ends with
// the message queued, which the boot's resend then keeps true, and a read finds it as the disk
// has it.
func TestFailureToldToItsCallerOnlyOnceRecorded(t *testing.T) {
	mem := persist.NewMemory()
	var held *heldOutbox
	e, u, net := startOnOutbox(t, mem, func(o *persist.Outbox) Outbox { held = &heldOutbox{Outbox: o}; return held })
	const refusing = "4915100000404"
	net.SetUnregistered([]string{refusing}) // a send fails at once, for good
	ctx := context.Background()
	recorded := func(id string) bool {
		_, err := mem.Get([]byte("outbox_status/" + id))
		return err == nil
	}
	send := func(wait time.Duration, at time.Time) (domain.OutboxEntry, error) {
		return e.Messages.Send(ctx, SendRequest{UserID: u.ID, Origin: "api", Wait: wait, SendAt: at,
			Message: domain.Message{To: refusing, Kind: domain.KindText, Text: "refused"}})
	}

	open := held.shut()
	t.Cleanup(open)
	m, err := send(300*time.Millisecond, time.Time{})
	if err != nil || m.Status != domain.MsgQueued {
		t.Fatalf("a send whose failure is not recorded answered %s, %v (want queued: its wait ended untold)", m.Status, err)
	}
	// Nor does a read (GET /api/v1/messages/{id}) tell it before its record.
	if got, err := e.Messages.Get(u.ID, m.ID); err != nil || got.Status != domain.MsgQueued {
		t.Fatalf("a message whose failure is not recorded reads %s, %v (want queued)", got.Status, err)
	}
	open()
	waitUntil(t, 10*time.Second, "the failure recorded", func() bool { return recorded(m.ID) })
	f, err := send(10*time.Second, time.Time{})
	if err == nil || f.Status != domain.MsgFailed || !recorded(f.ID) {
		t.Fatalf("a send that failed answered %s, %v, its record there: %v", f.Status, err, recorded(f.ID))
	}

	// A DELETE of a message accepted for later answers once its cancellation is recorded.
	s, err := send(0, time.Now().Add(time.Hour))
	if err != nil || s.Status != domain.MsgScheduled {
		t.Fatalf("scheduled: %s %v", s.Status, err)
	}
	open = held.shut()
	t.Cleanup(open)
	type result struct {
		d   DeleteResult
		err error
	}
	deleted := make(chan result, 1)
	go func() {
		d, err := e.Messages.Delete(ctx, u.ID, s.ID, SendRequest{})
		deleted <- result{d, err}
	}()
	waitUntil(t, 10*time.Second, "the cancellation's record held", func() bool { return held.waiting.Load() > 0 })
	if got, err := e.Messages.Get(u.ID, s.ID); err != nil || got.Status != domain.MsgScheduled {
		t.Fatalf("a message whose cancellation is not recorded reads %s, %v (want scheduled)", got.Status, err)
	}
	select {
	case res := <-deleted:
		t.Fatalf("DELETE answered %s, %v before its cancellation was recorded", res.d.Entry.Status, res.err)
	case <-time.After(200 * time.Millisecond):
	}
	open()
	if res := <-deleted; res.err != nil || res.d.Entry.Status != domain.MsgCancelled || !recorded(s.ID) {
		t.Fatalf("DELETE answered %s, %v, its record there: %v", res.d.Entry.Status, res.err, recorded(s.ID))
	}
}

// killedAfterCommits is a store killed after its first n commits: the later ones fail (and are
// not written).
type killedAfterCommits struct {
	persist.KV
	n atomic.Int32
}

func (k *killedAfterCommits) Commit(ctx context.Context, ops ...persist.Op) error {
	if k.n.Add(-1) < 0 {
		return errors.New("killed")
	}
	return k.KV.Commit(ctx, ops...)
}

// A batch of events too large for one commit is written in several; a kill -9 between two
// never leaves a failed status kept (event_final) without its event, nor its event without the
// status: kept alone, the boot settled the message failed and its event was lost for good
// (nobody was told it failed); its event alone, the boot sent again a message told failed.
func TestKeptFinalStatusCommittedWithItsEvent(t *testing.T) {
	mem := persist.NewMemory()
	kv := &killedAfterCommits{KV: mem}
	kv.n.Store(1 << 20)
	ev, _ := toldEvents(t, kv)
	ctx := context.Background()
	at := time.Now()
	var ps []PreparedEvent
	prepare := func(id string, st domain.MessageStatus) {
		t.Helper()
		d := domain.MessageStatusData{MessageID: id, Status: st, At: at}
		if st == domain.MsgFailed {
			d.Code, d.Error = "network_error", "refused"
		}
		p, err := ev.Prepare("u1", domain.Event{Type: domain.EventMessageStatus, Data: d})
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	for i := range 600 { // more than a commit takes (persist: maxCommitOps)
		prepare(fmt.Sprint("q", i), domain.MsgQueued)
	}
	prepare("f1", domain.MsgFailed)
	kv.n.Store(1) // the kill: after the first commit
	t.Cleanup(func() { kv.n.Store(1 << 20) })
	if err := ev.Commit(ctx, ps); err == nil {
		t.Fatal("the batch committed whole across the kill")
	}
	out, err := persist.NewWebhooks(mem).OutboxFrom(0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	told := false
	for _, r := range out {
		told = told || bytes.Contains(r.Body, []byte(`"messageId":"f1"`))
	}
	kept := len(finalsOf(t, mem, "f1")) == 1
	if told != kept {
		t.Fatalf("after the kill: the failed event committed %v, its status kept %v (%d events of %d committed)", told, kept, len(out), len(ps))
	}
}
