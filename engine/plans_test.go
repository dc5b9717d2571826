package engine

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network/sim"
	"github.com/gateway/gateway/persist"
)

// syncBuffer is a log sink the engine's actors may write from any goroutine.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// A user whose plan was removed from the table (the gateway restarted with another --plans)
// fails closed to the default plan's caps, daily and monthly, never open to the zero plan's
// "no cap"; the boot names the missing plan and how many users are on it; the profile keeps
// the plan it names, and an admin can still edit it without changing the plan, but cannot set
// a plan that is not in the table.
func TestUserOnRemovedPlanGetsTheDefaultPlan(t *testing.T) {
	ctx := context.Background()
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	store := persist.NewRecords(persist.NewMemory())
	e1 := newTestEngine(t, store, clk, Plans{"free": {RateLimit: 3, MonthlyMessages: 7}, "tiny": {RateLimit: 50, MonthlyMessages: 100}})
	if _, err := e1.Users.Create(ctx, NewUser{ID: "bob", Plan: "tiny"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e1.Users.Create(ctx, NewUser{ID: "carol", Plan: "tiny"}); err != nil {
		t.Fatal(err)
	}
	_, raw, err := e1.Keys.Create(ctx, KeyRequest{UserID: "bob", Name: "k"})
	if err != nil {
		t.Fatal(err)
	}
	e1.Stop(ctx)

	logs := &syncBuffer{}
	net, err := sim.Open(sim.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { net.Close() })
	e2, err := New(Config{
		Store: store.Store, Records: recordsOf(store), Logger: slog.New(slog.NewTextHandler(logs, nil)),
		Plans: Plans{"free": {RateLimit: 3, MonthlyMessages: 7}}, Now: clk.now, KeyBlock: 10, Network: net,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Stop(ctx)
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "plan=tiny users=2 default_plan=free") {
		t.Fatalf("boot log lacks the missing plan's warning:\n%s", l)
	}

	// The daily cap is the default plan's, named after it.
	for i := range 3 {
		if r := authz(e2, []byte(raw), ""); r.Err != nil || r.Plan != "free" || r.Limit != 3 || r.Remaining != int64(2-i) {
			t.Fatalf("call %d: %+v", i, r)
		}
	}
	if r := authz(e2, []byte(raw), ""); !errors.Is(r.Err, domain.ErrRateLimited) {
		t.Fatalf("4th call: %+v, want rate limited", r)
	}
	// So is the monthly allowance.
	acct, err := e2.Messages.Allowance(ctx, "bob")
	if err != nil || acct.Limit != 7 {
		t.Fatalf("allowance: %+v, %v; want the default plan's limit 7", acct, err)
	}
	if name, p := e2.Users.PlanInForce("bob"); name != "free" || p.RateLimit != 3 || p.MonthlyMessages != 7 {
		t.Fatalf("plan in force: %s %+v", name, p)
	}

	// The profile still names its plan; a patch that leaves the plan alone succeeds.
	name := "Bob"
	u, err := e2.Users.Update(ctx, UserPatch{ID: "bob", Name: &name})
	if err != nil || u.Name != "Bob" || u.Plan != "tiny" {
		t.Fatalf("rename: %+v, %v", u, err)
	}
	if u, err := e2.Users.Get("bob"); err != nil || u.Plan != "tiny" {
		t.Fatalf("get: %+v, %v", u, err)
	}
	// Setting a plan not in the table is refused, the one the profile names included.
	for _, plan := range []string{"tiny", "nope"} {
		if _, err := e2.Users.Update(ctx, UserPatch{ID: "bob", Plan: &plan}); !errors.Is(err, domain.ErrValidation) {
			t.Fatalf("set plan %q: %v, want a validation error", plan, err)
		}
	}
	if _, err := e2.Users.Create(ctx, NewUser{ID: "dave", Plan: "tiny"}); !errors.Is(err, domain.ErrValidation) {
		t.Fatalf("create on a missing plan: %v, want a validation error", err)
	}
}
