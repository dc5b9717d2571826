package natskv_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/natskv"
)

// startSmallPayload starts an embedded JetStream server with max_payload set to maxPayload
// (nats-server takes any value up to max_pending) and returns its URL.
func startSmallPayload(t *testing.T, maxPayload int32) string {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, NoLog: true, NoSigs: true,
		JetStream: true, StoreDir: t.TempDir(), MaxPayload: maxPayload})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	t.Cleanup(func() {
		srv.Shutdown()
		srv.WaitForShutdown()
	})
	if !srv.ReadyForConnections(30 * time.Second) {
		t.Fatal("nats server: not ready after 30s")
	}
	return srv.ClientURL()
}

// On a server whose max_payload is 128 KiB (under the page's own bound, 256 KiB), the outcome
// page still fits a message: 120 failures with 2 KiB errors (250 KiB), gathered behind a held
// commit, go into one window's pages of under 128 KiB, three of them, and are read back. Before,
// a page took outcomes until it held 256 KiB, the commit refused it (a value past
// max_payload), and the outbox wrote its outcomes one by one (finishPart): 120 pages, each a
// commit, after a failed one.
func TestOutboxPageFitsSmallMaxPayload(t *testing.T) {
	url := startSmallPayload(t, 128<<10)
	kv, err := natskv.Open(context.Background(), natskv.Options{URL: url, Prefix: "small", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close() })
	if kv.MaxValue() >= 128<<10 {
		t.Fatalf("MaxValue %d on a server of max_payload 128 KiB", kv.MaxValue())
	}
	o := persist.NewOutbox(kv)
	if _, err := o.Pending(); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	const n = 121
	es := make([]domain.OutboxEntry, n)
	for i := range es {
		es[i] = acceptNew(t, o, "u1", at)
		es[i].SetStatus(domain.MsgFailed, at.Add(time.Second))
		es[i].Code, es[i].Error = "network_error", fmt.Sprintf("%d: %s", i, strings.Repeat("x", 2<<10))
	}
	// The first outcome's commit held: the others gather behind it.
	release, held := natskv.HoldGroups(0)
	released := false
	defer func() {
		if !released {
			release()
		}
	}()
	done := make(chan error, n)
	o.Settle(es[0], func(err error) { done <- err })
	waitFor(t, "the first outcome's commit held", func() bool { return held() == 1 })
	for _, e := range es[1:] {
		o.Settle(e, func(err error) { done <- err })
	}
	release()
	released = true
	for range n {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	pages := keysUnder(t, kv, "outbox_page/")
	if pages > 5 {
		t.Errorf("%d outcomes in %d pages: a page of its own each, not pages within max_payload", n, pages)
	}
	fresh := persist.NewOutbox(kv)
	for _, e := range es {
		got, err := fresh.Get(e.ID)
		if err != nil || got.Status != domain.MsgFailed || got.Error != e.Error {
			t.Fatalf("%s: %s %v", e.ID, got.Status, err)
		}
	}
	t.Logf("%d outcomes in %d pages", n, pages)
}

// A cluster's outbox writes through a View: it bounds its pages by the same MaxValue.
var _ interface{ MaxValue() int } = (*natskv.View)(nil)
