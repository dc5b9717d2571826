package session

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/actors/internal/clocktest"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/persist"
)

// The session actor on a fake clock: a fake network client whose answers each test scripts,
// the real protection records on a memory store, and an inspect message that runs a function
// on the actor's goroutine (a barrier, and a look at its state).

var t0 = time.Date(2026, 11, 23, 9, 0, 0, 0, time.UTC)

type testClock struct{ *clocktest.Clock }

func (c testClock) AfterFunc(d time.Duration, f func()) Timer { return c.Clock.AfterFunc(d, f) }

// sendRec is one send the fake client was asked for.
type sendRec struct {
	id, to    string
	at        time.Time
	goroutine string
}

// fakeNet is a network with one client per session.
type fakeNet struct {
	mu      sync.Mutex
	clients map[string]*fakeClient
	phone   string // the phone a new client is paired with ("" = unpaired)
	clock   *clocktest.Clock
}

func (n *fakeNet) Open(id string, sink func(network.Event), _ ...network.Option) (network.Client, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	c := n.clients[id]
	if c == nil {
		c = &fakeClient{phone: n.phone, clock: n.clock}
		n.clients[id] = c
	}
	c.mu.Lock()
	c.sink = sink
	c.mu.Unlock()
	return c, nil
}

func (n *fakeNet) Close() error { return nil }

type fakeClient struct {
	mu    sync.Mutex
	sink  func(network.Event)
	phone string
	clock *clocktest.Clock
	// answer scripts the network's answer to a send (nil: sent).
	answer func(m domain.Message) error
	sends  []sendRec
	// lean: sends record nothing (benchmarks).
	lean bool
	// active counts the sends under way; overlap is set when two were at once.
	active  atomic.Int32
	overlap atomic.Bool
}

func (c *fakeClient) emit(ev network.Event) {
	c.mu.Lock()
	sink := c.sink
	c.mu.Unlock()
	sink(ev)
}

func (c *fakeClient) Connect(context.Context) error {
	c.mu.Lock()
	phone := c.phone
	c.mu.Unlock()
	if phone != "" {
		c.emit(network.Connected{Phone: phone})
	}
	return nil
}

func (c *fakeClient) PairPhone(context.Context, string) (string, error) { return "", nil }
func (c *fakeClient) Lookup(_ context.Context, phones []string) ([]domain.NumberCheck, error) {
	out := make([]domain.NumberCheck, len(phones))
	for i, p := range phones {
		out[i] = domain.NumberCheck{Phone: p, OnNetwork: true, LID: "9" + p}
	}
	return out, nil
}

func (c *fakeClient) MarkRead(context.Context, domain.MessageRef) error  { return nil }
func (c *fakeClient) Groups(context.Context) ([]domain.Group, error)     { return nil, nil }
func (c *fakeClient) InviteLink(context.Context, string) (string, error) { return "", nil }

func (c *fakeClient) CreateGroup(context.Context, string, []string) (domain.Group, error) {
	return domain.Group{}, nil
}

func (c *fakeClient) UpdateParticipants(context.Context, string, []string, []string) (domain.Group, error) {
	return domain.Group{}, nil
}

func (c *fakeClient) Send(_ context.Context, m domain.Message) (network.Receipt, error) {
	if c.active.Add(1) > 1 {
		c.overlap.Store(true)
	}
	defer c.active.Add(-1)
	if c.lean {
		return network.Receipt{ID: m.ID}, nil
	}
	buf := make([]byte, 64)
	g := strings.Fields(string(buf[:runtime.Stack(buf, false)]))[1]
	c.mu.Lock()
	c.sends = append(c.sends, sendRec{id: m.ID, to: m.To, at: c.clock.Now(), goroutine: g})
	answer := c.answer
	c.mu.Unlock()
	if answer != nil {
		if err := answer(m); err != nil {
			return network.Receipt{}, err
		}
	}
	return network.Receipt{ID: m.ID, At: c.clock.Now(), LID: "9" + m.To}, nil
}

func (c *fakeClient) Logout(context.Context) error {
	c.mu.Lock()
	c.phone = ""
	c.mu.Unlock()
	c.emit(network.LoggedOut{Reason: "logged out"})
	return nil
}

func (c *fakeClient) Disconnect() {}

func (c *fakeClient) Paired() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.phone, c.phone != ""
}

