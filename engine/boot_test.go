package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gateway/gateway/actors/session"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network/sim"
	"github.com/gateway/gateway/persist"
)

// Linked sessions reconnect at boot spread over the boot window, not all at once.
func TestBootReconnectsSpreadOverTheWindow(t *testing.T) {
	const n, window = 200, 2 * time.Second
	store := persist.NewRecords(persist.NewMemory())
	dir := t.TempDir()
	open := func(autopair time.Duration) *sim.Network {
		net, err := sim.Open(sim.Options{Dir: dir, AutoPair: autopair})
		if err != nil {
			t.Fatal(err)
		}
		return net
	}
	// The waits the engine's sessions ask its clock for: at boot, each linked session's slot.
	var (
		mu    sync.Mutex
		waits []time.Duration
	)
	afterFunc := func(d time.Duration, f func()) session.Timer {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		return time.AfterFunc(d, f)
	}
	newEngine := func(net *sim.Network, boot time.Duration) *Engine {
		e, err := New(Config{
			Store: store.Store, Records: recordsOf(store), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Plans: Plans{"unlimited": {}}, DefaultPlan: "unlimited", Network: net, BootWindow: boot,
			AfterFunc: afterFunc,
		})
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	ctx := context.Background()
	net1 := open(time.Millisecond)
	e1 := newEngine(net1, 0)
	uids := make([]string, n)
	for i := range uids {
		uids[i] = fmt.Sprintf("u%03d", i)
		u, err := e1.Users.Create(ctx, NewUser{ID: uids[i]})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := e1.Sessions.QR(ctx, u); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, 20*time.Second, "every session linked", func() bool {
		for _, uid := range uids {
			if e1.Sessions.Status(uid).Status != domain.StatusConnected {
				return false
			}
		}
		return true
	})
	e1.Stop(ctx)
	net1.Close()
	mu.Lock()
	waits = nil
	mu.Unlock()

	net2 := open(0)
	defer net2.Close()
	e2 := newEngine(net2, window)
	defer e2.Stop(ctx)
	waitUntil(t, 3*window, "every session reconnected", func() bool {
		for _, uid := range uids {
			if e2.Sessions.Status(uid).Status != domain.StatusConnected {
				return false
			}
		}
		return true
	})
	// The slots they waited for (their own clock's, so a loaded machine's late timers and slow
	// boot do not move them): one per session but the one whose slot is 0, spread over the
	// window.
	mu.Lock()
	times := slices.Clone(waits)
	mu.Unlock()
	if len(times) < n-1 || len(times) > n {
		t.Fatalf("%d sessions waited for a slot, want %d or %d", len(times), n-1, n)
	}
	for len(times) < n {
		times = append(times, 0)
	}
	slices.Sort(times)
	// Spread: a quarter of the window passes before half of them are back, and the last comes
	// after most of the window; no second of it takes them all.
	if mid := times[n/2]; mid < window/4 {
		t.Fatalf("half the sessions reconnected within %v of a %v window", mid, window)
	}
	if last := times[n-1]; last < window*7/10 || last > window {
		t.Fatalf("the last session reconnected after %v of a %v window", last, window)
	}
	if first := times[0]; first > window/2 {
		t.Fatalf("the first session waited %v", first)
	}
}

// usersScanKV is a KV that closes began when the users' scan begins.
type usersScanKV struct {
	*persist.Memory
	began chan struct{}
	once  sync.Once
}

func (k *usersScanKV) Scan(prefix []byte, fn func(key, value []byte) error) error {
	if string(prefix) == "user/" {
		k.once.Do(func() { close(k.began) })
	}
	return k.Memory.Scan(prefix, fn)
}

// The boot's reads begin before the events facet is ready (Config.EventsReady: a runtime boots
// it beside them), the boot waits for it before it builds anything, and its error fails the
// boot.
func TestBootReadsBeforeEventsReady(t *testing.T) {
	for _, refuse := range []bool{false, true} {
		kv := &usersScanKV{Memory: persist.NewMemory(), began: make(chan struct{})}
		store := persist.NewRecords(kv)
		net, err := sim.Open(sim.Options{Dir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		var readFirst, asked bool
		e, err := New(Config{
			Store: store.Store, Records: recordsOf(store), Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
			Plans: Plans{"unlimited": {}}, DefaultPlan: "unlimited", Network: net, Events: &countingSink{},
			EventsReady: func() error {
				asked = true
				select {
				case <-kv.began:
					readFirst = true
				case <-time.After(2 * time.Second):
				}
				if refuse {
					return domain.ErrUnavailable
				}
				return nil
			},
		})
		if !asked || !readFirst {
			t.Errorf("refuse %v: EventsReady asked %v, after the users' read began %v", refuse, asked, readFirst)
		}
		switch {
		case refuse && !errors.Is(err, domain.ErrUnavailable):
			t.Errorf("an events facet that failed its boot: New %v", err)
		case !refuse && err != nil:
			t.Errorf("New: %v", err)
		case !refuse:
			if _, err := e.Users.Create(context.Background(), NewUser{ID: "alice"}); err != nil {
				t.Error(err)
			}
			e.Stop(context.Background())
		}
		net.Close()
	}
}
