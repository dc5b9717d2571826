package engine

import (
	"context"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
)

// A group message two of the user's sessions got is kept once per session; a reply or a
// reaction to it by id takes the copy of the session the send names, else the default
// session's (the one a send naming none goes through), else the first session's that got it.
func TestReplyTakesTheCopyOfItsSession(t *testing.T) {
	recs := persist.NewRecords(persist.NewMemory())
	e, u, _ := gatedEngine(t, recs, Config{})
	ctx := context.Background()
	linked := e.Sessions.Status(u.ID).ID
	// Assigned last, so the user's default; its id sorts after every other (the first
	// session's copy by id is the linked one's).
	second, err := e.Sessions.CreateAs(ctx, "~second", "second", u.ID)
	if err != nil {
		t.Fatal(err)
	}
	if def := e.Sessions.Status(u.ID).ID; def != second.ID {
		t.Fatalf("the default session is %s, want %s", def, second.ID)
	}
	at := time.Now().UTC().Truncate(time.Millisecond)
	both := domain.InboundMessage{ID: "3EB0BOTH", UserID: u.ID, SessionID: linked, From: "4915100000011",
		Group: "120363000000000001@g.us", Type: "text", Kind: "text", Text: "who brings the cake?", Timestamp: at}
	copy2 := both
	copy2.SessionID = second.ID
	only := both
	only.ID = "3EB0ONLY"
	for _, m := range []domain.InboundMessage{both, copy2, only} {
		if err := recs.Webhooks.SaveInbound(ctx, m, nil, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	reply := func(id, via string) SendRequest {
		r := SendRequest{UserID: u.ID, SessionID: via, Message: domain.Message{To: both.Group, Kind: domain.KindText,
			Text: "me", ReplyTo: &domain.MessageRef{ID: id}}}
		if err := e.Messages.resolveRefs(&r); err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := reply(both.ID, ""); r.SessionID != second.ID {
		t.Fatalf("a reply naming no session goes through %s, want the default session's copy (%s)", r.SessionID, second.ID)
	}
	if r := reply(both.ID, linked); r.SessionID != linked {
		t.Fatalf("a reply naming session %s goes through %s", linked, r.SessionID)
	}
	if r := reply(only.ID, ""); r.SessionID != linked {
		t.Fatalf("a reply to what only %s got goes through %s", linked, r.SessionID)
	}
	r := SendRequest{UserID: u.ID, Message: domain.Message{Kind: domain.KindReaction, Emoji: "🎂", Target: &domain.MessageRef{ID: both.ID}}}
	if err := e.Messages.resolveRefs(&r); err != nil {
		t.Fatal(err)
	}
	if r.SessionID != second.ID || r.Message.To != both.Group {
		t.Fatalf("a reaction naming no session: through %s to %s, want the default session's copy (%s) in %s", r.SessionID, r.Message.To, second.ID, both.Group)
	}
}
