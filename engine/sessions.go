package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/gateway/gateway/actors/session"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/persist"
)

// Session errors, re-exported.
var (
	ErrAlreadyConnected = domain.ErrAlreadyConnected
	ErrNotConnected     = domain.ErrNotConnected
)

const sessionActorKind = "session"

// sessionEntry is one session's actor and the last view it published (session.Publisher).
type sessionEntry struct {
	actorRef[domain.Session]
}

// sessionIndex finds session actors by id (the registry) and a user's sessions (byUser,
// guarded by the registry's mu).
type sessionIndex struct {
	registry[string, *sessionEntry]
	assignMu sync.Mutex          // serialises assignments (read the owner, ask the actor, move the index)
	byUser   map[string][]string // user id → session ids, most recently assigned last
}

func (x *sessionIndex) init() {
	x.registry.init()
	x.byUser = map[string][]string{}
}

// assign moves a session to a user (from whoever had it).
func (x *sessionIndex) assign(id, from, to string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if from != "" {
		x.byUser[from] = slices.DeleteFunc(x.byUser[from], func(s string) bool { return s == id })
	}
	if to != "" {
		x.byUser[to] = append(slices.DeleteFunc(x.byUser[to], func(s string) bool { return s == id }), id)
	}
}

// defaultOf is the session a user's sends go through when none is named: the one assigned last.
func (x *sessionIndex) defaultOf(uid string) *sessionEntry {
	x.mu.RLock()
	defer x.mu.RUnlock()
	ids := x.byUser[uid]
	for i := len(ids) - 1; i >= 0; i-- {
		// The published view is the truth about ownership: the index may lag a reassignment.
		if e := x.byID[ids[i]]; e != nil && e.view.Load().AssignedTo == uid {
			return e
		}
	}
	return nil
}

// remove drops a session from the index.
func (x *sessionIndex) remove(id, owner string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.byID, id)
	if owner != "" {
		x.byUser[owner] = slices.DeleteFunc(x.byUser[owner], func(s string) bool { return s == id })
	}
}

func (e *Engine) bootSessions() (int, error) {
	states, err := e.sessionTable.ListSessions()
	if err != nil {
		return 0, fmt.Errorf("engine: load sessions: %w", err)
	}
	// Oldest assignment first, so each user's default is the one assigned last.
	slices.SortFunc(states, func(a, b domain.Session) int { return a.AssignedAt.Compare(b.AssignedAt) })
	// Linked sessions reconnect spread over the boot window, in a shuffled order.
	linked := 0
	for _, st := range states {
		if st.Linked {
			linked++
		}
	}
	delays := network.Stagger(linked, e.cfg.BootWindow)
	rand.Shuffle(len(delays), func(i, j int) { delays[i], delays[j] = delays[j], delays[i] })
	for _, st := range states {
		var d time.Duration
		if st.Linked && len(delays) > 0 {
			d, delays = delays[0], delays[1:]
		}
		e.spawnSessionDelayed(st, d)
	}
	return len(states), nil
}

func (e *Engine) spawnSession(st domain.Session) *sessionEntry {
	return e.spawnSessionDelayed(st, 0)
}

// spawnSessionDelayed spawns a session actor whose first reconnect (a linked session) waits
// connectDelay.
func (e *Engine) spawnSessionDelayed(st domain.Session, connectDelay time.Duration) *sessionEntry {
	ent := &sessionEntry{}
	view := st
	ent.view.Store(&view)
	deps := session.Deps{
		Store: e.sessionTable, Network: e.cfg.Network, Clock: clockFunc(e.cfg.Now), Log: e.log,
		Publisher:    ent,
		Deliveries:   e.msgs,
		Messages:     e.msgs,
		Inbound:      e.inbound,
		Events:       e.sessionEvents(),
		ConnectDelay: connectDelay,
		Contacts:     e.contacts,
		Pacing:       e.pacingOf(st.AssignedTo),
		SendTimeout:  e.cfg.SendTimeout,
	}
	e.sessions.put(st.ID, ent)
	if st.AssignedTo != "" {
		e.sessions.assign(st.ID, "", st.AssignedTo)
	}
	ent.pid = e.spawn(session.New(st, deps), sessionActorKind, st.ID)
	return ent
}

// SessionState is a session's snapshot (domain.Session); SessionView embeds it under this name.
type SessionState = domain.Session

// SessionView is a session as the admin list shows it.
type SessionView struct {
	SessionState
	ClientName string
}

func (e *Engine) sessionView(ent *sessionEntry) SessionView {
	st := *ent.view.Load()
	v := SessionView{SessionState: st}
	if st.AssignedTo != "" {
		v.ClientName = e.Users.clientName(st.AssignedTo)
	}
	return v
}

