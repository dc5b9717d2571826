package natskv

import (
	"fmt"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
)

// ReadWritten reads key (persist.WrittenReader) as the stream's leader has it, with the time
// the NATS server stored its record (the leader's clock when it took the write), or
// domain.ErrRecordNotFound. The outbox's checkpoint reads it to learn a time on the server's
// clock that has passed: a bound for the accepts' read at the next boot no node's clock
// takes part in (persist/outbox_boot.go).
func (s *Store) ReadWritten(key []byte) ([]byte, time.Time, error) {
	if !s.enter() {
		return nil, time.Time{}, persist.ErrClosed
	}
	defer s.calls.Done()
	return s.readWritten("", key)
}

// ReadWritten is Store.ReadWritten in the view's partition.
func (v *View) ReadWritten(key []byte) ([]byte, time.Time, error) {
	if !v.enter() {
		return nil, time.Time{}, v.closedErr()
	}
	defer v.calls.Done()
	return v.s.readWritten(v.tok, key)
}

func (s *Store) readWritten(tok string, key []byte) ([]byte, time.Time, error) {
	subject, err := s.subject(tok, key)
	if len(key) == 0 || err != nil {
		return nil, time.Time{}, domain.ErrRecordNotFound
	}
	ctx, cancel := s.holdCtx()
	defer cancel()
	r, at, err := s.lastAt(ctx, subject)
	switch {
	case err != nil:
		return nil, time.Time{}, fmt.Errorf("natskv: get: %w", err)
	case r.deleted:
		return nil, time.Time{}, domain.ErrRecordNotFound
	}
	return r.value, at, nil
}
