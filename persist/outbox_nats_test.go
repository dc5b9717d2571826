package persist

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

// A minted id names its window and nothing else does: the WhatsApp Web shape, upper-case hex.
func TestPagedIDWindow(t *testing.T) {
	for _, w := range []uint32{0, 1, 1<<32 - 1, idWindow(time.Date(2026, 11, 30, 22, 0, 0, 0, time.UTC).UnixMilli())} {
		id := pagedID(w, 1<<48-1)
		if got, ok := idWindowOf(id); !ok || got != w || len(id) != 24 {
			t.Fatalf("%s: window %d %v, want %d", id, got, ok, w)
		}
	}
	for _, id := range []string{"", "3EB0", "3EB0000000000000000000000", "3eb000000000000000000000", "3EB00000000000000000000g", "XEB000000000000000000000"} {
		if _, ok := idWindowOf(id); ok {
			t.Fatalf("%q read as a minted id", id)
		}
	}
	at := int64(1_796_000_000_123)
	if id := pagedID(idWindow(at), 5); !pagedIn(id, at) || !pagedIn(id, at-3) || pagedIn(id, at+10) {
		t.Fatal("pagedIn does not follow the accept's 10 ms window")
	}
}

// The outbox draws again a minted id's random bits it drew in the last second, so a repeated
// draw never makes two messages of one window share an id.
func TestMintDrawsAgain(t *testing.T) {
	draws := []uint64{7, 7, 7 | 1<<48, 9} // the third is the first's bits again (48 kept)
	old := mintRand
	t.Cleanup(func() { mintRand = old })
	mintRand = func() uint64 {
		v := draws[0]
		draws = draws[1:]
		return v
	}
	o := &Outbox{index: map[string]*pendingMsg{}, pages: pagesNone{}}
	var a, b domain.OutboxEntry
	o.mint(&a, 100)
	o.mint(&b, 100)
	if a.ID == b.ID || a.ID != pagedID(100, 7) || b.ID != pagedID(100, 9) || b.Message.ID != b.ID {
		t.Fatalf("minted %s then %s", a.ID, b.ID)
	}
}

type pagesNone struct{}

func (pagesNone) ScanSinceSeq([]byte, time.Time, func(key, value []byte, seq uint64) error) error {
	return nil
}

// A page is read back entry by entry, and one cut short is an error, not a shorter page.
func TestEachPaged(t *testing.T) {
	page := []byte{pageVersion, 2, 'a', 'b', 0, 0, 0, 2, statusVersion2, '{', 1, 'c', 0, 0, 0, 1, pageReceipt}
	var got [][]byte
	if err := eachPaged(page, func(id, rec []byte) error {
		got = append(got, append(append([]byte{}, id...), rec...))
		return nil
	}); err != nil || len(got) != 2 || !bytes.Equal(got[0], []byte{'a', 'b', statusVersion2, '{'}) || !bytes.Equal(got[1], []byte{'c', pageReceipt}) {
		t.Fatalf("%q %v", got, err)
	}
	for n := 1; n < len(page); n++ {
		if n == 10 {
			continue // a whole first entry: a page of one
		}
		if err := eachPaged(page[:n], func(_, _ []byte) error { return nil }); err == nil && n != 1 {
			t.Fatalf("a page cut at %d read", n)
		}
	}
	if err := eachPaged([]byte{9}, func(_, _ []byte) error { return nil }); err == nil {
		t.Fatal("a page of an unknown version read")
	}
}

// seqMemory is a Memory that pages outcomes: its scans give each record's place in the order
// written, and leave out the records written before since (by its clock), as JetStream's
// time index does; lost makes a page's commit apply and answer an error (its answer lost).
type seqMemory struct {
	*Memory
	clock *testClock
	mu    sync.Mutex
	seq   map[string]uint64
	at    map[string]time.Time
	n     uint64
	lost  bool
}

func newSeqMemory(clock *testClock) *seqMemory {
	return &seqMemory{Memory: NewMemory(), clock: clock, seq: map[string]uint64{}, at: map[string]time.Time{}}
}

