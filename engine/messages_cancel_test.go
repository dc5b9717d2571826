package engine

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
)

// A DELETE of a message accepted for later that comes again while the first one's
// cancellation is being recorded (a client retrying after a timeout, or two at once) answers
// as the first does once the record is durable: cancelled. It answered at once with the disk's
// scheduled message read as one sent long ago (409 not_revocable), though it was on its way
// to being cancelled; a store's cancellation tried again so counted the message as sent.
func TestDeleteAgainWhileTheCancellationIsRecorded(t *testing.T) {
	var held *heldOutbox
	e, u, _ := startOnOutbox(t, persist.NewMemory(), func(o *persist.Outbox) Outbox { held = &heldOutbox{Outbox: o}; return held })
	ctx := context.Background()
	s := scheduleLater(t, e, u)
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

// failingOutbox is an outbox whose outcomes' records fail outright while failing is set (a
// store refusing writes for longer than its retries).
// scheduleLater accepts a text to send in an hour.
func scheduleLater(t *testing.T, e *Engine, u domain.User) domain.OutboxEntry {
	t.Helper()
	s, err := e.Messages.Send(context.Background(), SendRequest{UserID: u.ID, Origin: "api", SendAt: time.Now().Add(time.Hour),
		Message: domain.Message{To: "491511234567", Kind: domain.KindText, Text: "later"}})
	if err != nil || s.Status != domain.MsgScheduled {
		t.Fatalf("scheduled: %s %v", s.Status, err)
	}
	return s
}

type failingOutbox struct {
	Outbox
	failing atomic.Bool
	refused atomic.Int32 // how many records it refused
	// hold, when set, holds each refusal until it is closed (a commit that takes its time
	// before it fails); held counts the refusals held.
	hold atomic.Pointer[chan struct{}]
	held atomic.Int32
}

func (o *failingOutbox) Settle(e domain.OutboxEntry, done func(error)) {
	if o.failing.Load() {
		o.refused.Add(1)
		hold := o.hold.Load()
		if hold != nil {
			o.held.Add(1)
		}
		go func() {
			if hold != nil {
				<-*hold
			}
			done(errors.New("the store refuses writes"))
		}()
		return
	}
	o.Outbox.Settle(e, done)
}

// A DELETE of a message accepted for later whose cancellation's record fails answers 503, and
// the DELETE tried again once the store is back records the cancellation and answers
// cancelled. The message meanwhile reads as the disk has it (scheduled) and is not sent by this
// process (a webhook may have been told it was cancelled: its event committed before the record
// failed). It was forgotten: the DELETE again answered 409 not_revocable ('sent more than 48
// hours ago'), and only a restart settled or sent it.
func TestDeleteAgainAfterTheCancellationsRecordFailed(t *testing.T) {
	var failing *failingOutbox
	e, u, _ := startOnOutbox(t, persist.NewMemory(), func(o *persist.Outbox) Outbox { failing = &failingOutbox{Outbox: o}; return failing })
	ctx := context.Background()
	s := scheduleLater(t, e, u)
	failing.failing.Store(true)
	if d, err := e.Messages.Delete(ctx, u.ID, s.ID, SendRequest{}); !errors.Is(err, domain.ErrUnavailable) {
		t.Fatalf("a DELETE whose cancellation was not recorded answered %s, %v (want 503)", d.Entry.Status, err)
	}
	if got, err := e.Messages.Get(u.ID, s.ID); err != nil || got.Status != domain.MsgScheduled {
		t.Fatalf("it reads %s, %v (want scheduled)", got.Status, err)
	}
	failing.failing.Store(false)
	d, err := e.Messages.Delete(ctx, u.ID, s.ID, SendRequest{})
	if err != nil || d.Entry.Status != domain.MsgCancelled {
		t.Fatalf("the DELETE again answered %s, %v (want cancelled)", d.Entry.Status, err)
	}
	failing.Outbox.Flush()
	if got, err := failing.Outbox.Get(s.ID); err != nil || got.Status != domain.MsgCancelled {
		t.Fatalf("recorded %s, %v", got.Status, err)
	}
}
