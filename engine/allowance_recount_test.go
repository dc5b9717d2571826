package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/actors/account"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network/sim"
	"github.com/gateway/gateway/persist"
)

// lossyAccounts is the account store of a process about to be killed: once lost is set, the
// writes of its count are lost (written behind, which a kill -9 cuts short; the last one, of
// its stop, included), while under a limit a write that raises the mark lands (a reservation
// waits for it: the process goes on only once it is durable).
type lossyAccounts struct {
	account.Store
	lost   *atomic.Bool
	limits bool
}

func (s lossyAccounts) PutAccount(ctx context.Context, a domain.Allowance) error {
	if s.lost.Load() {
		cur, err := s.GetAccount(a.UserID)
		if err != nil || !s.limits || cur.Period == a.Period && a.Mark <= cur.Mark {
			return err
		}
	}
	return s.Store.PutAccount(ctx, a)
}

// recountRig boots engines one after the other on the same records and simulated network, as
// a process restarted after a kill -9, each with the boot's recount (Records.Recount).
type recountRig struct {
	t     *testing.T
	recs  *persist.Records
	dir   string
	limit int64
	now   func() time.Time
}

func newRecountRig(t *testing.T, limit int64, now func() time.Time) *recountRig {
	return &recountRig{t: t, recs: persist.NewRecords(persist.NewMemory()), dir: t.TempDir(), limit: limit, now: now}
}

// boot starts an engine; lost, when given, loses its account writes once set.
func (g *recountRig) boot(lost *atomic.Bool) *Engine {
	g.t.Helper()
	net, err := sim.Open(sim.Options{Dir: g.dir, AutoPair: time.Millisecond})
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { net.Close() })
	r := recordsOf(g.recs)
	r.Recount = g.recs.Accounts
	if lost != nil {
		r.Accounts = lossyAccounts{g.recs.Accounts, lost, g.limit > 0}
	}
	e, err := New(Config{Store: g.recs.Store, Records: r, Network: net, Now: g.now,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Plans:  Plans{"small": {MonthlyMessages: g.limit}}, DefaultPlan: "small"})
	if err != nil {
		g.t.Fatal(err)
	}
	g.t.Cleanup(func() { e.Stop(context.Background()) })
	return e
}

// send sends n texts (numbers from first on) and waits until the allowance counts want.
func (g *recountRig) send(e *Engine, uid string, first, n int, want int64) {
	g.t.Helper()
	ctx := context.Background()
	for i := range n {
		if _, err := e.Messages.Send(ctx, SendRequest{UserID: uid, Origin: "api",
			Message: domain.Message{To: fmt.Sprintf("4915100%05d", first+i), Kind: domain.KindText, Text: "hi"}}); err != nil {
			g.t.Fatalf("message %d: %v", first+i, err)
		}
	}
	waitUntil(g.t, 10*time.Second, fmt.Sprintf("%d messages counted", want), func() bool {
		a, err := e.Messages.Allowance(ctx, uid)
		return err == nil && a.Sent == want
	})
}

func (g *recountRig) allowance(e *Engine, uid string) account.Result {
	g.t.Helper()
	a, err := e.Messages.Allowance(context.Background(), uid)
	if err != nil {
		g.t.Fatal(err)
	}
	return a
}

// A kill -9 between two writes of the count: the messages counted since the last snapshot that
// landed (their outcomes durable) are counted again by the boot, each once, and the messages
// the snapshot already counts among the recent ones (those of the process before, stopped a
// moment earlier) are not counted twice.
func TestRecountAfterKillCountsWhatTheSnapshotLeftOut(t *testing.T) {
	g := newRecountRig(t, 1_000_000, nil)
	e0 := g.boot(nil)
	u := linkU1(t, e0)
	g.send(e0, u.ID, 0, 10, 10)
	e0.Stop(context.Background())
	lost := new(atomic.Bool)
	lost.Store(true) // killed: no count of this process's lands
	e1 := g.boot(lost)
	g.send(e1, u.ID, 10, 5, 15)
	e1.Stop(context.Background())
	if s, err := g.recs.Accounts.GetAccount(u.ID); err != nil || s.Sent >= 15 || s.At == 0 {
		t.Fatalf("the snapshot the kill left: %+v %v, want fewer than 15 counted and its time", s, err)
	}
	e2 := g.boot(nil)
	if a := g.allowance(e2, u.ID); a.Sent != 15 || a.Remaining > 1_000_000-15 {
		t.Fatalf("after the kill: %+v, want 15 sent and at most %d left", a, 1_000_000-15)
	}
	// The boot wrote what it recounted: a second kill before the account is used keeps it.
	if s, err := g.recs.Accounts.GetAccount(u.ID); err != nil || s.Sent != 15 {
		t.Fatalf("the recounted snapshot: %+v %v", s, err)
	}
	g.send(e2, u.ID, 15, 2, 17)
	e2.Stop(context.Background())
	if a := g.allowance(g.boot(nil), u.ID); a.Sent != 17 {
		t.Fatalf("after a graceful stop: %+v, want 17 sent", a)
	}
}

