// Package session is the actor of one messaging session: its state machine (created, scan QR,
// connected, disconnected), its latest QR code, its network client, and its deliverer
// (deliver.go): the ordered queue of accepted messages, sent with the session's pacing, each
// outcome reported to the engine's message facet.
//
// Imports: domain, network (the port) and hollywood; what the actor needs from the rest of the
// gateway is declared here as interfaces (Store, Clock, Publisher, Deliveries, Records,
// Inbound, Events). Only the engine imports it: it spawns one actor per session and implements
// those interfaces (persist.Sessions is the Store, persist.Protections the Records).
//
// The linked phone's protections (protect.go: timelock, today's counts, link time, contact
// book, recipient marks, half rate) are records keyed by (session, phone), read back when the
// actor starts (DESIGN.md sections 13 and 14). Queued messages belong to the account they were
// accepted for: a logout, a reassignment or a deletion fails them, and the deliverer never
// sends one from another phone.
//
// Concurrency: every field of Session is owned by the actor's goroutine. Network I/O (connect,
// pair code, logout, sends) runs on worker goroutines whose outcomes come back as messages, so
// status and QR queries are answered at once while a call is in flight.
package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gateway/gateway/domain"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/network"
)

// Store persists session snapshots (persist.Sessions).
type Store interface {
	PutSession(ctx context.Context, s domain.Session) error
	// GetSession reads the persisted snapshot: a restart after a panic resumes from it, not
	// from the state the actor was spawned with.
	GetSession(id string) (domain.Session, error)
}

// Clock is the actor's time: activity, assignment and timelock times, and the timers of
// pacing and backoff (a fake clock moves both in tests).
type Clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a Clock's timer (*time.Timer is one).
type Timer = interface{ Stop() bool }

// Publisher receives every new view of the session (status reads cost no round trip). It is
// called from the actor's goroutine and must not block.
type Publisher interface {
	Publish(s domain.Session)
}

// Deps are a session actor's collaborators.
type Deps struct {
	Store   Store
	Network network.Network
	Clock   Clock
	Log     *slog.Logger
	// Publisher is optional (nil: nothing is published).
	Publisher Publisher
	// IOTimeout bounds one network call (connect, pair code, logout).
	IOTimeout time.Duration
	// Deliveries is told each queued message's network outcome.
	Deliveries Deliveries
	// Records keeps the linked phone's protections (protect.go).
	Records Records
	// Pacing is the session's pacing at spawn (the network's, the plan's and the session's own,
	// merged by the engine); SetPacing changes it.
	Pacing domain.Pacing
	// SendTimeout bounds one send on the network.
	SendTimeout time.Duration
	// Messages gives the network back a message it sent earlier (retry receipts).
	Messages network.MessageSource
	// Inbound is told every message someone wrote to the session's number, and their
	// reactions, edits, revokes and votes (nil: dropped).
	Inbound Inbound
	// Events is told every status change (nil: none).
	Events Events
	// ConnectDelay delays a linked session's first reconnect after boot (its slot in the boot
	// window).
	ConnectDelay time.Duration
	// Queue is the session's delivery queue, which the engine pushes accepted entries into
	// (nil: New makes one; only Enqueue messages fill it then).
	Queue *Queue
	// Account is a cloud session's credentials (network.WithAccount; nil for a linked one),
	// and SendLog its sends (network.WithSendLog).
	Account *domain.CloudAccount
	SendLog network.SendLog
}