// pair links the client to phone (a new scan).
func (c *fakeClient) pair(phone string) {
	c.mu.Lock()
	c.phone = phone
	c.mu.Unlock()
	c.emit(network.Paired{Phone: phone})
	c.emit(network.Connected{Phone: phone})
}

func (c *fakeClient) script(f func(m domain.Message) error) {
	c.mu.Lock()
	c.answer = f
	c.mu.Unlock()
}

func (c *fakeClient) sent() []sendRec {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]sendRec(nil), c.sends...)
}

// outcomeRec is one outcome the deliverer reported.
type outcomeRec struct {
	e   domain.OutboxEntry
	err error
}

type fakeDeliveries struct {
	mu       sync.Mutex
	outcomes []outcomeRec
	// n counts the outcomes; countOnly keeps nothing else (benchmarks).
	n         atomic.Int64
	countOnly bool
	// at, when set, is called with the count after each outcome.
	at func(n int64)
	// held, when set, takes the receipts' Dones instead of telling them (mu).
	held chan network.Done
}

func (d *fakeDeliveries) Outcome(e domain.OutboxEntry, err error) {
	n := d.n.Add(1)
	if d.at != nil {
		d.at(n)
	}
	if d.countOnly {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.outcomes = append(d.outcomes, outcomeRec{e, err})
}

func (d *fakeDeliveries) Receipt(_ string, _ domain.StatusChange, done network.Done) {
	d.mu.Lock()
	held := d.held
	d.mu.Unlock()
	if held != nil && done != nil {
		held <- done
		return
	}
	done.Call(nil)
}

func (d *fakeDeliveries) Failed(_ string, _ error, _ time.Time, done network.Done) { done.Call(nil) }

func (d *fakeDeliveries) all() []outcomeRec {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]outcomeRec(nil), d.outcomes...)
}

type memSessions struct {
	mu sync.Mutex
	m  map[string]domain.Session
}

func (s *memSessions) PutSession(_ context.Context, st domain.Session) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[st.ID] = st
	return nil
}

func (s *memSessions) GetSession(id string) (domain.Session, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.m[id]
	if !ok {
		return st, domain.ErrRecordNotFound
	}
	return st, nil
}

type warning struct {
	reason string
	until  time.Time
}

type fakeEvents struct {
	mu       sync.Mutex
	statuses []domain.Session
	warnings []warning
}

func (e *fakeEvents) SessionChanged(s domain.Session) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.statuses = append(e.statuses, s)
}

func (e *fakeEvents) SessionWarning(_ domain.Session, reason string, until time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.warnings = append(e.warnings, warning{reason, until})
}

func (e *fakeEvents) warned() []warning {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]warning(nil), e.warnings...)
}

type viewBox struct {
	mu sync.Mutex
	v  domain.Session
}

func (b *viewBox) Publish(s domain.Session) { b.mu.Lock(); b.v = s; b.mu.Unlock() }
func (b *viewBox) get() domain.Session      { b.mu.Lock(); defer b.mu.Unlock(); return b.v }

// inspect runs on the actor's goroutine (probe's own message).
type inspect struct {
	f    func(*Session)
	done chan struct{}
}

// probe is the session actor with inspect added.
type probe struct{ *Session }

func (p probe) Receive(c *actor.Context) {
	if m, ok := c.Message().(inspect); ok {
		p.sq.mu.Lock()
		m.f(p.Session)
		p.sq.mu.Unlock()
		close(m.done)
		return
	}
	p.Session.Receive(c)
}

// rig is one session actor under test, and what it talks to.
type rig struct {
	t       testing.TB
	hw      *actor.Engine
	pid     *actor.PID
	id      string
	clock   *clocktest.Clock
	net     *fakeNet
	records persist.Protections
	store   *memSessions
	out     *fakeDeliveries
	events  *fakeEvents
	inbound Inbound // nil: none (set before a spawn)
	view    *viewBox
	pacing  domain.Pacing
	seq     int
	queue   *Queue
}