// Sessions lists every session, oldest first.
func (e *Engine) Sessions() []SessionView {
	ents := e.sessions.all()
	out := make([]SessionView, len(ents))
	for i, ent := range ents {
		out[i] = e.sessionView(ent)
	}
	slices.SortFunc(out, func(a, b SessionView) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out
}

// CreateSession creates a session (status created), assigned to a user when assignTo is set.
func (e *Engine) CreateSession(ctx context.Context, name, assignTo string) (SessionView, error) {
	if strings.TrimSpace(name) == "" {
		return SessionView{}, fmt.Errorf("%w: sessionName is required", ErrValidation)
	}
	if err := checkName("sessionName", name); err != nil {
		return SessionView{}, err
	}
	if assignTo != "" {
		if _, err := e.Users.Get(assignTo); err != nil {
			return SessionView{}, err
		}
	}
	now := e.Now().UTC()
	st := domain.Session{
		ID: uuid.NewString(), Name: strings.TrimSpace(name), Status: domain.StatusCreated,
		AssignedTo: assignTo, CreatedAt: now, LastActivity: now,
	}
	if assignTo != "" {
		st.AssignedAt = now
	}
	if err := e.sessionTable.PutSession(ctx, st); err != nil {
		return SessionView{}, fmt.Errorf("%w: save session: %v", ErrUnavailable, err)
	}
	ent := e.spawnSession(st)
	e.log.Info("session created", "session_id", st.ID, "assigned_to", assignTo)
	return e.sessionView(ent), nil
}

// AssignSession assigns a session to a user.
func (e *Engine) AssignSession(ctx context.Context, sessionID, userID string) error {
	ent := e.sessions.get(sessionID)
	if ent == nil {
		return fmt.Errorf("%w: %s", ErrSessionNotFound, sessionID)
	}
	if _, err := e.Users.Get(userID); err != nil {
		return err
	}
	e.sessions.assignMu.Lock()
	defer e.sessions.assignMu.Unlock()
	from := ent.view.Load().AssignedTo
	if from != "" && from != userID && ent.view.Load().Linked {
		// The device is the previous owner's account: unlink it before anyone else can send
		// through it.
		if err := e.logout(ctx, ent); err != nil {
			return err
		}
	}
	msg := &session.Assign{UserID: userID, Reply: make(chan session.Reply, 1)}
	e.hw.Send(ent.pid, msg)
	r, err := e.waitSession(ctx, msg.Reply)
	if err != nil {
		return err
	}
	if r.Err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, r.Err)
	}
	e.sessions.assign(sessionID, from, userID)
	// The new owner's plan may pace differently.
	e.hw.Send(ent.pid, session.SetPacing{Pacing: e.pacingOf(userID)})
	return nil
}

// SessionUpdate is an admin's change to a session: its pacing override (when SetPacing; nil
// removes it) and its proxy (when Proxy is set; "" = direct).
type SessionUpdate struct {
	SetPacing bool
	Pacing    *domain.Pacing
	Proxy     *string
}

// UpdateSession applies an admin's change to a session.
func (e *Engine) UpdateSession(ctx context.Context, sessionID string, u SessionUpdate) (SessionView, error) {
	p := u.Pacing
	ent := e.sessions.get(sessionID)
	if ent == nil {
		return SessionView{}, fmt.Errorf("%w: %s", ErrSessionNotFound, sessionID)
	}
	if p != nil && (p.MinGapMs < 0 || p.JitterMs < 0 || p.PerMinute < 0 || p.NewContactsPerDay < 0 || p.RampDays < 0) {
		return SessionView{}, fmt.Errorf("%w: pacing values must be 0 or more", ErrValidation)
	}
	if u.Proxy != nil && *u.Proxy != "" {
		pu, err := url.Parse(*u.Proxy)
		if err != nil || pu.Host == "" || (pu.Scheme != "socks5" && pu.Scheme != "http" && pu.Scheme != "https") {
			return SessionView{}, fmt.Errorf("%w: proxy must be socks5://host:port or http(s)://host:port", ErrValidation)
		}
	}
	msg := &session.Update{SetPacing: u.SetPacing, Pacing: p, Proxy: u.Proxy, Reply: make(chan session.Reply, 1)}
	e.hw.Send(ent.pid, msg)
	r, err := e.waitSession(ctx, msg.Reply)
	if err == nil && r.Err != nil {
		err = fmt.Errorf("%w: %v", ErrUnavailable, r.Err)
	}
	if err != nil {
		return SessionView{}, err
	}
	return e.sessionView(ent), nil
}

// Pacing is the pacing in force for a session: the network's, its owner's plan's, its own.
func (e *Engine) Pacing(sessionID string) (domain.Pacing, error) {
	ent := e.sessions.get(sessionID)
	if ent == nil {
		return domain.Pacing{}, fmt.Errorf("%w: %s", ErrSessionNotFound, sessionID)
	}
	v := ent.view.Load()
	return e.pacingOf(v.AssignedTo).Merge(v.Pacing), nil
}

// SessionStatus is a user's session as the dashboard sees it; NOT_CREATED when there is none.
func (e *Engine) SessionStatus(uid string) domain.Session {
	ent := e.sessions.defaultOf(uid)
	if ent == nil {
		return domain.Session{Status: domain.StatusNotCreated}
	}
	st := *ent.view.Load()
	st.Status = st.ClientStatus()
	return st
}

