package key

import (
	"context"
	"errors"
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
	mu    sync.Mutex
	keys  map[string]domain.APIKey
	usage map[string]domain.KeyUsage
}

func (m *memStore) GetKey(id string) (domain.APIKey, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k, ok := m.keys[id]
	if !ok {
		return k, domain.ErrRecordNotFound
	}
	return k, nil
}

func (m *memStore) PutKey(_ context.Context, k domain.APIKey) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.keys[k.ID] = k
	return nil
}

func (m *memStore) GetKeyUsage(id string) (domain.KeyUsage, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.usage[id], nil
}

func (m *memStore) PutKeyUsage(_ context.Context, id string, u domain.KeyUsage) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.usage[id] = u
	return nil
}

func (m *memStore) DeleteKey(_ context.Context, id string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.keys, id)
	delete(m.usage, id)
	return nil
}

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

type views struct {
	mu   sync.Mutex
	last domain.APIKey
	n    int
}

func (v *views) Publish(rec domain.APIKey) { v.mu.Lock(); v.last, v.n = rec, v.n+1; v.mu.Unlock() }

var (
	_ Store     = (*memStore)(nil)
	_ Clock     = (*fakeClock)(nil)
	_ Publisher = (*views)(nil)
)

// spawn starts the actor of counter c's key on deps.
func spawn(t *testing.T, c *Counter, deps Deps) (*actor.Engine, *actor.PID) {
	t.Helper()
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		t.Fatal(err)
	}
	return hw, hw.Spawn(New(c, deps), "key", actor.WithID(c.id))
}

func authorize(t *testing.T, hw *actor.Engine, pid *actor.PID, scope string) Result {
	t.Helper()
	m := &Authorize{Scope: scope, Reply: make(chan Result, 1)}
	hw.Send(pid, m)
	select {
	case r := <-m.Reply:
		return r
	case <-time.After(5 * time.Second):
		t.Fatal("the key actor did not answer")
		return Result{}
	}
}

// The daily cap on a fake clock: the limit is enforced, the day's count is durable before it is
// granted, and a new UTC day starts from zero while api_calls keep counting.
func TestDailyCapOnAFakeClock(t *testing.T) {
	store := &memStore{keys: map[string]domain.APIKey{"k1": {ID: "k1", UserID: "u1", Status: "active", Scopes: []string{"text"}}},
		usage: map[string]domain.KeyUsage{}}
	clk := &fakeClock{t: time.Date(2026, 5, 1, 23, 0, 0, 0, time.UTC)}
	v := &views{}
	deps := Deps{Store: store, Clock: clk, Log: slog.New(slog.NewTextHandler(io.Discard, nil)), Block: 100, Publisher: v}
	hw, pid := spawn(t, NewCounter("k1", Plan{Name: "free", Limit: 3}), deps)

	for i := range 3 {
		r := authorize(t, hw, pid, "text")
		if r.Err != nil || r.Used != int64(i+1) || r.Remaining != int64(2-i) {
			t.Fatalf("call %d: used %d, remaining %d, err %v", i+1, r.Used, r.Remaining, r.Err)
		}
		if u, _ := store.GetKeyUsage("k1"); u.DayMark < r.Used || u.CallsMark < r.APICalls {
			t.Fatalf("call %d granted beyond the durable marks %+v", i+1, u)
		}
	}
	if r := authorize(t, hw, pid, "text"); !errors.Is(r.Err, domain.ErrRateLimited) {
		t.Fatalf("4th call: %v, want rate limited", r.Err)
	}
	if r := authorize(t, hw, pid, "media"); !errors.Is(r.Err, domain.ErrInsufficientScope) {
		t.Fatalf("a scope the key lacks: %v", r.Err)
	}
	clk.add(time.Hour) // the next UTC day
	r := authorize(t, hw, pid, "text")
	if r.Err != nil || r.Used != 1 || r.APICalls != 4 {
		t.Fatalf("next day: used %d, api_calls %d, err %v", r.Used, r.APICalls, r.Err)
	}
	if want := time.Date(2026, 5, 3, 0, 0, 0, 0, time.UTC); !r.Reset.Equal(want) {
		t.Fatalf("reset %v, want %v", r.Reset, want)
	}

	name := "renamed"
	up := &Update{Name: &name, Reply: make(chan error, 1)}
	hw.Send(pid, up)
	if err := <-up.Reply; err != nil {
		t.Fatal(err)
	}
	v.mu.Lock()
	published, n := v.last.Name, v.n
	v.mu.Unlock()
	if published != "renamed" || n < 2 {
		t.Fatalf("published %q after %d publications, want the renamed record", published, n)
	}
	<-hw.Poison(pid).Done()
	if u, _ := store.GetKeyUsage("k1"); u.Day != "2026-05-02" || u.DayMark != 1 || u.CallsMark != 4 {
		t.Fatalf("a graceful stop writes the exact counters, got %+v", u)
	}
}

