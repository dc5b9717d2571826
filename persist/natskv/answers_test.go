package natskv_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/gateway/gateway/persist/kvtest"
	"github.com/gateway/gateway/persist/natskv"
	"github.com/gateway/gateway/persist/natstest"
)

// answersStore is a store on a server of its own holding k/0 to k/9, each its own commit (so
// the records' sequences follow the keys).
func answersStore(t *testing.T) *natskv.Store {
	t.Helper()
	srv := natstest.Start(t)
	s, err := natskv.Open(context.Background(), natskv.Options{URL: srv.URL, Prefix: "answers"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	for i := range 10 {
		kvtest.MustCommit(t, s, kvtest.Put(fmt.Sprintf("k/%d", i), "v"))
	}
	return s
}

// A scan's page with one record's answer lost on the way (nats.go drops an answer its
// subscription has no room for, and tells only the connection's error callback) is read
// again, not taken as the page: before, the scan read on after the page's last record and
// never saw the lost one (an outbox boot's scan would miss a queued message).
func TestScanLostAnswerReadAgain(t *testing.T) {
	s := answersStore(t)
	dropped := s.DropAnswer(t, "k/4")
	got := kvtest.ScanKeys(t, s, "k/")
	if !dropped() {
		t.Fatal("no answer was dropped")
	}
	if len(got) != 10 {
		t.Fatalf("a scan with k/4's answer lost read %d keys: %q", len(got), got)
	}
}

// A multi-subject read (Get, GetMany) with a record's answer lost is read again: before, the
// subject without an answer read as a deleted record, and a present key as absent. The last
// record's answer is the one before the end of batch, which the end of batch's
// Nats-Last-Sequence names.
func TestGetLostAnswerReadAgain(t *testing.T) {
	s := answersStore(t)
	for _, key := range []string{"k/5", "k/9"} {
		dropped := s.DropAnswer(t, key)
		vals, err := s.GetMany([][]byte{[]byte("k/1"), []byte("k/5"), []byte("k/9")})
		if err != nil {
			t.Fatal(err)
		}
		if !dropped() {
			t.Fatalf("%s: no answer was dropped", key)
		}
		for i, v := range vals {
			if string(v) != "v" {
				t.Fatalf("GetMany with %s's answer lost: value %d is %q", key, i, v)
			}
		}
	}
	// A read of one key: its only record's answer lost.
	dropped := s.DropAnswer(t, "k/3")
	v, err := s.Get([]byte("k/3"))
	if err != nil || string(v) != "v" || !dropped() {
		t.Fatalf("Get with its answer lost: %q, %v (dropped: %v)", v, err, dropped())
	}
}
