package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/gateway/gateway/actors/session"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

const sessionActorKind = "session"

// Sessions is the session facet: creating, assigning, tuning and deleting sessions (admin), a
// user's own session (start, QR code, pair code, status, logout), and the session a send goes
// through. Each session is an actor (actors/session) owning its state machine, transport client
// and send queue; the facet's registry finds it by id and a user's sessions by owner.
type Sessions struct {
	e       *Engine
	idx     sessionIndex
	table   SessionStore
	records Protections
	inbound session.Inbound // takes what people do on the sessions' numbers (conversations.go)
	create  sync.Mutex      // serialises the creation of a user's own session
}

func newSessions(e *Engine) *Sessions {
	s := &Sessions{e: e, table: e.cfg.Records.Sessions, records: e.cfg.Records.Protections, inbound: inbound{e}}
	s.idx.init()
	return s
}

// sessionEntry is one session's actor and the last view it published (session.Publisher).
type sessionEntry struct {
	actorRef[domain.Session]
	// queue is the session's delivery queue: accepted messages are pushed into it (no actor
	// message), and its depth and oldest entry are read from it (the view's Queue is stale).
	queue *session.Queue
	// answer is the status route's answer rendered from a view (StatusAnswer).
	answer atomic.Pointer[statusAnswer]
}

// state is the session's view with its queue's counters laid over it.
func (ent *sessionEntry) state() domain.Session {
	st := *ent.view.Load()
	st.Queue = ent.queue.Stats()
	return st
}

// sessionIndex finds session actors by id (the registry) and a user's sessions (byUser,
// guarded by the registry's mu).
type sessionIndex struct {
	registry[string, *sessionEntry]
	assignMu sync.Mutex          // serialises assignments (read the owner, ask the actor, move the index)
	byUser   map[string][]string // user id → session ids, most recently assigned last
	userOf   map[string]string   // session id → the user whose byUser lists it
	// users: user id → []*sessionEntry, the entries of byUser's ids in its order (the one
	// assigned last, last), read without the lock by defaultOf and cloudOf (every send and
	// status read asks both; an RWMutex's reader count is one cache line every core writes).
	// Replaced whole, never changed in place, by whatever changes byUser or byID, under mu.
	users sync.Map
	// ver rises after every change of users (refresh): what was found in users holds while it
	// is unchanged (StatusRef).
	ver atomic.Uint64
}

func (x *sessionIndex) init() {
	x.registry.init()
	x.byUser = map[string][]string{}
	x.userOf = map[string]string{}
}

// refresh publishes uid's entries. Called with mu held.
func (x *sessionIndex) refresh(uid string) {
	ids := x.byUser[uid]
	ents := make([]*sessionEntry, 0, len(ids))
	for _, id := range ids {
		if e := x.byID[id]; e != nil {
			ents = append(ents, e)
		}
	}
	if len(ents) == 0 {
		x.users.Delete(uid)
	} else {
		x.users.Store(uid, ents)
	}
	x.ver.Add(1) // after the change: a reader that sees the new version finds the new entries
}

// put makes e id's entry.
func (x *sessionIndex) put(id string, e *sessionEntry) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.byID[id] = e
	if uid, ok := x.userOf[id]; ok {
		x.refresh(uid)
	}
}

// assign moves a session to a user (from whoever had it).
func (x *sessionIndex) assign(id, from, to string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if from != "" {
		x.byUser[from] = slices.DeleteFunc(x.byUser[from], func(s string) bool { return s == id })
		delete(x.userOf, id)
		x.refresh(from)
	}
	if to != "" {
		x.byUser[to] = append(slices.DeleteFunc(x.byUser[to], func(s string) bool { return s == id }), id)
		x.userOf[id] = to
		x.refresh(to)
	}
}

// defaultOf is the session a user's sends go through when none is named: the linked session
// assigned last (a cloud session is routed to: cloudOf, routing.go).
func (x *sessionIndex) defaultOf(uid string) *sessionEntry {
	linked, _ := x.kindsOf(uid)
	return linked
}

// cloudOf is the user's cloud session (the one assigned last), nil when none.
func (x *sessionIndex) cloudOf(uid string) *sessionEntry {
	_, cloud := x.kindsOf(uid)
	return cloud
}

