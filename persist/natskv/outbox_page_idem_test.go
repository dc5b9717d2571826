package natskv_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/natskv"
	"github.com/gateway/gateway/persist/natstest"
)

// A keyed send's look-up on NATS is IdemFind (the engine's idemRecord: every id the key may
// have derived and the key's own record, in one round trip). A derived id that names its
// accept's window by chance is paged: once its outcome is in a page and the message left the
// index, IdemFind must still find it, from this process, from a process booted after it, and
// from another node's view of the same partition (a takeover); otherwise the retry is accepted
// as a new message under the same id and sent twice. IdemFind skipped the pages.
func TestPagedOutboxIdemFindReadsPages(t *testing.T) {
	srv := natstest.Start(t)
	open := func() *natskv.Store { return openPartitioned(t, srv.URL, "pgfind") }
	first := open()
	o := persist.NewOutbox(first.Partition(3, nil))
	if _, err := o.Pending(); err != nil {
		t.Fatal(err)
	}
	if !o.MintsIDs() {
		t.Fatal("the outbox on a partition's view does not page")
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	accept := func(id, hash string) domain.OutboxEntry { return acceptSent(t, o, id, hash, at) }
	byChance := accept(fmt.Sprintf("3EB0%08X%012X", uint32(at.UnixMilli()/10), 11), "hash-window")
	derived := accept("3EB0FFFFFFFF"+"0123456789AB", "hash-derived")
	all := func(domain.IdemRecord) bool { return true }
	absent := "3EB0" + fmt.Sprintf("%08X", uint32(at.UnixMilli()/10)) + "0000000000FF" // its window, never accepted
	second := open()
	booted := persist.NewOutbox(second.Partition(3, nil))
	if _, err := booted.Pending(); err != nil {
		t.Fatal(err)
	}
	for name, ob := range map[string]*persist.Outbox{"the same process": o, "another node, booted": booted,
		"another process, not booted": persist.NewOutbox(second.Partition(3, nil))} {
		for _, c := range []struct {
			ids  []string
			want domain.OutboxEntry
			hash string
		}{
			{[]string{byChance.ID}, byChance, "hash-window"},
			{[]string{absent, byChance.ID, derived.ID}, byChance, "hash-window"},
			{[]string{absent, derived.ID, byChance.ID}, derived, "hash-derived"},
		} {
			r, err := ob.IdemFind(c.ids, "k1/key", all)
			if err != nil || r.MessageID != c.want.ID || r.BodyHash != c.hash {
				t.Fatalf("%s: IdemFind(%v) = %+v, %v; want %s (the retry would be a new message)", name, c.ids, r, err, c.want.ID)
			}
		}
		if r, err := ob.IdemFind([]string{absent}, "", all); !errors.Is(err, domain.ErrRecordNotFound) {
			t.Fatalf("%s: an id never accepted: %+v, %v", name, r, err)
		}
	}
	if keysUnder(t, second.Partition(3, nil), "outbox_status/"+byChance.ID) != 0 {
		t.Fatal("the id naming its window was not paged: the test tests nothing")
	}
}

// A message accepted long ago (queued for weeks behind a disconnected session: Renew keeps its
// body) and sent now is read by id, by a process that never indexed it: its outcome went
// where a read by id looks. It was written into its accept window's page, which a read by id
// looks for only within pageReadBack (22 days) of now: a 404 for a message that was sent.
func TestOutcomeOfAMessageQueuedForWeeksIsReadByID(t *testing.T) {
	kv := openPaged(t, "pgweeks")
	o := persist.NewOutbox(kv) // not booted: its floor lets an accept of 23 days ago in
	now := time.Now().UTC().Truncate(time.Millisecond)
	for _, age := range []time.Duration{23 * 24 * time.Hour, 13 * 24 * time.Hour} {
		e := acceptNew(t, o, "u1", now.Add(-age))
		sent(&e, now)
		settle(t, o, e)
		fresh := persist.NewOutbox(kv)
		if got, err := fresh.Get(e.ID); err != nil || got.Status != domain.MsgSent || got.NetworkID != e.NetworkID {
			t.Fatalf("accepted %v ago, sent now: read by id %s, %v", age, got.Status, err)
		}
		// Paged while a page is read for its whole life (13 days); a record beyond that.
		if got, want := keysUnder(t, kv, "outbox_status/"+e.ID), map[bool]int{true: 1, false: 0}[age > 15*24*time.Hour]; got != want {
			t.Fatalf("accepted %v ago: %d outbox_status records, want %d", age, got, want)
		}
	}
	if p, err := persist.NewOutbox(kv).Pending(); err != nil || len(p) != 0 {
		t.Fatalf("pending after both were sent: %d, %v", len(p), err)
	}
}