// Session-actor messages.
type (
	// Start starts linking (QR) or reconnects a linked device.
	Start struct{ Reply chan Reply }
	// GetQR answers the current QR code, waiting for the first one to be shown.
	GetQR struct{ Reply chan Reply }
	// GetPairCode starts linking by phone number and answers the code to type on the phone.
	GetPairCode struct {
		Phone string
		Reply chan Reply
	}
	// Logout unlinks the device from its phone (a new scan is needed to link again); the
	// queued messages fail with Cause (nil: domain.ErrSessionLoggedOut).
	Logout struct {
		Cause error
		Reply chan Reply
	}
	// Close fails every queued message with Cause (domain.ErrSessionDeleted when nil), and
	// every message handed to it later; it answers once the failures are reported (the session
	// is being deleted, or moved to another partition of a cluster).
	Close struct {
		Reply chan Reply
		Cause error // what the queued messages fail with (nil: session_deleted)
	}
	// Assign records the user the session belongs to; messages queued for another user fail
	// with domain.ErrSessionReassigned.
	Assign struct {
		UserID string
		Reply  chan Reply
	}

	// netEvent is an event of the network; held, the token of its Done (0: none; held.go).
	netEvent struct {
		ev   network.Event
		held uint64
	}
	connectDone struct{ err error }
	connectNow  struct{}
	logoutDone  struct {
		err   error
		reply chan Reply
	}
	pairDone struct {
		code  string
		err   error
		reply chan Reply
	}
)

// Reply is a session's view after a message, or why the message failed.
type Reply struct {
	State domain.Session
	Code  string // pair code
	// Found: Cancel found the message in the queue (and cancelled it).
	Found bool
	Err   error
}

// Failure is the reply's error (the engine's ask returns it).
func (r Reply) Failure() error { return r.Err }

// Session is the actor of one messaging session: its state machine, latest QR and network
// client. Network I/O runs on worker goroutines whose outcomes come back as messages, so status
// and QR queries are answered at once while a call is in flight. Every field is guarded by
// its Queue's mutex: the actor holds it while it handles a message, the send worker while it
// picks a batch and takes its result (worker.go).
type Session struct {
	deps   Deps
	st     domain.Session
	client network.Client
	// qrWaiters wait for the first QR code after a start.
	qrWaiters []chan Reply
	lastSaved time.Time
	// sq is the shared queue; q its entries and pacing state (accepted messages in order,
	// sent one batch at a time).
	sq *Queue
	q  *queue
	// lastEvent is the last status reported to deps.Events.
	lastEvent string
	// prot: the linked phone's protections; marks: its recipients refused twice, until when.
	prot     domain.Protections
	marks    map[string]time.Time
	refusals refusalWindow
	// unlinking: why the queue fails when the device is logged out now (nil: logged out).
	unlinking error
	// closing: the session is being deleted; closers wait for its queue to be settled.
	closing error
	closers []chan Reply
	// booked: numbers the contact book recorded as written to, by the hour (bookSent).
	booked map[string]int64
	// inHand: the Done of the network event being handled, until handed on (held.go);
	// panicked: this actor panicked (hollywood restarts it: its Stopped is not the end).
	inHand   network.Done
	panicked bool
}

// New returns the producer of a session actor starting from its snapshot.
func New(st domain.Session, deps Deps) actor.Producer {
	if deps.IOTimeout <= 0 {
		deps.IOTimeout = 30 * time.Second
	}
	if deps.SendTimeout <= 0 {
		deps.SendTimeout = 60 * time.Second
	}
	if deps.Queue == nil {
		deps.Queue = NewQueue()
	}
	return func() actor.Receiver {
		s := &Session{deps: deps, st: st, sq: deps.Queue, q: &deps.Queue.q}
		return s
	}
}

// Receive implements actor.Receiver: every message is handled with the queue's lock held (the
// worker reads the state this actor keeps), except the final stop, which waits for the
// worker's batch in flight.
func (s *Session) Receive(c *actor.Context) {
	if _, ok := c.Message().(actor.Stopped); ok {
		s.stopped()
		return
	}
	s.sq.mu.Lock()
	defer s.sq.mu.Unlock()
	defer s.failOnPanic()
	switch m := c.Message().(type) {
	case *Enqueue:
		s.enqueue(&m.Entry)
	default:
		s.receive(c)
	}
}

