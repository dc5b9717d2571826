package engine

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/gateway/gateway/persist"
)

// A reservation settles each unit exactly once, whatever path commits or releases it and
// however often: the one owner of the monthly count.
func TestReservationSettlesEachUnitOnce(t *testing.T) {
	clk := &clock{t: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	e := newTestEngine(t, persist.NewRecords(persist.NewMemory()), clk, Plans{"free": {RateLimit: 0, MonthlyMessages: 10}})
	defer e.Stop(context.Background())
	ctx := context.Background()
	if _, err := e.Users.Create(ctx, NewUser{ID: "alice"}); err != nil {
		t.Fatal(err)
	}
	batch, err := e.Messages.reserve(ctx, "alice", 4, ReserveOpts{})
	if err != nil || batch.Granted() != 4 {
		t.Fatalf("reserve 4: %v, granted %d", err, batch.Granted())
	}
	// Three messages taken from the batch, settled from many goroutines at once, twice each.
	msgs := []*Reservation{batch.Take(1), batch.Take(1), batch.Take(1)}
	var wg sync.WaitGroup
	for i, m := range msgs {
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if i == 2 {
					m.Release() // failed
				} else {
					m.Commit(1) // sent
				}
			}()
		}
	}
	wg.Wait()
	batch.Release() // the unused fourth
	batch.Release()
	if over := batch.Take(1); over.Granted() != 0 {
		t.Fatal("took from an empty reservation")
	}
	waitUntil(t, 2*time.Second, "the account to settle", func() bool {
		a, err := e.Messages.Allowance(ctx, "alice")
		return err == nil && a.Sent == 2 && a.Remaining == 8
	})
	// Nothing more trickles in.
	time.Sleep(50 * time.Millisecond)
	if a, _ := e.Messages.Allowance(ctx, "alice"); a.Sent != 2 || a.Remaining != 8 {
		t.Fatalf("account %+v, want 2 sent and 8 left", a)
	}
}

// The key's durable block scales with its daily cap: a kill -9 costs at most 1 % of the day,
// and at most the engine's block (10 here; the default, 1,000).
func TestKeyBlockScalesWithCap(t *testing.T) {
	for _, tc := range []struct {
		most  int64 // the engine's KeyBlock (0: its default)
		limit int64
		block int64
	}{{10, 300, 3}, {10, 50, 1}, {10, 100000, 10}, {10, 0, 10}, {0, 300, 3}, {0, 50000, 500}, {0, 10000000, 1000}, {0, 0, 1000}} {
		clk := &clock{t: time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)}
		store := persist.NewRecords(persist.NewMemory())
		e := newTestEngineBlock(t, store, clk, Plans{"free": {RateLimit: tc.limit, MonthlyMessages: 10}}, tc.most)
		raw := []byte(setupKey(t, e, nil))
		if r := authz(e, raw, ""); r.Err != nil {
			t.Fatal(r.Err)
		}
		waitUntil(t, 2*time.Second, "a mark", func() bool {
			keys, _ := store.Store.ListKeys()
			u, _ := store.Store.GetKeyUsage(keys[0].ID)
			return u.DayMark > 0
		})
		keys, _ := store.Store.ListKeys()
		u, _ := store.Store.GetKeyUsage(keys[0].ID)
		// The first mark reserved one block (ahead of the first call, or of the call it covers).
		if u.DayMark < tc.block || u.DayMark > 1+tc.block {
			t.Errorf("block %d, cap %d: mark %d after one call, want %d or 1+%[4]d", tc.most, tc.limit, u.DayMark, tc.block)
		}
		e.Stop(context.Background())
	}
}
