package persist

import (
	"context"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

// After a switch of --outbox, each outbox reads and writes the other's messages through it: a
// message the one in use does not hold is read there, and its receipt is written there (it
// failed before: a network's receipt refused and retried), in both directions. Holds says
// whether an outbox holds anything at all.
func TestOutboxOlderReadsAndReceipts(t *testing.T) {
	at := time.Now().Add(-time.Hour).UTC().Truncate(time.Millisecond)
	kv, clock := NewMemory(), &testClock{}
	clock.set(at)
	badger := outboxAt(kv, at)
	if holds, err := badger.Holds(); err != nil || holds {
		t.Fatalf("an empty outbox holds: %v, %v", holds, err)
	}
	be := queued("3EB0BBBBBBBBBBBBBBBBBBBB", at)
	if err := badger.Accept(context.Background(), &be, ""); err != nil {
		t.Fatal(err)
	}
	be.SetStatus(domain.MsgSent, at)
	ch := make(chan error, 1)
	badger.Settle(be, func(err error) { ch <- err })
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
	if holds, err := badger.Holds(); err != nil || !holds {
		t.Fatalf("an outbox with a sent message holds: %v, %v", holds, err)
	}

	lo, _ := openLogOutbox(t, t.TempDir(), kv, clock)
	lid := acceptLog(t, lo, 1, at)[0]
	settleLog(t, lo, lid, domain.MsgSent, at)
	lo.SetOlder(badger)
	badger.SetOlder(lo)

	// The log in use: the Badger outbox's message read and its receipt written through it.
	receiptLog(t, lo, be.ID, domain.StatusChange{Status: domain.MsgDelivered, At: domain.MillisOf(at.Add(time.Second))})
	if e, err := lo.Get(be.ID); err != nil || e.Status != domain.MsgDelivered {
		t.Fatalf("the older outbox's message through the log: %s, %v", e.Status, err)
	}
	// Badger in use: the log's message read and its receipt written through it.
	ch = make(chan error, 1)
	badger.Receipt(lid, domain.StatusChange{Status: domain.MsgRead, At: domain.MillisOf(at.Add(2 * time.Second))}, func(err error) { ch <- err })
	if err := <-ch; err != nil {
		t.Fatal(err)
	}
	if e, err := badger.Get(lid); err != nil || e.Status != domain.MsgRead {
		t.Fatalf("the log's message through Badger's outbox: %s, %v", e.Status, err)
	}
	badger.Flush()
	lo.Flush()
}
