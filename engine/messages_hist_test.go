package engine

import (
	"context"
	"testing"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
)

// A sent message's status history lies in its pending record (pending.hist), made with the
// record: no allocation of its own (issue 32: one a message in the send path's profile, in
// queuedEntry). Its room is two statuses, as before, so the deliverer's sent appends in place
// and the first receipt appends into a new array.
func TestSendHistoryInItsRecord(t *testing.T) {
	recs := persist.NewRecords(persist.NewMemory())
	e, u := linkedEngine(t, recs, recs.Outbox)
	m, err := e.Messages.Send(context.Background(), SendRequest{UserID: u.ID, Origin: "api",
		Message: domain.Message{To: "491510000001", Kind: domain.KindText, Text: "hi"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(m.History) != 1 || cap(m.History) != 2 || m.History[0].Status != domain.MsgQueued {
		t.Fatalf("history %+v (cap %d), want queued with room for one more", m.History, cap(m.History))
	}
	sh := e.Messages.msgs.shard(m.ID)
	sh.mu.Lock()
	p := sh.m[m.ID]
	sh.mu.Unlock()
	if p == nil {
		t.Fatal("the sent message has no record")
	}
	if &m.History[0] != &p.hist[0] {
		t.Fatal("the history lies outside the message's record: an allocation of its own")
	}
}
