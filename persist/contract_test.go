package persist_test

import (
	"sync/atomic"
	"testing"

	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/kvtest"
)

// The KV contract (persist/kvtest) on the memory KV and on Badger on disk in both fsync modes.
func TestKVContract(t *testing.T) {
	t.Run("memory", func(t *testing.T) {
		t.Parallel()
		kvtest.Run(t, kvtest.Factory{Open: func(t *testing.T) persist.KV {
			m := persist.NewMemory()
			t.Cleanup(func() { m.Close() })
			return m
		}})
	})
	for _, fsync := range []persist.Fsync{persist.FsyncBatch, persist.FsyncInterval} {
		t.Run("badger-"+string(fsync), func(t *testing.T) {
			t.Parallel()
			kvtest.Run(t, badgerFactory(fsync))
		})
	}
}

// badgerFactory opens Badger in a test directory with a free-space probe the Unavailable case
// turns down under the floor (what a full disk looks like to the store).
func badgerFactory(fsync persist.Fsync) kvtest.Factory {
	type opened struct {
		dir  string
		free *atomic.Uint64
	}
	floor := persist.MinFreeDiskFor(0)
	stores := map[persist.KV]opened{}
	open := func(t *testing.T, dir string, free *atomic.Uint64) persist.KV {
		t.Helper()
		o := persist.WithFreeSpace(persist.BadgerOptions{Fsync: fsync, MinFreeDisk: floor},
			func(string) (uint64, error) { return free.Load(), nil })
		b, err := persist.OpenBadger(dir, o)
		if err != nil {
			t.Fatalf("OpenBadger: %v", err)
		}
		t.Cleanup(func() { b.Close() })
		stores[b] = opened{dir, free}
		return b
	}
	return kvtest.Factory{
		Open: func(t *testing.T) persist.KV {
			free := &atomic.Uint64{}
			free.Store(1 << 40)
			return open(t, t.TempDir(), free)
		},
		Reopen: func(t *testing.T, kv persist.KV) persist.KV {
			o := stores[kv]
			if err := kv.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return open(t, o.dir, o.free)
		},
		Unavailable: func(t *testing.T, kv persist.KV) func() {
			free := stores[kv].free
			free.Store(uint64(floor / 2))
			return func() { free.Store(1 << 40) }
		},
	}
}
