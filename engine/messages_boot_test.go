package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/actors/account"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network/sim"
	"github.com/gateway/gateway/persist"
)

// togetherAccounts is the accounts' store whose reads wait until every one of want users'
// accounts is being read: they end only if the reads are made at once. A read that gave up
// waiting is counted in late.
type togetherAccounts struct {
	account.Store
	want  int
	mu    sync.Mutex
	began map[string]bool
	all   chan struct{} // closed once want users' reads began
	late  atomic.Int32
}

// togetherWait bounds the wait: read one after the other, each read waits this long.
const togetherWait = 2 * time.Second

func (s *togetherAccounts) GetAccount(uid string) (domain.Allowance, error) {
	s.mu.Lock()
	s.began[uid] = true
	if len(s.began) == s.want {
		close(s.all)
	}
	s.mu.Unlock()
	select {
	case <-s.all:
	case <-time.After(togetherWait):
		s.late.Add(1)
	}
	return s.Store.GetAccount(uid)
}

// A boot hands the pending messages of several users back with each user's reservation asked
// at once (each a read of the user's account and, on NATS, a round trip), not one user after
// the other (the account actors' starts, which read them, ran under the accounts' registry
// lock); every message is tracked again, its allowance taken.
func TestRecoverReservesTheUsersTogether(t *testing.T) {
	const users, each = 3, 4
	kv, newEngine, sessionOf := pendingOfUsers(t, users, each)
	ctx := context.Background()
	r := recordsOf(persist.NewRecords(kv))
	accounts := &togetherAccounts{Store: r.Accounts, want: users, began: map[string]bool{}, all: make(chan struct{})}
	r.Accounts = accounts
	e2, err := newEngine(r)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Stop(ctx)
	if n := accounts.late.Load(); n > 0 {
		t.Errorf("%d of %d users' account reads waited for the others': reserved one user after the other", n, users)
	}
	for uid := range sessionOf {
		a, err := e2.Messages.Allowance(ctx, uid)
		if err != nil || a.Remaining != 100-each {
			t.Errorf("%s: allowance %+v %v, want %d left (its %d pending messages reserved)", uid, a, err, 100-each, each)
		}
	}
	if d := e2.Stats().OutboxDepth; d != users*each {
		t.Errorf("outbox depth %d after the boot, want %d", d, users*each)
	}
}

// pendingOfUsers makes users users with a session each and each messages accepted for each of
// them and left pending by a process that died (in kv); newEngine boots an engine on kv with
// the records r.
func pendingOfUsers(t *testing.T, users, each int) (kv *persist.Memory, newEngine func(Records) (*Engine, error), sessionOf map[string]string) {
	t.Helper()
	kv = persist.NewMemory()
	recs := persist.NewRecords(kv)
	ctx := context.Background()
	newEngine = func(r Records) (*Engine, error) {
		net, err := sim.Open(sim.Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { net.Close() })
		return New(Config{Store: recs.Store, Records: r, Network: net, Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Plans: Plans{"small": {MonthlyMessages: 100}}, DefaultPlan: "small"})
	}
	// Users with a session each, then messages accepted for them and left pending by a process
	// that died.
	e1, err := newEngine(recordsOf(recs))
	if err != nil {
		t.Fatal(err)
	}
	sessionOf = map[string]string{}
	for i := range users {
		uid := fmt.Sprintf("u%d", i)
		if _, err := e1.Users.Create(ctx, NewUser{ID: uid}); err != nil {
			t.Fatal(err)
		}
		v, err := e1.Sessions.Create(ctx, uid+" session", uid)
		if err != nil {
			t.Fatal(err)
		}
		sessionOf[uid] = v.ID
	}
	e1.Stop(ctx)
	o := persist.NewOutbox(kv)
	if _, err := o.Pending(); err != nil {
		t.Fatal(err)
	}
	at := time.Now()
	for uid, sid := range sessionOf {
		for j := range each {
			id := fmt.Sprintf("%s-m%d", uid, j)
			m := domain.OutboxEntry{ID: id, SessionID: sid, UserID: uid, CreatedAt: domain.MillisOf(at),
				Message: domain.Message{ID: id, To: "491511234567", Kind: domain.KindText, Text: "hi"}}
			// Accepted for later: back on the schedule at boot, reserved, and not sent before
			// the test ends (a send for a session not linked would settle it meanwhile).
			m.SendAt = domain.MillisOf(at.Add(time.Hour))
			m.SetStatus(domain.MsgScheduled, at)
			if err := o.Accept(ctx, &m, ""); err != nil {
				t.Fatal(err)
			}
		}
	}
	return kv, newEngine, sessionOf
}

// failingAccounts is the accounts' store whose every read fails (a store gone away), counting
// the users whose account was read.
type failingAccounts struct {
	account.Store
	mu   sync.Mutex
	read map[string]bool
}

func (s *failingAccounts) GetAccount(uid string) (domain.Allowance, error) {
	s.mu.Lock()
	s.read[uid] = true
	s.mu.Unlock()
	return domain.Allowance{}, errors.New("the store went away")
}

// A boot whose reservations fail stops asking: the users still waiting for one of the
// recoverAsks slots are not asked once one failed, so the failed boot ends after one round of
// asks (each of a store gone away holds for its retries), not after one round per 32 users.
func TestRecoverStopsAskingOnceOneFailed(t *testing.T) {
	const users = recoverAsks + 16
	kv, newEngine, _ := pendingOfUsers(t, users, 1)
	r := recordsOf(persist.NewRecords(kv))
	accounts := &failingAccounts{Store: r.Accounts, read: map[string]bool{}}
	r.Accounts = accounts
	if e, err := newEngine(r); err == nil {
		e.Stop(context.Background())
		t.Fatal("the boot succeeded with every account read failing")
	}
	if n := len(accounts.read); n == 0 || n > recoverAsks {
		t.Errorf("%d users' accounts read by a failed boot, want 1 to %d (no ask after the first failure)", n, recoverAsks)
	}
}
