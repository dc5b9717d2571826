package natskv_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/kvtest"
	"github.com/gateway/gateway/persist/natskv"
	"github.com/gateway/gateway/persist/natstest"
)

// A partition's records prefetched while its lease waits out its TTL: the boot's scans then
// read only what was written after the prefetch (the old owner's last commits), and see
// exactly what a scan of the stream sees: a key written again, deleted, or added after the
// prefetch, and a record whose TTL ran out meanwhile.
func TestPrefetchedScansReadOnlyWhatChanged(t *testing.T) {
	srv := natstest.Start(t)
	open := func() *natskv.Store {
		s, err := natskv.Open(context.Background(), natskv.Options{URL: srv.URL, Prefix: "pre"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	const p = 5
	owner, taker, plain := open(), open(), open()
	ctx := context.Background()
	old := owner.Partition(p, nil)
	var ops []persist.Op
	for i := range 600 {
		ops = append(ops, kvtest.Put(fmt.Sprintf("a/%04d", i), "v"))
		if len(ops) == 100 {
			if err := old.Commit(ctx, ops...); err != nil {
				t.Fatal(err)
			}
			ops = nil
		}
	}
	ttl := kvtest.Put("d/ttl", "soon gone")
	ttl.TTL = time.Second
	for _, op := range []persist.Op{kvtest.Put("b/x", "1"), kvtest.Put("c/gone", "1"), ttl} {
		if err := old.Commit(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	// Another partition's records are not the prefetch's.
	if err := owner.Partition(p+1, nil).Commit(ctx, kvtest.Put("a/other", "x")); err != nil {
		t.Fatal(err)
	}

	if err := taker.Prefetch(ctx, p); err != nil {
		t.Fatal(err)
	}
	// The old owner's last commits, after the prefetch.
	for _, op := range []persist.Op{kvtest.Put("a/0001", "new"), kvtest.Del("c/gone"), kvtest.Put("b/y", "2"), kvtest.Put("e/new", "3")} {
		if err := old.Commit(ctx, op); err != nil {
			t.Fatal(err)
		}
	}
	// The TTL'd record lapses (the server may keep its message a moment longer).
	plainView := plain.Partition(p, nil)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := plainView.Get([]byte("d/ttl"))
		if errors.Is(err, domain.ErrRecordNotFound) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the TTL'd record never lapsed")
		}
		time.Sleep(50 * time.Millisecond)
	}

	scan := func(v *natskv.View, prefix string) string {
		var b strings.Builder
		if err := v.Scan([]byte(prefix), func(k, val []byte) error { fmt.Fprintf(&b, "%s=%s ", k, val); return nil }); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	boot := taker.Partition(p, nil)
	before := taker.ScanReads()
	for _, prefix := range []string{"", "a/", "a/000", "b/", "c/", "d/", "e/"} {
		if got, want := scan(boot, prefix), scan(plainView, prefix); got != want {
			t.Errorf("prefetched scan of %q:\n%.300s\nwant (a scan of the stream):\n%.300s", prefix, got, want)
		}
	}
	if !strings.Contains(scan(boot, "a/0001"), "a/0001=new") || strings.Contains(scan(boot, ""), "c/gone") || strings.Contains(scan(boot, ""), "d/ttl") {
		t.Errorf("the prefetched scan missed a change: %.200s", scan(boot, ""))
	}
	// Seven scans read the 4 messages written after the prefetch (each under its filter),
	// not the partition's 600 records each.
	if reads := taker.ScanReads() - before; reads > 7*4 {
		t.Errorf("the prefetched scans read %d messages from NATS, want only those written after the prefetch (at most %d)", reads, 7*4)
	}
	// Dropped: scans read the stream again.
	taker.DropPrefetch(p)
	before = taker.ScanReads()
	if got, want := scan(boot, "a/"), scan(plainView, "a/"); got != want {
		t.Errorf("scan after the drop: %.200s, want %.200s", got, want)
	}
	if reads := taker.ScanReads() - before; reads < 600 {
		t.Errorf("a scan after the drop read %d messages, want the partition's (600)", reads)
	}
}
