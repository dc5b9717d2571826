package natskv_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/kvtest"
	"github.com/gateway/gateway/persist/natskv"
)

// answersStore is a store on a server of its own holding k/0 to k/9, each its own commit (so
// the records' sequences follow the keys).
func answersStore(t *testing.T) *natskv.Store {
	t.Helper()
	s := openPaged(t, "answers")
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

// A direct get's answers fit the channel they come on (requestMany: made the size of the
// request, not nats.go's 65,536) even when the reader takes none until the server has sent
// them all: a scan's full pages (512 records and the end of batch) and the largest
// multi-subject reads (GetMany's parts: 1,023 keys) drop nothing. A channel a size too small
// dropped the end of batch, and the read never ended.
func TestDirectGetAnswersFitTheirChannel(t *testing.T) {
	s := openPaged(t, "fit")
	s.SetTimeouts(5*time.Second, 5*time.Second)
	const n = 1100
	keys := make([][]byte, n)
	for i := 0; i < n; i += 100 {
		var ops []persist.Op
		for j := i; j < i+100; j++ {
			keys[j] = fmt.Appendf(nil, "k/%04d", j)
			ops = append(ops, kvtest.Put(string(keys[j]), "v"))
		}
		kvtest.MustCommit(t, s, ops...)
	}
	// Each read in turn: its part of the records left, and the end of batch.
	left := 0
	part := func(most int) func() int {
		return func() int {
			got := min(left, most)
			left -= got
			return got + 1
		}
	}

	left = n
	dropped := natskv.HoldAnswers(t, part(natskv.ScanPage))
	if got := kvtest.ScanKeys(t, s, "k/"); len(got) != n {
		t.Fatalf("scan: %d keys, want %d", len(got), n)
	}
	if d := dropped(); d > 0 {
		t.Fatalf("a scan's pages dropped %d answers", d)
	}

	left = n
	dropped = natskv.HoldAnswers(t, part(natskv.MultiGetMax-1))
	vals, err := s.GetMany(keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		if string(v) != "v" {
			t.Fatalf("GetMany: %s is %q", keys[i], v)
		}
	}
	if d := dropped(); d > 0 {
		t.Fatalf("GetMany's reads dropped %d answers", d)
	}
}

// A multi-subject read whose answer the server stops at its bytes' bound (multiMaxBytes, 8
// MiB; without one, the server's max_pending: 64 MiB, 1,023 accept records of 64 KiB with their
// media) asks again for the subjects not answered: before, they read as deleted records, and an
// outbox boot took a queued message's accept record for expired.
func TestGetManyCutAnswerReadsOn(t *testing.T) {
	s := openPaged(t, "cut")
	value := strings.Repeat("v", 200<<10)
	keys := make([][]byte, 100) // 20 MiB: three answers
	for i := range keys {
		keys[i] = fmt.Appendf(nil, "k/%02d", i)
		kvtest.MustCommit(t, s, kvtest.Put(string(keys[i]), value))
	}
	vals, err := s.GetMany(keys)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range vals {
		if string(v) != value {
			t.Fatalf("GetMany of 20 MiB: %s has %d bytes", keys[i], len(v))
		}
	}
}
