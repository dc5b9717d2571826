package natskv_test

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/kvtest"
	"github.com/gateway/gateway/persist/natskv"
	"github.com/gateway/gateway/persist/natstest"
)

// factory opens stores on the NATS at url, each on a prefix of its own.
func factory(t *testing.T, tag, url string, srv *natstest.Server, o natskv.Options) kvtest.Factory {
	var (
		mu       sync.Mutex
		n        int
		prefixes = map[persist.KV]string{}
	)
	open := func(t *testing.T, prefix string) persist.KV {
		t.Helper()
		o := o
		// A round trip's bound fit for a loaded 2-core machine under the race detector: a
		// 4 MiB value on the R3 stream took over 2 s there. Nothing here waits it out.
		o.URL, o.Prefix, o.Timeout = url, prefix, 10*time.Second
		s, err := natskv.Open(context.Background(), o)
		if err != nil {
			t.Fatalf("natskv.Open: %v", err)
		}
		t.Cleanup(func() { s.Close() })
		mu.Lock()
		prefixes[s] = prefix
		mu.Unlock()
		return s
	}
	f := kvtest.Factory{
		Open: func(t *testing.T) persist.KV {
			mu.Lock()
			n++
			prefix := fmt.Sprintf("%s%d", tag, n)
			mu.Unlock()
			return open(t, prefix)
		},
		Reopen: func(t *testing.T, kv persist.KV) persist.KV {
			mu.Lock()
			prefix := prefixes[kv]
			mu.Unlock()
			if err := kv.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			return open(t, prefix)
		},
		MaxKey:   natskv.MaxEncodedKey - 3,
		MaxValue: natstest.MaxPayload - 4<<10,
	}
	if srv != nil {
		f.Unavailable = func(t *testing.T, kv persist.KV) func() {
			srv.Stop()
			return func() {
				if err := srv.Restart(); err != nil {
					t.Fatalf("restart NATS: %v", err)
				}
			}
		}
	}
	return f
}

// The KV contract on one embedded JetStream server: every key in partition 0, and spread over
// 16 partitions by a hash (scans then merge partitions).
func TestContractSingleServer(t *testing.T) {
	srv := natstest.Start(t)
	t.Run("partition0", func(t *testing.T) {
		kvtest.Run(t, factory(t, "p", srv.URL, srv, natskv.Options{}))
	})
	t.Run("hashed", func(t *testing.T) {
		kvtest.Run(t, factory(t, "h", srv.URL, nil, natskv.Options{Partition: func(key []byte) uint32 {
			h := fnv.New32a()
			h.Write(key)
			return h.Sum32() % 16
		}}))
	})
}

// The KV contract on a three-node JetStream cluster: the records stream at R3.
func TestContractCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("a three-node cluster: not in -short")
	}
	c := natstest.StartCluster(t, 3)
	kvtest.Run(t, factory(t, "c", c.URLs(), nil, natskv.Options{Replicas: 3}))
}

// Concurrent commits on distinct keys share round trips: with 4 groups in flight, 64
// committers' commits go out in far fewer groups than there were commits. On one server the
// one-message commits go as pipelined publishes (no atomic batch: a batch costs the server a
// file store of its own), the commits of several messages as atomic batches.
func TestGroupCommit(t *testing.T) {
	srv := natstest.Start(t)
	s, err := natskv.Open(context.Background(), natskv.Options{URL: srv.URL, Prefix: "group", MaxInflight: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const workers, each = 64, 30
	run := func(ops int) (groups, batches uint64) {
		g0, b0 := s.Stats()
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					var put []persist.Op
					for k := range ops {
						put = append(put, kvtest.Put(fmt.Sprintf("g%d/%d/%d/%d", ops, w, i, k), "v"))
					}
					if err := s.Commit(context.Background(), put...); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
		wg.Wait()
		g1, b1 := s.Stats()
		return g1 - g0, b1 - b0
	}
	for _, ops := range []int{1, 2} {
		groups, batches := run(ops)
		t.Logf("%d commits of %d ops in %d groups (%d batches)", workers*each, ops, groups, batches)
		if groups >= workers*each/2 {
			t.Fatalf("%d commits of %d ops went out as %d groups (%d batches): no grouping", workers*each, ops, groups, batches)
		}
		if (ops == 1) != (batches == 0) {
			t.Fatalf("%d commits of %d ops went out in %d atomic batches", workers*each, ops, batches)
		}
		if n := len(kvtest.ScanKeys(t, s, fmt.Sprintf("g%d/", ops))); n != workers*each*ops {
			t.Fatalf("scan found %d keys, want %d", n, workers*each*ops)
		}
	}
}

// A scan whose page is not answered within the store's round-trip bound fails (storage
// unavailable, after the store's hold) instead of ending early: before, an answer slower than
// the bound read as "no more records", so a loaded machine's scan missed records (the kvtest
// AtomicMultiOp "partial commit: []" and LargeValues flakes).
func TestScanSlowAnswerFails(t *testing.T) {
	srv := natstest.Start(t)
	s, err := natskv.Open(context.Background(), natskv.Options{URL: srv.URL, Prefix: "slow"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	kvtest.MustCommit(t, s, kvtest.Put("k/1", "v"), kvtest.Put("k/2", "v"), kvtest.Put("k/3", "v"))
	// A bound of 0: each try's context is done as it is made, so no answer comes within it. (A
	// bound of 1 ns was not that: its timer fires on a goroutine of its own, and on a loaded
	// machine a loopback answer came first and the scan read every key, once in CI.)
	s.SetTimeouts(0, 100*time.Millisecond)
	var keys []string
	err = s.Scan([]byte("k/"), func(k, _ []byte) error {
		keys = append(keys, string(k))
		return nil
	})
	if !errors.Is(err, domain.ErrStorageUnavailable) {
		t.Fatalf("a scan no page of which was answered in time: %d keys %q, err %v; want storage unavailable", len(keys), keys, err)
	}
	s.SetTimeouts(5*time.Second, 10*time.Second)
	if got := kvtest.ScanKeys(t, s, "k/"); len(got) != 3 {
		t.Fatalf("scan: %q", got)
	}
}

// One gateway per prefix: a second store on a held prefix refuses to open; after the holder
// closes (releases) it opens at once, and after a holder vanishes without releasing it opens
// once the lease has lapsed.
func TestSingleWriterLease(t *testing.T) {
	srv := natstest.Start(t)
	o := natskv.Options{URL: srv.URL, Prefix: "lease", NodeID: "a", LeaseTTL: 2 * time.Second}
	a, err := natskv.Open(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	kvtest.MustCommit(t, a, kvtest.Put("k", "a"))
	o.NodeID = "b"
	began := time.Now()
	if _, err := natskv.Open(context.Background(), o); !errors.Is(err, natskv.ErrLeaseHeld) {
		t.Fatalf("second holder: %v, want ErrLeaseHeld", err)
	}
	t.Logf("refused after %v", time.Since(began))
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	b, err := natskv.Open(context.Background(), o)
	if err != nil {
		t.Fatalf("after release: %v", err)
	}
	if d := time.Since(began); d > time.Second {
		t.Fatalf("taking a released lease took %v", d)
	}
	kvtest.WantValue(t, b, "k", "a")
	// b vanishes (its connection dies without a release): c waits for the lease to lapse.
	b.Abandon()
	o.NodeID = "c"
	c, err := natskv.Open(context.Background(), o)
	if err != nil {
		t.Fatalf("after the holder vanished: %v", err)
	}
	defer c.Close()
	kvtest.MustCommit(t, c, kvtest.Put("k", "c"))
}
