package engine

import (
	"context"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network/sim"
	"github.com/gateway/gateway/persist"
)

// Send fills a trace it is given with its steps in their order (the slow-send report's
// phases), and leaves the steps an error stopped before at zero.
func TestSendFillsItsTrace(t *testing.T) {
	recs := persist.NewRecords(persist.NewMemory())
	e, u := linkedEngine(t, recs, recs.Outbox)
	if !e.wallClock { // its reserve step is the accept's clock read (TestSendTraceClock: the other way)
		t.Fatal("an engine without a clock of its own does not read as on the wall clock")
	}
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

// With a test clock (one that may stand still), every step of the trace is read from the
// monotonic clock, never the engine's (with the wall clock, the reserve step is the accept's
// own read: TestSendFillsItsTrace).
func TestSendTraceClock(t *testing.T) {
	still := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	recs := persist.NewRecords(persist.NewMemory())
	net, err := sim.Open(sim.Options{Dir: t.TempDir(), AutoPair: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { net.Close() })
	e, u := startLinked(t, Config{Store: recs.Store, Records: recordsOf(recs), Network: net, Now: func() time.Time { return still }})
	if e.wallClock {
		t.Fatal("an engine with a clock of its own reads as on the wall clock")
	}
	before := time.Now()
	var tr SendTrace
	if _, err := e.Messages.Send(context.Background(), SendRequest{UserID: u.ID, Origin: "api", Trace: &tr,
		Message: domain.Message{To: "491510000001", Kind: domain.KindText, Text: "hi"}}); err != nil {
		t.Fatal(err)
	}
	if tr.Reserve.Before(before) || tr.Commit.Before(tr.Reserve) || tr.Committed.Before(tr.Commit) {
		t.Fatalf("trace %+v (sent after %v): want the monotonic clock's steps in order", tr, before)
	}
}