// failingStore refuses usage marks while full is set, as storage under its free-space floor
// does.
type failingStore struct {
	memStore
	full atomic.Bool
}

func (f *failingStore) PutKeyUsage(ctx context.Context, id string, u domain.KeyUsage) error {
	if f.full.Load() {
		return domain.ErrStorageUnavailable
	}
	return f.memStore.PutKeyUsage(ctx, id, u)
}

// While storage refuses the mark, calls go on counted in memory (the daily cap still holds),
// one line says so and one says when the mark is saved again, by the actor's own retry.
func TestCallsGoOnWhileTheMarkCannotBeSaved(t *testing.T) {
	store := &failingStore{memStore: memStore{keys: map[string]domain.APIKey{"k1": {ID: "k1", UserID: "u1", Status: "active"}},
		usage: map[string]domain.KeyUsage{}}}
	var logs logLines
	clk := &fakeClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	deps := Deps{Store: store, Clock: clk, Log: slog.New(slog.NewTextHandler(&logs, nil)), Block: 2}
	hw, pid := spawn(t, NewCounter("k1", Plan{Name: "p", Limit: 10}), deps)

	store.full.Store(true)
	for i := range 10 {
		if r := authorize(t, hw, pid, ""); r.Err != nil || r.Used != int64(i+1) {
			t.Fatalf("call %d under a full disk: used %d, err %v", i+1, r.Used, r.Err)
		}
	}
	if r := authorize(t, hw, pid, ""); !errors.Is(r.Err, domain.ErrRateLimited) {
		t.Fatalf("the cap during the outage: %v", r.Err)
	}
	store.full.Store(false)
	deadline := time.Now().Add(5 * time.Second)
	for {
		if u, _ := store.GetKeyUsage("k1"); u.DayMark >= 10 && u.CallsMark >= 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the mark was not saved after storage returned: %+v", store.usage["k1"])
		}
		time.Sleep(10 * time.Millisecond)
	}
	<-hw.Poison(pid).Done()
	if n := logs.count("cannot be saved"); n != 1 {
		t.Fatalf("%d lines about the failing mark, want 1:\n%s", n, logs.String())
	}
	if n := logs.count("saved again"); n != 1 {
		t.Fatalf("%d lines about its recovery, want 1:\n%s", n, logs.String())
	}
}

// logLines is a log sink safe for the actor's goroutines.
type logLines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logLines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *logLines) String() string     { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }
func (l *logLines) count(s string) int { return strings.Count(l.String(), s) }

// A call refunded (the gateway answered it 503) does not count against the day's cap; a refund
// of another day changes nothing.
func TestRefundedCallsDoNotCount(t *testing.T) {
	store := &memStore{keys: map[string]domain.APIKey{"k1": {ID: "k1", UserID: "u1", Status: "active"}}, usage: map[string]domain.KeyUsage{}}
	clk := &fakeClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	hw, pid := spawn(t, NewCounter("k1", Plan{Name: "p", Limit: 2}), Deps{Store: store, Clock: clk, Log: slog.New(slog.DiscardHandler), Block: 10})
	authorize(t, hw, pid, "")
	authorize(t, hw, pid, "")
	hw.Send(pid, Refund{Day: "2026-04-30"})
	if r := authorize(t, hw, pid, ""); !errors.Is(r.Err, domain.ErrRateLimited) {
		t.Fatalf("a refund of another day freed a call: %+v", r)
	}
	hw.Send(pid, Refund{Day: "2026-05-01"})
	if r := authorize(t, hw, pid, ""); r.Err != nil || r.Used != 2 || r.APICalls != 3 {
		t.Fatalf("after a refund: used %d, api_calls %d, err %v", r.Used, r.APICalls, r.Err)
	}
}

