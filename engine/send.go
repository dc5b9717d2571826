package engine

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gateway/gateway/domain"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/actors"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/persist"
)

// Send errors, re-exported.
var (
	ErrRecipientNotOnNetwork = actors.ErrRecipientNotOnNetwork
	ErrNetwork               = actors.ErrNetwork
	ErrMessageNotFound       = domain.ErrMessageNotFound
)

// outboxRetention is how long a message's outcome is kept for GET /api/v1/messages/{id}.
const outboxRetention = 7 * 24 * time.Hour

// outboxStore is the durable outbox. "outbox_pending/<id>" holds an accepted entry until its
// outcome is known (boot scans only those); the outcome then goes to "outbox/<id>", a short
// record without the message body, kept outboxRetention, in the same commit that removes the
// pending entry.
type outboxStore struct {
	done    *persist.Table[actors.OutboxEntry]
	pending *persist.Table[actors.OutboxEntry]
	log     interface{ Error(string, ...any) }
	depth   atomic.Int64 // entries appended and not yet settled (metrics)
	wg      sync.WaitGroup
}

func newOutboxStore(kv persist.KV, log interface{ Error(string, ...any) }) *outboxStore {
	return &outboxStore{
		done:    persist.NewTable[actors.OutboxEntry](kv, "outbox", 1),
		pending: persist.NewTable[actors.OutboxEntry](kv, "outbox_pending", 1),
		log:     log,
	}
}

func (o *outboxStore) Append(ctx context.Context, e actors.OutboxEntry) error {
	if err := o.pending.Put(ctx, e.ID, e); err != nil {
		return err
	}
	o.depth.Add(1)
	return nil
}

// Settle records the outcome in the background: the send path does not wait for it (a lost
// outcome only means the message is sent again under the same id at boot).
func (o *outboxStore) Settle(e actors.OutboxEntry) {
	o.depth.Add(-1)
	// The outcome keeps what GET /api/v1/messages/{id} shows, not the body.
	e.Message = network.Message{ID: e.Message.ID, To: e.Message.To, Kind: e.Message.Kind}
	put, err := o.done.PutTTLOp(e.ID, e, outboxRetention)
	if err != nil {
		o.log.Error("outbox: encode outcome", "message_id", e.ID, "err", err)
		return
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		if err := o.done.KV().Commit(context.Background(), put, o.pending.DeleteOp(e.ID)); err != nil {
			o.log.Error("outbox: record outcome", "message_id", e.ID, "err", err)
		}
	}()
}

// flush waits for outcomes being written (graceful shutdown).
func (o *outboxStore) flush() { o.wg.Wait() }

// get returns a message: its outcome, or the pending entry while it has none.
func (o *outboxStore) get(id string) (actors.OutboxEntry, error) {
	e, err := o.done.Get(id)
	if errors.Is(err, persist.ErrNotFound) {
		return o.pending.Get(id)
	}
	return e, err
}

func (o *outboxStore) pendingEntries() ([]actors.OutboxEntry, error) {
	var out []actors.OutboxEntry
	err := o.pending.Scan("", func(_ string, e actors.OutboxEntry) error {
		out = append(out, e)
		return nil
	})
	return out, err
}

// accountTable persists account snapshots (actors.AccountStore).
type accountTable struct {
	t *persist.Table[actors.AccountState]
}

func (a accountTable) GetAccount(uid string) (actors.AccountState, error) {
	s, err := a.t.Get(uid)
	if errors.Is(err, persist.ErrNotFound) {
		return actors.AccountState{UserID: uid}, nil
	}
	return s, err
}

func (a accountTable) PutAccount(ctx context.Context, s actors.AccountState) error {
	return a.t.Put(ctx, s.UserID, s)
}

// accountIndex: one account actor per user, spawned on first use.
type accountIndex struct {
	mu   sync.RWMutex
	pids map[string]*actor.PID
}

