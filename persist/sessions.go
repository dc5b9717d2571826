package persist

import (
	"context"
	"errors"

	"github.com/gateway/gateway/domain"
)

// Sessions persists session snapshots: "session/<id>".
type Sessions struct{ t *Table[domain.Session] }

// NewSessions returns the session table on kv.
func NewSessions(kv KV) Sessions { return Sessions{NewTable[domain.Session](kv, sessionTable, 1)} }

// PutSession writes a snapshot.
func (s Sessions) PutSession(ctx context.Context, st domain.Session) error {
	return s.t.Put(ctx, st.ID, st)
}

// AdoptSession writes a snapshot unless one of st's id is there already (a cluster moving a
// session into this partition: a resumed move never overwrites the session's newer state).
func (s Sessions) AdoptSession(ctx context.Context, st domain.Session) error {
	op, err := s.t.PutOp(st.ID, st)
	if err != nil {
		return err
	}
	err = s.t.KV().Commit(ctx, IfAbsentOp(op.Key), op)
	if errors.Is(err, domain.ErrRecordExists) {
		return nil
	}
	return err
}

// GetSession reads a snapshot (ErrNotFound when none).
func (s Sessions) GetSession(id string) (domain.Session, error) { return s.t.Get(id) }

// DeleteSession removes a snapshot.
func (s Sessions) DeleteSession(ctx context.Context, id string) error { return s.t.Delete(ctx, id) }

// ListSessions returns every snapshot.
func (s Sessions) ListSessions() ([]domain.Session, error) {
	var out []domain.Session
	err := s.t.Scan("", func(_ string, st domain.Session) error {
		out = append(out, st)
		return nil
	})
	return out, err
}
