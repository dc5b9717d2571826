// Package kvtest is the contract every persist.KV implementation meets, as a suite any package
// can run against its own store: Badger and the in-memory KV run it in persist, JetStream in
// persist/natskv. A new implementation passes Run before it may hold the gateway's records.
//
// What the contract says, beyond the KV interface's comments:
//   - keys are any non-empty bytes (every byte value, NUL and "/" included) up to the store's
//     key limit; Scan returns them in byte order, whatever the store does underneath (a store
//     that cannot keep bytes as they are encodes them reversibly and in order);
//   - a Commit is atomic: a reader sees all of it or nothing, and a refused op (ErrInvalid) or
//     a failed condition (ErrExists for IfAbsent, ErrNotFound for IfPresent) writes nothing;
//   - conditions hold under concurrent committers: of many racing IfAbsent commits on one key,
//     exactly one wins; conditions see the state before the commit, not its own writes;
//   - a TTL'd key is gone (Get, Scan, conditions) once its TTL has passed, and not before;
//   - values up to the store's value limit round-trip byte for byte;
//   - what was committed before Close is there after a reopen (durable stores);
//   - while the store is unavailable, Commit fails with domain.ErrStorageUnavailable and
//     writes nothing, Health (persist.Durable) says so, and the store recovers by itself when
//     the cause is gone.
//
// Imports: persist and the standard library only.
package kvtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
)

// Factory opens the stores the suite runs on.
type Factory struct {
	// Open returns a fresh, empty store, closed at the end of the test.
	Open func(t *testing.T) persist.KV
	// Reopen closes kv and opens the same data again. Nil: the store keeps nothing across
	// Close (the memory KV), and the close-and-reopen case is not run.
	Reopen func(t *testing.T, kv persist.KV) persist.KV
	// Unavailable makes kv's storage unavailable until the returned restore is called (a full
	// disk, a stopped server). Nil: the store cannot be unavailable (the memory KV).
	Unavailable func(t *testing.T, kv persist.KV) (restore func())
	// MaxKey is the length of the longest key of letters the store takes (0: persist.MaxKeySize);
	// a longer one is refused with ErrInvalid.
	MaxKey int
	// MaxValue is the largest value the store takes (0: persist.MaxValueSize). The suite writes
	// one of min(MaxValue, 4 MiB) and, when MaxValue is at most 16 MiB, checks that one byte
	// more is refused with ErrInvalid.
	MaxValue int
}

// Run runs the whole contract against the stores f opens.
func Run(t *testing.T, f Factory) {
	if f.MaxKey == 0 {
		f.MaxKey = persist.MaxKeySize
	}
	if f.MaxValue == 0 {
		f.MaxValue = persist.MaxValueSize
	}
	cases := []struct {
		name string
		run  func(t *testing.T, f Factory)
	}{
		{"GetPutDelete", testGetPutDelete},
		{"InvalidOpsRefusedWhole", testInvalidOps},
		{"CanceledContext", testCanceledContext},
		{"ScanOrderAndPrefix", testScanOrder},
		{"KeyAlphabet", testKeyAlphabet},
		{"AtomicMultiOp", testAtomicMultiOp},
		{"TTL", testTTL},
		{"LargeValues", testLargeValues},
		{"ConcurrentCommits", testConcurrentCommits},
		{"IfAbsentIfPresent", testConditions},
		{"ConcurrentConditions", testConcurrentConditions},
		{"AfterClose", testAfterClose},
		{"CloseDuringCommits", testCloseDuringCommits},
	}
	if f.Reopen != nil {
		cases = append(cases, struct {
			name string
			run  func(t *testing.T, f Factory)
		}{"CloseAndReopen", testReopen})
	}
	if f.Unavailable != nil {
		cases = append(cases, struct {
			name string
			run  func(t *testing.T, f Factory)
		}{"Unavailable", testUnavailable})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.run(t, f) })
	}
}