// Callers counting on the counter (TryAuthorize) while others go through the actor: the daily
// cap holds exactly, every counted call is covered by the marks known durable, and a graceful
// stop writes the exact counters.
func TestCounterCallersKeepTheCapAndTheMarks(t *testing.T) {
	store := &memStore{keys: map[string]domain.APIKey{"k1": {ID: "k1", UserID: "u1", Status: "active", Scopes: []string{"text"}}},
		usage: map[string]domain.KeyUsage{}}
	clk := &fakeClock{t: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	const limit = 5000
	c := NewCounter("k1", Plan{Name: "p", Limit: limit})
	hw, pid := spawn(t, c, Deps{Store: store, Clock: clk, Log: slog.New(slog.DiscardHandler), Block: 100})
	var (
		granted, fast atomic.Int64
		wg            sync.WaitGroup
	)
	for w := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				r, ok := c.TryAuthorize(clk.Now(), "text")
				if ok {
					fast.Add(1)
				} else {
					r = authorize(t, hw, pid, "text")
				}
				if errors.Is(r.Err, domain.ErrRateLimited) {
					return
				}
				if r.Err != nil {
					t.Errorf("worker %d, call %d: %v", w, i, r.Err)
					return
				}
				granted.Add(1)
				c.mu.Lock()
				count, calls, known := c.count, c.calls, c.usage
				c.mu.Unlock()
				if u, _ := store.GetKeyUsage("k1"); count > known.DayMark || calls > known.CallsMark || known.DayMark > u.DayMark || known.CallsMark > u.CallsMark {
					t.Errorf("count %d, calls %d with marks %+v known durable, %+v written", count, calls, known, u)
				}
			}
		})
	}
	wg.Wait()
	if got := granted.Load(); got != limit {
		t.Fatalf("granted %d calls on a cap of %d", got, limit)
	}
	if fast.Load() < limit/2 {
		t.Fatalf("only %d of %d calls were counted by a caller", fast.Load(), limit)
	}
	<-hw.Poison(pid).Done()
	if u, _ := store.GetKeyUsage("k1"); u.DayMark != limit || u.CallsMark != limit {
		t.Fatalf("a graceful stop writes the exact counters, got %+v", u)
	}
}

// A caller reads the clock before it waits for the counter's lock, so a reading from just
// before midnight can arrive after another caller started the new day: it counts toward the new
// day, whose count it must not zero (the cap would be passed at every midnight).
func TestLateClockReadingsKeepTheNewDaysCap(t *testing.T) {
	store := &memStore{keys: map[string]domain.APIKey{"k1": {ID: "k1", UserID: "u1", Status: "active", Scopes: []string{"text"}}},
		usage: map[string]domain.KeyUsage{}}
	clk := &fakeClock{t: time.Date(2026, 5, 1, 23, 0, 0, 0, time.UTC)}
	const limit = 10
	c := NewCounter("k1", Plan{Name: "p", Limit: limit})
	hw, pid := spawn(t, c, Deps{Store: store, Clock: clk, Log: slog.New(slog.DiscardHandler), Block: 100})
	call := func(now time.Time) Result {
		if r, ok := c.TryAuthorize(now, "text"); ok {
			return r
		}
		return authorize(t, hw, pid, "text")
	}
	for range 3 {
		if r := call(clk.Now()); r.Err != nil {
			t.Fatal(r.Err)
		}
	}
	late := time.Date(2026, 5, 1, 23, 59, 59, 999e6, time.UTC)
	clk.add(time.Hour) // 00:00 on May 2nd
	granted := 0
	for i := 0; i < 4*limit; i++ {
		now := clk.Now()
		if i%2 == 1 {
			now = late
		}
		r := call(now)
		if errors.Is(r.Err, domain.ErrRateLimited) {
			continue
		}
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		if want := time.Date(2026, 5, 3, 0, 0, 0, 0, time.UTC); !r.Reset.Equal(want) {
			t.Fatalf("call %d: reset %v, want %v", i, r.Reset, want)
		}
		granted++
	}
	if granted != limit {
		t.Fatalf("%d calls granted on May 2nd with late readings mixed in, want the cap of %d", granted, limit)
	}
	<-hw.Poison(pid).Done()
	if u, _ := store.GetKeyUsage("k1"); u.Day != "2026-05-02" || u.DayMark != limit {
		t.Fatalf("the stop wrote %+v, want May 2nd's count of %d", u, limit)
	}
}