// stopped ends the session for good (not a restart after a panic): the worker picks nothing
// more, its batch in flight is waited for (at most one send timeout), then it exits and the
// client disconnects.
func (s *Session) stopped() {
	if s.panicked {
		// Hollywood delivers Stopped before restarting an actor that panicked: its successor
		// takes the queue, the worker and the held Dones over (started). The client
		// reconnects then, as it always did.
		if s.client != nil {
			s.client.Disconnect()
		}
		return
	}
	s.sq.mu.Lock()
	s.sq.stopped = true
	client := s.client
	held := s.sq.dropHeld()
	s.sq.mu.Unlock()
	for _, d := range held {
		d.Call(errStopped) // never taken: the network delivers them again
	}
	done := make(chan struct{})
	go func() { s.sq.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.deps.SendTimeout):
		s.deps.Log.Warn("session stopped with sends in flight", "session_id", s.st.ID)
	}
	s.sq.stop()
	if client != nil {
		client.Disconnect()
	}
}

// receive handles every other message.
//
//go:noinline
func (s *Session) receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case Enqueue:
		s.enqueue(&m.Entry)
	case actor.Started:
		s.started(c)
	case *Start:
		s.start(c)
		m.Reply <- Reply{State: s.st}
	case *GetQR:
		s.getQR(c, m)
	case *GetPairCode:
		s.pairCode(c, m)
	case *Assign:
		s.st.AssignedTo, s.st.AssignedAt = m.UserID, s.deps.Clock.Now().UTC()
		err := s.save()
		s.sweep()
		s.wake()
		s.publish()
		m.Reply <- Reply{State: s.st, Err: err}
	case *Logout:
		s.logout(c, m)
	case logoutDone:
		s.loggedOut(m)
		s.wake()
	case *Call:
		s.call(m)
	case *SetAccount:
		s.setAccount(c, m)
	case *Cancel:
		s.cancel(m)
	case *Close:
		s.closing = m.Cause
		if s.closing == nil {
			s.closing = domain.ErrSessionDeleted
		}
		s.closers = append(s.closers, m.Reply)
		s.sweep()
		s.wake()
		s.answerClosers()
	case SetPacing:
		s.q.base = m.Pacing
		s.setPacing(m.Pacing.Merge(s.st.Pacing))
		s.wake()
	case *Update:
		if m.SetPacing {
			s.st.Pacing = m.Pacing
			s.setPacing(s.q.base.Merge(m.Pacing))
		}
		if m.Proxy != nil {
			s.st.Proxy = *m.Proxy
		}
		err := s.save()
		s.publish()
		m.Reply <- Reply{State: s.st, Err: err}
		s.stir()
		s.wake()
	case netEvent:
		ev, ok := s.takeNet(m)
		if !ok {
			return
		}
		s.onNetEvent(ev)
		if d := s.inHand; d != nil {
			s.inHand = nil
			d.Call(nil) // an event this actor keeps nothing of
		}
		s.stir()
		s.wake()
	case connectNow:
		if s.st.Status != domain.StatusConnected {
			s.connect(c)
		}
	case connectDone:
		if m.err != nil {
			s.deps.Log.Warn("session connect failed", "session_id", s.st.ID, "err", m.err)
			if s.st.Status == domain.StatusScanQR && s.st.QR == "" {
				s.setStatus(domain.StatusDisconnected)
				s.failQRWaiters(fmt.Errorf("%w: connect: %w", domain.ErrUnavailable, m.err))
			}
		}
	case pairDone:
		if m.err != nil {
			m.reply <- Reply{State: s.st, Err: fmt.Errorf("%w: pair code: %w", domain.ErrUnavailable, m.err)}
			return
		}
		m.reply <- Reply{State: s.st, Code: m.code}
	}
}

// setPacing puts a new pacing in force: a gap drawn under the old one shrinks to the new one's
// longest.
func (s *Session) setPacing(p domain.Pacing) {
	s.q.pacing = p
	longest := s.pacingAt(s.deps.Clock.Now())
	s.q.gap = min(s.q.gap, time.Duration(longest.MinGapMs+longest.JitterMs)*time.Millisecond)
	s.stir()
}

