package engine

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
)

// lostAnswerOutbox stores an accept and then reports it failed, once armed: a commit whose
// answer was lost (a timeout, the records stream's leader killed after it replicated).
type lostAnswerOutbox struct {
	*persist.Outbox
	lostAnswer
}

func (o *lostAnswerOutbox) Accept(ctx context.Context, e *domain.OutboxEntry, idemHash string) error {
	return o.answer(o.Outbox.Accept(ctx, e, idemHash))
}

// lostAnswer reports a commit that was stored as failed, once armed (lose).
type lostAnswer struct{ lose atomic.Bool }

func (l *lostAnswer) answer(err error) error {
	if err == nil && l.lose.Swap(false) {
		return fmt.Errorf("%w: the commit's answer was lost", domain.ErrStorageUnavailable)
	}
	return err
}

// A message stored by an accept that answered an error is sent once a retry finds it: the
// replay of its Idempotency-Key, or a send under the same caller-chosen id (a campaign's
// number). It used to be answered 200 "queued" and wait, in no queue, for the next boot.
func TestAcceptThatSeemedToFailIsSentOnRetry(t *testing.T) {
	recs := persist.NewRecords(persist.NewMemory())
	ob := &lostAnswerOutbox{Outbox: recs.Outbox}
	e, u := linkedEngine(t, recs, ob)
	ctx := context.Background()
	sent := func(id string) func() bool {
		return func() bool {
			m, err := e.Messages.Get(u.ID, id)
			return err == nil && m.Final() && m.Status != domain.MsgFailed
		}
	}

	// An Idempotency-Key: the retry is answered from the key's record.
	idem := Idem{KeyID: "k1", Key: "retry-1", BodyHash: "h", At: e.now()}
	ob.lose.Store(true)
	if _, err := e.Messages.Send(ctx, SendRequest{UserID: u.ID, Origin: "api", IdemID: idem.ID(), Idem: domain.IdemRecord{BodyHash: "h"},
		Message: domain.Message{ID: idem.Derived(), To: "491510000001", Kind: domain.KindText, Text: "keyed"}}); err == nil {
		t.Fatal("the accept whose answer was lost succeeded")
	}
	rec, found, _, err := e.Messages.BeginIdempotent(&idem)
	if err != nil || !found || rec.MessageID != idem.Derived() {
		t.Fatalf("the key's record: %+v %v %v", rec, found, err)
	}
	m, err := e.Messages.Replay(u.ID, rec.MessageID)
	if err != nil || m.Status != domain.MsgQueued {
		t.Fatalf("replay: %+v %v", m, err)
	}
	waitUntil(t, 10*time.Second, "the replayed message sent", sent(rec.MessageID))

	// A caller-chosen id sent again (a campaign's number).
	ob.lose.Store(true)
	req := SendRequest{UserID: u.ID, Origin: "campaign:c1", Message: domain.Message{ID: "c1-0001", To: "491510000002", Kind: domain.KindText, Text: "number"}}
	if _, err := e.Messages.Send(ctx, req); err == nil {
		t.Fatal("the accept whose answer was lost succeeded")
	}
	if m, err := e.Messages.Send(ctx, req); err != nil || m.ID != "c1-0001" {
		t.Fatalf("the same id again: %+v %v", m, err)
	}
	waitUntil(t, 10*time.Second, "the number sent", sent("c1-0001"))

	// A message queued here already is not queued twice.
	m, err = e.Messages.Send(ctx, SendRequest{UserID: u.ID, Origin: "api", Message: domain.Message{ID: "once", To: "491510000003", Kind: domain.KindText, Text: "once"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Messages.Replay(u.ID, m.ID); err != nil {
		t.Fatal(err)
	}
	// (No outbox Flush here: a WaitGroup's Wait beside the receipts' background writes is a
	// race; the message's record, read through Get, holds its attempts with its outcome.)
	waitUntil(t, 10*time.Second, "sent", sent(m.ID))
	if got, _ := e.Messages.Get(u.ID, m.ID); got.Attempts != 1 {
		t.Fatalf("a queued message replayed: %d attempts, want 1", got.Attempts)
	}
}