// newRig starts a session linked to phone (connected) with pacing.
func newRig(t testing.TB, phone string, pacing domain.Pacing) *rig {
	t.Helper()
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktest.New(t0)
	r := &rig{
		t: t, hw: hw, id: "s1", clock: clk,
		net:     &fakeNet{clients: map[string]*fakeClient{}, phone: phone, clock: clk},
		records: persist.NewProtections(persist.NewMemory()),
		store:   &memSessions{m: map[string]domain.Session{}},
		out:     &fakeDeliveries{}, events: &fakeEvents{}, pacing: pacing,
	}
	r.store.m[r.id] = domain.Session{ID: r.id, AssignedTo: "u1", CreatedAt: t0.Add(-30 * 24 * time.Hour), Status: domain.StatusDisconnected, Linked: phone != ""}
	r.spawn()
	t.Cleanup(func() { <-hw.Poison(r.pid).Done() })
	return r
}

// spawn starts the actor (again: a restart from the records).
func (r *rig) spawn() {
	r.view = &viewBox{}
	r.queue = NewQueue()
	deps := Deps{
		Store: r.store, Network: r.net, Clock: testClock{r.clock},
		Log:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		Publisher: r.view, Deliveries: r.out, Records: r.records, Events: r.events,
		Pacing: r.pacing, SendTimeout: 5 * time.Second, Queue: r.queue, Inbound: r.inbound,
	}
	st, _ := r.store.GetSession(r.id)
	var s *Session
	r.pid = r.hw.Spawn(func() actor.Receiver {
		s = New(st, deps)().(*Session)
		return probe{s}
	}, "session", actor.WithID(r.id))
	if st.Linked {
		r.waitStatus(domain.StatusConnected)
	}
}

// stop stops the actor gracefully (what a restart does).
func (r *rig) stop() { <-r.hw.Poison(r.pid).Done() }

func (r *rig) client() *fakeClient {
	r.net.mu.Lock()
	defer r.net.mu.Unlock()
	return r.net.clients[r.id]
}

// do runs f on the actor's goroutine and waits for it.
func (r *rig) do(f func(*Session)) {
	r.t.Helper()
	m := inspect{f: f, done: make(chan struct{})}
	r.hw.Send(r.pid, m)
	select {
	case <-m.done:
	case <-time.After(5 * time.Second):
		r.t.Fatal("the session actor did not answer")
	}
}

// settle waits until the worker has nothing to do that it knows of (every job's result taken,
// every wake acted on).
func (r *rig) settle() {
	r.t.Helper()
	r.eventually("the deliverer idle", func() bool {
		idle := false
		r.do(func(s *Session) { idle = s.sq.idle() })
		return idle
	})
}

func (r *rig) eventually(what string, cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func (r *rig) waitStatus(status string) {
	r.t.Helper()
	r.eventually("status "+status, func() bool { return r.view.get().Status == status })
}

// send enqueues a message to to (accepted for user u1 from the linked phone); it returns its id.
func (r *rig) send(to string) string {
	r.seq++
	id := fmt.Sprintf("m%02d", r.seq)
	phone, _ := r.client().Paired()
	e := domain.OutboxEntry{ID: id, UserID: "u1", From: phone, Message: domain.Message{ID: id, To: to, Kind: domain.KindText, Text: id}, CreatedAt: domain.MillisOf(r.clock.Now())}
	e.SetStatus(domain.MsgQueued, r.clock.Now())
	r.queue.Push(e) // as the engine does: no actor message
	return id
}

// advance moves the clock and waits until the actor has acted on it.
func (r *rig) advance(d time.Duration) {
	r.settle()
	r.clock.Advance(d)
	r.do(func(*Session) {})
	r.settle()
}

// sentTo lists the ids sent to to, in order (repeats included).
func (r *rig) sentTo(to string) []string {
	var ids []string
	for _, s := range r.client().sent() {
		if s.to == to {
			ids = append(ids, s.id)
		}
	}
	return ids
}

// outcome is the reported outcome of message id (ok false: none yet).
func (r *rig) outcome(id string) (outcomeRec, bool) {
	for _, o := range r.out.all() {
		if o.e.ID == id {
			return o, true
		}
	}
	return outcomeRec{}, false
}

// waitOutcome waits for message id's outcome.
func (r *rig) waitOutcome(id string) outcomeRec {
	r.t.Helper()
	var o outcomeRec
	r.eventually("the outcome of "+id, func() bool {
		var ok bool
		o, ok = r.outcome(id)
		return ok
	})
	return o
}

func (r *rig) depth() int { r.settle(); return r.queue.Stats().Depth }
