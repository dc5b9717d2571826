package account

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/domain"
)

type memStore struct {
	mu sync.Mutex
	st domain.Allowance
}

func (m *memStore) GetAccount(string) (domain.Allowance, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.st, nil
}

func (m *memStore) PutAccount(_ context.Context, s domain.Allowance) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.st = s
	return nil
}

func (m *memStore) get() domain.Allowance { m.mu.Lock(); defer m.mu.Unlock(); return m.st }

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

var (
	_ Store = (*memStore)(nil)
	_ Clock = (*fakeClock)(nil)
)

// spawn starts user u1's account actor, with the monthly limit, on store and clk.
func spawn(t *testing.T, store Store, clk Clock, limit int64) (*actor.Engine, *actor.PID, *Counter) {
	t.Helper()
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	c := NewCounter("u1", limit)
	deps := Deps{Store: store, Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	return hw, hw.Spawn(New(c, deps), "account", actor.WithID("u1")), c
}

func reserve(t *testing.T, hw *actor.Engine, pid *actor.PID, n int64) Result {
	t.Helper()
	m := &Reserve{N: n, Reply: make(chan Result, 1)}
	hw.Send(pid, m)
	select {
	case r := <-m.Reply:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("the account actor did not answer")
		return Result{}
	}
}

// The monthly limit on a fake clock: a batch is clipped to what is left, nothing is granted
// beyond the durable mark, and a new UTC month starts from zero.
func TestMonthlyLimitOnAFakeClock(t *testing.T) {
	store := &memStore{}
	clk := &fakeClock{t: time.Date(2026, 1, 31, 23, 0, 0, 0, time.UTC)}
	hw, pid, _ := spawn(t, store, clk, 5)

	if r := reserve(t, hw, pid, 3); r.Err != nil || r.Granted != 3 || r.Remaining != 2 {
		t.Fatalf("first batch: %+v", r)
	}
	if r := reserve(t, hw, pid, 5); r.Err != nil || r.Granted != 2 || r.Remaining != 0 {
		t.Fatalf("a batch over the limit is clipped: %+v", r)
	}
	if mark := store.get().Mark; mark < 5 {
		t.Fatalf("granted 5 with a durable mark of %d", mark)
	}
	if r := reserve(t, hw, pid, 1); !errors.Is(r.Err, domain.ErrQuotaExceeded) || r.Granted != 0 {
		t.Fatalf("nothing left: %+v", r)
	}
	hw.Send(pid, Settle{Sent: 4, Unreserve: 5}) // 4 sent, 1 failed: its allowance comes back
	if r := reserve(t, hw, pid, 2); r.Err != nil || r.Granted != 1 || r.Sent != 4 {
		t.Fatalf("after settling: %+v", r)
	}
	if want := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC); !reserve(t, hw, pid, 0).Reset.Equal(want) {
		t.Fatalf("reset is not %v", want)
	}

	hw.Send(pid, Settle{Sent: 1, Unreserve: 1}) // a reservation in flight counts until settled
	get := &Get{Reply: make(chan Result, 1)}
	hw.Send(pid, get)
	if r := <-get.Reply; r.Sent != 5 || r.Remaining != 0 {
		t.Fatalf("January ends with %+v", r)
	}

	clk.set(time.Date(2026, 2, 1, 0, 0, 1, 0, time.UTC))
	if r := reserve(t, hw, pid, 5); r.Err != nil || r.Granted != 5 || r.Sent != 0 {
		t.Fatalf("a new month: %+v", r)
	}
	<-hw.Poison(pid).Done()
	if st := store.get(); st.Period != "2026-02" || st.Mark != 5 {
		t.Fatalf("a graceful stop writes the month's use, got %+v", st)
	}
}

