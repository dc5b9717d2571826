package actors

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/network"
)

// Session statuses. SPEC.md section 3.2: an admin-created session reports "created" until it is
// started; the client view shows CONNECTED, SCAN_QR or DISCONNECTED (NOT_CREATED is the
// absence of a session, decided by the engine).
const (
	StatusCreated      = "created"
	StatusScanQR       = "SCAN_QR"
	StatusConnected    = "CONNECTED"
	StatusDisconnected = "DISCONNECTED"
	StatusNotCreated   = "NOT_CREATED"
)

// Session errors.
var (
	// ErrAlreadyConnected: a QR or pair code was asked for a linked session.
	ErrAlreadyConnected = errors.New("session is already connected")
	// ErrNotConnected: the session is not linked and connected, so it cannot send.
	ErrNotConnected = errors.New("session is not connected")
)

// SessionState is a session's persisted snapshot (and the view the actor publishes).
type SessionState struct {
	ID           string    `json:"id"`
	Name         string    `json:"name"`
	Status       string    `json:"status"`
	Phone        string    `json:"phone"`
	AssignedTo   string    `json:"assignedTo"`
	AssignedAt   time.Time `json:"assignedAt"`
	CreatedAt    time.Time `json:"createdAt"`
	LastActivity time.Time `json:"lastActivity"`
	// Linked: the device is paired to a phone (it reconnects at boot without a scan).
	Linked bool `json:"linked"`
	// QR is the latest QR code text while Status is SCAN_QR (not persisted).
	QR string `json:"-"`
}

// ClientStatus is the status as the dashboard sees it.
func (s SessionState) ClientStatus() string {
	if s.Status == StatusCreated {
		return StatusDisconnected
	}
	return s.Status
}

// SessionStore persists session snapshots.
type SessionStore interface {
	PutSession(ctx context.Context, s SessionState) error
}

// SessionDeps are a session actor's collaborators.
type SessionDeps struct {
	Store   SessionStore
	Network network.Network
	Now     func() time.Time
	Log     *slog.Logger
	// Publish receives every new view of the session (status reads cost no round trip).
	Publish func(SessionState)
	// IOTimeout bounds one network call (connect, pair code, logout).
	IOTimeout time.Duration
	// Outbox keeps every accepted message until its outcome is recorded.
	Outbox Outbox
	// SendTimeout bounds one send on the network.
	SendTimeout time.Duration
	// OnRecovered is told the outcome of a message re-sent after a crash (no caller waits for it).
	OnRecovered func(e OutboxEntry, err error)
	// Load reads the persisted snapshot: a restart after a panic resumes from it, not from the
	// state the actor was spawned with.
	Load func(id string) (SessionState, error)
}

// Session-actor messages.
type (
	// StartSession starts linking (QR) or reconnects a linked device.
	StartSession struct{ Reply chan SessionReply }
	// GetQR answers the current QR code, waiting for the first one to be shown.
	GetQR struct{ Reply chan SessionReply }
	// GetPairCode starts linking by phone number and answers the code to type on the phone.
	GetPairCode struct {
		Phone string
		Reply chan SessionReply
	}
	// ResendEntry re-sends an outbox entry that had no outcome at boot, once connected.
	ResendEntry struct{ Entry OutboxEntry }
	// AssignSession records the user the session belongs to.
	AssignSession struct {
		UserID string
		Reply  chan SessionReply
	}

	netEvent    struct{ ev network.Event }
	connectDone struct{ err error }
	sendDone    struct{}
	pairDone    struct {
		code  string
		err   error
		reply chan SessionReply
	}
)

// SessionReply is a session's view after a message, or why the message failed.
type SessionReply struct {
	State SessionState
	Code  string // pair code
	Err   error
}

// Session is the actor of one messaging session: its state machine, latest QR and network
// client. Network I/O runs on worker goroutines whose outcomes come back as messages, so status
// and QR queries are answered at once while a call is in flight.
type Session struct {
	deps   SessionDeps
	st     SessionState
	client network.Client
	// qrWaiters wait for the first QR code after a start.
	qrWaiters []chan SessionReply
	lastSaved time.Time
	// recovering are outbox entries to re-send once the session is connected.
	recovering []OutboxEntry
	// inflight counts send workers still running: a stop waits for them before it disconnects,
	// so a graceful shutdown never turns an accepted message into a failure.
	inflight sync.WaitGroup
}

// NewSession returns the producer of a session actor starting from its snapshot.
func NewSession(st SessionState, deps SessionDeps) actor.Producer {
	if deps.IOTimeout <= 0 {
		deps.IOTimeout = 30 * time.Second
	}
	if deps.SendTimeout <= 0 {
		deps.SendTimeout = 60 * time.Second
	}
	return func() actor.Receiver { return &Session{deps: deps, st: st} }
}