// answerClosers answers Close once the queue is settled: nothing queued, nothing with the
// worker, every failure reported (the reply channels are buffered: the worker may answer).
func (s *Session) answerClosers() {
	if len(s.closers) == 0 || s.q.busy || len(s.q.items) > 0 || len(s.q.fails) > 0 {
		return
	}
	for _, r := range s.closers {
		r <- Reply{State: s.st}
	}
	s.closers = nil
}

// unlinkCause is why queued messages fail when the device is logged out.
func (s *Session) unlinkCause() error {
	if s.unlinking != nil {
		return s.unlinking
	}
	return domain.ErrSessionLoggedOut
}

// started rebuilds from the snapshot (the actor was just spawned or restarted after a panic):
// the network client is reopened and a linked device reconnects without a new scan.
func (s *Session) started(c *actor.Context) {
	if st, err := s.deps.Store.GetSession(s.st.ID); err == nil {
		s.st = st
	}
	s.q.base = s.deps.Pacing
	s.q.pacing = s.deps.Pacing.Merge(s.st.Pacing)
	hw, self := c.Engine(), c.PID()
	// This actor takes the queue over (from the start, or from its predecessor after a panic),
	// with what was pushed before it started.
	s.sq.s = s
	defer func() {
		early := s.sq.early
		s.sq.early = nil
		for i := range early {
			s.enqueue(&early[i])
		}
		s.sq.count()
		s.wake()
	}()
	client, err := s.open(c)
	if err != nil {
		s.deps.Log.Error("session: open network client", "session_id", s.st.ID, "err", err)
		return
	}
	s.client = client
	phone, linked := client.Paired()
	s.st.Linked = linked
	if linked {
		// A phone linked before its protections were records counts its ramp from the
		// session's creation and keeps the timelock the snapshot had.
		tl := s.st.TimelockUntil
		s.st.Phone = phone
		s.loadPhone(phone, s.st.CreatedAt)
		if !tl.IsZero() && s.prot.TimelockUntil == 0 && tl.After(s.deps.Clock.Now()) {
			s.setTimelock(tl)
		}
	}
	switch {
	case linked:
		s.setStatus(domain.StatusDisconnected)
		if d := s.deps.ConnectDelay; d > 0 {
			// Boot: linked sessions reconnect spread over a window, not all at once.
			s.deps.ConnectDelay = 0
			s.deps.Clock.AfterFunc(d, func() { hw.Send(self, connectNow{}) })
		} else {
			s.connect(c)
		}
	case s.st.Status == domain.StatusCreated:
		s.publish()
	default:
		// An unlinked session waits for the user to start it again (a QR is shown on demand).
		s.st.QR = ""
		s.setStatus(domain.StatusDisconnected)
	}
}

// open opens the session's network client with its options (opening it again takes new
// ones: a cloud session's new token).
func (s *Session) open(c *actor.Context) (network.Client, error) {
	hw, self := c.Engine(), c.PID()
	var opts []network.Option
	if s.deps.Messages != nil {
		opts = append(opts, network.WithMessageSource(s.deps.Messages))
	}
	if s.st.Proxy != "" {
		opts = append(opts, network.WithProxy(s.st.Proxy))
	}
	if s.deps.Account != nil {
		opts = append(opts, network.WithAccount(*s.deps.Account))
	}
	if s.deps.SendLog != nil {
		opts = append(opts, network.WithSendLog(s.deps.SendLog))
	}
	deliveries, sq := s.deps.Deliveries, s.sq
	return s.deps.Network.Open(s.st.ID, func(ev network.Event) {
		if r, ok := ev.(network.MessageReceipt); ok {
			// A receipt changes nothing the actor owns: it goes straight to the message facet
			// (which folds one that overtakes its message's outcome into it), sparing a
			// mailbox round and a scan of the queue per message.
			receipt(deliveries, r)
			return
		}
		sq.sendNet(hw, self, ev)
	}, opts...)
}

