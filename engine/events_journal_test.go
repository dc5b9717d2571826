package engine_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/actors/webhook"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/media"
	"github.com/gateway/gateway/persist"
)

// fakeBroker is an EventForwarder that keeps what it takes, or refuses while down.
type fakeBroker struct {
	mu   sync.Mutex
	down bool
	got  []domain.EventRecord
}

func (b *fakeBroker) Forward(_ context.Context, evs []domain.EventRecord) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.down {
		return 0, errors.New("broker down")
	}
	b.got = append(b.got, evs...)
	return len(evs), nil
}

func (b *fakeBroker) setDown(down bool) {
	b.mu.Lock()
	b.down = down
	b.mu.Unlock()
}

func (b *fakeBroker) ids() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, e := range b.got {
		out = append(out, e.ID)
	}
	return out
}

// newForwarding is an Events on kv that forwards to b (nil: no broker), booted.
func newForwarding(t *testing.T, kv persist.KV, b *fakeBroker, backlog int) *engine.Events {
	t.Helper()
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	cfg := engine.EventsConfig{
		Store: persist.NewWebhooks(kv), Actors: hw, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Poster: webhook.NewHTTPPoster(nil, 0, 0), Guard: media.Guard{AllowPrivate: true}, ForwardBacklog: backlog,
	}
	if b != nil {
		cfg.Forward = b
	}
	ev, err := engine.NewEvents(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Boot(context.Background()); err != nil {
		t.Fatal(err)
	}
	return ev
}

func stopEvents(ev *engine.Events) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ev.Stop(ctx)
}

func statusEvent(msg string) domain.Event {
	return domain.Event{Type: domain.EventMessageStatus, Data: domain.MessageStatusData{MessageID: msg, Status: "sent"}}
}

