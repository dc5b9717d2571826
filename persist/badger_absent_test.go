package persist

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// waitAbsentReady waits for b's scan of the keys known absent to end.
func waitAbsentReady(t *testing.T, b *Badger) {
	t.Helper()
	waitFor(t, 10*time.Second, "the scan of the keys known absent", b.absent.ready.Load)
}

// A key under outlog_pos/ or idem/ never written is answered absent without a read, by Get,
// Has and readMany; one written is read (before and after a restart, which scans the keys on
// disk); a key elsewhere is always read.
func TestBadgerAbsentKeys(t *testing.T) {
	dir := t.TempDir()
	b := openTestBadger(t, dir, FsyncInterval)
	waitAbsentReady(t, b)
	mustCommit(t, b, put("outlog_pos/a", "pos-a"), put("idem/k", "rec-k"), put("other/x", "x"))
	mustCommit(t, b, Op{Key: []byte("outlog_pos/ttl"), Value: []byte("pos-ttl"), TTL: time.Hour})

	check := func(b *Badger) {
		t.Helper()
		wantValue(t, b, "outlog_pos/a", "pos-a")
		wantValue(t, b, "outlog_pos/ttl", "pos-ttl")
		wantValue(t, b, "idem/k", "rec-k")
		wantValue(t, b, "other/x", "x")
		before := b.absent.hits.Load()
		wantAbsent(t, b, "outlog_pos/never")
		wantAbsent(t, b, "idem/never")
		if got := b.absent.hits.Load() - before; got != 2 {
			t.Fatalf("absent keys answered without a read: %d, want 2", got)
		}
		before = b.absent.hits.Load()
		wantAbsent(t, b, "other/never") // not covered: read
		if got := b.absent.hits.Load() - before; got != 0 {
			t.Fatalf("a key outside the prefixes answered without a read")
		}
		vals, err := b.readMany([][]byte{[]byte("outlog_pos/never"), nil, []byte("outlog_pos/a"), []byte("idem/k"), []byte("idem/never")})
		if err != nil {
			t.Fatal(err)
		}
		if vals[0] != nil || vals[1] != nil || string(vals[2]) != "pos-a" || string(vals[3]) != "rec-k" || vals[4] != nil {
			t.Fatalf("readMany: %q", vals)
		}
		has, err := b.Has([][]byte{[]byte("idem/never"), []byte("idem/k"), []byte("outlog_pos/a")})
		if err != nil {
			t.Fatal(err)
		}
		if has[0] || !has[1] || !has[2] {
			t.Fatalf("Has: %v", has)
		}
	}
	check(b)
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = openTestBadger(t, dir, FsyncInterval)
	waitAbsentReady(t, b)
	check(b)
	// A key deleted stays a hash: read, and absent.
	mustCommit(t, b, del("outlog_pos/a"))
	wantAbsent(t, b, "outlog_pos/a")
}