// Put is the write of value at key.
func Put(key, value string) persist.Op { return persist.Op{Key: []byte(key), Value: []byte(value)} }

// Del is the removal of key.
func Del(key string) persist.Op { return persist.Op{Key: []byte(key), Delete: true} }

// MustCommit commits ops or fails the test.
func MustCommit(t testing.TB, kv persist.KV, ops ...persist.Op) {
	t.Helper()
	if err := kv.Commit(context.Background(), ops...); err != nil {
		t.Fatalf("Commit: %v", err)
	}
}

// WantValue fails the test unless key holds want.
func WantValue(t testing.TB, kv persist.KV, key, want string) {
	t.Helper()
	got, err := kv.Get([]byte(key))
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	if string(got) != want {
		t.Fatalf("Get(%q) = %q, want %q", key, got, want)
	}
}

// WantAbsent fails the test unless key is absent.
func WantAbsent(t testing.TB, kv persist.KV, key string) {
	t.Helper()
	if got, err := kv.Get([]byte(key)); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Fatalf("Get(%q) = %q, %v; want ErrNotFound", key, got, err)
	}
}

// ScanKeys returns the keys under prefix, in the order Scan gives them.
func ScanKeys(t testing.TB, kv persist.KV, prefix string) []string {
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

// WaitFor polls cond until it holds or total has passed.
func WaitFor(t testing.TB, total time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(total)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", total, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func testGetPutDelete(t *testing.T, f Factory) {
	kv := f.Open(t)
	WantAbsent(t, kv, "a")
	WantAbsent(t, kv, "")
	MustCommit(t, kv, Put("a", "1"))
	WantValue(t, kv, "a", "1")
	MustCommit(t, kv, Put("a", "2"))
	WantValue(t, kv, "a", "2")

	// Get returns the caller's own copy.
	v, _ := kv.Get([]byte("a"))
	v[0] = 'x'
	WantValue(t, kv, "a", "2")

	// Commit copies: reusing the op's slices afterwards changes nothing.
	key, val := []byte("b"), []byte("v")
	MustCommit(t, kv, persist.Op{Key: key, Value: val})
	key[0], val[0] = 'z', 'z'
	WantValue(t, kv, "b", "v")

	MustCommit(t, kv, Del("a"))
	WantAbsent(t, kv, "a")
	MustCommit(t, kv, Del("never-written")) // deleting an absent key is fine
	MustCommit(t, kv)                       // so is an empty commit

	MustCommit(t, kv, persist.Op{Key: []byte("empty")})
	WantValue(t, kv, "empty", "")
	// A deleted key can be written again.
	MustCommit(t, kv, Put("a", "3"))
	WantValue(t, kv, "a", "3")
}

func testInvalidOps(t *testing.T, f Factory) {
	kv := f.Open(t)
	ctx := context.Background()
	MustCommit(t, kv, Put(string(bytes.Repeat([]byte("k"), f.MaxKey)), "longest"))
	WantValue(t, kv, string(bytes.Repeat([]byte("k"), f.MaxKey)), "longest")
	bad := []persist.Op{
		{Key: nil, Value: []byte("x")},
		{Key: bytes.Repeat([]byte("k"), f.MaxKey+1)},
		{Key: []byte("!badger!head")},
		{Key: []byte("k"), TTL: -time.Second},
	}
	for i, b := range bad {
		err := kv.Commit(ctx, Put("good", "1"), b)
		if !errors.Is(err, domain.ErrRecordInvalid) {
			t.Fatalf("bad op %d: Commit error = %v, want ErrInvalid", i, err)
		}
		WantAbsent(t, kv, "good")
	}
}

func testCanceledContext(t *testing.T, f Factory) {
	kv := f.Open(t)
	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := kv.Commit(cctx, Put("a", "1")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Commit with canceled ctx = %v, want context.Canceled", err)
	}
	WantAbsent(t, kv, "a")
}

func testScanOrder(t *testing.T, f Factory) {
	kv := f.Open(t)
	ctx := context.Background()
	keys := []string{"b/2", "a", "b", "b/10", "c", "b/1", "ba", "b0", "b/\xff", "b/1/x", "\xff\xff", "b/1\x00k", "b/1\x00"}
	for _, k := range keys {
		MustCommit(t, kv, Put(k, "v-"+k))
	}
	all := slices.Clone(keys)
	slices.Sort(all)
	if got := ScanKeys(t, kv, ""); !slices.Equal(got, all) {
		t.Fatalf("Scan(all) = %q, want %q", got, all)
	}
	if got, want := ScanKeys(t, kv, "b/"), []string{"b/1", "b/1\x00", "b/1\x00k", "b/1/x", "b/10", "b/2", "b/\xff"}; !slices.Equal(got, want) {
		t.Fatalf("Scan(b/) = %q, want %q", got, want)
	}
	if got, want := ScanKeys(t, kv, "b/1"), []string{"b/1", "b/1\x00", "b/1\x00k", "b/1/x", "b/10"}; !slices.Equal(got, want) {
		t.Fatalf("Scan(b/1) = %q, want %q", got, want)
	}
	if got, want := ScanKeys(t, kv, "b/1\x00"), []string{"b/1\x00", "b/1\x00k"}; !slices.Equal(got, want) {
		t.Fatalf("Scan(b/1\\x00) = %q, want %q", got, want)
	}
	if got, want := ScanKeys(t, kv, "\xff"), []string{"\xff\xff"}; !slices.Equal(got, want) {
		t.Fatalf("Scan(\\xff) = %q, want %q", got, want)
	}
	if got := ScanKeys(t, kv, "zz"); len(got) != 0 {
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
		return kv.Commit(ctx, Put("d", "from-scan"))
	}); err != nil {
		t.Fatalf("Commit inside Scan: %v", err)
	}
	WantValue(t, kv, "d", "from-scan")
	// Deleted keys leave the scan.
	MustCommit(t, kv, Del("b/2"), Del("b/1\x00"))
	if got, want := ScanKeys(t, kv, "b/"), []string{"b/1", "b/1\x00k", "b/1/x", "b/10", "b/\xff"}; !slices.Equal(got, want) {
		t.Fatalf("Scan(b/) after deletes = %q, want %q", got, want)
	}
}

