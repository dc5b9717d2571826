package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/actors/webhook"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
)

// fakeClock is a manual clock: timers fire only when the test advances it.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	c       *fakeClock
	at      time.Time
	d       time.Duration
	f       func()
	stopped bool
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) AfterFunc(d time.Duration, f func()) webhook.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), d: d, f: f}
	c.timers = append(c.timers, t)
	return t
}

// pending returns the timers not fired or stopped.
func (c *fakeClock) pending() []*fakeTimer {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*fakeTimer
	for _, t := range c.timers {
		if !t.stopped {
			out = append(out, t)
		}
	}
	return out
}

// fireNext moves the clock to the earliest pending timer and fires it; it returns its delay.
func (c *fakeClock) fireNext() time.Duration {
	c.mu.Lock()
	var next *fakeTimer
	for _, t := range c.timers {
		if !t.stopped && (next == nil || t.at.Before(next.at)) {
			next = t
		}
	}
	if next == nil {
		c.mu.Unlock()
		return 0
	}
	next.stopped = true
	if next.at.After(c.now) {
		c.now = next.at
	}
	c.mu.Unlock()
	next.f()
	return next.d
}

// receiver is a fake Poster: it records what arrives and answers from a script.
type receiver struct {
	mu       sync.Mutex
	got      []domain.WebhookDelivery // by webhook-id and body
	headers  []webhook.Headers
	answer   func(n int) (int, error) // n: 0-based index of the call
	calls    int
	secret   string
	badSigns int
}

func (r *receiver) Post(_ context.Context, url string, h webhook.Headers, body []byte) (int, error) {
	r.mu.Lock()
	n := r.calls
	r.calls++
	if !verifyFromSpec(r.secret, h, body) {
		r.badSigns++
	}
	answer := r.answer
	r.mu.Unlock()
	status, err := 200, error(nil)
	if answer != nil {
		status, err = answer(n) // may block: outside the lock
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err == nil && status/100 == 2 {
		r.got = append(r.got, domain.WebhookDelivery{ID: h.ID, Body: slices.Clone(body)})
		r.headers = append(r.headers, h)
	}
	return status, err
}

func (r *receiver) delivered() []domain.WebhookDelivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// verifyFromSpec checks a signature as the Standard Webhooks specification describes it,
// independently of the library the gateway signs with.
func verifyFromSpec(secret string, h webhook.Headers, body []byte) bool {
	key, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(secret, "whsec_"))
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(h.ID + "." + h.Timestamp + "."))
	mac.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
	for _, s := range strings.Fields(h.Signature) {
		if hmac.Equal([]byte(s), []byte(want)) {
			return true
		}
	}
	return false
}

type observer struct {
	mu        sync.Mutex
	delivered int
	failed    int
	dropped   int
	last      domain.WebhookSubscription
}

func (o *observer) Delivered(string, time.Duration) { o.mu.Lock(); o.delivered++; o.mu.Unlock() }
func (o *observer) Failed(string, int)              { o.mu.Lock(); o.failed++; o.mu.Unlock() }
func (o *observer) Dropped(_ string, n int)         { o.mu.Lock(); o.dropped += n; o.mu.Unlock() }
func (o *observer) Changed(s domain.WebhookSubscription) {
	o.mu.Lock()
	o.last = s
	o.mu.Unlock()
}

type harness struct {
	t     *testing.T
	hw    *actor.Engine
	store *persist.Webhooks
	clk   *fakeClock
	rcv   *receiver
	obs   *observer
	sub   domain.WebhookSubscription
	pid   *actor.PID
	seq   uint64
	wg    sync.WaitGroup
}

func newHarness(t *testing.T, kv persist.KV) *harness {
	t.Helper()
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	secret, err := webhook.NewSecret()
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{
		t: t, hw: hw, store: persist.NewWebhooks(kv),
		clk: &fakeClock{now: time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)},
		rcv: &receiver{secret: secret}, obs: &observer{},
		sub: domain.WebhookSubscription{ID: "sub1", UserID: "u1", URL: "http://receiver.invalid/hook",
			Events: domain.EventTypes(), Secret: secret},
	}
	if _, err := h.store.GetSubscription("sub1"); err != nil {
		h.sub.CreatedAt = h.clk.Now()
		if err := h.store.PutSubscription(context.Background(), h.sub); err != nil {
			t.Fatal(err)
		}
	} else {
		h.sub, _ = h.store.GetSubscription("sub1")
		h.rcv.secret = h.sub.Secret
	}
	return h
}

