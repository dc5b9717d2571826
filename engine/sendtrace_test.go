package engine

import (
	"context"
	"testing"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
)

// Send fills a trace it is given with its steps in their order (the slow-send report's
// phases), and leaves the steps an error stopped before at zero.
func TestSendFillsItsTrace(t *testing.T) {
	recs := persist.NewRecords(persist.NewMemory())
	e, u := linkedEngine(t, recs, recs.Outbox)
	var tr SendTrace
	if _, err := e.Messages.Send(context.Background(), SendRequest{UserID: u.ID, Origin: "api", Trace: &tr,
		Message: domain.Message{To: "491510000001", Kind: domain.KindText, Text: "hi"}}); err != nil {
		t.Fatal(err)
	}
	if tr.Reserve.IsZero() || tr.Commit.Before(tr.Reserve) || tr.Committed.Before(tr.Commit) {
		t.Fatalf("trace %+v: want reserve <= commit <= committed, none zero", tr)
	}
	tr = SendTrace{}
	if _, err := e.Messages.Send(context.Background(), SendRequest{UserID: u.ID, SessionID: "no-such-session", Origin: "api", Trace: &tr,
		Message: domain.Message{To: "491510000001", Kind: domain.KindText, Text: "hi"}}); err == nil {
		t.Fatal("a send on a session that does not exist was accepted")
	}
	if tr != (SendTrace{}) {
		t.Fatalf("trace of a send refused before its reservation: %+v, want zero", tr)
	}
}