// Every byte value is a key byte: one key of each single byte, one holding all 256 in order,
// and keys with empty "/"-separated parts. Each round-trips, and Scan returns them in byte
// order.
func testKeyAlphabet(t *testing.T, f Factory) {
	kv := f.Open(t)
	var keys []string
	for b := range 256 {
		keys = append(keys, "one/"+string([]byte{byte(b)}), "one/"+string([]byte{byte(b), 'z'}))
	}
	every := make([]byte, 256)
	for i := range every {
		every[i] = byte(i)
	}
	keys = append(keys, "every/"+string(every), "every/"+string(every[1:]), string(every[1:]))
	// Empty parts, trailing and leading separators.
	keys = append(keys, "one//", "one///x", "one/", "/", "//", "/x", "one/..", "one/./")
	ops := make([]persist.Op, 0, len(keys))
	for _, k := range keys {
		ops = append(ops, Put(k, fmt.Sprintf("%x", k)))
	}
	for chunk := range slices.Chunk(ops, 64) {
		MustCommit(t, kv, chunk...)
	}
	for _, k := range keys {
		WantValue(t, kv, k, fmt.Sprintf("%x", k))
	}
	sorted := slices.Clone(keys)
	slices.Sort(sorted)
	sorted = slices.Compact(sorted)
	if got := ScanKeys(t, kv, ""); !slices.Equal(got, sorted) {
		t.Fatalf("Scan(all) is not in byte order:\n got %q\nwant %q", got, sorted)
	}
	var under []string
	for _, k := range sorted {
		if len(k) >= 4 && k[:4] == "one/" {
			under = append(under, k)
		}
	}
	if got := ScanKeys(t, kv, "one/"); !slices.Equal(got, under) {
		t.Fatalf("Scan(one/) = %q, want %q", got, under)
	}
	if got, want := ScanKeys(t, kv, "every/"), []string{"every/" + string(every), "every/" + string(every[1:])}; !slices.Equal(got, want) {
		t.Fatalf("Scan(every/) = %q, want %q", got, want)
	}
}

