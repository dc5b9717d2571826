package whatsapp

import (
	"slices"
	"testing"
	"time"

	"go.mau.fi/whatsmeow/proto/waE2E"
	"google.golang.org/protobuf/proto"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/network/whatsapp/fakewa"
)

func (h *harness) openWith(id string, src network.MessageSource) *session {
	h.t.Helper()
	rec := newRecorder()
	c, err := h.net.Open(id, rec.sink, network.WithMessageSource(src))
	if err != nil {
		h.t.Fatal(err)
	}
	return &session{t: h.t, c: c.(*client), rec: rec}
}

func isVote(e network.Event) bool { _, ok := e.(network.PollVote); return ok }

// A poll's votes reach the session as the network carries them, encrypted with the poll's
// message secret (the phone's vote is AES-GCM under a key derived from it, with SHA-256 hashes
// of the chosen options inside): the adapter decrypts them with the secret whatsmeow kept when
// the poll was sent, and names the options. After a restart (the adapter's own memory of the
// poll gone) the options come from the outbox and the secret from the device store.
func TestPollVoteDecrypted(t *testing.T) {
	h := newHarness(t)
	h.srv.AddAccount(phoneB, phoneD)
	src := &outbox{m: map[string]domain.Message{}}
	s := h.openWith("s1", src)
	h.link(s, phoneA)
	poll := domain.Message{ID: "3EB0900D0000000000000001", To: phoneB, Kind: domain.KindPoll, Question: "Confirm order 1001?",
		Options: []string{"Yes", "No", "Call me"}}
	src.mu.Lock()
	src.m[poll.ID] = poll
	src.mu.Unlock()
	if _, err := s.c.Send(ctxT(t), poll); err != nil {
		t.Fatal(err)
	}
	// The phone got the poll with its secret; the device store kept it.
	got := h.srv.Received(phoneB)
	if len(got) != 1 || got[0].Message.GetPollCreationMessage().GetName() != "Confirm order 1001?" || len(got[0].Message.GetMessageContextInfo().GetMessageSecret()) != 32 {
		t.Fatalf("the phone got %+v, want the poll with a 32-byte message secret", got)
	}
	vote := func(options ...string) {
		t.Helper()
		if _, err := h.srv.Do(phoneB, phoneA, fakewa.Act{Type: "poll_vote", MessageID: poll.ID, Options: options}); err != nil {
			t.Fatal(err)
		}
	}
	vote("Yes")
	v := s.expect("the vote", isVote).(network.PollVote)
	if v.Poll != poll.ID || v.From != phoneB || v.FromLID != h.srv.LID(phoneB) || !slices.Equal(v.Options, []string{"Yes"}) {
		t.Fatalf("vote %+v, want Yes from %s", v, phoneB)
	}
	vote("No", "Call me")
	if v := s.expect("the changed vote", isVote).(network.PollVote); !slices.Equal(v.Options, []string{"No", "Call me"}) {
		t.Fatalf("changed vote %+v", v)
	}

	// The votes acked before the restart (the sink kept them): one still unacked when the
	// client closes comes again at the next login, before the vote below.
	for end := time.Now().Add(wait); len(h.srv.Unacked(phoneA)) != 0; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("unacked before the restart: %v", h.srv.Unacked(phoneA))
		}
	}

	// Restarted: the options from the outbox, the secret from the device store.
	h.reopen()
	s = h.openWith("s1", src)
	s.connect()
	s.expect("Connected", isConnected)
	vote("Call me")
	if v := s.expect("a vote after a restart", isVote).(network.PollVote); !slices.Equal(v.Options, []string{"Call me"}) {
		t.Fatalf("vote after a restart %+v", v)
	}

	// A vote in a poll the session never sent (another's secret) is no vote of ours.
	if _, err := h.srv.Send(phoneD, phoneA, &waE2E.Message{PollUpdateMessage: &waE2E.PollUpdateMessage{
		PollCreationMessageKey: nil, Vote: &waE2E.PollEncValue{EncPayload: []byte("not a vote"), EncIV: make([]byte, 12)}}}); err != nil {
		t.Fatal(err)
	}
	s.expectNone("a vote nobody can read", 300*time.Millisecond, isVote)
}