func (m *seqMemory) Commit(ctx context.Context, ops ...Op) error {
	if err := m.Memory.Commit(ctx, ops...); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	paged := false
	for _, op := range ops {
		m.n++
		m.seq[string(op.Key)], m.at[string(op.Key)] = m.n, m.clock.now()
		paged = paged || bytes.HasPrefix(op.Key, []byte(outboxPageTable+"/"))
	}
	if paged && m.lost {
		return errors.New("the answer was lost")
	}
	return nil
}

func (m *seqMemory) ScanSinceSeq(prefix []byte, since time.Time, fn func(key, value []byte, seq uint64) error) error {
	type rec struct {
		k, v []byte
		seq  uint64
	}
	var recs []rec
	err := m.Scan(prefix, func(k, v []byte) error {
		m.mu.Lock()
		seq, at := m.seq[string(k)], m.at[string(k)]
		m.mu.Unlock()
		if !at.Before(since) {
			recs = append(recs, rec{slices.Clone(k), slices.Clone(v), seq})
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(recs, func(a, b rec) int { return cmp.Compare(a.seq, b.seq) })
	for _, r := range recs {
		if err := fn(r.k, r.v, r.seq); err != nil {
			return err
		}
	}
	return nil
}

// A page committed whose answer was lost (the message back to pending, then marked) and a
// checkpoint moved on long past it: the next boot finds the page through the marked message's
// window (or, a cluster's partition, its second: PagesPerSecond), not through the pages
// written since the checkpoint, and does not send it again.
func TestPagedStaleMarkFoundThroughItsWindow(t *testing.T) {
	for _, perSecond := range []bool{false, true} {
		t.Run(fmt.Sprintf("per-second=%v", perSecond), func(t *testing.T) { stalePageFoundAtBoot(t, perSecond) })
	}
}

func stalePageFoundAtBoot(t *testing.T, perSecond bool) {
	clock := &testClock{}
	clock.set(time.Now().Truncate(time.Millisecond))
	// The store's clock (its records' times), by which the boot reads the pages since the
	// checkpoint (onStoreClock: time.Now's): an hour behind, as the checkpoint will be ahead,
	// so that only the marked messages' own windows or seconds can find their pages.
	stored := &testClock{}
	stored.set(time.Now().Add(-time.Hour))
	kv := newSeqMemory(stored)
	// A node of a cluster (a node with --nats-window-pages without perSecond).
	boot := func() (*Outbox, []string) { return nodeOutbox(t, kv, clock, perSecond, true) }
	o, _ := boot()
	if !o.MintsIDs() {
		t.Fatal("an outbox on a store that pages does not mint")
	}
	// Five settled with their answers lost (each window's pages read apart at the next boot),
	// and one never settled, still pending.
	var lost []domain.OutboxEntry
	for range 5 {
		lost = append(lost, acceptMinted(t, o, clock))
		clock.add(20 * time.Millisecond) // the next in another window
	}
	open := acceptMinted(t, o, clock)
	kv.lost = true
	for _, e := range lost {
		done := make(chan error, 1)
		o.Settle(sentAt(e, clock.now()), func(err error) { done <- err })
		o.Flush() // (a hold ends)
		if err := <-done; err == nil {
			t.Fatal("the lost answer answered")
		}
	}
	kv.lost = false
	if got := len(scanKeys(t, kv, outboxPageTable+"/s")) > 0; got != perSecond {
		t.Fatalf("pages per second: %v, want %v", got, perSecond)
	}
	clock.add(markAfter + time.Second)
	if err := o.Checkpoint(); err != nil { // marks them: pending here, their outcomes unanswered
		t.Fatal(err)
	}
	if len(scanKeys(t, kv, outboxPendingTable+"/")) != 6 {
		t.Fatal("not marked")
	}
	clock.add(time.Hour)
	if err := o.Checkpoint(); err != nil { // the checkpoint moves on past every page
		t.Fatal(err)
	}
	if _, p := boot(); len(p) != 1 || p[0] != open.ID {
		t.Fatalf("pending at the next boot: %v, want only %s", p, open.ID)
	}
	if len(scanKeys(t, kv, outboxPendingTable+"/")) != 1 {
		t.Fatal("the stale marks stayed")
	}
}