func (e *Engine) account(uid string) *actor.PID {
	e.accounts.mu.RLock()
	pid := e.accounts.pids[uid]
	e.accounts.mu.RUnlock()
	if pid != nil {
		return pid
	}
	e.accounts.mu.Lock()
	defer e.accounts.mu.Unlock()
	if pid = e.accounts.pids[uid]; pid == nil {
		deps := actors.AccountDeps{Store: e.accountTable, Now: e.cfg.Now, Log: e.log}
		pid = e.spawn(actors.NewAccount(uid, e.monthlyLimit(uid), deps), "account", uid)
		e.accounts.pids[uid] = pid
	}
	return pid
}

func (e *Engine) monthlyLimit(uid string) int64 {
	name := e.cfg.DefaultPlan
	if u, ok := e.users.get(uid); ok && u.Plan != "" {
		name = u.Plan
	}
	return e.cfg.Plans[name].MonthlyMessages
}

// reserve asks the user's account for up to n messages.
func (e *Engine) reserve(ctx context.Context, uid string, n int64) (actors.AccountResult, error) {
	msg := &actors.Reserve{N: n, Reply: make(chan actors.AccountResult, 1)}
	e.hw.Send(e.account(uid), msg)
	return waitReply(ctx, msg.Reply, e.cfg.AskTimeout, "account")
}

func (e *Engine) settle(uid string, sent, unreserve int64) {
	e.hw.Send(e.account(uid), actors.Settle{Sent: sent, Unreserve: unreserve})
}

// Account is the user's monthly allowance.
func (e *Engine) Account(ctx context.Context, uid string) (actors.AccountResult, error) {
	msg := &actors.GetAccount{Reply: make(chan actors.AccountResult, 1)}
	e.hw.Send(e.account(uid), msg)
	return waitReply(ctx, msg.Reply, e.cfg.AskTimeout, "account")
}

// SendRequest is one message to send for a user.
type SendRequest struct {
	UserID    string
	SessionID string // "" = the user's default session; else it must be assigned to the user
	Origin    string
	Message   network.Message // To must be normalised digits; ID "" = a new one
}

// Send sends one message through the user's session: allowance reserved, outbox appended
// (durable), network send, outcome recorded, allowance settled. The result carries the outbox
// entry with its outcome.
func (e *Engine) Send(ctx context.Context, r SendRequest) (actors.OutboxEntry, error) {
	ent, err := e.sendSession(r.UserID, r.SessionID)
	if err != nil {
		return actors.OutboxEntry{}, err
	}
	acct, err := e.reserve(ctx, r.UserID, 1)
	if err == nil {
		err = acct.Err
	}
	if err != nil {
		return actors.OutboxEntry{}, err
	}
	if r.Message.ID == "" {
		r.Message.ID = NewMessageID()
	}
	return e.dispatch(ctx, ent, r.UserID, r.Origin, r.Message)
}

// dispatch hands one message, whose allowance is reserved, to its session and settles the
// account with the outcome.
func (e *Engine) dispatch(ctx context.Context, ent *sessionEntry, uid, origin string, m network.Message) (actors.OutboxEntry, error) {
	now := e.Now().UTC()
	entry := actors.OutboxEntry{
		ID: m.ID, SessionID: ent.view.Load().ID, UserID: uid, Origin: origin,
		Message: m, Status: actors.MsgQueued, CreatedAt: actors.MillisOf(now), UpdatedAt: actors.MillisOf(now),
	}
	msg := &actors.SendMessage{Entry: entry, Reply: make(chan actors.SendResult, 1)}
	e.hw.Send(ent.pid, msg)
	res, err := waitReply(ctx, msg.Reply, e.cfg.SendTimeout+5*time.Second, "session")
	if err != nil {
		// The outcome is unknown to the caller, not lost: the outbox still records it. Keep
		// the reservation until the outcome arrives, then settle.
		// If the session never answers, the reservation is given back only when the message
		// is not pending in the outbox: one still pending may yet go out (it keeps its
		// reservation; a restart re-takes it when the outbox re-sends it).
		go func() {
			t := time.NewTimer(2 * e.cfg.SendTimeout)
			defer t.Stop()
			for {
				select {
				case res := <-msg.Reply:
					e.settle(uid, boolInt(res.Err == nil), 1)
					return
				case <-t.C:
					if _, err := e.outbox.pending.Get(m.ID); err != nil {
						e.settle(uid, 0, 1)
						return
					}
					t.Reset(10 * time.Minute)
				}
			}
		}()
		return entry, err
	}
	e.settle(uid, boolInt(res.Err == nil), 1)
	if res.Err == nil {
		e.metrics.sent.Add(1)
	} else {
		e.metrics.failed.Add(1)
	}
	return res.Entry, res.Err
}

