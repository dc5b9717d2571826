package natskv_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/gateway/gateway/persist/kvtest"
	"github.com/gateway/gateway/persist/natskv"
)

// A scan's page is bounded in bytes as well as in records: a scan of 24 records of 900 KiB
// (21 MiB) reads every record, in order, in several pages, none holding more than
// ScanMaxBytes and one record (the server stops a page once past max_bytes). Before, one page
// held all 24: a page of 512 records near max_payload reaches the server's max_pending
// (64 MiB), where it disconnects a client slow to read.
func TestScanPageBoundedInBytes(t *testing.T) {
	s := openPaged(t, "big")
	const n, size = 24, 900 << 10
	value := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, size) }
	for i := range n {
		kvtest.MustCommit(t, s, kvtest.Put(fmt.Sprintf("m/%02d", i), string(value(i))))
	}
	pages := natskv.WatchPages(t)
	i := 0
	if err := s.Scan([]byte("m/"), func(k, v []byte) error {
		if want := fmt.Sprintf("m/%02d", i); string(k) != want || !bytes.Equal(v, value(i)) {
			return fmt.Errorf("record %d: %s (%d bytes), want %s", i, k, len(v), want)
		}
		i++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if i != n {
		t.Fatalf("the scan read %d records, want %d", i, n)
	}
	recs, sizes := pages()
	total := 0
	for p, b := range sizes {
		total += recs[p]
		if b > natskv.ScanMaxBytes+size {
			t.Errorf("page %d: %d records, %d bytes: past %d and one record", p, recs[p], b, natskv.ScanMaxBytes)
		}
	}
	if len(sizes) < 3 || total != n {
		t.Fatalf("%d pages of %v records (%v bytes), want 3 or more holding the %d records", len(sizes), recs, sizes, n)
	}
	t.Logf("%d pages: %v records, %v bytes", len(sizes), recs, sizes)
}
