package engine

import (
	"context"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network/sim"
	"github.com/gateway/gateway/persist"
)

// A DELETE of a message accepted for later that comes again while the first one's
// cancellation is being recorded (a client retrying after a timeout, or two at once) answers
// as the first does once the record is durable: cancelled. It answered at once with the disk's
// scheduled message read as one sent long ago (409 not_revocable), though it was on its way
// to being cancelled; a store's cancellation tried again so counted the message as sent.
func TestDeleteAgainWhileTheCancellationIsRecorded(t *testing.T) {
	mem := persist.NewMemory()
	recs := persist.NewRecords(mem)
	held := &heldOutbox{Outbox: recs.Outbox}
	r := recordsOf(recs)
	r.Outbox = held
	net, err := sim.Open(sim.Options{Dir: t.TempDir(), AutoPair: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { net.Close() })
	e, u := startLinked(t, Config{Store: recs.Store, Records: r, Network: net})
	ctx := context.Background()
	s, err := e.Messages.Send(ctx, SendRequest{UserID: u.ID, Origin: "api", SendAt: time.Now().Add(time.Hour),
		Message: domain.Message{To: "491511234567", Kind: domain.KindText, Text: "later"}})
	if err != nil || s.Status != domain.MsgScheduled {
		t.Fatalf("scheduled: %s %v", s.Status, err)
	}
	open := held.shut()
	t.Cleanup(open)
	type result struct {
		d   DeleteResult
		err error
	}
	del := func() chan result {
		ch := make(chan result, 1)
		go func() {
			d, err := e.Messages.Delete(ctx, u.ID, s.ID, SendRequest{})
			ch <- result{d, err}
		}()
		return ch
	}
	first := del()
	waitUntil(t, 10*time.Second, "the cancellation's record held", func() bool { return held.waiting.Load() > 0 })
	again := del()
	select {
	case res := <-again:
		t.Fatalf("the DELETE again answered %s, %v while the cancellation was being recorded", res.d.Entry.Status, res.err)
	case <-time.After(100 * time.Millisecond):
	}
	open()
	for _, ch := range []chan result{first, again} {
		if res := <-ch; res.err != nil || res.d.Entry.Status != domain.MsgCancelled {
			t.Fatalf("DELETE answered %s, %v", res.d.Entry.Status, res.err)
		}
	}
}