// sendSession resolves the session a user's message goes through ("" = the user's default)
// and checks it is assigned to the user and connected.
func (e *Engine) sendSession(uid, sessionID string) (*sessionEntry, error) {
	var ent *sessionEntry
	if sessionID == "" {
		if ent = e.sessions.defaultOf(uid); ent == nil {
			return nil, fmt.Errorf("%w: no session is assigned to this account; link one first", ErrNotConnected)
		}
	} else if ent = e.sessions.get(sessionID); ent == nil || ent.view.Load().AssignedTo != uid {
		return nil, fmt.Errorf("%w: session %s is not assigned to this account", ErrForbidden, sessionID)
	}
	if ent.view.Load().Status != actors.StatusConnected {
		return nil, fmt.Errorf("%w: link the session first", ErrNotConnected)
	}
	return ent, nil
}

// Message returns one of the user's messages by id.
func (e *Engine) Message(uid, id string) (actors.OutboxEntry, error) {
	m, err := e.outbox.get(id)
	if err != nil || m.UserID != uid {
		return actors.OutboxEntry{}, fmt.Errorf("%w: %s", ErrMessageNotFound, id)
	}
	return m, nil
}

// recoverOutbox hands every entry without an outcome back to its session, which sends it again
// (same id) once connected.
func (e *Engine) recoverOutbox() (int, error) {
	pending, err := e.outbox.pendingEntries()
	if err != nil {
		return 0, fmt.Errorf("engine: outbox: %w", err)
	}
	for _, entry := range pending {
		ent := e.sessions.get(entry.SessionID)
		if ent == nil {
			e.log.Error("outbox entry for an unknown session", "message_id", entry.ID, "session_id", entry.SessionID)
			continue
		}
		// Its reservation died with the last process: take it again (forced: the message was
		// accepted) before any new send can use the same allowance.
		msg := &actors.Reserve{N: 1, Force: true, Reclaim: true, Reply: make(chan actors.AccountResult, 1)}
		e.hw.Send(e.account(entry.UserID), msg)
		if _, err := waitReply(context.Background(), msg.Reply, e.cfg.AskTimeout, "account"); err != nil {
			return 0, fmt.Errorf("engine: outbox: reserve for %s: %w", entry.ID, err)
		}
		e.outbox.depth.Add(1)
		e.hw.Send(ent.pid, actors.ResendEntry{Entry: entry})
	}
	return len(pending), nil
}

func (e *Engine) onRecovered(entry actors.OutboxEntry, err error) {
	if err != nil {
		e.log.Warn("recovered message failed", "message_id", entry.ID, "err", err)
		e.metrics.failed.Add(1)
		e.settle(entry.UserID, 0, 1)
		return
	}
	e.metrics.sent.Add(1)
	e.settle(entry.UserID, 1, 1)
}

// NewMessageID makes a message id in the shape WhatsApp Web uses (3EB0 + 20 hex digits).
func NewMessageID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "3EB0" + strings.ToUpper(hex.EncodeToString(b[:]))
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// waitReply waits for an actor's reply, ctx, or the timeout.
func waitReply[T any](ctx context.Context, reply chan T, timeout time.Duration, who string) (T, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-reply:
		return r, nil
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	case <-t.C:
		var zero T
		return zero, fmt.Errorf("%w: the %s did not answer in time", ErrUnavailable, who)
	}
}