// A graceful stop writes the exact count: the boot's recount adds nothing to it, however
// recent its messages (the snapshot says how many of them it counts).
func TestRecountAfterStopCountsNothingTwice(t *testing.T) {
	g := newRecountRig(t, 0, nil)
	e1 := g.boot(nil)
	u := linkU1(t, e1)
	g.send(e1, u.ID, 0, 6, 6)
	e1.Stop(context.Background())
	for i := range 2 {
		e := g.boot(nil)
		if a := g.allowance(e, u.ID); a.Sent != 6 {
			t.Fatalf("boot %d after a graceful stop: %+v, want 6 sent", i+2, a)
		}
		e.Stop(context.Background())
	}
}

// The month turned between the last snapshot that landed (October's) and the kill: the boot
// counts November's messages in November, and nothing of October's.
func TestRecountAfterKillAcrossTheMonth(t *testing.T) {
	clk := &clock{t: time.Date(2026, 10, 31, 23, 59, 50, 0, time.UTC)}
	g := newRecountRig(t, 0, clk.now)
	e0 := g.boot(nil)
	u := linkU1(t, e0)
	g.send(e0, u.ID, 0, 2, 2)
	e0.Stop(context.Background())
	clk.set(time.Date(2026, 11, 1, 0, 0, 5, 0, time.UTC))
	lost := new(atomic.Bool)
	lost.Store(true)
	e1 := g.boot(lost)
	g.send(e1, u.ID, 2, 3, 3)
	e1.Stop(context.Background())
	if s, err := g.recs.Accounts.GetAccount(u.ID); err != nil || s.Period != "2026-10" {
		t.Fatalf("the snapshot the kill left: %+v %v, want October's", s, err)
	}
	clk.set(time.Date(2026, 11, 1, 0, 0, 6, 0, time.UTC))
	e2 := g.boot(nil)
	if a := g.allowance(e2, u.ID); a.Sent != 3 {
		t.Fatalf("November after the kill: %+v, want 3 sent", a)
	}
}

// Around a kill the monthly limit holds: the messages recounted fill the allowance the dead
// process's mark held, and nothing beyond the limit goes out.
func TestRecountAfterKillKeepsTheLimit(t *testing.T) {
	g := newRecountRig(t, 5, nil)
	var lost atomic.Bool
	e1 := g.boot(&lost)
	u := linkU1(t, e1)
	g.send(e1, u.ID, 0, 3, 3)
	lost.Store(true)
	g.send(e1, u.ID, 3, 2, 5)
	ctx := context.Background()
	if _, err := e1.Messages.Send(ctx, SendRequest{UserID: u.ID, Origin: "api",
		Message: domain.Message{To: "491510009999", Kind: domain.KindText, Text: "one more"}}); !errors.Is(err, domain.ErrQuotaExceeded) {
		t.Fatalf("a sixth message of 5: %v, want quota exceeded", err)
	}
	e1.Stop(ctx)
	e2 := g.boot(nil)
	if a := g.allowance(e2, u.ID); a.Sent != 5 || a.Remaining != 0 {
		t.Fatalf("after the kill: %+v, want 5 sent and none left", a)
	}
	if _, err := e2.Messages.Send(ctx, SendRequest{UserID: u.ID, Origin: "api",
		Message: domain.Message{To: "491510009998", Kind: domain.KindText, Text: "one more"}}); !errors.Is(err, domain.ErrQuotaExceeded) {
		t.Fatalf("a message past the limit after the kill: %v, want quota exceeded", err)
	}
}