func (h *harness) start() {
	deps := webhook.Deps{Store: h.store, Poster: h.rcv, Clock: h.clk, Observer: h.obs, Workers: &h.wg,
		Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	h.pid = h.hw.Spawn(webhook.New(h.sub.ID, deps), "webhook", actor.WithID(h.sub.ID), actor.WithInboxSize(8))
}

func (h *harness) stop() {
	<-h.hw.Poison(h.pid).Done()
	h.wg.Wait()
}

// publish commits n deliveries and tells the actor.
func (h *harness) publish(n int) []string {
	var ds []domain.WebhookDelivery
	var ids []string
	for range n {
		h.seq++
		id := fmt.Sprintf("msg_%04d", h.seq)
		ds = append(ds, domain.WebhookDelivery{ID: id, SubscriptionID: h.sub.ID, Seq: h.seq, EventID: "evt" + id,
			Type: domain.EventMessageStatus, CreatedAt: h.clk.Now(), Body: []byte(`{"n":` + fmt.Sprint(h.seq) + `}`)})
		ids = append(ids, id)
	}
	if err := h.store.Enqueue(context.Background(), ds); err != nil {
		h.t.Fatal(err)
	}
	if h.pid != nil {
		h.hw.Send(h.pid, webhook.Enqueued{Deliveries: ds})
	}
	return ids
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func deliveredIDs(r *receiver) []string {
	var out []string
	for _, d := range r.delivered() {
		out = append(out, d.ID)
	}
	return out
}

func (h *harness) queueLen() int {
	seqs, err := h.store.Pending(h.sub.ID)
	if err != nil {
		h.t.Fatal(err)
	}
	return len(seqs)
}

func TestDeliversInOrderAndEmptiesTheQueue(t *testing.T) {
	h := newHarness(t, persist.NewMemory())
	early := h.publish(20) // committed before the actor exists: found by its load
	h.start()
	defer h.stop()
	var want []string
	want = append(want, early...)
	for range 10 {
		want = append(want, h.publish(8)...)
	}
	waitFor(t, "every delivery", func() bool { return len(h.rcv.delivered()) == len(want) })
	if got := deliveredIDs(h.rcv); !slices.Equal(got, want) {
		t.Fatalf("order:\n got %v\nwant %v", got, want)
	}
	waitFor(t, "the queue to empty", func() bool { return h.queueLen() == 0 })
	if h.rcv.badSigns != 0 {
		t.Fatalf("%d signatures failed the from-spec verifier", h.rcv.badSigns)
	}
	as, err := h.store.Attempts(h.sub.ID)
	if err != nil || len(as) != persist.RecentWebhookAttempts || !as[0].Delivered || as[0].Status != 200 {
		t.Fatalf("attempts: %d, newest %+v, %v", len(as), as[0], err)
	}
}

func TestBackoffWithJitterThenOrderKept(t *testing.T) {
	h := newHarness(t, persist.NewMemory())
	h.rcv.answer = func(n int) (int, error) {
		switch {
		case n < 3:
			return 503, nil
		case n == 3:
			return 0, fmt.Errorf("connection refused")
		}
		return 204, nil
	}
	h.start()
	defer h.stop()
	ids := h.publish(3)
	policy := webhook.Policy{}
	for i := 1; i <= 4; i++ {
		waitFor(t, "a retry timer", func() bool { return len(h.clk.pending()) == 1 })
		d := h.clk.pending()[0].d
		if full := policy.Backoff(i); d < full/2 || d > full {
			t.Fatalf("wait after failure %d = %v, want within [%v, %v]", i, d, full/2, full)
		}
		if got := h.rcv.delivered(); len(got) != 0 {
			t.Fatalf("a later delivery overtook the failing head: %v", got)
		}
		h.clk.fireNext()
	}
	waitFor(t, "the three deliveries", func() bool { return len(h.rcv.delivered()) == 3 })
	if got := deliveredIDs(h.rcv); !slices.Equal(got, ids) {
		t.Fatalf("order: got %v, want %v", got, ids)
	}
	waitFor(t, "the attempts to be recorded", func() bool {
		as, _ := h.store.Attempts(h.sub.ID)
		return len(as) == 7
	})
	as, _ := h.store.Attempts(h.sub.ID)
	// Newest first: three successes, then the head's four failures, attempt numbers 4..1.
	if as[3].Attempt != 4 || as[3].Error == "" || as[6].Attempt != 1 || as[6].Status != 503 || as[2].Attempt != 5 || !as[2].Delivered {
		t.Fatalf("attempt records: %+v", as)
	}
	for _, h := range h.rcv.headers {
		if h.ID == "" || h.Timestamp == "" || !strings.HasPrefix(h.Signature, "v1,") {
			t.Fatalf("headers %+v", h)
		}
	}
	// The retries stopped failing: the subscription is healthy again.
	waitFor(t, "the subscription healthy", func() bool {
		s, _ := h.store.GetSubscription(h.sub.ID)
		return s.FailingSince.IsZero()
	})
}

func TestDisabledAfter24hOfFailures(t *testing.T) {
	h := newHarness(t, persist.NewMemory())
	h.rcv.answer = func(int) (int, error) { return 500, nil }
	h.start()
	defer h.stop()
	start := h.clk.Now()
	h.publish(5)
	for i := 0; ; i++ {
		if i > 1000 {
			t.Fatal("never disabled")
		}
		waitFor(t, "a retry timer or the disable", func() bool {
			s, _ := h.store.GetSubscription(h.sub.ID)
			return len(h.clk.pending()) == 1 || s.Disabled
		})
		if s, _ := h.store.GetSubscription(h.sub.ID); s.Disabled {
			break
		}
		h.clk.fireNext()
	}
	s, _ := h.store.GetSubscription(h.sub.ID)
	if elapsed := s.DisabledAt.Sub(start); elapsed < 24*time.Hour || elapsed > 24*time.Hour+10*time.Minute {
		t.Fatalf("disabled after %v, want 24 h (plus at most one backoff)", elapsed)
	}
	if !strings.Contains(s.DisabledReason, "24 h") || !strings.Contains(s.DisabledReason, "500") {
		t.Fatalf("reason %q", s.DisabledReason)
	}
	waitFor(t, "the queue to be dropped", func() bool { return h.queueLen() == 0 })
	h.obs.mu.Lock()
	defer h.obs.mu.Unlock()
	if !h.obs.last.Disabled || h.obs.dropped != 5 || h.obs.delivered != 0 {
		t.Fatalf("observer: %+v", h.obs)
	}
	if len(h.clk.pending()) != 0 {
		t.Fatal("a disabled subscription still has a retry timer")
	}
}

func TestResumesFromTheSameStoreAfterARestart(t *testing.T) {
	kv := persist.NewMemory()
	h := newHarness(t, kv)
	block := make(chan struct{})
	h.rcv.answer = func(n int) (int, error) {
		if n >= 10 {
			<-block // the receiver hangs: the "process" stops with deliveries in flight
			return 0, fmt.Errorf("killed")
		}
		return 200, nil
	}
	h.start()
	ids := h.publish(25)
	waitFor(t, "the first ten", func() bool { return len(h.rcv.delivered()) == 10 })
	<-h.hw.Poison(h.pid).Done()
	close(block)
	h.wg.Wait()

	// A new actor on the same store, as after a restart: the rest arrives, with the same ids.
	h2 := newHarness(t, kv)
	h2.rcv.got = nil
	h2.start()
	defer h2.stop()
	waitFor(t, "the rest", func() bool {
		d := h2.rcv.delivered()
		return len(d) > 0 && d[len(d)-1].ID == ids[len(ids)-1]
	})
	got := append(deliveredIDs(h.rcv), deliveredIDs(h2.rcv)...)
	// At least once, in order: duplicates only of the same id, next to each other.
	got = slices.Compact(got)
	if !slices.Equal(got, ids) {
		t.Fatalf("after the restart:\n got %v\nwant %v", got, ids)
	}
	if h2.rcv.badSigns != 0 {
		t.Fatal("bad signatures after the restart")
	}
}

// A publisher slow to send its Enqueued (the actor's load already read the deliveries from the
// store and delivered them) does not make the receiver get them twice.
func TestLateEnqueuedAfterLoadNotDeliveredTwice(t *testing.T) {
	h := newHarness(t, persist.NewMemory())
	ids := h.publish(5) // committed before the actor exists: its Enqueued comes late, below
	h.start()
	defer h.stop()
	waitFor(t, "the loaded deliveries", func() bool { return len(h.rcv.delivered()) == len(ids) })
	var late []domain.WebhookDelivery
	for i, id := range ids {
		late = append(late, domain.WebhookDelivery{ID: id, SubscriptionID: h.sub.ID, Seq: uint64(i + 1), EventID: "evt" + id,
			Type: domain.EventMessageStatus, CreatedAt: h.clk.Now(), Body: []byte(`{"n":` + fmt.Sprint(i+1) + `}`)})
	}
	h.hw.Send(h.pid, webhook.Enqueued{Deliveries: late})
	next := h.publish(1) // a marker behind them: once it is delivered, the late ones were seen
	waitFor(t, "the next delivery", func() bool { return len(h.rcv.delivered()) > len(ids) })
	if got := deliveredIDs(h.rcv); !slices.Equal(got, append(ids, next...)) {
		t.Fatalf("delivered %v, want %v then %v once each", got, ids, next)
	}
}