// kindsOf is the user's linked and cloud sessions assigned last, from one read of the index
// (a sync.Map's: a send that names no session asks for both, route and forSend), read without
// a lock from the entries refresh published: a user without a session of one kind costs a look
// at each of their few views. The view is the truth about ownership (the index may lag a
// reassignment).
func (x *sessionIndex) kindsOf(uid string) (linked, cloud *sessionEntry) {
	v, ok := x.users.Load(uid)
	if !ok {
		return nil, nil
	}
	ents := v.([]*sessionEntry)
	for i := len(ents) - 1; i >= 0 && (linked == nil || cloud == nil); i-- {
		st := ents[i].view.Load()
		switch {
		case st.AssignedTo != uid:
		case st.IsCloud():
			if cloud == nil {
				cloud = ents[i]
			}
		case linked == nil:
			linked = ents[i]
		}
	}
	return linked, cloud
}

// is tells whether the session's published view has it assigned to uid, a cloud session or
// not: the view is the truth about ownership (the index may lag a reassignment).
func (ent *sessionEntry) is(uid string, cloud bool) bool {
	st := ent.view.Load()
	return st.AssignedTo == uid && st.IsCloud() == cloud
}

// remove drops a session from the index.
func (x *sessionIndex) remove(id, owner string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.byID, id)
	if owner != "" {
		x.byUser[owner] = slices.DeleteFunc(x.byUser[owner], func(s string) bool { return s == id })
		x.refresh(owner)
	}
	if uid, ok := x.userOf[id]; ok && uid != owner {
		x.refresh(uid)
	}
	delete(x.userOf, id)
}

func (s *Sessions) boot(states []domain.Session) int {
	// Oldest assignment first, so each user's default is the one assigned last.
	slices.SortFunc(states, func(a, b domain.Session) int { return a.AssignedAt.Compare(b.AssignedAt) })
	// Linked sessions reconnect spread over the boot window, in a shuffled order.
	linked := 0
	for _, st := range states {
		if st.Linked {
			linked++
		}
	}
	delays := network.Stagger(linked, s.e.cfg.BootWindow)
	rand.Shuffle(len(delays), func(i, j int) { delays[i], delays[j] = delays[j], delays[i] })
	var moving []domain.Session
	for _, st := range states {
		if st.Moving != "" {
			moving = append(moving, st) // a move cut short: finished below, never started here
			continue
		}
		var d time.Duration
		if st.Linked && len(delays) > 0 {
			d, delays = delays[0], delays[1:]
		}
		s.spawnDelayed(st, d)
	}
	s.resumeMoves(moving)
	return len(states) - len(moving)
}

func (s *Sessions) spawn(st domain.Session) *sessionEntry {
	return s.spawnDelayed(st, 0)
}

// spawnDelayed spawns a session actor whose first reconnect (a linked session) waits
// connectDelay.
func (s *Sessions) spawnDelayed(st domain.Session, connectDelay time.Duration) *sessionEntry {
	ent := &sessionEntry{queue: session.NewQueue()}
	view := st
	ent.view.Store(&view)
	deps := session.Deps{
		Store: s.table, Network: s.e.cfg.Network, Clock: sessionClock{s.e.cfg.Now, s.e.cfg.AfterFunc}, Log: s.e.log,
		Publisher:    ent,
		Deliveries:   s.e.Messages.msgs,
		Messages:     s.e.Messages.msgs,
		Inbound:      s.inbound,
		Events:       s.events(),
		ConnectDelay: connectDelay,
		Records:      s.records,
		Pacing:       s.pacingOf(st.AssignedTo),
		SendTimeout:  s.e.cfg.SendTimeout,
		Queue:        ent.queue,
	}
	if st.IsCloud() {
		s.e.Cloud.deps(st, &deps)
	}
	s.idx.put(st.ID, ent)
	if st.AssignedTo != "" {
		s.idx.assign(st.ID, "", st.AssignedTo)
	}
	ent.pid = s.e.spawn(session.New(st, deps), sessionActorKind, st.ID)
	return ent
}

// pacingOf is the pacing of a session owned by uid: the network's default with the owner's
// plan's over it (the session's own override is laid on by its actor).
func (s *Sessions) pacingOf(uid string) domain.Pacing {
	p := s.e.cfg.Pacing
	if uid != "" {
		p = p.Merge(s.e.Users.planOf(uid).Pacing)
	}
	return p
}

// forSend resolves the session a user's message goes through ("" = the user's default)
// and checks it is assigned to the user and linked. A linked session that is momentarily
// disconnected accepts: its queue waits for the link (DESIGN.md section 9).
func (s *Sessions) forSend(uid, sessionID string) (*sessionEntry, error) {
	var ent *sessionEntry
	if sessionID == "" {
		if ent = s.idx.defaultOf(uid); ent == nil {
			return nil, fmt.Errorf("%w: no session is assigned to this account; link one first", domain.ErrNotConnected)
		}
	} else if ent = s.idx.get(sessionID); ent == nil || ent.view.Load().AssignedTo != uid {
		return nil, fmt.Errorf("%w: session %s is not assigned to this account", domain.ErrForbidden, sessionID)
	}
	return sendable(ent)
}

