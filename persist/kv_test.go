package persist

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// kvImpl is one implementation under the contract suites.
type kvImpl struct {
	name string
	open func(t *testing.T) KV
}

// kvImpls lists every KV implementation: the memory one and Badger on disk in both fsync
// modes. Each open gives a fresh, empty store closed at the end of the test.
func kvImpls() []kvImpl {
	return []kvImpl{
		{"memory", func(t *testing.T) KV {
			m := NewMemory()
			t.Cleanup(func() { m.Close() })
			return m
		}},
		{"badger-batch", func(t *testing.T) KV { return openTestBadger(t, t.TempDir(), FsyncBatch) }},
		{"badger-interval", func(t *testing.T) KV { return openTestBadger(t, t.TempDir(), FsyncInterval) }},
	}
}

func openTestBadger(t testing.TB, dir string, fsync Fsync) *Badger {
	t.Helper()
	b, err := OpenBadger(dir, BadgerOptions{Fsync: fsync})
	if err != nil {
		t.Fatalf("OpenBadger: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func TestKV(t *testing.T) {
	for _, impl := range kvImpls() {
		t.Run(impl.name, func(t *testing.T) {
			t.Parallel()
			testKV(t, impl.open)
		})
	}
}

// waitFor polls cond every few milliseconds until it holds or the deadline passes.
func waitFor(t *testing.T, total time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(total)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", total, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func put(key, value string) Op { return Op{Key: []byte(key), Value: []byte(value)} }
func del(key string) Op        { return Op{Key: []byte(key), Delete: true} }

func mustCommit(t *testing.T, kv KV, ops ...Op) {
	t.Helper()
	if err := kv.Commit(context.Background(), ops...); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

func wantValue(t *testing.T, kv KV, key, want string) {
	t.Helper()
	got, err := kv.Get([]byte(key))
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if string(got) != want {
		t.Fatalf("Get(%q) = %q, want %q", key, got, want)
	}
}

func wantAbsent(t *testing.T, kv KV, key string) {
	t.Helper()
	if got, err := kv.Get([]byte(key)); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Get(%q) = %q, %v; want ErrNotFound", key, got, err)
	}
}

func scanKeys(t *testing.T, kv KV, prefix string) []string {
	t.Helper()
	var keys []string
	if err := kv.Scan([]byte(prefix), func(k, _ []byte) error {
		keys = append(keys, string(k))
		return nil
	}); err != nil {
		t.Fatalf("Scan(%q): %v", prefix, err)
	}
	return keys
}

// testKV is the contract every KV implementation meets.
func testKV(t *testing.T, newKV func(t *testing.T) KV) {
	ctx := context.Background()

	t.Run("GetPutDelete", func(t *testing.T) {
		kv := newKV(t)
		wantAbsent(t, kv, "a")
		wantAbsent(t, kv, "")
		mustCommit(t, kv, put("a", "1"))
		wantValue(t, kv, "a", "1")
		mustCommit(t, kv, put("a", "2"))
		wantValue(t, kv, "a", "2")

		// Get returns the caller's own copy.
		v, _ := kv.Get([]byte("a"))
		v[0] = 'x'
		wantValue(t, kv, "a", "2")

		// Commit copies: reusing the op's slices afterwards changes nothing.
		key, val := []byte("b"), []byte("v")
		mustCommit(t, kv, Op{Key: key, Value: val})
		key[0], val[0] = 'z', 'z'
		wantValue(t, kv, "b", "v")

		mustCommit(t, kv, del("a"))
		wantAbsent(t, kv, "a")
		mustCommit(t, kv, del("never-written")) // deleting an absent key is fine
		mustCommit(t, kv)                       // so is an empty commit

		mustCommit(t, kv, Op{Key: []byte("empty")})
		wantValue(t, kv, "empty", "")
	})

	t.Run("InvalidOpsRefusedWhole", func(t *testing.T) {
		kv := newKV(t)
		bad := []Op{
			{Key: nil, Value: []byte("x")},
			{Key: bytes.Repeat([]byte("k"), MaxKeySize+1)},
			{Key: []byte("!badger!head")},
			{Key: []byte("k"), TTL: -time.Second},
		}
		for i, b := range bad {
			err := kv.Commit(ctx, put("good", "1"), b)
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("bad op %d: Commit error = %v, want ErrInvalid", i, err)
			}
			wantAbsent(t, kv, "good")
		}
	})

	t.Run("CanceledContext", func(t *testing.T) {
		kv := newKV(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := kv.Commit(cctx, put("a", "1")); !errors.Is(err, context.Canceled) {
			t.Fatalf("Commit with canceled ctx = %v, want context.Canceled", err)
		}
		wantAbsent(t, kv, "a")
	})

	t.Run("ScanOrderAndPrefix", func(t *testing.T) {
		kv := newKV(t)
		keys := []string{"b/2", "a", "b", "b/10", "c", "b/1", "ba", "b0", "b/\xff", "b/1/x", "\xff\xff"}
		for _, k := range keys {
			mustCommit(t, kv, put(k, "v-"+k))
		}
		all := slices.Clone(keys)
		slices.Sort(all)
		if got := scanKeys(t, kv, ""); !slices.Equal(got, all) {
			t.Fatalf("Scan(all) = %q, want %q", got, all)
		}
		if got, want := scanKeys(t, kv, "b/"), []string{"b/1", "b/1/x", "b/10", "b/2", "b/\xff"}; !slices.Equal(got, want) {
			t.Fatalf("Scan(b/) = %q, want %q", got, want)
		}
		if got, want := scanKeys(t, kv, "b/1"), []string{"b/1", "b/1/x", "b/10"}; !slices.Equal(got, want) {
			t.Fatalf("Scan(b/1) = %q, want %q", got, want)
		}
		if got, want := scanKeys(t, kv, "\xff"), []string{"\xff\xff"}; !slices.Equal(got, want) {
			t.Fatalf("Scan(\\xff) = %q, want %q", got, want)
		}
		if got := scanKeys(t, kv, "zz"); len(got) != 0 {
			t.Fatalf("Scan(zz) = %q, want none", got)
		}
		// Values match their keys.
		if err := kv.Scan([]byte("b"), func(k, v []byte) error {
			if string(v) != "v-"+string(k) {
				return fmt.Errorf("value of %q = %q", k, v)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		// An error from fn stops the scan and comes back.
		stop := errors.New("stop")
		n := 0
		err := kv.Scan(nil, func(_, _ []byte) error {
			n++
			if n == 3 {
				return stop
			}
			return nil
		})
		if !errors.Is(err, stop) || n != 3 {
			t.Fatalf("Scan with failing fn: err %v after %d calls, want stop after 3", err, n)
		}
		// fn may write (no lock held across it).
		if err := kv.Scan([]byte("c"), func(k, _ []byte) error {
			return kv.Commit(ctx, put("d", "from-scan"))
		}); err != nil {
			t.Fatalf("Commit inside Scan: %v", err)
		}
		wantValue(t, kv, "d", "from-scan")
	})

	t.Run("AtomicMultiOp", func(t *testing.T) {
		kv := newKV(t)
		mustCommit(t, kv, put("x/a", "0"), put("x/b", "0"), put("x/gone", "0"))
		// Ops apply in order: later ops on one key win.
		mustCommit(t, kv, put("x/gone", "1"), del("x/gone"), del("x/back"), put("x/back", "2"))
		wantAbsent(t, kv, "x/gone")
		wantValue(t, kv, "x/back", "2")
		mustCommit(t, kv, del("x/back"))

		// A reader never sees one half of a commit.
		const rounds = 200
		done := make(chan error, 1)
		go func() {
			for i := 1; i <= rounds; i++ {
				v := fmt.Sprint(i)
				if err := kv.Commit(ctx, put("x/a", v), put("x/b", v)); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		for finished := false; !finished; {
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Commit: %v", err)
				}
				finished = true
			default:
			}
			var seen []string
			if err := kv.Scan([]byte("x/"), func(_, v []byte) error {
				seen = append(seen, string(v))
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(seen) != 2 || seen[0] != seen[1] {
				t.Fatalf("scan saw a partial commit: %q", seen)
			}
		}
		wantValue(t, kv, "x/a", fmt.Sprint(rounds))
		wantValue(t, kv, "x/b", fmt.Sprint(rounds))
	})

	t.Run("TTL", func(t *testing.T) {
		kv := newKV(t)
		const ttl = 500 * time.Millisecond
		mustCommit(t, kv, Op{Key: []byte("t/short"), Value: []byte("s"), TTL: ttl}, put("t/keep", "k"))
		// Badger rounds expiry up to whole seconds, so the entry is there for at least ttl.
		wantValue(t, kv, "t/short", "s")
		if got, want := scanKeys(t, kv, "t/"), []string{"t/keep", "t/short"}; !slices.Equal(got, want) {
			t.Fatalf("Scan before expiry = %q, want %q", got, want)
		}
		waitFor(t, 5*time.Second, "the TTL'd entry to expire", func() bool {
			_, err := kv.Get([]byte("t/short"))
			return errors.Is(err, ErrNotFound)
		})
		if got, want := scanKeys(t, kv, "t/"), []string{"t/keep"}; !slices.Equal(got, want) {
			t.Fatalf("Scan after expiry = %q, want %q", got, want)
		}
		wantValue(t, kv, "t/keep", "k")
		// An expired key can be written again.
		mustCommit(t, kv, put("t/short", "again"))
		wantValue(t, kv, "t/short", "again")
	})

	t.Run("ConcurrentCommits", func(t *testing.T) {
		kv := newKV(t)
		const workers, each = 32, 40
		var wg sync.WaitGroup
		errs := make(chan error, workers)
		for w := range workers {
			wg.Go(func() {
				for i := range each {
					k := fmt.Sprintf("c/%02d/%03d", w, i)
					if err := kv.Commit(ctx, put(k, k), put(k+"/twin", k)); err != nil {
						errs <- err
						return
					}
					// Visible as soon as Commit returns.
					if v, err := kv.Get([]byte(k + "/twin")); err != nil || string(v) != k {
						errs <- fmt.Errorf("read own write %s: %q, %v", k, v, err)
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if n := len(scanKeys(t, kv, "c/")); n != workers*each*2 {
			t.Fatalf("scan found %d keys, want %d", n, workers*each*2)
		}
	})

	t.Run("IfAbsent", func(t *testing.T) {
		kv := newKV(t)
		guarded := func(k, v string) error { return kv.Commit(ctx, IfAbsentOp([]byte(k)), put(k, v), put(k+"/body", v)) }
		if err := guarded("g", "1"); err != nil {
			t.Fatal(err)
		}
		if err := guarded("g", "2"); !errors.Is(err, ErrExists) {
			t.Fatalf("second put-if-absent = %v, want ErrExists", err)
		}
		wantValue(t, kv, "g", "1")
		wantValue(t, kv, "g/body", "1") // nothing of the refused commit was written
		wantAbsent(t, kv, "IfAbsent")   // the condition itself writes nothing
		mustCommit(t, kv, IfAbsentOp([]byte("IfAbsent")))
		wantAbsent(t, kv, "IfAbsent")

		// IfPresent: the opposite condition.
		if err := kv.Commit(ctx, IfPresentOp([]byte("nope")), put("p", "1")); !errors.Is(err, ErrNotFound) {
			t.Fatalf("if-present on an absent key = %v, want ErrNotFound", err)
		}
		wantAbsent(t, kv, "p")
		mustCommit(t, kv, IfPresentOp([]byte("g")), put("p", "2"))
		wantValue(t, kv, "p", "2")
		if got, err := Has(kv, [][]byte{[]byte("g"), []byte("nope"), []byte("p")}); err != nil || fmt.Sprint(got) != "[true false true]" {
			t.Fatalf("Has = %v, %v", got, err)
		}

		// Many callers racing for the same keys: exactly one wins each, whatever the groups.
		const racers, keys = 16, 20
		var wins atomic.Int64
		var wg sync.WaitGroup
		for r := range racers {
			wg.Go(func() {
				for k := range keys {
					switch err := guarded(fmt.Sprintf("race/%02d", k), fmt.Sprint(r)); {
					case err == nil:
						wins.Add(1)
					case !errors.Is(err, ErrExists):
						t.Error(err)
					}
				}
			})
		}
		wg.Wait()
		if wins.Load() != keys {
			t.Fatalf("%d put-if-absent won, want %d (one per key)", wins.Load(), keys)
		}
		for k := range keys {
			a, _ := kv.Get(fmt.Appendf(nil, "race/%02d", k))
			b, _ := kv.Get(fmt.Appendf(nil, "race/%02d/body", k))
			if string(a) != string(b) {
				t.Fatalf("key %d: winner %q but body %q", k, a, b)
			}
		}
	})

	t.Run("AfterClose", func(t *testing.T) {
		kv := newKV(t)
		mustCommit(t, kv, put("a", "1"))
		if err := kv.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		if err := kv.Commit(ctx, put("a", "2")); !errors.Is(err, ErrClosed) {
			t.Fatalf("Commit after Close = %v, want ErrClosed", err)
		}
		if _, err := kv.Get([]byte("a")); !errors.Is(err, ErrClosed) {
			t.Fatalf("Get after Close = %v, want ErrClosed", err)
		}
		if err := kv.Scan(nil, func(_, _ []byte) error { return nil }); !errors.Is(err, ErrClosed) {
			t.Fatalf("Scan after Close = %v, want ErrClosed", err)
		}
		if err := kv.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})

	t.Run("CloseDuringCommits", func(t *testing.T) {
		kv := newKV(t)
		var wg sync.WaitGroup
		errs := make(chan error, 16)
		for w := range 16 {
			wg.Go(func() {
				for i := 0; ; i++ {
					err := kv.Commit(ctx, put(fmt.Sprintf("w%d/%d", w, i), "v"))
					if errors.Is(err, ErrClosed) {
						return
					}
					if err != nil {
						errs <- err
						return
					}
				}
			})
		}
		waitFor(t, 5*time.Second, "some commits", func() bool { return len(scanKeys(t, kv, "w1")) > 5 })
		if err := kv.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("Commit racing Close: %v (want nil or ErrClosed)", err)
		}
	})
}