func testAtomicMultiOp(t *testing.T, f Factory) {
	kv := f.Open(t)
	ctx := context.Background()
	MustCommit(t, kv, Put("x/a", "0"), Put("x/b", "0"), Put("x/gone", "0"))
	// Ops apply in order: later ops on one key win.
	MustCommit(t, kv, Put("x/gone", "1"), Del("x/gone"), Del("x/back"), Put("x/back", "2"))
	WantAbsent(t, kv, "x/gone")
	WantValue(t, kv, "x/back", "2")
	MustCommit(t, kv, Del("x/back"))

	// A reader never sees one half of a commit.
	const rounds = 200
	done := make(chan error, 1)
	go func() {
		for i := 1; i <= rounds; i++ {
			v := fmt.Sprint(i)
			if err := kv.Commit(ctx, Put("x/a", v), Put("x/b", v)); err != nil {
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
	WantValue(t, kv, "x/a", fmt.Sprint(rounds))
	WantValue(t, kv, "x/b", fmt.Sprint(rounds))
}

func testTTL(t *testing.T, f Factory) {
	kv := f.Open(t)
	// A store may count the TTL from before its commit returns (NATS: the writer's expiry),
	// so a commit slow under load leaves less of it for the reads below: such a commit is
	// made again with twice the TTL.
	ttl := 500 * time.Millisecond
	for {
		start := time.Now()
		MustCommit(t, kv, persist.Op{Key: []byte("t/short"), Value: []byte("s"), TTL: ttl}, Put("t/keep", "k"),
			persist.Op{Key: []byte("t/long"), Value: []byte("l"), TTL: time.Hour})
		if time.Since(start) < ttl/4 || ttl >= 8*time.Second {
			break
		}
		ttl *= 2
	}
	// Stores may round a TTL up (to whole seconds), never down: the entry is there at first.
	WantValue(t, kv, "t/short", "s")
	if got, want := ScanKeys(t, kv, "t/"), []string{"t/keep", "t/long", "t/short"}; !slices.Equal(got, want) {
		t.Fatalf("Scan before expiry = %q, want %q", got, want)
	}
	if err := kv.Commit(context.Background(), persist.IfAbsentOp([]byte("t/short"))); !errors.Is(err, domain.ErrRecordExists) {
		t.Fatalf("IfAbsent on a live TTL'd key = %v, want ErrExists", err)
	}
	WaitFor(t, ttl+5*time.Second, "the TTL'd entry to expire", func() bool {
		_, err := kv.Get([]byte("t/short"))
		return errors.Is(err, domain.ErrRecordNotFound)
	})
	if got, want := ScanKeys(t, kv, "t/"), []string{"t/keep", "t/long"}; !slices.Equal(got, want) {
		t.Fatalf("Scan after expiry = %q, want %q", got, want)
	}
	WantValue(t, kv, "t/keep", "k")
	WantValue(t, kv, "t/long", "l")
	// An expired key is absent for conditions too, and can be written again.
	if err := kv.Commit(context.Background(), persist.IfPresentOp([]byte("t/short"))); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Fatalf("IfPresent on an expired key = %v, want ErrNotFound", err)
	}
	MustCommit(t, kv, persist.IfAbsentOp([]byte("t/short")), Put("t/short", "again"))
	WantValue(t, kv, "t/short", "again")
}

func testLargeValues(t *testing.T, f Factory) {
	kv := f.Open(t)
	size := min(f.MaxValue, 4<<20)
	big := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range big {
		big[i] = byte(rng.Uint32())
	}
	MustCommit(t, kv, persist.Op{Key: []byte("big/1"), Value: big}, Put("big/2", "small"))
	got, err := kv.Get([]byte("big/1"))
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("Get(big/1): %d bytes, %v; want the %d bytes written", len(got), err, size)
	}
	n := 0
	if err := kv.Scan([]byte("big/"), func(k, v []byte) error {
		if string(k) == "big/1" && !bytes.Equal(v, big) {
			return fmt.Errorf("scan gave %d bytes for big/1", len(v))
		}
		n++
		return nil
	}); err != nil || n != 2 {
		t.Fatalf("Scan(big/): %d keys, %v", n, err)
	}
	if f.MaxValue <= 16<<20 {
		err := kv.Commit(context.Background(), Put("big/3", "x"), persist.Op{Key: []byte("big/4"), Value: make([]byte, f.MaxValue+1)})
		if !errors.Is(err, domain.ErrRecordInvalid) {
			t.Fatalf("value of %d bytes: %v, want ErrInvalid", f.MaxValue+1, err)
		}
		WantAbsent(t, kv, "big/3")
	}
}

func testConcurrentCommits(t *testing.T, f Factory) {
	kv := f.Open(t)
	ctx := context.Background()
	const workers, each = 32, 40
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				k := fmt.Sprintf("c/%02d/%03d", w, i)
				if err := kv.Commit(ctx, Put(k, k), Put(k+"/twin", k)); err != nil {
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
	if n := len(ScanKeys(t, kv, "c/")); n != workers*each*2 {
		t.Fatalf("scan found %d keys, want %d", n, workers*each*2)
	}
}

func testConditions(t *testing.T, f Factory) {
	kv := f.Open(t)
	ctx := context.Background()
	guarded := func(k, v string) error {
		return kv.Commit(ctx, persist.IfAbsentOp([]byte(k)), Put(k, v), Put(k+"/body", v))
	}
	if err := guarded("g", "1"); err != nil {
		t.Fatal(err)
	}
	if err := guarded("g", "2"); !errors.Is(err, domain.ErrRecordExists) {
		t.Fatalf("second put-if-absent = %v, want ErrExists", err)
	}
	WantValue(t, kv, "g", "1")
	WantValue(t, kv, "g/body", "1") // nothing of the refused commit was written
	WantAbsent(t, kv, "IfAbsent")   // the condition itself writes nothing
	MustCommit(t, kv, persist.IfAbsentOp([]byte("IfAbsent")))
	WantAbsent(t, kv, "IfAbsent")

	// IfPresent: the opposite condition.
	if err := kv.Commit(ctx, persist.IfPresentOp([]byte("nope")), Put("p", "1")); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Fatalf("if-present on an absent key = %v, want ErrNotFound", err)
	}
	WantAbsent(t, kv, "p")
	MustCommit(t, kv, persist.IfPresentOp([]byte("g")), Put("p", "2"))
	WantValue(t, kv, "p", "2")
	if got, err := persist.Has(kv, [][]byte{[]byte("g"), []byte("nope"), []byte("p")}); err != nil || fmt.Sprint(got) != "[true false true]" {
		t.Fatalf("Has = %v, %v", got, err)
	}
	// Conditions see the state before the commit: a put and an IfPresent of one key in one
	// commit fails when the key was absent.
	if err := kv.Commit(ctx, Put("q", "1"), persist.IfPresentOp([]byte("q"))); !errors.Is(err, domain.ErrRecordNotFound) {
		t.Fatalf("put then if-present of a new key = %v, want ErrNotFound", err)
	}
	WantAbsent(t, kv, "q")
	// A deleted key is absent: IfAbsent holds again, IfPresent fails.
	MustCommit(t, kv, persist.IfPresentOp([]byte("p")), Del("p"))
	WantAbsent(t, kv, "p")
	MustCommit(t, kv, persist.IfAbsentOp([]byte("p")), Put("p", "3"))
	WantValue(t, kv, "p", "3")
	// Several conditions in one commit, none of them on a written key: all must hold.
	if err := kv.Commit(ctx, persist.IfPresentOp([]byte("g")), persist.IfAbsentOp([]byte("p")), Put("r", "1")); !errors.Is(err, domain.ErrRecordExists) {
		t.Fatalf("two conditions, one failing = %v, want ErrExists", err)
	}
	WantAbsent(t, kv, "r")
	MustCommit(t, kv, persist.IfPresentOp([]byte("g")), persist.IfPresentOp([]byte("p")), persist.IfAbsentOp([]byte("r")), Put("r", "2"))
	WantValue(t, kv, "r", "2")
}

// Many committers racing for the same keys: of 16 put-if-absent commits on one key exactly one
// wins, and of 16 delete-if-present commits exactly one deletes; the losers write nothing.
func testConcurrentConditions(t *testing.T, f Factory) {
	kv := f.Open(t)
	ctx := context.Background()
	const racers, keys = 16, 12
	var wins [keys]atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for r := range racers {
		wg.Go(func() {
			<-start
			for k := range keys {
				key := fmt.Sprintf("race/%02d", k)
				err := kv.Commit(ctx, persist.IfAbsentOp([]byte(key)), Put(key, fmt.Sprint(r)), Put(key+"/body", fmt.Sprint(r)))
				switch {
				case err == nil:
					wins[k].Add(1)
				case !errors.Is(err, domain.ErrRecordExists):
					t.Errorf("racer %d, %s: %v", r, key, err)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	for k := range keys {
		if n := wins[k].Load(); n != 1 {
			t.Fatalf("key %d: %d put-if-absent commits won, want exactly 1", k, n)
		}
		a, _ := kv.Get(fmt.Appendf(nil, "race/%02d", k))
		b, _ := kv.Get(fmt.Appendf(nil, "race/%02d/body", k))
		if len(a) == 0 || string(a) != string(b) {
			t.Fatalf("key %d: winner %q but body %q", k, a, b)
		}
	}

	var deletes [keys]atomic.Int64
	start = make(chan struct{})
	for r := range racers {
		wg.Go(func() {
			<-start
			for k := range keys {
				key := fmt.Sprintf("race/%02d", k)
				err := kv.Commit(ctx, persist.IfPresentOp([]byte(key)), Del(key), Put(fmt.Sprintf("deleted/%02d/%02d", k, r), "x"))
				switch {
				case err == nil:
					deletes[k].Add(1)
				case !errors.Is(err, domain.ErrRecordNotFound):
					t.Errorf("racer %d, delete %s: %v", r, key, err)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	for k := range keys {
		if n := deletes[k].Load(); n != 1 {
			t.Fatalf("key %d: %d delete-if-present commits won, want exactly 1", k, n)
		}
		if got := ScanKeys(t, kv, fmt.Sprintf("deleted/%02d/", k)); len(got) != 1 {
			t.Fatalf("key %d: the losers' writes landed: %q", k, got)
		}
		WantAbsent(t, kv, fmt.Sprintf("race/%02d", k))
	}
}

func testAfterClose(t *testing.T, f Factory) {
	kv := f.Open(t)
	ctx := context.Background()
	MustCommit(t, kv, Put("a", "1"))
	if err := kv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := kv.Commit(ctx, Put("a", "2")); !errors.Is(err, persist.ErrClosed) {
		t.Fatalf("Commit after Close = %v, want ErrClosed", err)
	}
	if _, err := kv.Get([]byte("a")); !errors.Is(err, persist.ErrClosed) {
		t.Fatalf("Get after Close = %v, want ErrClosed", err)
	}
	if err := kv.Scan(nil, func(_, _ []byte) error { return nil }); !errors.Is(err, persist.ErrClosed) {
		t.Fatalf("Scan after Close = %v, want ErrClosed", err)
	}
	if err := kv.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func testCloseDuringCommits(t *testing.T, f Factory) {
	kv := f.Open(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for w := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				err := kv.Commit(ctx, Put(fmt.Sprintf("w%d/%d", w, i), "v"))
				if errors.Is(err, persist.ErrClosed) {
					return
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	WaitFor(t, 10*time.Second, "some commits", func() bool { return len(ScanKeys(t, kv, "w1/")) > 5 })
	if err := kv.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Commit racing Close: %v (want nil or ErrClosed)", err)
	}
}

// What was committed before Close is there after a reopen; TTLs and deletes too.
func testReopen(t *testing.T, f Factory) {
	kv := f.Open(t)
	var acked atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := range 25 {
				if err := kv.Commit(context.Background(), Put(fmt.Sprintf("r/%d/%02d", w, i), "v")); err != nil {
					t.Errorf("Commit: %v", err)
					return
				}
				acked.Add(1)
			}
		})
	}
	MustCommit(t, kv, Put("k/1", "one"), Put("k/2", "two"), persist.Op{Key: []byte("k/ttl"), Value: []byte("t"), TTL: time.Hour})
	MustCommit(t, kv, Del("k/2"))
	wg.Wait()
	kv = f.Reopen(t, kv)
	WantValue(t, kv, "k/1", "one")
	WantAbsent(t, kv, "k/2")
	WantValue(t, kv, "k/ttl", "t")
	if n := len(ScanKeys(t, kv, "r/")); int64(n) != acked.Load() {
		t.Fatalf("after reopen %d keys, want the %d acknowledged", n, acked.Load())
	}
	MustCommit(t, kv, persist.IfAbsentOp([]byte("k/2")), Put("k/2", "again"))
	WantValue(t, kv, "k/2", "again")
}

// While the storage is unavailable, commits fail with ErrStorageUnavailable and write nothing;
// reads either work or fail the same way; once it is back, the same store commits again.
func testUnavailable(t *testing.T, f Factory) {
	kv := f.Open(t)
	ctx := context.Background()
	MustCommit(t, kv, Put("u/before", "1"))
	health, _ := kv.(interface{ Health() error })
	if health != nil && health.Health() != nil {
		t.Fatalf("Health before: %v", health.Health())
	}
	restore := f.Unavailable(t, kv)
	WaitFor(t, 10*time.Second, "commits to be refused", func() bool {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		err := kv.Commit(cctx, Put("u/probe", "x"))
		if err != nil && !errors.Is(err, domain.ErrStorageUnavailable) {
			t.Fatalf("Commit while unavailable = %v, want ErrStorageUnavailable", err)
		}
		return err != nil
	})
	began := time.Now()
	err := kv.Commit(ctx, Put("u/during", "x"))
	if !errors.Is(err, domain.ErrStorageUnavailable) {
		t.Fatalf("Commit while unavailable = %v, want ErrStorageUnavailable", err)
	}
	if d := time.Since(began); d > 10*time.Second {
		t.Fatalf("a refused commit took %v", d)
	}
	if _, err := kv.Get([]byte("u/before")); err != nil && !errors.Is(err, domain.ErrStorageUnavailable) {
		t.Fatalf("Get while unavailable = %v, want a value or ErrStorageUnavailable", err)
	}
	if health != nil && !errors.Is(health.Health(), domain.ErrStorageUnavailable) {
		t.Fatalf("Health while unavailable = %v, want ErrStorageUnavailable", health.Health())
	}
	restore()
	WaitFor(t, 30*time.Second, "commits to be accepted again", func() bool {
		return kv.Commit(ctx, Put("u/after", "1")) == nil
	})
	if health != nil {
		WaitFor(t, 10*time.Second, "Health to clear", func() bool { return health.Health() == nil })
	}
	WantValue(t, kv, "u/before", "1")
	WantAbsent(t, kv, "u/during")
	WantValue(t, kv, "u/after", "1")
}
