package engine

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
)

// downOutbox is an outbox whose reads by id fail as a store that cannot be reached does, while
// down is set.
type downOutbox struct {
	Outbox
	down atomic.Bool
}

func (o *downOutbox) Get(id string) (domain.OutboxEntry, error) {
	if o.down.Load() {
		return domain.OutboxEntry{}, fmt.Errorf("natskv: get: %w", domain.ErrStorageUnavailable)
	}
	return o.Outbox.Get(id)
}

// A read by id while the store cannot be reached answers 503 (unavailable), not 404
// message_not_found for a message that exists (a client would take it as lost and send it
// again); an id the store does not hold, or another user's message, is a 404. Every outbox
// error read as a 404.
func TestGetAnswersUnavailableWhenTheStoreIs(t *testing.T) {
	var o *downOutbox
	e, u, _ := startOnOutbox(t, persist.NewMemory(), func(p *persist.Outbox) Outbox { o = &downOutbox{Outbox: p}; return o })
	s := scheduleLater(t, e, u)
	o.down.Store(true)
	if got, err := e.Messages.Get(u.ID, s.ID); !errors.Is(err, domain.ErrUnavailable) || errors.Is(err, domain.ErrMessageNotFound) {
		t.Fatalf("the store down: %s, %v (want unavailable, 503)", got.Status, err)
	}
	o.down.Store(false)
	if got, err := e.Messages.Get(u.ID, s.ID); err != nil || got.Status != domain.MsgScheduled {
		t.Fatalf("the store back: %s, %v", got.Status, err)
	}
	if _, err := e.Messages.Get("someone-else", s.ID); !errors.Is(err, domain.ErrMessageNotFound) {
		t.Fatalf("another user's message: %v (want message_not_found)", err)
	}
	if _, err := e.Messages.Get(u.ID, "3EB0"+"00000000000000000000"); !errors.Is(err, domain.ErrMessageNotFound) {
		t.Fatalf("an id never accepted: %v (want message_not_found)", err)
	}
}