// A 500-message month raises its mark one message ahead (0.2 %): at any reply the durable mark
// is at most a couple of messages past what is reserved, which is all a kill -9 can cost.
func TestSmallPlanMarkStaysClose(t *testing.T) {
	store := &memStore{}
	clk := &fakeClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	hw, pid, _ := spawn(t, store, clk, 500)
	for i := range 40 {
		r := reserve(t, hw, pid, 1)
		if r.Err != nil || r.Granted != 1 {
			t.Fatalf("message %d: %+v", i+1, r)
		}
		hw.Send(pid, Settle{Sent: 1, Unreserve: 1})
		used := int64(i + 1)
		if m := store.get().Mark; m < used || m > used+2 {
			t.Fatalf("after %d messages the durable mark is %d, want %d to %d", used, m, used, used+2)
		}
	}
	<-hw.Poison(pid).Done()
}

// Callers reserving and settling on the counter (TryReserve, Settle) while others go through
// the actor: nothing is granted beyond the monthly limit, every grant is covered by the durable
// mark when it is answered, and the month ends with the exact count.
func TestCounterCallersKeepTheLimitAndTheMark(t *testing.T) {
	store := &memStore{}
	clk := &fakeClock{t: time.Date(2026, 3, 10, 12, 0, 0, 0, time.UTC)}
	const limit = 3000
	hw, pid, c := spawn(t, store, clk, limit)
	var (
		granted, fast atomic.Int64
		wg            sync.WaitGroup
	)
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				r, ok := c.TryReserve(clk.Now(), 1)
				if ok {
					fast.Add(1)
				} else {
					r = reserve(t, hw, pid, 1)
				}
				if errors.Is(r.Err, domain.ErrQuotaExceeded) {
					return
				}
				if r.Err != nil || r.Granted != 1 {
					t.Errorf("worker %d, call %d: %+v", w, i, r)
					return
				}
				granted.Add(1)
				c.mu.Lock()
				used, known := c.used(), c.st.Mark
				c.mu.Unlock()
				if durable := store.get().Mark; used > known || known > durable {
					t.Errorf("%d used with a mark of %d known durable, %d written", used, known, durable)
				}
				if i%3 == 0 {
					c.Settle(clk.Now(), 0, 1) // failed: its allowance comes back
					granted.Add(-1)
				} else {
					c.Settle(clk.Now(), 1, 1)
				}
			}
		})
	}
	wg.Wait()
	if got := granted.Load(); got != limit {
		t.Fatalf("sent %d of a %d limit", got, limit)
	}
	if fast.Load() == 0 {
		t.Fatal("no reservation was made by a caller")
	}
	<-hw.Poison(pid).Done()
	if st := store.get(); st.Sent != limit || st.Mark != limit {
		t.Fatalf("a graceful stop writes the exact count, got %+v", st)
	}
}

// A reservation's or a settlement's clock reading from the last moment of March that arrives
// after April started counts toward April: it must not zero April's count and mark (the
// allowance would be passed at every month's start).
func TestLateClockReadingsKeepTheNewMonthsLimit(t *testing.T) {
	store := &memStore{}
	clk := &fakeClock{t: time.Date(2026, 3, 31, 23, 0, 0, 0, time.UTC)}
	const limit = 10
	hw, pid, c := spawn(t, store, clk, limit)
	take := func(now time.Time) Result {
		if r, ok := c.TryReserve(now, 1); ok {
			return r
		}
		return reserve(t, hw, pid, 1)
	}
	for range 3 {
		if r := take(clk.Now()); r.Err != nil || r.Granted != 1 {
			t.Fatalf("March: %+v", r)
		}
		c.Settle(clk.Now(), 1, 1)
	}
	late := time.Date(2026, 3, 31, 23, 59, 59, 999e6, time.UTC)
	clk.set(time.Date(2026, 4, 1, 0, 0, 0, 0, time.UTC))
	sent := 0
	for i := 0; i < 4*limit; i++ {
		now := clk.Now()
		if i%2 == 1 {
			now = late
		}
		r := take(now)
		if errors.Is(r.Err, domain.ErrQuotaExceeded) {
			continue
		}
		if r.Err != nil || r.Granted != 1 {
			t.Fatalf("April, call %d: %+v", i, r)
		}
		c.Settle(late, 1, 1) // its outcome read the clock before April began
		sent++
	}
	if sent != limit {
		t.Fatalf("%d messages sent in April with late readings mixed in, want the limit of %d", sent, limit)
	}
	<-hw.Poison(pid).Done()
	if st := store.get(); st.Period != "2026-04" || st.Sent != limit {
		t.Fatalf("the stop wrote %+v, want April's %d sent", st, limit)
	}
}

