package storeevents

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/ecom"
)

// memInbox is an in-memory Store.
type memInbox struct {
	mu         sync.Mutex
	failFinish int // the next failFinish FinishEvents calls fail
	entries    map[string]domain.InboxEntry
	records    []domain.StoreEvent
	sent       map[string]bool
}

func (m *memInbox) PendingInbox(string) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for s := range m.entries {
		out = append(out, s)
	}
	slices.Sort(out)
	return out, nil
}

func (m *memInbox) InboxEntry(_, seq string) (domain.InboxEntry, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[seq]
	return e, ok, nil
}

func (m *memInbox) LastEventN(string) (int64, error) { return 0, nil }

func (m *memInbox) AlreadySent(_ string, keys []string) ([]bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]bool, len(keys))
	for i, k := range keys {
		out[i] = m.sent[k]
	}
	return out, nil
}

func (m *memInbox) FinishEvents(_ context.Context, _ string, fs []Finished) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failFinish > 0 {
		m.failFinish--
		return errors.New("disk full")
	}
	for _, f := range fs {
		delete(m.entries, f.Seq)
		m.records = append(m.records, f.Record)
		if f.SentKey != "" {
			m.sent[f.SentKey] = true
		}
	}
	return nil
}

func (m *memInbox) record(webhookID string) (domain.StoreEvent, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.records {
		if r.WebhookID == webhookID {
			return r, true
		}
	}
	return domain.StoreEvent{}, false
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// storeHarness runs one storeevents actor over a memInbox; send decides each send's outcome.
type storeHarness struct {
	t     *testing.T
	inbox *memInbox
	clk   *fakeClock
	hw    *actor.Engine
	pid   *actor.PID

	mu         sync.Mutex
	sends      []string // phones, in order
	send       func(n int) error
	ready      bool
	readyCalls int
	disabled   bool                          // the template is disabled
	outbox     map[string]domain.OutboxEntry // what Outcome finds, by message id
	views      []View
	batches    []int // the size of the batch of each accepted message
}

func newStoreHarness(t *testing.T, send func(n int) error) *storeHarness {
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	h := &storeHarness{t: t, inbox: &memInbox{entries: map[string]domain.InboxEntry{}, sent: map[string]bool{}},
		clk: &fakeClock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}, hw: hw, send: send, ready: true}
	return h
}

// The harness is the actor's whole world: storage (its memInbox), orders, templates, the
// sender and the outbox.
func (h *storeHarness) FetchOrder(context.Context, string, int64) ([]byte, error) {
	return nil, ErrNoStoreToken
}

// Compose is the engine's composer reduced to a template "order {order_number}" that may be
// disabled.
func (h *storeHarness) Compose(_ context.Context, c Compose) (Composed, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case c.Event.SkipReason != "":
		return Composed{Skip: c.Event.SkipReason}, nil
	case h.disabled:
		return Composed{Skip: "template disabled"}, nil
	}
	text := ecom.Render("order {order_number}", c.Event, "Acme")
	return Composed{Out: []Outgoing{{Message: domain.Message{ID: c.MessageID, To: c.Event.Phone, Kind: domain.KindText, Text: text}}}}, nil
}
func (h *storeHarness) Outcome(id string) (domain.OutboxEntry, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	e, ok := h.outbox[id]
	return e, ok
}
func (h *storeHarness) Publish(v View) {
	h.mu.Lock()
	h.views = append(h.views, v)
	h.mu.Unlock()
}
func (h *storeHarness) SendGroups(_ context.Context, _, _ string, groups [][]Outgoing) (int, error) {
	for k, g := range groups {
		m := g[0].Message
		h.mu.Lock()
		n := len(h.sends)
		h.sends = append(h.sends, m.To)
		h.mu.Unlock()
		if err := h.send(n); err != nil {
			return k, err
		}
		h.mu.Lock()
		if h.outbox == nil {
			h.outbox = map[string]domain.OutboxEntry{}
		}
		h.outbox[m.ID] = domain.OutboxEntry{ID: m.ID, Status: domain.MsgQueued}
		h.batches = append(h.batches, len(groups))
		h.mu.Unlock()
	}
	return len(groups), nil
}
func (h *storeHarness) SessionReady(string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.readyCalls++
	return h.ready
}

