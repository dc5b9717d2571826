package session

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// Conversations beside the queue (DESIGN.md section 16): calls on the session's network client
// that are not queued messages (number lookups, read marks, groups), and cancelling a message
// still in the queue.

type (
	// Call runs Fn with the session's network client on a goroutine of its own (network I/O
	// never runs in Receive), when the session is connected (ErrNotConnected otherwise). Checks
	// numbers are counted first against the linked phone's daily lookups, durably (a lookup in
	// bulk is a ban signal): ErrCheckLimit past domain.ContactsCheckPerDay.
	Call struct {
		Checks int
		Fn     func(ctx context.Context, c network.Client) error
		Reply  chan Reply
	}
	// Cancel takes a queued message out of the queue before it is sent: it is reported
	// cancelled (its allowance released) and Reply.Found is true. Not found: the message is
	// being sent right now, or was settled.
	Cancel struct {
		ID    string
		Reply chan Reply
	}
)

// call runs a Call.
func (s *Session) call(m *Call) {
	if s.client == nil || s.st.Status != domain.StatusConnected {
		m.Reply <- Reply{State: s.st, Err: fmt.Errorf("%w: link the session first", domain.ErrNotConnected)}
		return
	}
	if m.Checks > 0 {
		now := s.deps.Clock.Now()
		next := s.prot
		next.Roll(domain.DayOf(now))
		if left := domain.ContactsCheckPerDay - next.Checks; m.Checks > left {
			m.Reply <- Reply{State: s.st, Err: fmt.Errorf("%w (%d left today; the count starts again at %s)", domain.ErrCheckLimit,
				max(left, 0), domain.DayStart(domain.DayOf(now)+1).Format(time.RFC3339))}
			return
		}
		next.Checks += m.Checks
		if err := s.deps.Records.PutProtections(context.Background(), next); err != nil {
			m.Reply <- Reply{State: s.st, Err: fmt.Errorf("%w: count the lookups: %w", domain.ErrUnavailable, err)}
			return
		}
		s.prot = next
	}
	client, st, timeout := s.client, s.st, s.deps.IOTimeout
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		m.Reply <- Reply{State: st, Err: m.Fn(ctx, client)}
	}()
}

// cancel takes a queued message out of the queue; the next job reports it cancelled.
func (s *Session) cancel(m *Cancel) {
	q := s.q
	i := slices.IndexFunc(q.items, func(it item) bool { return it.e.ID == m.ID })
	if i < 0 {
		m.Reply <- Reply{State: s.st}
		return
	}
	e := q.items[i].e
	q.items = slices.Delete(q.items, i, i+1)
	e.SetStatus(domain.MsgCancelled, s.deps.Clock.Now())
	q.fails = append(q.fails, failure{e: e, err: domain.ErrCancelled})
	s.stir()
	s.publishQueue()
	s.wake()
	m.Reply <- Reply{State: s.st, Found: true}
}
