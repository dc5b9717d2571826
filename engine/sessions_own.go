package engine

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/gateway/gateway/actors/session"
	"github.com/gateway/gateway/domain"
)

// A user's own session, as the dashboard and the client API see it: created on first use
// (one per user), started (QR code or pair code), its status, and unlinked on logout.

// Status is a user's session as the dashboard sees it; NOT_CREATED when there is none.
func (s *Sessions) Status(uid string) domain.Session {
	ent := s.idx.defaultOf(uid)
	if ent == nil {
		return domain.Session{Status: domain.StatusNotCreated}
	}
	st := ent.state()
	st.Status = st.ClientStatus()
	return st
}

// StatusAnswer is Status for the route that answers it: render writes the answer's parts that
// follow from the session's view (everything but the queue's counters) and returns where the
// counters go. The rendering is kept with the session and given again while its published view
// is the one it was rendered from (a view is replaced, never changed, on every change of the
// session); the counters are read on every call. ok is false when the user has no session (the
// answer is then Status's NOT_CREATED). The caller must not modify the answer.
func (s *Sessions) StatusAnswer(uid string, render func(dst []byte, st *domain.Session) ([]byte, int)) (answer []byte, split int, q domain.QueueStats, ok bool) {
	return s.statusAnswer(s.idx.defaultOf(uid), render)
}

// StatusRef is where a user's session was found, kept by a caller that asks for the same
// user's status again and again (the server keeps one with a signed-in caller's profile):
// StatusAnswerAt uses it while the session index is at the version it was found at. Its zero
// value is ready to use; it is safe for concurrent use.
type StatusRef struct{ p atomic.Pointer[statusRef] }

type statusRef struct {
	ent *sessionEntry // nil: the user had no session
	ver uint64
}

// StatusAnswerAt is StatusAnswer with ref, which must be kept for uid only: the user's session
// is taken from ref while the session index is unchanged (its version rises with every change
// of a user's session list), and found again, and kept in ref, when it has changed. The
// session's published view stays the truth about its owner, as for defaultOf: a session whose
// view no longer has it assigned to uid is found again. A nil ref: StatusAnswer.
func (s *Sessions) StatusAnswerAt(ref *StatusRef, uid string, render func(dst []byte, st *domain.Session) ([]byte, int)) (answer []byte, split int, q domain.QueueStats, ok bool) {
	if ref == nil {
		return s.StatusAnswer(uid, render)
	}
	r := ref.p.Load()
	if r == nil || r.ver != s.idx.ver.Load() || (r.ent != nil && !r.ent.is(uid, false)) {
		ver := s.idx.ver.Load() // before the lookup: a change meanwhile makes r stale
		r = &statusRef{ent: s.idx.defaultOf(uid), ver: ver}
		ref.p.Store(r)
	}
	return s.statusAnswer(r.ent, render)
}

func (s *Sessions) statusAnswer(ent *sessionEntry, render func(dst []byte, st *domain.Session) ([]byte, int)) (answer []byte, split int, q domain.QueueStats, ok bool) {
	if ent == nil {
		return nil, 0, domain.QueueStats{}, false
	}
	view := ent.view.Load()
	q = ent.queue.Stats()
	if a := ent.answer.Load(); a != nil && a.view == view {
		return a.body, a.split, q, true
	}
	st := *view
	st.Status = st.ClientStatus()
	a := &statusAnswer{view: view}
	a.body, a.split = render(nil, &st)
	ent.answer.Store(a)
	return a.body, a.split, q, true
}

// statusAnswer is a status answer rendered from a session's view (StatusAnswer).
type statusAnswer struct {
	view  *domain.Session
	body  []byte
	split int
}

// own returns the user's session, creating one (assigned to them) when they have none.
func (s *Sessions) own(ctx context.Context, u domain.User) (*sessionEntry, error) {
	if ent := s.idx.defaultOf(u.ID); ent != nil {
		return ent, nil
	}
	s.create.Lock()
	defer s.create.Unlock()
	if ent := s.idx.defaultOf(u.ID); ent != nil {
		return ent, nil
	}
	name := u.Name
	if name == "" {
		name = u.ID
	}
	v, err := s.Create(ctx, name+" session", u.ID)
	if err != nil {
		return nil, err
	}
	return s.idx.get(v.ID), nil
}

// Start starts the user's session (creating it first if they have none): linking by QR
// for an unlinked device, a reconnect for a linked one.
func (s *Sessions) Start(ctx context.Context, u domain.User) (domain.Session, error) {
	ent, err := s.own(ctx, u)
	if err != nil {
		return domain.Session{}, err
	}
	msg := &session.Start{Reply: make(chan session.Reply, 1)}
	r, err := s.ask(ctx, ent, msg, msg.Reply)
	return r.State, err
}

// QR returns the QR code text to show for the user's session, creating and starting the
// session when needed; ErrAlreadyConnected when it is linked and connected.
func (s *Sessions) QR(ctx context.Context, u domain.User) (domain.Session, error) {
	ent, err := s.own(ctx, u)
	if err != nil {
		return domain.Session{}, err
	}
	msg := &session.GetQR{Reply: make(chan session.Reply, 1)}
	r, err := s.ask(ctx, ent, msg, msg.Reply)
	return r.State, err
}

// PairCode starts linking the user's session by phone number and returns the code.
func (s *Sessions) PairCode(ctx context.Context, u domain.User, phone string) (domain.Session, string, error) {
	ent, err := s.own(ctx, u)
	if err != nil {
		return domain.Session{}, "", err
	}
	msg := &session.GetPairCode{Phone: phone, Reply: make(chan session.Reply, 1)}
	r, err := s.ask(ctx, ent, msg, msg.Reply)
	return r.State, r.Code, err
}

// Logout unlinks the user's session from their phone (POST /api/client/logout); a new
// QR scan links it again.
func (s *Sessions) Logout(ctx context.Context, uid string) error {
	ent := s.idx.defaultOf(uid)
	if ent == nil {
		return fmt.Errorf("%w: this account has no session", domain.ErrSessionNotFound)
	}
	return s.unlink(ctx, ent, nil)
}