// Receive implements actor.Receiver.
func (s *Session) Receive(c *actor.Context) {
	switch m := c.Message().(type) {
	case actor.Started:
		s.started(c)
	case *StartSession:
		s.start(c)
		m.Reply <- SessionReply{State: s.st}
	case *GetQR:
		s.getQR(c, m)
	case *GetPairCode:
		s.pairCode(c, m)
	case *AssignSession:
		s.st.AssignedTo, s.st.AssignedAt = m.UserID, s.deps.Now().UTC()
		err := s.save()
		s.publish()
		m.Reply <- SessionReply{State: s.st, Err: err}
	case *SendMessage:
		if s.st.Status != StatusConnected || s.client == nil {
			m.Reply <- SendResult{Entry: m.Entry, Err: ErrNotConnected}
			return
		}
		s.send(c, m.Entry, true, m.Reply)
	case ResendEntry:
		if s.st.Status == StatusConnected && s.client != nil {
			s.send(c, m.Entry, false, nil)
		} else {
			s.recovering = append(s.recovering, m.Entry)
		}
	case sendDone:
		s.touch()
	case netEvent:
		s.onNetEvent(m.ev)
		if s.st.Status == StatusConnected && len(s.recovering) > 0 {
			for _, e := range s.recovering {
				s.send(c, e, false, nil)
			}
			s.recovering = nil
		}
	case connectDone:
		if m.err != nil {
			s.deps.Log.Warn("session connect failed", "session_id", s.st.ID, "err", m.err)
			if s.st.Status == StatusScanQR && s.st.QR == "" {
				s.setStatus(StatusDisconnected)
				s.failQRWaiters(fmt.Errorf("%w: connect: %v", ErrUnavailable, m.err))
			}
		}
	case pairDone:
		if m.err != nil {
			m.reply <- SessionReply{State: s.st, Err: fmt.Errorf("%w: pair code: %v", ErrUnavailable, m.err)}
			return
		}
		m.reply <- SessionReply{State: s.st, Code: m.code}
	case actor.Stopped:
		s.drain()
		if s.client != nil {
			s.client.Disconnect()
		}
	}
}

// started rebuilds from the snapshot (the actor was just spawned or restarted after a panic):
// the network client is reopened and a linked device reconnects without a new scan.
func (s *Session) started(c *actor.Context) {
	if s.deps.Load != nil {
		if st, err := s.deps.Load(s.st.ID); err == nil {
			s.st = st
		}
	}
	engine, self := c.Engine(), c.PID()
	client, err := s.deps.Network.Open(s.st.ID, func(ev network.Event) { engine.Send(self, netEvent{ev}) })
	if err != nil {
		s.deps.Log.Error("session: open network client", "session_id", s.st.ID, "err", err)
		return
	}
	s.client = client
	phone, linked := client.Paired()
	s.st.Linked = linked
	if linked {
		s.st.Phone = phone
	}
	switch {
	case linked:
		s.setStatus(StatusDisconnected)
		s.connect(c)
	case s.st.Status == StatusCreated:
		s.publish()
	default:
		// An unlinked session waits for the user to start it again (a QR is shown on demand).
		s.st.QR = ""
		s.setStatus(StatusDisconnected)
	}
}

func (s *Session) start(c *actor.Context) {
	if s.client == nil {
		return
	}
	switch s.st.Status {
	case StatusConnected:
		return
	case StatusScanQR:
		if s.st.QR != "" {
			return
		}
	}
	if !s.st.Linked {
		s.setStatus(StatusScanQR)
	}
	s.connect(c)
}

func (s *Session) connect(c *actor.Context) {
	client, engine, self, timeout := s.client, c.Engine(), c.PID(), s.deps.IOTimeout
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		engine.Send(self, connectDone{err: client.Connect(ctx)})
	}()
}

// send runs one message through the outbox and the network on a worker goroutine: append
// (durable) → send → record the outcome → answer. Fresh entries are appended first; recovered
// ones are in the outbox already.
func (s *Session) send(c *actor.Context, e OutboxEntry, fresh bool, reply chan SendResult) {
	e.SessionID = s.st.ID
	client, deps, engine, self := s.client, s.deps, c.Engine(), c.PID()
	s.inflight.Add(1)
	go func() {
		defer s.inflight.Done()
		r := runSend(client, deps, e, fresh)
		if reply != nil {
			reply <- r
		} else if deps.OnRecovered != nil {
			deps.OnRecovered(r.Entry, r.Err)
		}
		engine.Send(self, sendDone{})
	}()
}