// Keys written while the scan at open runs are found: the scan's read snapshot is taken, then
// held while four writers commit (so only Commit's add can make their keys known), then it
// reads the 20,000 keys on disk. A key written before or during the scan answered absent fails
// the test (it fails with the scan, or with Commit's add, taken out).
func TestBadgerAbsentKeysWrittenDuringTheScan(t *testing.T) {
	dir := t.TempDir()
	b := openTestBadger(t, dir, FsyncInterval)
	const onDisk = 20000
	for i := 0; i < onDisk; i += 500 {
		ops := make([]Op, 0, 500)
		for j := i; j < i+500; j++ {
			ops = append(ops, put(fmt.Sprintf("outlog_pos/disk-%d", j), "p"))
		}
		mustCommit(t, b, ops...)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	b, err := OpenBadger(dir, BadgerOptions{Fsync: FsyncInterval, absentHold: hold})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	var wg sync.WaitGroup
	const writers, each = 4, 300
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				key := "idem/live-"
				if i%2 == 1 {
					key = "outlog_pos/live-"
				}
				if err := b.Commit(context.Background(), put(fmt.Sprintf("%s%d-%d", key, w, i), "r")); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if b.absent.ready.Load() {
		t.Fatal("the scan ended while held")
	}
	close(hold)
	waitAbsentReady(t, b)
	for i := range onDisk {
		if _, err := b.Get(fmt.Appendf(nil, "outlog_pos/disk-%d", i)); err != nil {
			t.Fatalf("disk-%d: %v", i, err)
		}
	}
	for w := range writers {
		for i := range each {
			key := "idem/live-"
			if i%2 == 1 {
				key = "outlog_pos/live-"
			}
			if _, err := b.Get(fmt.Appendf(nil, "%s%d-%d", key, w, i)); err != nil {
				t.Fatalf("%s%d-%d: %v", key, w, i, err)
			}
		}
	}
	before := b.absent.hits.Load()
	wantAbsent(t, b, "outlog_pos/never")
	if b.absent.hits.Load() == before {
		t.Fatal("after the scan, a key never written was read")
	}
}

// The hash of a key expired over absentSlack ago is dropped; one without expiry, or expiring
// later, stays.
func TestAbsentKeysSweep(t *testing.T) {
	a := newAbsentKeys(absentPrefixes)
	a.ready.Store(true)
	now := time.Now()
	a.written([]Op{
		{Key: []byte("idem/short"), Value: []byte("v"), TTL: time.Minute},
		{Key: []byte("idem/long"), Value: []byte("v"), TTL: 48 * time.Hour},
		{Key: []byte("idem/forever"), Value: []byte("v")},
		{Key: []byte("idem/gone"), Delete: true},
		{Key: []byte("idem/cond"), IfAbsent: true},
		{Key: []byte("other/x"), Value: []byte("v")},
	}, now)
	if len(a.keys) != 3 {
		t.Fatalf("%d hashes, want 3 (short, long, forever)", len(a.keys))
	}
	a.sweep(now.Add(time.Minute + absentSlack/2))
	if a.absent([]byte("idem/short")) {
		t.Fatal("a key dropped before its expiry and the slack")
	}
	a.sweep(now.Add(time.Minute + absentSlack + 2*time.Second))
	if !a.absent([]byte("idem/short")) || a.absent([]byte("idem/long")) || a.absent([]byte("idem/forever")) {
		t.Fatalf("after the sweep: short absent %v, long absent %v, forever absent %v",
			a.absent([]byte("idem/short")), a.absent([]byte("idem/long")), a.absent([]byte("idem/forever")))
	}
	// Written again with an earlier expiry: the later one is kept.
	a.written([]Op{{Key: []byte("idem/long"), Value: []byte("v"), TTL: time.Minute}}, now)
	a.sweep(now.Add(time.Minute + absentSlack + 2*time.Second))
	if a.absent([]byte("idem/long")) {
		t.Fatal("a key written again with an earlier expiry was dropped at it")
	}
}

// Past its bound, the set keeps nothing and every look-up reads Badger.
func TestBadgerAbsentKeysBound(t *testing.T) {
	b := openTestBadger(t, t.TempDir(), FsyncInterval)
	waitAbsentReady(t, b)
	b.absent.mu.Lock()
	b.absent.max = 10
	b.absent.mu.Unlock()
	for i := range 11 {
		mustCommit(t, b, put(fmt.Sprintf("idem/%d", i), "r"))
	}
	if !b.absent.off.Load() {
		t.Fatal("over its bound, the set is still kept")
	}
	before := b.absent.hits.Load()
	for i := range 11 {
		wantValue(t, b, fmt.Sprintf("idem/%d", i), "r")
	}
	wantAbsent(t, b, "idem/never")
	if b.absent.hits.Load() != before {
		t.Fatal("a look-up answered without a read once the set is off")
	}
}

// A look-up that the commit taking the set past its bound overtakes (between absent's checks
// and its read of the map) reads the key: it never answers absent for a key that is there.
func TestAbsentKeysOffWhileLookingUp(t *testing.T) {
	a := newAbsentKeys(absentPrefixes)
	a.ready.Store(true)
	a.max = 1
	a.written([]Op{put("idem/there", "r")}, time.Now())
	a.checked = func() {
		a.checked = nil
		a.written([]Op{put("idem/more", "r")}, time.Now()) // past the bound: off
	}
	if a.absent([]byte("idem/there")) {
		t.Fatal("a key written answered absent as the set went off")
	}
	if !a.off.Load() || a.absent([]byte("idem/there")) {
		t.Fatal("off: every key must be read")
	}
}