// Interface guards.
var (
	_ Store        = (*memInbox)(nil)
	_ OrderFetcher = (*storeHarness)(nil)
	_ Composer     = (*storeHarness)(nil)
	_ Sender       = (*storeHarness)(nil)
	_ Outbox       = (*storeHarness)(nil)
	_ Publisher    = (*storeHarness)(nil)
	_ Clock        = (*fakeClock)(nil)
)

func (h *storeHarness) start() {
	deps := Deps{
		Store: h.inbox, Orders: h, Composer: h, Sender: h, Outbox: h, Publisher: h,
		Clock: h.clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
		BaseBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, SessionPoll: 5 * time.Millisecond,
	}
	h.pid = h.hw.Spawn(New("acme.myshopify.com", deps), "storeevents", actor.WithID("acme"))
	h.t.Cleanup(func() { <-h.hw.Poison(h.pid).Done() })
}

// add puts an orders/create entry for an order with this phone into the inbox.
func (h *storeHarness) add(seq, webhookID string, orderID int, phone string) {
	body := `{"id":` + strconv.Itoa(orderID) + `,"name":"#` + strconv.Itoa(orderID) + `","customer":{"first_name":"Ann","phone":"` + phone + `"}}`
	h.inbox.mu.Lock()
	h.inbox.entries[seq] = domain.InboxEntry{
		Seq: seq, Shop: "acme.myshopify.com", UserID: "u1", Platform: ecom.PlatformShopify, Topic: ecom.TopicOrderCreated,
		WebhookID: webhookID, MessageID: "3EB0" + seq, ReceivedAt: h.clk.Now(), Body: []byte(body),
	}
	h.inbox.mu.Unlock()
	if h.pid != nil {
		h.hw.Send(h.pid, InboxAdded{Seq: seq})
	}
}

func (h *storeHarness) wait(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			h.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func (h *storeHarness) sendCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.sends)
}

func TestStoreEventsInOrderWithRetries(t *testing.T) {
	// The 2nd and 3rd sends fail on the network: the event is retried, and the ones behind it wait.
	h := newStoreHarness(t, func(n int) error {
		if n == 1 || n == 2 {
			return domain.ErrNetwork
		}
		return nil
	})
	h.add("001", "a", 1, "+14155550001")
	h.add("002", "b", 2, "+14155550002")
	h.start()
	h.add("003", "c", 3, "+14155550003")
	h.wait("three events recorded", func() bool { _, ok := h.inbox.record("c"); return ok })
	h.mu.Lock()
	got := slices.Clone(h.sends)
	h.mu.Unlock()
	want := []string{"14155550001", "14155550002", "14155550002", "14155550002", "14155550003"}
	if !slices.Equal(got, want) {
		t.Fatalf("sends %v, want %v", got, want)
	}
	if r, _ := h.inbox.record("b"); r.Status != domain.StoreEventSent || r.Attempts != 3 || r.MessageID != "3EB0002" || r.OrderName != "#2" {
		t.Fatalf("retried event: %+v", r)
	}
	// The same order event again (another delivery id) is not sent twice.
	h.add("004", "d", 1, "+14155550001")
	h.wait("the repeat recorded", func() bool { _, ok := h.inbox.record("d"); return ok })
	if r, _ := h.inbox.record("d"); r.Status != domain.StoreEventSkipped || h.sendCount() != 5 {
		t.Fatalf("repeated event: %+v after %d sends", r, h.sendCount())
	}
}

func TestStoreEventsWaitForSessionThenGiveUpAfterWindow(t *testing.T) {
	h := newStoreHarness(t, func(int) error { return domain.ErrNotConnected })
	h.ready = false
	h.add("001", "a", 1, "+14155550001")
	h.start()
	h.wait("a first attempt", func() bool { return h.sendCount() == 1 })
	// While the session is down, nothing is attempted: the session's state is polled.
	h.wait("the session polled", func() bool { h.mu.Lock(); defer h.mu.Unlock(); return h.readyCalls >= 5 })
	if n := h.sendCount(); n != 1 {
		t.Fatalf("%d sends while the session is down, want 1", n)
	}
	// Connected again: retried at once.
	h.mu.Lock()
	h.ready = true
	h.mu.Unlock()
	h.wait("a second attempt", func() bool { return h.sendCount() >= 2 })

	// Still failing 24 h after it was received: given up, recorded failed, the next one runs.
	h.clk.add(DefaultRetryWindow + time.Minute)
	h.wait("the event given up", func() bool { _, ok := h.inbox.record("a"); return ok })
	r, _ := h.inbox.record("a")
	if r.Status != domain.StoreEventFailed || !strings.Contains(r.Reason, "gave up after 24 h") {
		t.Fatalf("given-up event: %+v", r)
	}
	h.inbox.mu.Lock()
	left := len(h.inbox.entries)
	h.inbox.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d entries left in the inbox", left)
	}
}

