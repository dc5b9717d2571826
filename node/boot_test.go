package node

import (
	"bytes"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/persist"
)

// bootTogetherKV is a node's records whose events facet's read of the webhook subscriptions
// waits for the engine's read of the users to begin: it begins only if the two boots overlap.
// A read that gave up waiting is counted in late.
type bootTogetherKV struct {
	*persist.Memory
	users chan struct{} // closed when the engine's users scan begins
	once  sync.Once
	late  atomic.Int32
}

// bootTogetherWait bounds the wait: booted one after the other, the events facet waits this
// long.
const bootTogetherWait = 2 * time.Second

func (k *bootTogetherKV) Health() error { return nil }

func (k *bootTogetherKV) Scan(prefix []byte, fn func(key, value []byte) error) error {
	switch {
	case bytes.HasPrefix(prefix, []byte("user/")):
		k.once.Do(func() { close(k.users) })
	case bytes.HasPrefix(prefix, []byte("webhook_sub/")):
		select {
		case <-k.users:
		case <-time.After(bootTogetherWait):
			k.late.Add(1)
		}
	}
	return k.Memory.Scan(prefix, fn)
}

// A runtime's events facet boots beside the engine's reads, not before them (a partition taken
// over starts that much sooner: 60-150 ms at load 11 on NATS), and the runtime then serves: a
// user signs in (the engine) and lists their webhook subscriptions (the events facet).
func TestRuntimeBootsEventsBesideTheEngine(t *testing.T) {
	kv := &bootTogetherKV{Memory: persist.NewMemory(), users: make(chan struct{})}
	c := testConfig(t)
	c.KV = kv
	n := start(t, c)
	if l := kv.late.Load(); l > 0 {
		t.Errorf("the events facet's boot waited for the engine's reads to begin (%d): booted one after the other", l)
	}
	alice := n.signIn(t, "alice")
	n.must(t, 200, "GET", "/api/client/webhooks", alice, nil)
}
