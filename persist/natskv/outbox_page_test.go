package natskv_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/natskv"
	"github.com/gateway/gateway/persist/natstest"
)

// The outbox on NATS mints ids and pages its outcomes (persist/outbox_nats.go): these are the
// outbox's reads by id, boot and recount, run on a real JetStream server.

func openPaged(t *testing.T, prefix string) *natskv.Store {
	t.Helper()
	srv := natstest.Start(t)
	kv, err := natskv.Open(context.Background(), natskv.Options{URL: srv.URL, Prefix: prefix, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close() })
	return kv
}

// keysUnder counts the records under prefix.
func keysUnder(t *testing.T, kv persist.KV, prefix string) int {
	t.Helper()
	n := 0
	if err := kv.Scan([]byte(prefix), func(_, _ []byte) error {
		n++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// acceptNew accepts a message without an id (the outbox mints it) for uid at at.
func acceptNew(t *testing.T, o *persist.Outbox, uid string, at time.Time) domain.OutboxEntry {
	t.Helper()
	e := domain.OutboxEntry{SessionID: "s1", UserID: uid, CreatedAt: domain.MillisOf(at),
		Message: domain.Message{To: "491511234567", Kind: domain.KindText, Text: "hi"}}
	e.SetStatus(domain.MsgQueued, at)
	if err := o.Accept(context.Background(), &e, ""); err != nil {
		t.Fatal(err)
	}
	if len(e.ID) != 24 || !strings.HasPrefix(e.ID, "3EB0") || e.Message.ID != e.ID {
		t.Fatalf("minted id %q (message %q)", e.ID, e.Message.ID)
	}
	return e
}

// acceptSent accepts a message of id at at (with the Idempotency-Key's body hash), records
// it sent a second later and waits for that outcome's answer.
func acceptSent(t *testing.T, o *persist.Outbox, id, hash string, at time.Time) domain.OutboxEntry {
	t.Helper()
	e := domain.OutboxEntry{ID: id, SessionID: "s1", UserID: "u1", CreatedAt: domain.MillisOf(at),
		Message: domain.Message{ID: id, To: "491511234567", Kind: domain.KindText, Text: "hi"}}
	e.SetStatus(domain.MsgQueued, at)
	if err := o.Accept(context.Background(), &e, hash); err != nil {
		t.Fatal(err)
	}
	sent(&e, at.Add(time.Second))
	settle(t, o, e)
	return e
}

// settle records e's outcome and waits for its answer.
func settle(t *testing.T, o *persist.Outbox, e domain.OutboxEntry) {
	t.Helper()
	done := make(chan error, 1)
	o.Settle(e, func(err error) { done <- err })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func sent(e *domain.OutboxEntry, at time.Time) {
	e.SetStatus(domain.MsgSent, at)
	e.SentAt, e.NetworkID = domain.MillisOf(at), "net-"+e.ID
}

// A settled message is read by id from its page (by a process that never indexed it), its
// receipts laid over (folded into the page or recorded after it), and a later outcome of the
// same message (a late failure) wins over the earlier page; the outcomes of a gather take
// fewer records than messages, and none is an outbox_status record.
func TestPagedOutboxReadsByID(t *testing.T) {
	kv := openPaged(t, "pgread")
	o := persist.NewOutbox(kv)
	if !o.MintsIDs() {
		t.Fatal("the outbox on NATS does not mint ids")
	}
	if _, err := o.Pending(); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	const n = 40
	es := make([]domain.OutboxEntry, n)
	seen := map[string]bool{}
	for i := range es {
		es[i] = acceptNew(t, o, fmt.Sprint("u", i%3), at)
		if seen[es[i].ID] {
			t.Fatalf("id %s minted twice", es[i].ID)
		}
		seen[es[i].ID] = true
	}
	done := make(chan error, 2*n)
	for i := range es {
		sent(&es[i], at.Add(time.Second))
		o.Settle(es[i], func(err error) { done <- err })
		if i%2 == 0 {
			o.Receipt(es[i].ID, domain.StatusChange{Status: domain.MsgDelivered, At: domain.MillisOf(at.Add(2 * time.Second))},
				func(err error) { done <- err })
		}
	}
	for range n + n/2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got := keysUnder(t, kv, "outbox_status/") + keysUnder(t, kv, "outbox_receipt/"); got != 0 {
		t.Fatalf("%d outbox_status and outbox_receipt records for minted ids, want none", got)
	}
	if pages := keysUnder(t, kv, "outbox_page/"); pages == 0 || pages >= n {
		t.Fatalf("%d pages for %d outcomes", pages, n)
	}
	fresh := persist.NewOutbox(kv) // another process: nothing indexed
	for i, e := range es {
		got, err := fresh.Get(e.ID)
		want := domain.MsgSent
		if i%2 == 0 {
			want = domain.MsgDelivered
		}
		if err != nil || got.Status != want || got.NetworkID != e.NetworkID || got.SentAt != e.SentAt || got.UserID != e.UserID {
			t.Fatalf("%d %s: %+v %v, want %s", i, e.ID, got, err, want)
		}
	}
	// A receipt after the page: in the window's next page (its outcome was paged lately), or,
	// from a process that did not page it, its own record; laid over both ways.
	for _, c := range []struct {
		o      *persist.Outbox
		e      domain.OutboxEntry
		record int
	}{{o, es[1], 0}, {persist.NewOutbox(kv), es[3], 1}} {
		c.o.Receipt(c.e.ID, domain.StatusChange{Status: domain.MsgRead, At: domain.MillisOf(at.Add(3 * time.Second))},
			func(err error) { done <- err })
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if got := keysUnder(t, kv, "outbox_receipt/"+c.e.ID+"/"); got != c.record {
			t.Fatalf("%d receipt records of %s, want %d", got, c.e.ID, c.record)
		}
		if got, err := fresh.Get(c.e.ID); err != nil || got.Status != domain.MsgRead {
			t.Fatalf("after a read receipt: %s %v", got.Status, err)
		}
	}
	// Late failures, each in a page of its own after the first (several: a read that took
	// the pages in any order but the stream's would see the sent one some of the time).
	for i := 2; i < 12; i++ {
		late := es[i]
		late.Status, late.Code, late.Error = domain.MsgFailed, "network_error", "refused late"
		late.History = append(late.History, domain.StatusChange{Status: domain.MsgFailed, At: domain.MillisOf(at.Add(4 * time.Second))})
		settle(t, o, late)
		if got, err := fresh.Get(late.ID); err != nil || got.Status != domain.MsgFailed || got.Code != "network_error" || got.SentAt != late.SentAt {
			t.Fatalf("after a late failure: %+v %v", got, err)
		}
	}
	if p, err := persist.NewOutbox(kv).Pending(); err != nil || len(p) != 0 {
		t.Fatalf("pending after every outcome: %d, %v", len(p), err)
	}
	if _, err := fresh.Get("3EB0" + strings.Repeat("0", 20)); err == nil {
		t.Fatal("an id never minted was found")
	}
}

// pagedKV is the store as the outbox sees it without its shared writer (each part its own
// Commit).
type pagedKV interface {
	persist.KV
	ScanSinceSeq(prefix []byte, since time.Time, fn func(key, value []byte, seq uint64) error) error
}

// dyingKV commits a page and never answers it: the process dies between the page's commit and
// its answer (kill -9).
type dyingKV struct {
	pagedKV
	dead chan struct{}
}

func (d dyingKV) Commit(ctx context.Context, ops ...persist.Op) error {
	err := d.pagedKV.Commit(ctx, ops...)
	for _, op := range ops {
		if bytes.HasPrefix(op.Key, []byte("outbox_page/")) {
			<-d.dead
			return context.Canceled
		}
	}
	return err
}

// A message whose page was committed and never answered (a kill -9 between the two) is not
// pending at the next boot: it is not sent again; the one whose outcome was never written is.
func TestPagedOutcomeCommittedNotAnsweredIsNotSentAgain(t *testing.T) {
	kv := openPaged(t, "pgkill")
	dead := make(chan struct{})
	o := persist.NewOutbox(dyingKV{kv, dead})
	t.Cleanup(func() { close(dead) })
	if _, err := o.Pending(); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	done := acceptNew(t, o, "u1", at)
	open := acceptNew(t, o, "u1", at)
	sent(&done, at.Add(time.Second))
	answered := make(chan error, 1)
	o.Settle(done, func(err error) { answered <- err })
	for deadline := time.Now().Add(10 * time.Second); keysUnder(t, kv, "outbox_page/") == 0; {
		if time.Now().After(deadline) {
			t.Fatal("the page was never committed")
		}
		time.Sleep(5 * time.Millisecond)
	}
	select {
	case err := <-answered:
		t.Fatalf("a dead process answered: %v", err)
	default:
	}
	p, err := persist.NewOutbox(kv).Pending()
	if err != nil || len(p) != 1 || p[0].ID != open.ID {
		t.Fatalf("pending at the next boot: %+v %v, want only %s", p, err, open.ID)
	}
	if got, err := persist.NewOutbox(kv).Get(done.ID); err != nil || got.Status != domain.MsgSent {
		t.Fatalf("the settled message: %s %v", got.Status, err)
	}
}

// A keyed send's id (derived from its Idempotency-Key) keeps its outbox_status record, and
// IdemOf reads it back; one whose id names its accept's window by chance is paged, and IdemOf
// and Get find it all the same. A caller's id does too.
func TestPagedOutboxKeyedAndCallerIDs(t *testing.T) {
	kv := openPaged(t, "pgidem")
	o := persist.NewOutbox(kv)
	if _, err := o.Pending(); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	accept := func(id, hash string) domain.OutboxEntry { return acceptSent(t, o, id, hash, at) }
	derived := accept("3EB0FFFFFFFF"+"0123456789AB", "hash-derived")
	if keysUnder(t, kv, "outbox_status/"+derived.ID) != 1 {
		t.Fatal("a derived id's outcome is not its outbox_status record")
	}
	window := fmt.Sprintf("3EB0%08X%012X", uint32(at.UnixMilli()/10), 7)
	byChance := accept(window, "hash-window")
	if keysUnder(t, kv, "outbox_status/"+byChance.ID) != 0 {
		t.Fatal("an id naming its accept's window has an outbox_status record")
	}
	caller := accept("order-17", "")
	fresh := persist.NewOutbox(kv)
	for _, c := range []struct {
		e    domain.OutboxEntry
		hash string
	}{{derived, "hash-derived"}, {byChance, "hash-window"}} {
		r, err := fresh.IdemOf(c.e.ID)
		if err != nil || r.BodyHash != c.hash || r.MessageID != c.e.ID {
			t.Fatalf("IdemOf(%s): %+v %v", c.e.ID, r, err)
		}
	}
	for _, e := range []domain.OutboxEntry{derived, byChance, caller} {
		if got, err := fresh.Get(e.ID); err != nil || got.Status != domain.MsgSent {
			t.Fatalf("Get(%s): %s %v", e.ID, got.Status, err)
		}
	}
	if p, err := fresh.Pending(); err != nil || len(p) != 0 {
		t.Fatalf("pending: %d %v", len(p), err)
	}
}

// The recount after a kill -9 counts the messages whose sent outcomes are in pages (several,
// one of them later rewritten failed: counted once), as it counts outbox_status records.
func TestPagedOutboxRecount(t *testing.T) {
	kv := openPaged(t, "pgcount")
	o := persist.NewOutbox(kv)
	if _, err := o.Pending(); err != nil {
		t.Fatal(err)
	}
	a := persist.NewAccounts(kv)
	now := time.Now().UTC().Truncate(time.Millisecond)
	period := now.Format("2006-01")
	snap := domain.Allowance{UserID: "u1", Period: period, Sent: 5, Mark: 5, At: now.Add(-2 * time.Second).UnixMilli(),
		Since: now.Add(-10 * time.Second).UnixMilli()}
	if err := a.PutAccount(context.Background(), snap); err != nil {
		t.Fatal(err)
	}
	var es []domain.OutboxEntry
	for round := range 3 { // three gathers: three pages at least
		var batch []domain.OutboxEntry
		for range 2 {
			e := acceptNew(t, o, "u1", now)
			sent(&e, now.Add(time.Duration(round)*time.Millisecond))
			batch = append(batch, e)
		}
		for _, e := range batch {
			settle(t, o, e)
		}
		es = append(es, batch...)
	}
	late := es[0]
	late.Status, late.Code = domain.MsgFailed, "network_error"
	settle(t, o, late)
	if pages := keysUnder(t, kv, "outbox_page/"); pages < 3 {
		t.Fatalf("%d pages", pages)
	}
	got, err := a.Recount(now.Add(time.Second), 40*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := got["u1"]; !ok || r.Allowance.Sent != 5+int64(len(es)) || len(r.Sent) != len(es) {
		t.Fatalf("recounted %+v, want %d sent", got, 5+len(es))
	}
}

// A cluster in a rolling upgrade from the release before pages: a node started with
// --nats-outcome-records (persist.Outbox.WriteOutcomeRecords) mints no id and settles even a
// minted id, accepted by a node that pages, with its own outbox_status record, which that
// release's boot reads; and a paging node's boot finds such a record for a minted id (the
// outcome a node of that release wrote) instead of sending the message again.
func TestOutcomeRecordsDuringARollingUpgrade(t *testing.T) {
	kv := openPaged(t, "pgroll")
	paging := persist.NewOutbox(kv)
	if _, err := paging.Pending(); err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	handed := acceptNew(t, paging, "u1", at) // accepted, then its partition handed over
	records := persist.NewOutbox(kv)
	records.WriteOutcomeRecords()
	if records.MintsIDs() {
		t.Fatal("an outbox writing outcome records mints ids")
	}
	p, err := records.Pending()
	if err != nil || len(p) != 1 || p[0].ID != handed.ID {
		t.Fatalf("pending on the node taking over: %+v %v, want %s", p, err, handed.ID)
	}
	sent(&handed, at.Add(time.Second))
	settle(t, records, handed)
	if keysUnder(t, kv, "outbox_status/"+handed.ID) != 1 || keysUnder(t, kv, "outbox_page/") != 0 {
		t.Fatalf("a minted id settled with outcome records: %d status records, %d pages",
			keysUnder(t, kv, "outbox_status/"+handed.ID), keysUnder(t, kv, "outbox_page/"))
	}
	next := persist.NewOutbox(kv)
	if p, err := next.Pending(); err != nil || len(p) != 0 {
		t.Fatalf("a paging node's boot after it: pending %+v %v, want none (the outcome is a record)", p, err)
	}
	if got, err := next.Get(handed.ID); err != nil || got.Status != domain.MsgSent {
		t.Fatalf("read by id: %s %v", got.Status, err)
	}
}
