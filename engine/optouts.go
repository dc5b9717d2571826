package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/gateway/gateway/domain"
)

// OptOuts is the suppression-list facet (DESIGN.md section 18): each account's phones that said
// STOP (or were put there through the API or the dashboard). A customer's message that is
// exactly a stop word puts the phone on the list and is answered once; START takes it off.
// Campaigns and store messages skip a phone on the list (opted_out, nothing charged); an API or
// dashboard send to it is refused unless it is transactional; a scheduled message is checked
// again at its time.
//
// The list lives in storage (OptOutStore) and, per user, in memory once read: every send asks
// Has, a map read under a read lock.
type OptOuts struct {
	e     *Engine
	store OptOutStore
	users sync.Map // uid → *optoutSet
}

// OptOutStore is the suppression lists' storage (persist.StoreLoop).
type OptOutStore interface {
	PutOptOuts(ctx context.Context, uid string, os []domain.OptOut) error
	DeleteOptOuts(ctx context.Context, uid string, phones []string) error
	OptOuts(uid string) ([]domain.OptOut, error)
}

// optoutSet is one user's list in memory; load reads it on first use.
type optoutSet struct {
	load   sync.Once
	err    error
	mu     sync.RWMutex
	phones map[string]domain.OptOut
	write  sync.Mutex // serialises a user's changes (read, commit, apply)
}

func newOptOuts(e *Engine) *OptOuts { return &OptOuts{e: e, store: e.cfg.Records.StoreLoop} }

// set is the user's list, read from storage on first use (an error is returned, and read
// again next time).
func (o *OptOuts) set(uid string) (*optoutSet, error) {
	v, ok := o.users.Load(uid)
	if !ok {
		v, _ = o.users.LoadOrStore(uid, &optoutSet{}) // a new set only when there is none: not one per send
	}
	s := v.(*optoutSet)
	s.load.Do(func() {
		s.phones = map[string]domain.OptOut{}
		if o.store == nil {
			return
		}
		list, err := o.store.OptOuts(uid)
		if err != nil {
			s.err = err
			return
		}
		for _, x := range list {
			s.phones[x.Phone] = x
		}
	})
	if s.err != nil {
		o.users.CompareAndDelete(uid, s) // read again on the next call
		return nil, fmt.Errorf("%w: the suppression list: %w", domain.ErrUnavailable, s.err)
	}
	return s, nil
}

// Has tells whether phone is on the user's suppression list. A list storage cannot read is
// taken as empty for this call (logged): a send is not refused because of a read that failed.
func (o *OptOuts) Has(uid, phone string) bool {
	s, err := o.set(uid)
	if err != nil {
		o.e.log.Warn("suppression list not read; the send goes on", "user_id", uid, "err", err)
		return false
	}
	s.mu.RLock()
	_, ok := s.phones[phone]
	s.mu.RUnlock()
	return ok
}

// List returns the user's suppression list, in phone order.
func (o *OptOuts) List(uid string) ([]domain.OptOut, error) {
	s, err := o.set(uid)
	if err != nil {
		return nil, err
	}
	s.mu.RLock()
	out := make([]domain.OptOut, 0, len(s.phones))
	for _, x := range s.phones {
		out = append(out, x)
	}
	s.mu.RUnlock()
	slices.SortFunc(out, func(a, b domain.OptOut) int {
		switch {
		case a.Phone < b.Phone:
			return -1
		case a.Phone > b.Phone:
			return 1
		}
		return 0
	})
	return out, nil
}

// Add puts phones (normalised digits) on the user's list; it returns those that were not on it.
func (o *OptOuts) Add(ctx context.Context, uid string, phones []string, source, word string) ([]domain.OptOut, error) {
	s, err := o.set(uid)
	if err != nil {
		return nil, err
	}
	if o.store == nil {
		return nil, fmt.Errorf("%w: no suppression list storage", domain.ErrUnavailable)
	}
	s.write.Lock()
	defer s.write.Unlock()
	now := o.e.now().UTC()
	var add []domain.OptOut
	s.mu.RLock()
	for _, p := range phones {
		if _, on := s.phones[p]; !on && !slices.ContainsFunc(add, func(x domain.OptOut) bool { return x.Phone == p }) {
			add = append(add, domain.OptOut{Phone: p, At: now, Source: source, Word: word})
		}
	}
	s.mu.RUnlock()
	if len(add) == 0 {
		return nil, nil
	}
	if err := o.store.PutOptOuts(ctx, uid, add); err != nil {
		return nil, fmt.Errorf("%w: save the suppression list: %w", domain.ErrUnavailable, err)
	}
	s.mu.Lock()
	for _, x := range add {
		s.phones[x.Phone] = x
	}
	s.mu.Unlock()
	return add, nil
}

// Remove takes phones off the user's list; it returns how many were on it.
func (o *OptOuts) Remove(ctx context.Context, uid string, phones []string) (int, error) {
	s, err := o.set(uid)
	if err != nil {
		return 0, err
	}
	if o.store == nil {
		return 0, fmt.Errorf("%w: no suppression list storage", domain.ErrUnavailable)
	}
	s.write.Lock()
	defer s.write.Unlock()
	var del []string
	s.mu.RLock()
	for _, p := range phones {
		if _, on := s.phones[p]; on && !slices.Contains(del, p) {
			del = append(del, p)
		}
	}
	s.mu.RUnlock()
	if len(del) == 0 {
		return 0, nil
	}
	if err := o.store.DeleteOptOuts(ctx, uid, del); err != nil {
		return 0, fmt.Errorf("%w: save the suppression list: %w", domain.ErrUnavailable, err)
	}
	s.mu.Lock()
	for _, p := range del {
		delete(s.phones, p)
	}
	s.mu.Unlock()
	return len(del), nil
}

// incoming takes a customer's message to one of the user's sessions: exactly a stop word puts
// the phone on the list and answers once with the user's stop reply; START takes it off and
// answers with the start reply. It reports whether the message was one of them.
func (o *OptOuts) incoming(ctx context.Context, uid, sessionID, from, text string) (bool, error) {
	st := o.e.Users.settings(uid)
	if word, ok := domain.IsStopWord(text, st.StopWords); ok {
		added, err := o.Add(ctx, uid, []string{from}, domain.OptOutReply, word)
		if err != nil {
			o.e.log.Warn("opt-out not saved", "user_id", uid, "err", err)
			return true, err
		}
		if len(added) > 0 {
			o.reply(ctx, uid, sessionID, from, orDefault(st.StopReply, domain.DefaultStopReply))
			o.e.log.Info("a customer opted out", "user_id", uid, "word", word)
		}
		return true, nil
	}
	if domain.IsStartWord(text) {
		n, err := o.Remove(ctx, uid, []string{from})
		if err != nil {
			o.e.log.Warn("opt-in not saved", "user_id", uid, "err", err)
			return true, err
		}
		if n > 0 {
			o.reply(ctx, uid, sessionID, from, orDefault(st.StartReply, domain.DefaultStartReply))
		}
		return true, nil
	}
	return false, nil
}

// reply answers the customer through the session they wrote to (a reply: never held by quiet
// hours, sent even though they just opted out).
func (o *OptOuts) reply(ctx context.Context, uid, sessionID, to, text string) {
	_, err := o.e.Messages.Send(ctx, SendRequest{UserID: uid, SessionID: sessionID, Origin: "reply", Transactional: true,
		Message: domain.Message{To: to, Kind: domain.KindText, Text: text}})
	if err != nil && !errors.Is(err, context.Canceled) {
		o.e.log.Warn("opt-out reply not sent", "user_id", uid, "err", err)
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