// closedStore is a cluster partition's store after the partition left the node (its view closed).
type closedStore struct{ memStore }

func (c *closedStore) GetAccount(string) (domain.Allowance, error) {
	return domain.Allowance{}, fmt.Errorf("persist: store closed: %w", domain.ErrNodeUnavailable)
}

// An account that could not be read answers unavailable and says why: a partition that left
// the node under the request is node_unavailable, so httpapi runs the request again on the
// partition's next owner instead of answering 503 (test-cluster, a NATS server's loss).
func TestUnreadAccountSaysWhy(t *testing.T) {
	hw, pid, _ := spawn(t, &closedStore{}, &fakeClock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}, 5)
	r := reserve(t, hw, pid, 1)
	if !errors.Is(r.Err, domain.ErrUnavailable) || !strings.Contains(r.Err.Error(), domain.ErrNodeUnavailable.Msg) {
		t.Fatalf("a reservation on an account that could not be read: %v, want unavailable saying node_unavailable", r.Err)
	}
}

// untilTick runs to the next multiple of its period: never zero, never more than the period.
func TestUntilTick(t *testing.T) {
	base := time.Date(2026, 12, 3, 20, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		at   time.Duration
		want time.Duration
	}{
		{0, time.Second}, {300 * time.Millisecond, 700 * time.Millisecond},
		{999 * time.Millisecond, time.Millisecond}, {time.Second + 1, time.Second - 1},
	} {
		if got := untilTick(base.Add(c.at), time.Second); got != c.want {
			t.Errorf("at +%v: %v, want %v", c.at, got, c.want)
		}
	}
}

// countWrites records when each user's count (Sent) was first written.
type countWrites struct {
	mu    sync.Mutex
	first map[string]time.Time
}

func (w *countWrites) GetAccount(uid string) (domain.Allowance, error) {
	return domain.Allowance{UserID: uid}, nil
}

func (w *countWrites) PutAccount(_ context.Context, s domain.Allowance) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.first[s.UserID]; !ok && s.Sent > 0 {
		w.first[s.UserID] = time.Now()
	}
	return nil
}

func (w *countWrites) at(uid string) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.first[uid]
	return at, ok
}

type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

// Two users who send 150 ms apart have their counts written on the same tick, so that the
// writes share a commit and its sync, not each on a phase of its own.
func TestCountsWrittenOnTheSameTick(t *testing.T) {
	const every = 400 * time.Millisecond
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	store := &countWrites{first: map[string]time.Time{}}
	deps := Deps{Store: store, Clock: wallClock{}, Log: slog.New(slog.DiscardHandler), FlushEvery: every}
	pids := map[string]*actor.PID{}
	for _, uid := range []string{"u1", "u2"} {
		pids[uid] = hw.Spawn(New(NewCounter(uid, 0), deps), "account", actor.WithID(uid))
	}
	defer func() {
		for _, pid := range pids {
			<-hw.Poison(pid).Done()
		}
	}()
	// Both sends within one period: start just after a tick.
	time.Sleep(untilTick(time.Now(), every) + 10*time.Millisecond)
	for i, uid := range []string{"u1", "u2"} {
		if i > 0 {
			time.Sleep(150 * time.Millisecond)
		}
		if r := reserve(t, hw, pids[uid], 1); r.Err != nil || r.Granted != 1 {
			t.Fatalf("%s: %+v", uid, r)
		}
		hw.Send(pids[uid], Settle{Sent: 1, Unreserve: 1, At: time.Now().UnixMilli()})
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		t1, ok1 := store.at("u1")
		t2, ok2 := store.at("u2")
		if ok1 && ok2 {
			if d := t1.Sub(t2).Abs(); d > 75*time.Millisecond {
				t.Fatalf("counts written %v apart (sent 150 ms apart, flushed every %v)", d, every)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("counts not written: u1 %v, u2 %v", ok1, ok2)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
