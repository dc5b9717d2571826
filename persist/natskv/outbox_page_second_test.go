package natskv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/natskv"
	"github.com/gateway/gateway/persist/natstest"
)

// A cluster's partition on JetStream pages its outcomes per second (persist.Outbox.PagesPerSecond)
// while a node of a rolling upgrade pages per window (--nats-window-pages): a message's later
// outcome may be in either. Another node's view of the partition, booted and not, reads each
// message's newest outcome by stream order over both (a late failure in a window's page after
// a sent outcome in a second's, and the other way round), a keyed retry of a derived id naming
// its window finds it, and the boot finds nothing pending.
func TestSecondPagesBesideWindowPages(t *testing.T) {
	srv := natstest.Start(t)
	open := func() *natskv.Store { return openPartitioned(t, srv.URL, "pgsec") }
	boot := func(o *persist.Outbox) *persist.Outbox {
		if _, err := o.Pending(); err != nil {
			t.Fatal(err)
		}
		return o
	}
	view := open().Partition(2, nil)
	coarse := persist.NewOutbox(view)
	coarse.PagesPerSecond(true)
	boot(coarse)
	node := func(kv persist.KV) *persist.Outbox { // another node's, with --nats-window-pages
		o := persist.NewOutbox(kv)
		o.PagesPerSecond(false)
		return o
	}
	windowed := boot(node(open().Partition(2, nil)))
	now := time.Now().UTC().Truncate(time.Millisecond)
	a := acceptNew(t, coarse, "u1", now) // sent in a second's page, failed in a window's
	b := acceptNew(t, coarse, "u1", now) // sent in a window's page, failed in a second's
	keyed := acceptSent(t, coarse, fmt.Sprintf("3EB0%08X00000000ABCD", uint32(now.UnixMilli()/10)), "hash-keyed", now)
	sent(&a, now)
	settle(t, coarse, a)
	sent(&b, now)
	settle(t, windowed, b)
	for _, c := range []struct {
		o *persist.Outbox
		e domain.OutboxEntry
	}{{windowed, a}, {coarse, b}} {
		c.e.SetStatus(domain.MsgFailed, now.Add(2*time.Second))
		c.e.Code, c.e.Error = "x", "late"
		settle(t, c.o, c.e)
	}
	if keysUnder(t, view, "outbox_page/s") == 0 || keysUnder(t, view, "outbox_page/") == keysUnder(t, view, "outbox_page/s") {
		t.Fatal("not both kinds of pages: the test tests nothing")
	}
	third := open()
	for name, o := range map[string]*persist.Outbox{"not booted": node(third.Partition(2, nil)), "booted": boot(node(third.Partition(2, nil)))} {
		for _, e := range []domain.OutboxEntry{a, b} {
			if got, err := o.Get(e.ID); err != nil || got.Status != domain.MsgFailed {
				t.Fatalf("%s: %s read %s, %v; want its later outcome, failed", name, e.ID, got.Status, err)
			}
		}
		if r, err := o.IdemFind([]string{keyed.ID}, "", func(domain.IdemRecord) bool { return true }); err != nil || r.MessageID != keyed.ID {
			t.Fatalf("%s: keyed retry %+v, %v", name, r, err)
		}
	}
	if p, err := node(third.Partition(2, nil)).Pending(); err != nil || len(p) != 0 {
		t.Fatalf("pending: %d, %v", len(p), err)
	}
}

// openPartitioned opens a store of 4 partitions on the server at url (another node's, each
// call).
func openPartitioned(t *testing.T, url, prefix string) *natskv.Store {
	t.Helper()
	kv, err := natskv.Open(context.Background(), natskv.Options{URL: url, Prefix: prefix, Timeout: 10 * time.Second, Partitions: 4})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close() })
	return kv
}
