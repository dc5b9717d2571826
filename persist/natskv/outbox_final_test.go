package natskv_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
	"github.com/gateway/gateway/persist/natskv"
	"github.com/gateway/gateway/persist/natstest"
)

// A failed or cancelled outcome's record deletes the status kept with its event (event_final)
// in its own commit on NATS too: the delete is a tombstone in the record's batch, also of a key
// that was never written (a message whose status nobody kept), and the record lands with it.
func TestOutcomeRecordDeletesItsKeptFinalStatusOnNATS(t *testing.T) {
	srv := natstest.Start(t)
	kv, err := natskv.Open(context.Background(), natskv.Options{URL: srv.URL, Prefix: "fin", Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kv.Close() })
	ctx := context.Background()
	w, o := persist.NewWebhooks(kv), persist.NewOutbox(kv)
	at := time.Now().UTC().Truncate(time.Millisecond)
	var es []domain.OutboxEntry
	var finals []domain.FinalStatus
	for i, st := range []domain.MessageStatus{domain.MsgFailed, domain.MsgCancelled, domain.MsgSent, domain.MsgFailed} {
		e := domain.OutboxEntry{ID: fmt.Sprint("m", i), SessionID: "s1", UserID: "u/x", CreatedAt: domain.MillisOf(at),
			Message: domain.Message{ID: fmt.Sprint("m", i), To: "491511234567", Kind: domain.KindText, Text: "hi"}}
		e.SetStatus(domain.MsgQueued, at)
		if err := o.Accept(ctx, &e, ""); err != nil {
			t.Fatal(err)
		}
		e.SetStatus(st, at.Add(time.Second))
		e.Code, e.Error = "network_error", "refused"
		es = append(es, e)
		if st != domain.MsgSent && i < 2 { // the last failure's status was never kept
			finals = append(finals, domain.FinalStatus{UserID: e.UserID, MessageID: e.ID, Status: st, At: at})
		}
	}
	if err := w.AppendEvents(ctx, nil, nil, nil, finals...); err != nil {
		t.Fatal(err)
	}
	if got, err := w.FinalStatuses(es); err != nil || len(got) != 2 {
		t.Fatalf("kept statuses before their records: %+v %v", got, err)
	}
	done := make(chan error, len(es))
	for _, e := range es {
		o.Settle(e, func(err error) { done <- err })
	}
	for range es {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if got, err := w.FinalStatuses(es); err != nil || len(got) != 0 {
		t.Fatalf("kept statuses after their records: %+v %v", got, err)
	}
	for _, e := range es {
		if got, err := o.Get(e.ID); err != nil || got.Status != e.Status {
			t.Fatalf("%s: %+v %v", e.ID, got.Status, err)
		}
	}
	if p, err := persist.NewOutbox(kv).Pending(); err != nil || len(p) != 0 {
		t.Fatalf("pending after every record: %d, %v", len(p), err)
	}
}