func (s *Session) start(c *actor.Context) {
	if s.client == nil {
		return
	}
	switch s.st.Status {
	case domain.StatusConnected:
		return
	case domain.StatusScanQR:
		if s.st.QR != "" {
			return
		}
	}
	if !s.st.Linked {
		s.setStatus(domain.StatusScanQR)
	}
	s.connect(c)
}

func (s *Session) connect(c *actor.Context) {
	client, hw, self, timeout := s.client, c.Engine(), c.PID(), s.deps.IOTimeout
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		hw.Send(self, connectDone{err: client.Connect(ctx)})
	}()
}

func (s *Session) getQR(c *actor.Context, m *GetQR) {
	if s.st.Status == domain.StatusConnected {
		m.Reply <- Reply{State: s.st, Err: domain.ErrAlreadyConnected}
		return
	}
	if s.st.Status == domain.StatusScanQR && s.st.QR != "" {
		m.Reply <- Reply{State: s.st}
		return
	}
	s.qrWaiters = append(s.qrWaiters, m.Reply)
	s.start(c)
}

func (s *Session) pairCode(c *actor.Context, m *GetPairCode) {
	if s.st.Status == domain.StatusConnected {
		m.Reply <- Reply{State: s.st, Err: domain.ErrAlreadyConnected}
		return
	}
	if s.client == nil {
		m.Reply <- Reply{State: s.st, Err: fmt.Errorf("%w: network client", domain.ErrUnavailable)}
		return
	}
	s.setStatus(domain.StatusScanQR)
	client, hw, self, timeout, phone := s.client, c.Engine(), c.PID(), s.deps.IOTimeout, m.Phone
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		code, err := client.PairPhone(ctx, phone)
		hw.Send(self, pairDone{code: code, err: err, reply: m.Reply})
	}()
}

func (s *Session) onNetEvent(ev network.Event) {
	switch e := ev.(type) {
	case network.QRCode:
		s.st.QR = e.Code
		if !s.st.Linked {
			s.setStatus(domain.StatusScanQR)
		}
		for _, w := range s.qrWaiters {
			w <- Reply{State: s.st}
		}
		s.qrWaiters = nil
	case network.QRTimeout:
		s.st.QR = ""
		s.setStatus(domain.StatusDisconnected)
		s.failQRWaiters(fmt.Errorf("%w: the QR codes expired; start again", domain.ErrUnavailable))
	case network.Paired:
		s.st.Linked, s.st.Phone, s.st.QR = true, e.Phone, ""
		s.unlinking = nil
		s.loadPhone(e.Phone, s.deps.Clock.Now())
		s.save()
		s.publish()
	case network.Connected:
		now := s.deps.Clock.Now()
		s.st.Linked, s.st.QR = true, ""
		s.unlinking = nil
		if e.Phone != "" {
			s.st.Phone = e.Phone
		}
		s.loadPhone(s.st.Phone, now)
		s.st.LastActivity = now.UTC()
		s.st.StatusReason, s.st.Until = "", time.Time{}
		s.setStatus(domain.StatusConnected)
		s.failQRWaiters(domain.ErrAlreadyConnected)
		if s.prot.Banned {
			// A ban's end: half rate for a day (the network watches an account it just let
			// back in).
			s.prot.Banned = false
			s.saveProtections()
			s.slowDown(now, domain.WarnBanEnded)
		}
	case network.Disconnected:
		s.st.StatusReason, s.st.Until = string(e.StatusReason), e.Until
		if s.st.StatusReason == "" {
			s.st.StatusReason = string(network.ReasonNetwork)
		}
		if e.StatusReason == network.ReasonBanned && !s.prot.Banned && s.prot.Phone != "" {
			s.prot.Banned = true
			s.saveProtections()
		}
		s.deps.Log.Info("session disconnected", "session_id", s.st.ID, "reason", s.st.StatusReason, "detail", e.Reason, "until", e.Until, "reconnecting", e.Reconnecting)
		s.saveStatus(domain.StatusDisconnected)
	case network.LoggedOut:
		s.st.Linked, s.st.QR = false, ""
		s.st.StatusReason, s.st.Until = string(network.ReasonLoggedOut), time.Time{}
		s.saveStatus(domain.StatusDisconnected)
		s.sweep()
	case network.Timelock:
		// The network refuses first messages to new contacts: they wait until the end (an
		// hour when not given) and are not re-sent meanwhile; replies to contacts who wrote
		// still go.
		until := time.Time{}
		if e.Active {
			if until = e.Until; until.IsZero() {
				until = s.deps.Clock.Now().Add(timelockUnknownEnd)
			}
		}
		s.setTimelock(until)
	case network.PhoneOffline:
		s.st.LogoutAt = e.LogoutAt
		s.saveStatus(s.st.Status)
	case network.PhoneOnline:
		s.st.LogoutAt = time.Time{}
		s.saveStatus(s.st.Status)
	case network.MessageReceipt:
		s.handOn() // Deliveries tells it once recorded
		receipt(s.deps.Deliveries, e)
	case network.Incoming:
		if e.Group == "" {
			s.wrote(e.From, s.deps.Clock.Now(), e.FromLID, e.PushName)
		}
		s.inbound(e)
	case network.Reaction, network.Edited, network.Revoked, network.PollVote:
		s.inbound(e)
	}
}

