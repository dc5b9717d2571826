package persist

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
)

func queued(id string, at time.Time) domain.OutboxEntry {
	e := domain.OutboxEntry{ID: id, SessionID: "s1", UserID: "u1", Message: domain.Message{ID: id, To: "491511234567", Kind: domain.KindText, Text: "hi"}, CreatedAt: domain.MillisOf(at)}
	e.SetStatus(domain.MsgQueued, at)
	return e
}

// Outcomes and receipts go through the background writer: every one lands, each caller is
// answered once, and a receipt queued behind its outcome ends up in the same record.
func TestOutboxBackgroundWrites(t *testing.T) {
	o := NewOutbox(NewMemory())
	ctx := context.Background()
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	const n = 700 // more than one batch
	var answered, failed atomic.Int64
	done := func(err error) {
		answered.Add(1)
		if err != nil {
			failed.Add(1)
		}
	}
	for i := range n {
		e := queued(fmt.Sprintf("m%04d", i), t0)
		if err := o.Accept(ctx, e, "", domain.IdemRecord{}); err != nil {
			t.Fatal(err)
		}
		e.SetStatus(domain.MsgSent, t0.Add(time.Second))
		o.Settle(e, done)
		o.Receipt(e.ID, domain.StatusChange{Status: domain.MsgDelivered, At: domain.MillisOf(t0.Add(2 * time.Second))}, done)
	}
	o.Flush()
	if got := answered.Load(); got != 2*n || failed.Load() != 0 {
		t.Fatalf("answered %d (failed %d), want %d", got, failed.Load(), 2*n)
	}
	if p, err := o.Pending(); err != nil || len(p) != 0 {
		t.Fatalf("pending after flush: %d, %v", len(p), err)
	}
	for i := range n {
		e, err := o.Get(fmt.Sprintf("m%04d", i))
		if err != nil {
			t.Fatal(err)
		}
		var got []domain.MessageStatus
		for _, c := range e.History {
			got = append(got, c.Status)
		}
		if e.Status != domain.MsgDelivered || fmt.Sprint(got) != "[queued sent delivered]" {
			t.Fatalf("%s: status %s, history %v", e.ID, e.Status, got)
		}
	}
}

// failingKV refuses any commit that writes a key containing bad.
type failingKV struct {
	KV
	bad []byte
}

func (f failingKV) Commit(ctx context.Context, ops ...Op) error {
	for _, op := range ops {
		if bytes.Contains(op.Key, f.bad) {
			return errors.New("refused")
		}
	}
	return f.KV.Commit(ctx, ops...)
}

// A write the store refuses fails alone: the others of its batch land.
func TestOutboxBackgroundWriteFailsAlone(t *testing.T) {
	o := NewOutbox(failingKV{NewMemory(), []byte("bad")})
	ctx := context.Background()
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	errs := map[string]*atomic.Value{}
	for _, id := range []string{"good1", "bad", "good2"} {
		e := queued(id, t0)
		if id != "bad" {
			if err := o.Accept(ctx, e, "", domain.IdemRecord{}); err != nil {
				t.Fatal(err)
			}
		}
		e.SetStatus(domain.MsgSent, t0)
		v := &atomic.Value{}
		errs[id] = v
		o.Settle(e, func(err error) { v.Store(fmt.Sprint(err)) })
	}
	o.Flush()
	for id, v := range errs {
		want := "<nil>"
		if id == "bad" {
			want = "refused"
		}
		if got := v.Load(); got != want {
			t.Fatalf("%s: answered %v, want %s", id, got, want)
		}
		if id != "bad" {
			if e, err := o.Get(id); err != nil || e.Status != domain.MsgSent {
				t.Fatalf("%s: %+v %v", id, e, err)
			}
		}
	}
}