// replayed lists the ids Replay gives after last.
func replayed(t *testing.T, ev *engine.Events, uid, last string) ([]string, bool) {
	t.Helper()
	var ids []string
	found, err := ev.Replay(uid, last, func(e engine.LiveEvent) error {
		ids = append(ids, e.ID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return ids, found
}

// Once a user opened a live stream, every event of theirs is in their journal, in commit order,
// also after the stream closed and across a restart; Replay gives the events after an id (the
// new run's numbers sort after the old run's) and says when it does not know the id. A user
// who never streamed has no journal.
func TestJournalReplay(t *testing.T) {
	ctx := context.Background()
	kv := persist.NewMemory()
	b := &fakeBroker{}
	ev := newForwarding(t, kv, b, 0)
	ev.Listen("u1").Close()
	for i := range 6 {
		for _, uid := range []string{"u1", "u2"} {
			if err := ev.Publish(ctx, uid, statusEvent(uid+"-"+string(rune('a'+i)))); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitUntil(t, 5*time.Second, "12 events forwarded", func() bool { return len(b.ids()) == 12 })
	var u1 []string
	b.mu.Lock()
	for _, r := range b.got {
		if r.UserID == "u1" {
			u1 = append(u1, r.ID)
		}
	}
	if got, found := replayed(t, ev, "u1", u1[1]); !found || !slices.Equal(got, u1[2:]) {
		t.Fatalf("replay after the second: %v (found %v), want %v", got, found, u1[2:])
	}
	if got, found := replayed(t, ev, "u1", u1[5]); !found || len(got) != 0 {
		t.Fatalf("replay after the last: %v, %v", got, found)
	}
	// An id of the journal's shape that it does not hold: u1[0] with its last letter changed
	// (to one it is not: the random suffix ends in x one time in 32).
	other := "x"
	if strings.HasSuffix(u1[0], other) {
		other = "y"
	}
	for _, bad := range []string{"evt_nothing", "", u1[0][:len(u1[0])-1] + other} {
		if got, found := replayed(t, ev, "u1", bad); found || len(got) != 0 {
			t.Fatalf("replay after %q: %v, %v", bad, got, found)
		}
	}
	if _, found := replayed(t, ev, "u2", u1[0]); found {
		t.Fatal("u2 replayed after an event of u1")
	}
	if j, err := persist.NewWebhooks(kv).JournalFrom("u2", 0, 100); err != nil || len(j) != 0 {
		t.Fatalf("u2, who never streamed, has a journal: %d entries, %v", len(j), err)
	}
	b.mu.Unlock()
	stopEvents(ev)

	// A restart: its events come after the last run's.
	ev = newForwarding(t, kv, b, 0)
	defer stopEvents(ev)
	if err := ev.Publish(ctx, "u1", statusEvent("after")); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 5*time.Second, "the 13th event forwarded", func() bool { return len(b.ids()) == 13 })
	next := b.ids()[12]
	if got, found := replayed(t, ev, "u1", u1[4]); !found || !slices.Equal(got, []string{u1[5], next}) {
		t.Fatalf("replay across the restart: %v, %v", got, found)
	}
}

// A broker that is down holds nothing up: events wait in the outbox, in order, and go when it
// is back, each once; what one run left is published by the next.
func TestForwardWaitsForBroker(t *testing.T) {
	ctx := context.Background()
	kv := persist.NewMemory()
	b := &fakeBroker{down: true}
	ev := newForwarding(t, kv, b, 0)
	store := persist.NewWebhooks(kv)
	for i := range 10 {
		if err := ev.Publish(ctx, "u1", statusEvent(string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := store.OutboxLen(); n != 10 {
		t.Fatalf("outbox holds %d, want 10", n)
	}
	stopEvents(ev) // the broker is still down: the outbox keeps them

	ev = newForwarding(t, kv, b, 0)
	defer stopEvents(ev)
	for i := range 5 {
		if err := ev.Publish(ctx, "u1", statusEvent(string(rune('k'+i)))); err != nil {
			t.Fatal(err)
		}
	}
	b.setDown(false)
	waitUntil(t, 10*time.Second, "15 events forwarded", func() bool { return len(b.ids()) == 15 })
	waitUntil(t, 5*time.Second, "an empty outbox", func() bool { n, _ := store.OutboxLen(); return n == 0 })
	b.mu.Lock()
	defer b.mu.Unlock()
	seen := map[string]bool{}
	for i, r := range b.got {
		if seen[r.ID] {
			t.Fatalf("%s forwarded twice", r.ID)
		}
		seen[r.ID] = true
		if i > 0 && r.Seq <= b.got[i-1].Seq {
			t.Fatalf("out of order at %d: %d after %d", i, r.Seq, b.got[i-1].Seq)
		}
	}
}

// Past the backlog, new events are not queued for the broker, and everything else still
// happens: the journal keeps them.
func TestForwardBacklog(t *testing.T) {
	ctx := context.Background()
	kv := persist.NewMemory()
	b := &fakeBroker{down: true}
	ev := newForwarding(t, kv, b, 5)
	defer stopEvents(ev)
	var ids []string
	l := ev.Listen("u1") // and its events journaled
	defer l.Close()
	for i := range 8 {
		if err := ev.Publish(ctx, "u1", statusEvent(string(rune('a'+i)))); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, (<-l.C).ID)
	}
	if n, _ := persist.NewWebhooks(kv).OutboxLen(); n != 5 {
		t.Fatalf("outbox holds %d, want the backlog's 5", n)
	}
	if got, found := replayed(t, ev, "u1", ids[0]); !found || !slices.Equal(got, ids[1:]) {
		t.Fatalf("journal: %v", got)
	}
	b.setDown(false)
	waitUntil(t, 10*time.Second, "the 5 waiting forwarded", func() bool { return len(b.ids()) == 5 })
	if !slices.Equal(b.ids(), ids[:5]) {
		t.Fatalf("forwarded %v, want %v", b.ids(), ids[:5])
	}
}

// An event numbered before another but committed after it (an incoming message's commit
// overtaken by the publisher's) is still forwarded.
func TestForwardKeepsLateCommits(t *testing.T) {
	ctx := context.Background()
	kv := persist.NewMemory()
	b := &fakeBroker{}
	ev := newForwarding(t, kv, b, 0)
	defer stopEvents(ev)
	first, err := ev.Prepare("u1", statusEvent("first"))
	if err != nil {
		t.Fatal(err)
	}
	second, err := ev.Prepare("u1", statusEvent("second"))
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Commit(ctx, []engine.PreparedEvent{second}); err != nil {
		t.Fatal(err)
	}
	ev.Committed(second)
	time.Sleep(50 * time.Millisecond) // the forwarder's chance to pass the first over (it must not)
	if err := ev.Commit(ctx, []engine.PreparedEvent{first}); err != nil {
		t.Fatal(err)
	}
	ev.Committed(first)
	waitUntil(t, 5*time.Second, "both forwarded", func() bool { return len(b.ids()) == 2 })
}

// A graceful stop publishes what was committed before it.
func TestForwardDrainsOnStop(t *testing.T) {
	ctx := context.Background()
	kv := persist.NewMemory()
	b := &fakeBroker{}
	ev := newForwarding(t, kv, b, 0)
	for i := range 300 {
		if err := ev.Publish(ctx, "u1", statusEvent(string(rune('a'+i%26)))); err != nil {
			t.Fatal(err)
		}
	}
	stopEvents(ev)
	if n := len(b.ids()); n != 300 {
		t.Fatalf("%d of 300 events published by the stop", n)
	}
	if n, _ := persist.NewWebhooks(kv).OutboxLen(); n != 0 {
		t.Fatalf("%d events left in the outbox", n)
	}
}

// epochGate holds (or fails) the commit of the journal's epoch: the rest of the store works.
type epochGate struct {
	persist.KV
	open     chan struct{} // closed: the epoch's commit goes through
	fail     error         // the epoch's commit fails with it
	released atomic.Bool   // the epoch's commit went through
}

func (g *epochGate) Commit(ctx context.Context, ops ...persist.Op) error {
	for _, op := range ops {
		if strings.HasPrefix(string(op.Key), "event_epoch/") {
			if g.fail != nil {
				return g.fail
			}
			<-g.open
			err := g.KV.Commit(ctx, ops...)
			g.released.Store(true)
			return err
		}
	}
	return g.KV.Commit(ctx, ops...)
}

// The journal's epoch is counted beside the boot, not before it: Boot returns while its commit
// is held, Counted waits for it, and no event is numbered before it is durable (so every event
// of the run sorts after the last run's); a count that fails fails Counted and every numbering.
func TestJournalEpochCountedBesideBoot(t *testing.T) {
	ctx := context.Background()
	kv := persist.NewMemory()
	ev := newForwarding(t, kv, nil, 0)
	ev.Listen("u1").Close() // u1's events are journaled from now on
	if err := ev.Publish(ctx, "u1", statusEvent("first run")); err != nil {
		t.Fatal(err)
	}
	j, err := persist.NewWebhooks(kv).JournalFrom("u1", 0, 10)
	if err != nil || len(j) != 1 {
		t.Fatalf("the first run's journal: %d entries, %v", len(j), err)
	}
	stopEvents(ev)

	gate := &epochGate{KV: kv, open: make(chan struct{})}
	ev = newForwarding(t, gate, nil, 0) // Boot returned with the epoch's commit held
	defer stopEvents(ev)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if err := ev.Counted(short); err == nil {
		t.Fatal("Counted returned nil while the epoch's commit was held")
	}
	published := make(chan error, 1)
	go func() {
		err := ev.Publish(ctx, "u1", statusEvent("second run"))
		if err == nil && !gate.released.Load() {
			err = errors.New("an event was published before the epoch was counted")
		}
		published <- err
	}()
	close(gate.open)
	if err := ev.Counted(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-published; err != nil {
		t.Fatal(err)
	}
	j, err = persist.NewWebhooks(kv).JournalFrom("u1", 0, 10)
	if err != nil || len(j) != 2 || j[1].Seq <= j[0].Seq {
		t.Fatalf("the journal across the runs: %+v, %v (want the second run's event after the first's)", j, err)
	}

	failing := &epochGate{KV: kv, fail: errors.New("stream unavailable")}
	ev3 := newForwarding(t, failing, nil, 0)
	defer stopEvents(ev3)
	if err := ev3.Counted(ctx); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("Counted after a failed count: %v, want unavailable", err)
	}
	if err := ev3.Publish(ctx, "u1", statusEvent("no epoch")); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("a publish with no epoch counted: %v, want unavailable", err)
	}
}

// A stream that opens while one of its user's events is between its preparation and its commit
// gets that event: from the journal when the commit came first, else live. (It failed before:
// an event prepared while no stream was open went to no stream, and a resumed stream whose
// replay read the journal before the commit lost it; seen in TestKill9BetweenToldOutcomesAndRecords
// under load.)
func TestStreamOpenedBetweenPrepareAndCommitGetsTheEvent(t *testing.T) {
	ctx := context.Background()
	ev := newForwarding(t, persist.NewMemory(), nil, 0)
	defer stopEvents(ev)
	l := ev.Listen("u1") // u1 streams: their events are journaled from now on
	if err := ev.Publish(ctx, "u1", statusEvent("first")); err != nil {
		t.Fatal(err)
	}
	first := (<-l.C).ID
	l.Close()

	p, err := ev.Prepare("u1", statusEvent("second")) // no stream open
	if err != nil {
		t.Fatal(err)
	}
	resumed := ev.Listen("u1")
	defer resumed.Close()
	if got, found := replayed(t, ev, "u1", first); !found || len(got) != 0 {
		t.Fatalf("replay before the commit: %v, %v", got, found)
	}
	if err := ev.Commit(ctx, []engine.PreparedEvent{p}); err != nil {
		t.Fatal(err)
	}
	ev.Committed(p)
	select {
	case e := <-resumed.C:
		if !strings.Contains(string(e.Body), `"second"`) {
			t.Fatalf("the stream got %s", e.Body)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the event committed after the stream's replay never reached the stream")
	}
}