// inbound hands what someone did on the network to the Inbound (the engine), which calls an
// Incoming's Done.
func (s *Session) inbound(e network.Event) {
	if s.deps.Inbound != nil {
		s.deps.Inbound.Inbound(s.st, e)
		s.handOn()
		return
	}
	s.handOn()
	network.DoneOf(e).Call(nil) // nothing here keeps it
}

// receipt reports a network receipt to the message facet; its Done, when set, once each of
// its messages' records is written.
func receipt(d Deliveries, e network.MessageReceipt) {
	st := domain.MsgDelivered
	switch e.Status {
	case network.StatusRead, network.StatusPlayed:
		st = domain.MsgRead
	case network.StatusSent:
		st = domain.MsgSent // a message sent already: only its pricing is news
	}
	done := network.Join(e.Done, len(e.IDs))
	for _, id := range e.IDs {
		if e.Status == network.StatusFailed {
			d.Failed(id, e.Err, e.At, done)
		} else {
			d.Receipt(id, domain.StatusChange{Status: st, At: domain.MillisOf(e.At), Category: e.Category}, done)
		}
	}
}

// saveStatus sets the status and always persists the snapshot (its reason or a warning may have
// changed even when the status did not).
func (s *Session) saveStatus(status string) {
	if status != s.st.Status || status != domain.StatusConnected {
		defer s.statusEvent()
	}
	s.st.Status = status
	if err := s.save(); err != nil {
		s.deps.Log.Error("session: save snapshot", "session_id", s.st.ID, "err", err)
	}
	s.publish()
}

func (s *Session) failQRWaiters(err error) {
	for _, w := range s.qrWaiters {
		w <- Reply{State: s.st, Err: err}
	}
	s.qrWaiters = nil
}

// setStatus changes the status, persists the snapshot and publishes the view.
func (s *Session) setStatus(status string) {
	changed := s.st.Status != status
	if changed {
		defer s.statusEvent()
	}
	s.st.Status = status
	if changed {
		if err := s.save(); err != nil {
			s.deps.Log.Error("session: save snapshot", "session_id", s.st.ID, "err", err)
		}
	}
	s.publish()
}

func (s *Session) save() error {
	s.lastSaved = s.deps.Clock.Now()
	if err := s.deps.Store.PutSession(context.Background(), s.st); err != nil {
		return fmt.Errorf("%w: save session: %w", domain.ErrUnavailable, err)
	}
	return nil
}