// A contact's reaction to the session's message, its edit and its revoke of its own message
// arrive as their events, naming the message by its id.
func TestReactionEditRevokeArriveAsEvents(t *testing.T) {
	h := newHarness(t)
	h.srv.AddAccount(phoneB)
	s := h.open("s1")
	h.link(s, phoneA)
	const ours = "3EB0900D0000000000000002"
	if _, err := s.c.Send(ctxT(t), domain.Message{ID: ours, To: phoneB, Kind: domain.KindText, Text: "your parcel left"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.srv.Do(phoneB, phoneA, fakewa.Act{Type: "reaction", MessageID: ours, Emoji: "🎉"}); err != nil {
		t.Fatal(err)
	}
	r := s.expect("the reaction", func(e network.Event) bool { _, ok := e.(network.Reaction); return ok }).(network.Reaction)
	if r.Target != ours || r.Emoji != "🎉" || r.From != phoneB || r.FromLID != h.srv.LID(phoneB) {
		t.Fatalf("reaction %+v", r)
	}
	theirs, err := h.srv.SendText(phoneB, phoneA, "when does it arrive?")
	if err != nil {
		t.Fatal(err)
	}
	s.expect("the message", func(e network.Event) bool { _, ok := e.(network.Incoming); return ok })
	if _, err := h.srv.Do(phoneB, phoneA, fakewa.Act{Type: "edit", MessageID: theirs, Text: "when does it arrive, please?"}); err != nil {
		t.Fatal(err)
	}
	e := s.expect("the edit", func(e network.Event) bool { _, ok := e.(network.Edited); return ok }).(network.Edited)
	if e.Target != theirs || e.Message.Text != "when does it arrive, please?" || e.From != phoneB {
		t.Fatalf("edit %+v", e)
	}
	if _, err := h.srv.Do(phoneB, phoneA, fakewa.Act{Type: "revoke", MessageID: theirs}); err != nil {
		t.Fatal(err)
	}
	if v := s.expect("the revoke", func(e network.Event) bool { _, ok := e.(network.Revoked); return ok }).(network.Revoked); v.Target != theirs || v.From != phoneB {
		t.Fatalf("revoke %+v", v)
	}
	// Taking a reaction back is a reaction with no emoji.
	if _, err := h.srv.Do(phoneB, phoneA, fakewa.Act{Type: "reaction", MessageID: ours, Emoji: ""}); err != nil {
		t.Fatal(err)
	}
	if r := s.expect("the reaction taken back", func(e network.Event) bool { _, ok := e.(network.Reaction); return ok }).(network.Reaction); r.Target != ours || r.Emoji != "" {
		t.Fatalf("reaction taken back %+v", r)
	}
}

// A contact known by its LID only (the message names no sender_pn) still arrives with its phone
// when the device's LID map knows it (here: the number was looked up, and whatsmeow stored the
// pair the network answered); unknown, it arrives by LID alone, never under a made-up number.
func TestLIDOnlySenderCarriesThePhone(t *testing.T) {
	h := newHarness(t)
	h.srv.AddAccount(phoneB, phoneD)
	s := h.open("s1")
	h.link(s, phoneA)
	isIn := func(e network.Event) bool { _, ok := e.(network.Incoming); return ok }

	// Unknown to the LID map: the LID, no phone.
	if _, err := h.srv.Send(phoneD, phoneA, &waE2E.Message{Conversation: proto.String("who am I?")}, fakewa.SendOptions{HidePN: true}); err != nil {
		t.Fatal(err)
	}
	in := s.expect("a message from a LID", isIn).(network.Incoming)
	if in.From != "" || in.FromLID != h.srv.LID(phoneD) || in.Message.Text != "who am I?" {
		t.Fatalf("incoming %+v, want the LID %s alone", in, h.srv.LID(phoneD))
	}

	// Looked up: the LID map has the pair; the message carries the phone.
	if got, err := s.c.Lookup(ctxT(t), []string{phoneB}); err != nil || !got[0].OnNetwork || got[0].LID != h.srv.LID(phoneB) {
		t.Fatalf("Lookup = %+v, %v", got, err)
	}
	if _, err := h.srv.Send(phoneB, phoneA, &waE2E.Message{Conversation: proto.String("it's me")}, fakewa.SendOptions{HidePN: true}); err != nil {
		t.Fatal(err)
	}
	in = s.expect("a message from a known LID", isIn).(network.Incoming)
	if in.From != phoneB || in.FromLID != h.srv.LID(phoneB) || in.Message.Text != "it's me" {
		t.Fatalf("incoming %+v, want %s by its LID's phone", in, phoneB)
	}
}
