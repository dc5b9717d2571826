package persist

import (
	"bytes"
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