// touch records activity at now (the clock read already); the snapshot is written at most
// every few seconds for it alone.
func (s *Session) touch(now time.Time) {
	now = now.UTC()
	if now.Sub(s.st.LastActivity) < time.Second {
		return // second precision is enough for lastActivity; spare the hot path a view copy
	}
	s.st.LastActivity = now
	if now.Sub(s.lastSaved) >= 5*time.Second {
		if err := s.save(); err != nil {
			s.deps.Log.Warn("session: save activity", "session_id", s.st.ID, "err", err)
		}
	}
	s.publish()
}

// publishQueue publishes the queue's depth and head as counters (Queue.Stats: status reads and
// metrics see them without a round trip, and without a copy of the view per entry).
func (s *Session) publishQueue() { s.sq.count() }

func (s *Session) publish() {
	s.st.Queue = s.q.stats()
	if s.deps.Publisher != nil {
		s.deps.Publisher.Publish(s.st)
	}
}

// logout unlinks the device on a worker goroutine (network I/O never runs in Receive).
func (s *Session) logout(c *actor.Context, m *Logout) {
	reply := m.Reply
	if s.client == nil {
		reply <- Reply{State: s.st, Err: fmt.Errorf("%w: network client", domain.ErrUnavailable)}
		return
	}
	if !s.st.Linked {
		reply <- Reply{State: s.st}
		return
	}
	// The network's LoggedOut may come before the call returns: the queue fails for this cause.
	s.unlinking = m.Cause
	client, hw, self, timeout := s.client, c.Engine(), c.PID(), s.deps.IOTimeout
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		hw.Send(self, logoutDone{err: client.Logout(ctx), reply: reply})
	}()
}

// loggedOut records the unlink: a device the network no longer knows is unlinked here too,
// whatever the call answered, once the network did not refuse it for a reason of its own.
func (s *Session) loggedOut(m logoutDone) {
	if m.err != nil && !errors.Is(m.err, domain.ErrNotConnected) {
		s.deps.Log.Warn("session logout failed", "session_id", s.st.ID, "err", m.err)
		if s.st.Linked {
			s.unlinking = nil
		}
		m.reply <- Reply{State: s.st, Err: fmt.Errorf("%w: logout: %w", domain.ErrUnavailable, m.err)}
		return
	}
	s.st.Linked, s.st.QR, s.st.Phone, s.st.Status = false, "", "", domain.StatusDisconnected
	if err := s.save(); err != nil {
		s.deps.Log.Error("session: save snapshot", "session_id", s.st.ID, "err", err)
	}
	s.sweep()
	s.publish()
	s.deps.Log.Info("session logged out", "session_id", s.st.ID)
	m.reply <- Reply{State: s.st}
}

// Inbound takes what people do on a session's number: the messages they write
// (network.Incoming), their reactions, edits, revokes and poll votes. It is called from the
// actor's goroutine and must not block. It calls an event's Done (network.DoneOf) once the
// event is recorded: an Incoming kept and what it answers recorded, a Reaction on its message.
type Inbound interface {
	Inbound(s domain.Session, ev network.Event)
}

// Events hears a session's status changes (session.status events) and its slow-downs
// (session.warning).
type Events interface {
	SessionChanged(s domain.Session)
	SessionWarning(s domain.Session, reason string, until time.Time)
}

// statusEvent reports the session's status as it stands, once it differs from the last one
// reported (status, reason or ban end).
func (s *Session) statusEvent() {
	if s.deps.Events == nil {
		return
	}
	key := s.st.ClientStatus() + "|" + s.st.StatusReason + "|" + s.st.Until.String()
	if s.st.Status == domain.StatusConnected {
		key = domain.StatusConnected
	}
	key += "|" + s.st.TimelockUntil.String()
	if key == s.lastEvent {
		return
	}
	s.lastEvent = key
	s.deps.Events.SessionChanged(s.st)
}
