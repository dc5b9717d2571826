package natskv_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/natskv"
	"github.com/gateway/gateway/persist/natstest"
)

// WriteStats counts the records of the commits applied (a write or a delete each, not a
// condition), and not those of a commit refused.
func TestWriteStatsCountAppliedRecords(t *testing.T) {
	srv := natstest.Start(t)
	ctx := context.Background()
	s, err := natskv.Open(ctx, natskv.Options{URL: srv.URL, Prefix: "ws"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if r, n := s.WriteStats(); r != 0 || n != 0 {
		t.Fatalf("a new store: %d records, %d bytes", r, n)
	}
	v10, v20 := bytes.Repeat([]byte("a"), 10), bytes.Repeat([]byte("b"), 20)
	if err := s.Commit(ctx, persist.Op{Key: []byte("t/a"), Value: v10}, persist.Op{Key: []byte("t/b"), Value: v20}); err != nil {
		t.Fatal(err) // two records: an atomic batch
	}
	if err := s.Commit(ctx, persist.Op{Key: []byte("t/a"), Delete: true}); err != nil {
		t.Fatal(err) // one, a pipelined publish
	}
	err = s.Commit(ctx, persist.Op{Key: []byte("t/b"), IfAbsent: true}, persist.Op{Key: []byte("t/c"), Value: v10})
	if !errors.Is(err, domain.ErrRecordExists) {
		t.Fatalf("a commit whose condition fails: %v", err)
	}
	if err := s.Commit(ctx, persist.Op{Key: []byte("t/x"), IfAbsent: true}, persist.Op{Key: []byte("t/d"), Value: v10}); err != nil {
		t.Fatal(err) // one record and a condition
	}
	r, n := s.WriteStats()
	if r != 4 {
		t.Fatalf("%d records, want 4 (2 + 1 + 0 + 1)", r)
	}
	// the values' 40 bytes and four subjects of at least "ws." and a table each
	if n < uint64(40+4*len("ws.t.")) {
		t.Fatalf("%d bytes for 40 bytes of values and four subjects", n)
	}
}