func TestStoreEventsSkipsWithoutPhone(t *testing.T) {
	h := newStoreHarness(t, func(int) error { return nil })
	h.start()
	h.add("001", "a", 1, "not a number")
	h.wait("recorded", func() bool { _, ok := h.inbox.record("a"); return ok })
	if r, _ := h.inbox.record("a"); r.Status != domain.StoreEventSkipped || !strings.Contains(r.Reason, "customer.phone") || h.sendCount() != 0 {
		t.Fatalf("event without a usable phone: %+v", r)
	}
}

// A message the outbox already holds as sent (a crash before the outcome was recorded) is
// recorded sent, not sent again; a disabled template sends nothing; the queue view is
// published as it drains.
func TestStoreEventsOutboxTemplateAndViews(t *testing.T) {
	h := newStoreHarness(t, func(int) error { return nil })
	h.outbox = map[string]domain.OutboxEntry{"3EB0001": {ID: "3EB0001", Status: domain.MsgSent}}
	h.add("001", "a", 1, "+14155550001")
	h.start()
	h.wait("the sent one recorded", func() bool { _, ok := h.inbox.record("a"); return ok })
	if r, _ := h.inbox.record("a"); r.Status != domain.StoreEventSent || r.MessageID != "3EB0001" || h.sendCount() != 0 {
		t.Fatalf("event already in the outbox: %+v after %d sends", r, h.sendCount())
	}
	h.mu.Lock()
	h.disabled = true
	h.mu.Unlock()
	h.add("002", "b", 2, "+14155550002")
	h.wait("the disabled one recorded", func() bool { _, ok := h.inbox.record("b"); return ok })
	if r, _ := h.inbox.record("b"); r.Status != domain.StoreEventSkipped || r.Reason != "template disabled" || h.sendCount() != 0 {
		t.Fatalf("event with a disabled template: %+v", r)
	}
	h.wait("an empty queue published", func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		return len(h.views) > 0 && h.views[len(h.views)-1].Pending == 0
	})
}

// Events queued together go out in batches (one accept per pass), in order; a repeat inside a
// batch is skipped; a pass whose outcomes could not be recorded runs again without sending its
// accepted messages twice (they are found in the outbox).
func TestStoreEventsBatches(t *testing.T) {
	h := newStoreHarness(t, func(int) error { return nil })
	h.inbox.failFinish = 1
	const n = 70
	for i := range n {
		h.add(fmt.Sprintf("%03d", i), fmt.Sprintf("w%03d", i), 100+i, fmt.Sprintf("+1415555%04d", i))
	}
	h.add("999", "again", 100, "+14155550000") // order 100 again, another delivery
	h.start()
	h.wait("every event recorded", func() bool { _, ok := h.inbox.record("again"); return ok })
	h.mu.Lock()
	sends, batches := slices.Clone(h.sends), slices.Clone(h.batches)
	h.mu.Unlock()
	if len(sends) != n {
		t.Fatalf("%d sends for %d events (a pass retried after its record failed sent again?)", len(sends), n)
	}
	for i, to := range sends {
		if want := fmt.Sprintf("1415555%04d", i); to != want {
			t.Fatalf("send %d went to %s, want %s (order)", i, to, want)
		}
	}
	if batches[0] < 2 || batches[0] > batchMax {
		t.Fatalf("first batch of %d messages, want 2..%d", batches[0], batchMax)
	}
	for i := range n {
		if r, _ := h.inbox.record(fmt.Sprintf("w%03d", i)); r.Status != domain.StoreEventSent || r.MessageID != fmt.Sprintf("3EB0%03d", i) {
			t.Fatalf("event %d: %+v", i, r)
		}
	}
	if r, _ := h.inbox.record("again"); r.Status != domain.StoreEventSkipped || !strings.Contains(r.Reason, "already sent") {
		t.Fatalf("the repeat: %+v", r)
	}
}