// sendable is forSend's check of the session found: linked, or connected.
func sendable(ent *sessionEntry) (*sessionEntry, error) {
	if v := ent.view.Load(); v.Status != domain.StatusConnected && !v.Linked {
		return nil, fmt.Errorf("%w: link the session first", domain.ErrNotConnected)
	}
	return ent, nil
}

// SessionView is a session as the admin list shows it.
type SessionView struct {
	domain.Session
	ClientName string
}

func (s *Sessions) view(ent *sessionEntry) SessionView {
	st := ent.state()
	v := SessionView{Session: st}
	if st.AssignedTo != "" {
		v.ClientName = s.e.Users.clientName(st.AssignedTo)
	}
	return v
}

// List lists every session, oldest first.
func (s *Sessions) List() []SessionView {
	ents := s.idx.all()
	out := make([]SessionView, len(ents))
	for i, ent := range ents {
		out[i] = s.view(ent)
	}
	SortSessions(out)
	return out
}

// SortSessions puts sessions in the admin list's order: oldest first (then by id).
func SortSessions(ss []SessionView) {
	slices.SortFunc(ss, func(a, b SessionView) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// Create creates a session (status created), assigned to a user when assignTo is set.
func (s *Sessions) Create(ctx context.Context, name, assignTo string) (SessionView, error) {
	return s.CreateAs(ctx, uuid.NewString(), name, assignTo)
}

// CreateAs is Create with the session's id chosen by the caller (a cluster node picks it, to
// know the partition of a session with no user before creating it there).
func (s *Sessions) CreateAs(ctx context.Context, id, name, assignTo string) (SessionView, error) {
	if err := checkID("session id", id); err != nil {
		return SessionView{}, err
	}
	if strings.TrimSpace(name) == "" {
		return SessionView{}, fmt.Errorf("%w: sessionName is required", domain.ErrValidation)
	}
	if err := checkName("sessionName", name); err != nil {
		return SessionView{}, err
	}
	if assignTo != "" {
		if _, err := s.e.Users.Get(assignTo); err != nil {
			return SessionView{}, err
		}
	}
	now := s.e.now().UTC()
	st := domain.Session{
		ID: id, Name: strings.TrimSpace(name), Status: domain.StatusCreated,
		AssignedTo: assignTo, CreatedAt: now, LastActivity: now,
	}
	if assignTo != "" {
		st.AssignedAt = now
	}
	if err := s.table.PutSession(ctx, st); err != nil {
		return SessionView{}, fmt.Errorf("%w: save session: %w", domain.ErrUnavailable, err)
	}
	ent := s.spawn(st)
	s.e.log.Info("session created", "session_id", st.ID, "assigned_to", assignTo)
	return s.view(ent), nil
}

// Assign assigns a session to a user.
func (s *Sessions) Assign(ctx context.Context, sessionID, userID string) error {
	ent, err := s.entry(sessionID)
	if err != nil {
		return err
	}
	if m := s.e.cfg.Mover; m != nil && !m.Local(userID) {
		return s.moveOut(ctx, m, ent, userID)
	}
	if _, err := s.e.Users.Get(userID); err != nil {
		return err
	}
	s.idx.assignMu.Lock()
	defer s.idx.assignMu.Unlock()
	from := ent.view.Load().AssignedTo
	if from != "" && from != userID && ent.view.Load().Linked {
		// The device is the previous owner's account: unlink it before anyone else can send
		// through it. Their queued messages fail (session_reassigned).
		if err := s.unlink(ctx, ent, domain.ErrSessionReassigned); err != nil {
			return err
		}
	}
	msg := &session.Assign{UserID: userID, Reply: make(chan session.Reply, 1)}
	if _, err := s.ask(ctx, ent, msg, msg.Reply); err != nil {
		return err
	}
	s.idx.assign(sessionID, from, userID)
	// The new owner's plan may pace differently (a cloud number goes at Meta's pace).
	if v := ent.view.Load(); !v.IsCloud() {
		s.e.hw.Send(ent.pid, session.SetPacing{Pacing: s.pacingOf(userID)})
	}
	return nil
}

// SessionUpdate is an admin's change to a session: its pacing override (when SetPacing; nil
// removes it) and its proxy (when Proxy is set; "" = direct).
type SessionUpdate struct {
	SetPacing bool
	Pacing    *domain.Pacing
	Proxy     *string
}

// Update applies an admin's change to a session.
func (s *Sessions) Update(ctx context.Context, sessionID string, u SessionUpdate) (SessionView, error) {
	p := u.Pacing
	ent, err := s.entry(sessionID)
	if err != nil {
		return SessionView{}, err
	}
	if p != nil && (p.MinGapMs < 0 || p.JitterMs < 0 || p.PerMinute < 0 || p.NewContactsPerDay < 0 || p.RampDays < 0 || p.PerDay < 0) {
		return SessionView{}, fmt.Errorf("%w: pacing values must be 0 or more", domain.ErrValidation)
	}
	if u.Proxy != nil && *u.Proxy != "" {
		pu, err := url.Parse(*u.Proxy)
		if err != nil || pu.Host == "" || (pu.Scheme != "socks5" && pu.Scheme != "http" && pu.Scheme != "https") {
			return SessionView{}, fmt.Errorf("%w: proxy must be socks5://host:port or http(s)://host:port", domain.ErrValidation)
		}
	}
	msg := &session.Update{SetPacing: u.SetPacing, Pacing: p, Proxy: u.Proxy, Reply: make(chan session.Reply, 1)}
	if _, err := s.ask(ctx, ent, msg, msg.Reply); err != nil {
		return SessionView{}, err
	}
	return s.view(ent), nil
}

// Pacing is the pacing in force for a session: the network's, its owner's plan's, its own.
func (s *Sessions) Pacing(sessionID string) (domain.Pacing, error) {
	ent, err := s.entry(sessionID)
	if err != nil {
		return domain.Pacing{}, err
	}
	v := ent.view.Load()
	if v.IsCloud() {
		return cloudPacing(v).Merge(v.Pacing), nil
	}
	return s.pacingOf(v.AssignedTo).Merge(v.Pacing), nil
}

// ask sends msg to the session's actor and waits for its reply (SessionTimeout: some answers
// involve the network).
func (s *Sessions) ask(ctx context.Context, ent *sessionEntry, msg any, reply chan session.Reply) (session.Reply, error) {
	return ask(ctx, s.e, ent.pid, msg, reply, s.e.cfg.SessionTimeout, "session")
}

// unlink unlinks a session's device from its phone; its queued messages fail with cause (nil:
// session_logged_out).
func (s *Sessions) unlink(ctx context.Context, ent *sessionEntry, cause error) error {
	msg := &session.Logout{Cause: cause, Reply: make(chan session.Reply, 1)}
	_, err := s.ask(ctx, ent, msg, msg.Reply)
	return err
}

// close unlinks a session's device (when linked) and fails its queue with cause, before its
// actor stops (Delete, moveOut).
func (s *Sessions) close(ctx context.Context, ent *sessionEntry, cause error) error {
	if ent.view.Load().Linked {
		if err := s.unlink(ctx, ent, cause); err != nil {
			return err
		}
	}
	closing := &session.Close{Cause: cause, Reply: make(chan session.Reply, 1)}
	_, err := s.ask(ctx, ent, closing, closing.Reply)
	return err
}

// Delete unlinks a session's device, stops its actor and deletes it with its protection
// records (DELETE /api/admin/sessions?id=). Messages still in its queue fail with
// session_deleted: nothing can send them any more.
func (s *Sessions) Delete(ctx context.Context, id string) error {
	ent, err := s.entry(id)
	if err != nil {
		return err
	}
	s.idx.assignMu.Lock()
	defer s.idx.assignMu.Unlock()
	if err := s.close(ctx, ent, domain.ErrSessionDeleted); err != nil {
		return err
	}
	depth := ent.queue.Stats().Depth
	<-s.e.hw.Poison(ent.pid).Done()
	if err := s.table.DeleteSession(ctx, id); err != nil {
		return fmt.Errorf("%w: delete session: %w", domain.ErrUnavailable, err)
	}
	if err := s.records.DeleteSession(ctx, id); err != nil {
		s.e.log.Warn("session deleted; its protection records were not", "session_id", id, "err", err)
	}
	s.idx.remove(id, ent.view.Load().AssignedTo)
	s.e.log.Info("session deleted", "session_id", id, "queued_left", depth)
	return nil
}

// events is the session actors' status listener (nil when events are off).
func (s *Sessions) events() session.Events {
	if s.e.pub == nil {
		return nil
	}
	return sessionEvents{s.e.pub}
}
