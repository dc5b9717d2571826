package natskv_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/kvtest"
	"github.com/gateway/gateway/persist/natskv"
	"github.com/gateway/gateway/persist/natstest"
)

// Parts handed to the store together (a node's shared outcome writer) are each committed with
// their own partition's fence (one-message parts as pipelined publishes, the others as atomic
// batches): a partition taken over, one whose lease is lost and one whose
// view is closed have their parts refused, the others' parts land.
func TestCommitPartsKeepsEachFence(t *testing.T) {
	srv := natstest.Start(t)
	s, err := natskv.Open(context.Background(), natskv.Options{URL: srv.URL, Prefix: "parts"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	live, taken, lost, closed := newOwner(t, s, 1), newOwner(t, s, 2), newOwner(t, s, 3), newOwner(t, s, 4)
	vLive, vTaken, vLost, vClosed := s.Partition(1, live), s.Partition(2, taken), s.Partition(3, lost), s.Partition(4, closed)
	(&owner{s: s, p: 2}).acquire(t) // another node takes partition 2: its old fence is stale
	lost.lost.Store(true)
	if err := vClosed.Close(); err != nil {
		t.Fatal(err)
	}
	parts := []persist.Part{
		{KV: vLive, Ops: []persist.Op{kvtest.Put("k/1", "a")}},
		{KV: vTaken, Ops: []persist.Op{kvtest.Put("k/1", "stale"), kvtest.Put("k/2", "stale")}},
		{KV: vLost, Ops: []persist.Op{kvtest.Put("k/1", "stale")}},
		{KV: vClosed, Ops: []persist.Op{kvtest.Put("k/1", "stale")}},
		{KV: vLive, Ops: []persist.Op{kvtest.Put("k/2", "b"), kvtest.Put("k/3", "c")}},
		{KV: s, Ops: []persist.Op{kvtest.Put("k/9", "store")}},
		{KV: vTaken, Ops: []persist.Op{kvtest.Put("k/1", "stale")}}, // one message: pipelined
	}
	errs := make([]error, len(parts))
	s.CommitParts(context.Background(), parts, errs)
	for i, want := range []bool{true, false, false, false, true, true, false} {
		if ok := errs[i] == nil; ok != want {
			t.Fatalf("part %d: %v (want success %v)", i, errs[i], want)
		}
		if !want && !errors.Is(errs[i], domain.ErrNodeUnavailable) {
			t.Fatalf("part %d refused with %v, want ErrNodeUnavailable", i, errs[i])
		}
	}
	if taken.fenced.Load() == 0 {
		t.Fatal("the taken partition's Fencer was never told its fence moved")
	}
	kvtest.WantValue(t, vLive, "k/1", "a")
	kvtest.WantValue(t, vLive, "k/3", "c")
	kvtest.WantValue(t, s, "k/9", "store")
	for p := 2; p <= 4; p++ {
		kvtest.WantAbsent(t, s.Partition(p, nil), "k/1")
	}
}

// The outboxes of a store's partitions share the store's outcome writer; a partition taken
// over has its outcomes refused (each outcome carries its own partition's fence), the others'
// are written.
func TestSharedOutcomeWriterKeepsEachFence(t *testing.T) {
	srv := natstest.Start(t)
	s, err := natskv.Open(context.Background(), natskv.Options{URL: srv.URL, Prefix: "shared"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	const n = 8
	views := make([]*natskv.View, n)
	boxes := make([]*persist.Outbox, n)
	for p := range n {
		views[p] = s.Partition(p, newOwner(t, s, p))
		boxes[p] = persist.NewOutbox(views[p])
	}
	if views[0].OutcomeWriter() != views[1].OutcomeWriter() || views[0].OutcomeWriter() != s.OutcomeWriter() {
		t.Fatal("the partitions' views do not share the store's outcome writer")
	}
	(&owner{s: s, p: 5}).acquire(t) // another node takes partition 5
	now := time.Now()
	errs := make(chan error, 4*n)
	for round := range 4 {
		for p := range n {
			e := domain.OutboxEntry{ID: "m" + string(rune('a'+p)) + string(rune('0'+round)), UserID: "u", CreatedAt: domain.MillisOf(now), Status: domain.MsgSent, UpdatedAt: domain.MillisOf(now)}
			boxes[p].Settle(e, func(err error) { errs <- err })
		}
	}
	for _, b := range boxes {
		b.Flush()
	}
	close(errs)
	var ok, refused int
	for err := range errs {
		switch {
		case err == nil:
			ok++
		case errors.Is(err, domain.ErrNodeUnavailable):
			refused++
		default:
			t.Fatalf("outcome: %v", err)
		}
	}
	if ok != 4*(n-1) || refused != 4 {
		t.Fatalf("%d outcomes written, %d refused; want %d and 4 (partition 5's)", ok, refused, 4*(n-1))
	}
	for p := range n {
		_, err := views[p].Get([]byte("outbox_status/m" + string(rune('a'+p)) + "0"))
		if p == 5 {
			if !errors.Is(err, domain.ErrRecordNotFound) {
				t.Fatalf("the taken partition's outcome: %v, want not found", err)
			}
		} else if err != nil {
			t.Fatalf("partition %d's outcome: %v", p, err)
		}
	}
}
