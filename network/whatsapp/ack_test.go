package whatsapp

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/network/whatsapp/fakewa"
)

func isIncoming(e network.Event) bool { _, ok := e.(network.Incoming); return ok }

// ackAbsent fails if the server gets the acknowledgement of class and id within d (only for
// asserting absence: without SynchronousAck whatsmeow acks within milliseconds of the event).
func (h *harness) ackAbsent(what, class, id string, d time.Duration) {
	h.t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if h.srv.Acked(class, id) {
			h.t.Fatalf("%s: the server got its ack while it was not kept", what)
		}
	}
}

// ackSeen waits for the server to get the acknowledgement of class and id.
func (h *harness) ackSeen(what, class, id string) {
	h.t.Helper()
	for end := time.Now().Add(wait); !h.srv.Acked(class, id); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			h.t.Fatalf("%s: no ack within %s (unacked: %v)", what, wait, h.srv.Unacked(phoneA))
		}
	}
}

// An incoming message, a receipt, an edit and a vote are acked to the server only once the sink has kept them
// (their Done called with nil): while the commit is held the server has no ack. A failed commit
// leaves the message unacked; the adapter resets the link, the server delivers it again at the
// login, whatsmeow decrypts it again from its event buffer, and the second delivery, kept, is
// acked (and not delivered a third time). A commit that does not end within keepWait is a
// failure too.
func TestAckOnlyOnceKept(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	// Shortened: a commit held past keepWait is a failure (the holds below last 300 ms).
	h.net.keepWait, h.net.redeliverAfter = 2*time.Second, 50*time.Millisecond
	s := h.open("s1")
	h.link(s, phoneA)
	h.srv.AddAccount(phoneB)
	type held struct {
		ev   network.Event
		done network.Done
	}
	commits := make(chan held, 4)
	s.rec.mu.Lock()
	s.rec.keep = func(e network.Event, d network.Done) {
		select {
		case commits <- held{e, d}:
		default: // the test stopped taking them (it failed): never block the session
			d(errors.New("the test takes no more commits"))
		}
	}
	s.rec.mu.Unlock()
	next := func(what string) held {
		t.Helper()
		select {
		case c := <-commits:
			return c
		case <-time.After(wait):
			t.Fatalf("%s: no commit within %s", what, wait)
			return held{}
		}
	}

	// A message: no ack while its commit is held, the ack once it is done.
	id, err := h.srv.SendText(phoneB, phoneA, "where is order 1001?")
	if err != nil {
		t.Fatal(err)
	}
	if in := s.expect("the message", isIncoming).(network.Incoming); in.ID != id {
		t.Fatalf("incoming %#v, want %s", in, id)
	}
	h.ackAbsent("the message", "message", id, 300*time.Millisecond)
	c := next("the message")
	if in, ok := c.ev.(network.Incoming); !ok || in.ID != id {
		t.Fatalf("first event %#v, want the incoming message %s", c.ev, id)
	}
	c.done(nil)
	h.ackSeen("the message", "message", id)

	// A receipt of a sent message: the same.
	if _, err := s.c.Send(ctxT(t), domain.Message{ID: "RC1", To: phoneB, Kind: domain.KindText, Text: "shipped"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.srv.Receipt(phoneA, phoneB, "read", "RC1"); err != nil {
		t.Fatal(err)
	}
	c = next("the receipt")
	if r, ok := c.ev.(network.MessageReceipt); !ok || !slices.Equal(r.IDs, []string{"RC1"}) {
		t.Fatalf("event %#v, want the receipt of RC1", c.ev)
	}
	h.ackAbsent("the receipt", "receipt", "RC1", 300*time.Millisecond)
	c.done(nil)
	h.ackSeen("the receipt", "receipt", "RC1")

	// An edit and a vote on an order's confirmation (a poll): the same (acked at once before,
	// so a kill -9 before their record lost them).
	eid, err := h.srv.Do(phoneB, phoneA, fakewa.Act{Type: "edit", MessageID: id, Text: "where is order 1001, please?"})
	if err != nil {
		t.Fatal(err)
	}
	c = next("the edit")
	if e, ok := c.ev.(network.Edited); !ok || e.Target != id {
		t.Fatalf("event %#v, want the edit of %s", c.ev, id)
	}
	h.ackAbsent("the edit", "message", eid, 300*time.Millisecond)
	c.done(nil)
	h.ackSeen("the edit", "message", eid)
	poll := domain.Message{ID: "3EB0A0C00000000000000001", To: phoneB, Kind: domain.KindPoll, Question: "Confirm order 1001?",
		Options: []string{"Yes", "No"}}
	if _, err := s.c.Send(ctxT(t), poll); err != nil {
		t.Fatal(err)
	}
	vid, err := h.srv.Do(phoneB, phoneA, fakewa.Act{Type: "poll_vote", MessageID: poll.ID, Options: []string{"Yes"}})
	if err != nil {
		t.Fatal(err)
	}
	c = next("the vote")
	if v, ok := c.ev.(network.PollVote); !ok || v.Poll != poll.ID || !slices.Equal(v.Options, []string{"Yes"}) {
		t.Fatalf("event %#v, want the vote Yes on %s", c.ev, poll.ID)
	}
	h.ackAbsent("the vote", "message", vid, 300*time.Millisecond)
	c.done(nil)
	h.ackSeen("the vote", "message", vid)

	// A failed commit: no ack, the message stays queued on the server.
	id2, err := h.srv.SendText(phoneB, phoneA, "and order 1002?")
	if err != nil {
		t.Fatal(err)
	}
	c = next("the second message")
	if in, ok := c.ev.(network.Incoming); !ok || in.ID != id2 || in.Message.Text != "and order 1002?" {
		t.Fatalf("event %#v, want the incoming message %s", c.ev, id2)
	}
	c.done(errors.New("storage unavailable"))
	h.ackAbsent("the failed message", "message", id2, 300*time.Millisecond)
	if u := h.srv.Unacked(phoneA); !slices.Equal(u, []string{id2}) {
		t.Fatalf("unacked on the server: %v, want [%s]", u, id2)
	}
	// The adapter resets the link; the server delivers it again at the login, the same
	// ciphertext (its Signal ratchet moved on: only whatsmeow's event buffer can read it now).
	c = next("the message delivered again")
	if in, ok := c.ev.(network.Incoming); !ok || in.ID != id2 || in.Message.Text != "and order 1002?" {
		t.Fatalf("event %#v, want the incoming message %s again", c.ev, id2)
	}
	c.done(nil)
	h.ackSeen("the message delivered again", "message", id2)
	if u := h.srv.Unacked(phoneA); len(u) != 0 {
		t.Fatalf("unacked on the server: %v, want none", u)
	}
	// A commit that never ends: unacked after keepWait, delivered again, kept.
	id3, err := h.srv.SendText(phoneB, phoneA, "anyone there?")
	if err != nil {
		t.Fatal(err)
	}
	if c = next("the third message"); c.ev.(network.Incoming).ID != id3 {
		t.Fatalf("event %#v, want the incoming message %s", c.ev, id3)
	}
	if c = next("the third message delivered again"); c.ev.(network.Incoming).ID != id3 {
		t.Fatalf("event %#v, want the incoming message %s again", c.ev, id3)
	}
	c.done(nil)
	h.ackSeen("the third message delivered again", "message", id3)

	// Refused as invalid (not for the moment): acked, not delivered again (a retry would be
	// refused again, and the link reset every redeliverAfter for ever).
	id4, err := h.srv.SendText(phoneB, phoneA, "a message the gateway refuses")
	if err != nil {
		t.Fatal(err)
	}
	if c = next("the refused message"); c.ev.(network.Incoming).ID != id4 {
		t.Fatalf("event %#v, want the incoming message %s", c.ev, id4)
	}
	c.done(fmt.Errorf("%w: an incoming message needs a user and an id", domain.ErrValidation))
	h.ackSeen("the refused message", "message", id4)

	// Kept, a message is not delivered again (whatsmeow's buffer marks it processed; the
	// server has it acked).
	h.srv.Drop(phoneA)
	s.expect("Connected again", isConnected)
	select {
	case c := <-commits:
		t.Fatalf("after the ack: %#v was delivered again", c.ev)
	case <-time.After(300 * time.Millisecond):
	}
}