// ownSession returns the user's session, creating one (assigned to them) when they have none.
func (e *Engine) ownSession(ctx context.Context, u persist.User) (*sessionEntry, error) {
	if ent := e.sessions.defaultOf(u.ID); ent != nil {
		return ent, nil
	}
	e.sessionCreate.Lock()
	defer e.sessionCreate.Unlock()
	if ent := e.sessions.defaultOf(u.ID); ent != nil {
		return ent, nil
	}
	name := u.Name
	if name == "" {
		name = u.ID
	}
	v, err := e.CreateSession(ctx, name+" session", u.ID)
	if err != nil {
		return nil, err
	}
	return e.sessions.get(v.ID), nil
}

// StartSession starts the user's session (creating it first if they have none): linking by QR
// for an unlinked device, a reconnect for a linked one.
func (e *Engine) StartSession(ctx context.Context, u persist.User) (domain.Session, error) {
	ent, err := e.ownSession(ctx, u)
	if err != nil {
		return domain.Session{}, err
	}
	msg := &session.Start{Reply: make(chan session.Reply, 1)}
	e.hw.Send(ent.pid, msg)
	r, err := e.waitSession(ctx, msg.Reply)
	if err != nil {
		return domain.Session{}, err
	}
	return r.State, r.Err
}

// SessionQR returns the QR code text to show for the user's session, creating and starting the
// session when needed; ErrAlreadyConnected when it is linked and connected.
func (e *Engine) SessionQR(ctx context.Context, u persist.User) (domain.Session, error) {
	ent, err := e.ownSession(ctx, u)
	if err != nil {
		return domain.Session{}, err
	}
	msg := &session.GetQR{Reply: make(chan session.Reply, 1)}
	e.hw.Send(ent.pid, msg)
	r, err := e.waitSession(ctx, msg.Reply)
	if err != nil {
		return domain.Session{}, err
	}
	return r.State, r.Err
}

// SessionPairCode starts linking the user's session by phone number and returns the code.
func (e *Engine) SessionPairCode(ctx context.Context, u persist.User, phone string) (domain.Session, string, error) {
	ent, err := e.ownSession(ctx, u)
	if err != nil {
		return domain.Session{}, "", err
	}
	msg := &session.GetPairCode{Phone: phone, Reply: make(chan session.Reply, 1)}
	e.hw.Send(ent.pid, msg)
	r, err := e.waitSession(ctx, msg.Reply)
	if err != nil {
		return domain.Session{}, "", err
	}
	return r.State, r.Code, r.Err
}

func (e *Engine) waitSession(ctx context.Context, reply chan session.Reply) (session.Reply, error) {
	return waitReply(ctx, reply, e.cfg.SessionTimeout, "session")
}

// logout unlinks a session's device from its phone.
func (e *Engine) logout(ctx context.Context, ent *sessionEntry) error {
	msg := &session.Logout{Reply: make(chan session.Reply, 1)}
	e.hw.Send(ent.pid, msg)
	r, err := e.waitSession(ctx, msg.Reply)
	if err == nil {
		err = r.Err
	}
	return err
}

// LogoutSession unlinks the user's session from their phone (POST /api/client/logout); a new
// QR scan links it again.
func (e *Engine) LogoutSession(ctx context.Context, uid string) error {
	ent := e.sessions.defaultOf(uid)
	if ent == nil {
		return fmt.Errorf("%w: this account has no session", ErrSessionNotFound)
	}
	return e.logout(ctx, ent)
}

// DeleteSession unlinks a session's device, stops its actor and deletes it (DELETE
// /api/admin/sessions?id=). Messages still in its queue fail with session_not_found: nothing
// can send them any more.
func (e *Engine) DeleteSession(ctx context.Context, id string) error {
	ent := e.sessions.get(id)
	if ent == nil {
		return fmt.Errorf("%w: %s", ErrSessionNotFound, id)
	}
	e.sessions.assignMu.Lock()
	defer e.sessions.assignMu.Unlock()
	if ent.view.Load().Linked {
		if err := e.logout(ctx, ent); err != nil {
			return err
		}
	}
	take := &session.TakeQueue{Reply: make(chan []domain.OutboxEntry, 1)}
	e.hw.Send(ent.pid, take)
	queued, err := waitReply(ctx, take.Reply, e.cfg.AskTimeout, "session")
	if err != nil {
		return err
	}
	<-e.hw.Poison(ent.pid).Done()
	if err := e.sessionTable.DeleteSession(ctx, id); err != nil {
		return fmt.Errorf("%w: delete session: %v", ErrUnavailable, err)
	}
	e.sessions.remove(id, ent.view.Load().AssignedTo)
	now := e.Now().UTC()
	for _, q := range queued {
		gone := fmt.Errorf("%w: the session was deleted", ErrSessionNotFound)
		q.Code, q.Error = domain.CodeOf(gone), gone.Error()
		q.SetStatus(domain.MsgFailed, now)
		e.msgs.Outcome(q, gone)
	}
	e.log.Info("session deleted", "session_id", id, "queued_failed", len(queued))
	return nil
}

// sessionEvents is the session actors' status listener (nil when events are off).
func (e *Engine) sessionEvents() session.Events {
	if e.pub == nil {
		return nil
	}
	return sessionEvents{e.pub}
}