// drain waits for the send workers still running, at most one send timeout.
func (s *Session) drain() {
	done := make(chan struct{})
	go func() { s.inflight.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(s.deps.SendTimeout):
		s.deps.Log.Warn("session stopped with sends in flight", "session_id", s.st.ID)
	}
}

func runSend(client network.Client, deps SessionDeps, e OutboxEntry, fresh bool) SendResult {
	if fresh {
		if err := deps.Outbox.Append(context.Background(), e); err != nil {
			return SendResult{Entry: e, Err: fmt.Errorf("%w: outbox: %w", ErrUnavailable, err)}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), deps.SendTimeout)
	rc, err := client.Send(ctx, e.Message)
	cancel()
	now := deps.Now().UTC()
	e.UpdatedAt = MillisOf(now)
	e.Message.Data = nil // the outcome is kept; the media bytes need not be
	err = classify(err)
	if err != nil {
		e.Status, e.Error = MsgFailed, err.Error()
	} else {
		e.Status, e.NetworkID, e.SentAt = MsgSent, rc.ID, MillisOf(now)
	}
	deps.Outbox.Settle(e)
	return SendResult{Entry: e, Err: err}
}

func (s *Session) getQR(c *actor.Context, m *GetQR) {
	if s.st.Status == StatusConnected {
		m.Reply <- SessionReply{State: s.st, Err: ErrAlreadyConnected}
		return
	}
	if s.st.Status == StatusScanQR && s.st.QR != "" {
		m.Reply <- SessionReply{State: s.st}
		return
	}
	s.qrWaiters = append(s.qrWaiters, m.Reply)
	s.start(c)
}

func (s *Session) pairCode(c *actor.Context, m *GetPairCode) {
	if s.st.Status == StatusConnected {
		m.Reply <- SessionReply{State: s.st, Err: ErrAlreadyConnected}
		return
	}
	if s.client == nil {
		m.Reply <- SessionReply{State: s.st, Err: fmt.Errorf("%w: network client", ErrUnavailable)}
		return
	}
	s.setStatus(StatusScanQR)
	client, engine, self, timeout, phone := s.client, c.Engine(), c.PID(), s.deps.IOTimeout, m.Phone
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		code, err := client.PairPhone(ctx, phone)
		engine.Send(self, pairDone{code: code, err: err, reply: m.Reply})
	}()
}

func (s *Session) onNetEvent(ev network.Event) {
	switch e := ev.(type) {
	case network.QRCode:
		s.st.QR = e.Code
		if !s.st.Linked {
			s.setStatus(StatusScanQR)
		}
		for _, w := range s.qrWaiters {
			w <- SessionReply{State: s.st}
		}
		s.qrWaiters = nil
	case network.QRTimeout:
		s.st.QR = ""
		s.setStatus(StatusDisconnected)
		s.failQRWaiters(fmt.Errorf("%w: the QR codes expired; start again", ErrUnavailable))
	case network.Paired:
		s.st.Linked, s.st.Phone, s.st.QR = true, e.Phone, ""
		s.save()
		s.publish()
	case network.Connected:
		s.st.Linked, s.st.QR = true, ""
		if e.Phone != "" {
			s.st.Phone = e.Phone
		}
		s.st.LastActivity = s.deps.Now().UTC()
		s.setStatus(StatusConnected)
		s.failQRWaiters(ErrAlreadyConnected)
	case network.Disconnected:
		s.setStatus(StatusDisconnected)
	case network.LoggedOut:
		s.st.Linked, s.st.QR = false, ""
		s.setStatus(StatusDisconnected)
	}
}

func (s *Session) failQRWaiters(err error) {
	for _, w := range s.qrWaiters {
		w <- SessionReply{State: s.st, Err: err}
	}
	s.qrWaiters = nil
}

// setStatus changes the status, persists the snapshot and publishes the view.
func (s *Session) setStatus(status string) {
	changed := s.st.Status != status
	s.st.Status = status
	if changed {
		if err := s.save(); err != nil {
			s.deps.Log.Error("session: save snapshot", "session_id", s.st.ID, "err", err)
		}
	}
	s.publish()
}

func (s *Session) save() error {
	s.lastSaved = s.deps.Now()
	return s.deps.Store.PutSession(context.Background(), s.st)
}

// touch records activity; the snapshot is written at most every few seconds for it alone.
func (s *Session) touch() {
	now := s.deps.Now().UTC()
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

func (s *Session) publish() {
	if s.deps.Publish != nil {
		s.deps.Publish(s.st)
	}
}
