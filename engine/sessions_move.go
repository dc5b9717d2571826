package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gateway/gateway/domain"
)

// Sessions in a cluster (DESIGN.md section 13.1): an engine runs the users of one partition,
// and a session lives on its user's partition. Assigning a session to a user of another
// partition moves it: on the session's current owner (this engine) its queue fails, its device
// is logged out, the new assignee and a moving mark are written in one commit and its actor
// stops; the Mover (node's) copies its records into the new partition and has that
// partition's owner start it; then this partition's records of it go. A move cut short (a
// crash, the new owner unreachable) is finished by whoever runs this partition next: boot
// finds the mark.

// Mover moves sessions between the partitions of a cluster (nil on a single node).
type Mover interface {
	// Local tells whether uid's records live in this engine's partition.
	Local(uid string) bool
	// User reads the profile of uid, wherever it lives (domain.ErrUserNotFound when none).
	User(ctx context.Context, uid string) (domain.User, error)
	// Move copies st (assigned to st.Moving, without the mark) and its protection records into
	// the new assignee's partition, unless that partition holds the session already, and has
	// the partition's owner start it. It may be run again after a failure.
	Move(ctx context.Context, st domain.Session) error
}

// moveOut assigns a session to a user of another partition (see above).
func (s *Sessions) moveOut(ctx context.Context, m Mover, ent *sessionEntry, userID string) error {
	if _, err := m.User(ctx, userID); err != nil {
		return err
	}
	s.idx.assignMu.Lock()
	defer s.idx.assignMu.Unlock()
	if err := s.close(ctx, ent, domain.ErrSessionReassigned); err != nil {
		return err
	}
	<-s.e.hw.Poison(ent.pid).Done()
	st := *ent.view.Load()
	from := st.AssignedTo
	st.Moving = userID
	if err := s.table.PutSession(ctx, st); err != nil {
		// Not marked: the session stays here; its actor starts again.
		s.idx.remove(st.ID, from)
		st.Moving = ""
		s.spawn(st)
		return fmt.Errorf("%w: mark session moving: %w", domain.ErrUnavailable, err)
	}
	s.idx.remove(st.ID, from)
	s.e.log.Info("session moving to another partition", "session_id", st.ID, "from", from, "to", userID)
	return s.finishMove(ctx, m, st)
}

// finishMove has the Mover copy a marked session to its new partition, then removes it from
// this one.
func (s *Sessions) finishMove(ctx context.Context, m Mover, st domain.Session) error {
	moved := st
	moved.AssignedTo, moved.AssignedAt, moved.Moving = st.Moving, s.e.now().UTC(), ""
	if err := m.Move(ctx, moved); err != nil {
		return fmt.Errorf("%w: move session: %w", domain.ErrUnavailable, err)
	}
	if err := s.table.DeleteSession(ctx, st.ID); err != nil {
		return fmt.Errorf("%w: remove moved session: %w", domain.ErrUnavailable, err)
	}
	if err := s.records.DeleteSession(ctx, st.ID); err != nil {
		s.e.log.Warn("session moved; its protection records here were not removed", "session_id", st.ID, "err", err)
	}
	s.e.log.Info("session moved to another partition", "session_id", st.ID, "to", moved.AssignedTo)
	return nil
}

// resumeMoves finishes, in the background, the moves a previous owner of the partition left
// marked (boot), retrying until each is done or the engine stops.
func (s *Sessions) resumeMoves(marked []domain.Session) {
	m := s.e.cfg.Mover
	if m == nil || len(marked) == 0 {
		return
	}
	s.e.goBackground(func() {
		for _, st := range marked {
			for wait := time.Second; ; wait = min(2*wait, 30*time.Second) {
				ctx, cancel := context.WithTimeout(s.e.stopCtx, 30*time.Second)
				err := s.finishMove(ctx, m, st)
				cancel()
				if err == nil || s.e.stopCtx.Err() != nil {
					break
				}
				s.e.log.Warn("finishing a session's move", "session_id", st.ID, "err", err)
				select {
				case <-s.e.stopCtx.Done():
					return
				case <-time.After(wait):
				}
			}
		}
	})
}

// Adopt starts a session whose record was moved into this engine's partition (the Mover asks
// the partition's owner to). A session already running is left as it is.
func (s *Sessions) Adopt(ctx context.Context, id string) error {
	_, err := s.entry(id)
	return err
}

// entry finds a session's actor; in a cluster, a session moved here whose start was not asked
// for (the mover's request was lost) is started from its record.
func (s *Sessions) entry(id string) (*sessionEntry, error) {
	if ent := s.idx.get(id); ent != nil {
		return ent, nil
	}
	if s.e.cfg.Mover == nil {
		return nil, fmt.Errorf("%w: %s", domain.ErrSessionNotFound, id)
	}
	s.idx.assignMu.Lock()
	defer s.idx.assignMu.Unlock()
	if ent := s.idx.get(id); ent != nil {
		return ent, nil
	}
	st, err := s.table.GetSession(id)
	switch {
	case errors.Is(err, domain.ErrRecordNotFound):
		return nil, fmt.Errorf("%w: %s", domain.ErrSessionNotFound, id)
	case err != nil:
		return nil, fmt.Errorf("%w: read session: %w", domain.ErrUnavailable, err)
	case st.Moving != "":
		return nil, fmt.Errorf("%w: session %s is moving to another user", domain.ErrUnavailable, id)
	}
	s.e.log.Info("session adopted from another partition", "session_id", id, "assigned_to", st.AssignedTo)
	return s.spawn(st), nil
}
