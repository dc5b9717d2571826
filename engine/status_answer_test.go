package engine

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
)

// The status route's answer is rendered once per published view of the session: given again
// while the view is unchanged, rendered anew after a change (a logout here); the queue's
// counters are read on every call; a user without a session has none.
func TestStatusAnswerFollowsTheView(t *testing.T) {
	recs := persist.NewRecords(persist.NewMemory())
	e, u := linkedEngine(t, recs, recs.Outbox)
	renders := 0
	render := func(dst []byte, st *domain.Session) ([]byte, int) {
		renders++
		dst = append(dst, st.Status+"|"...)
		return append(dst, st.StatusReason...), len(st.Status)
	}
	answer := func(want string, wantRenders int) domain.QueueStats {
		t.Helper()
		body, split, q, ok := e.Sessions.StatusAnswer(u.ID, render)
		if !ok || string(body) != want || split != strings.IndexByte(want, '|') || renders != wantRenders {
			t.Fatalf("answer %q (split %d, ok %v) after %d renders; want %q after %d", body, split, ok, renders, want, wantRenders)
		}
		return q
	}
	answer(domain.StatusConnected+"|", 1)
	if q := answer(domain.StatusConnected+"|", 1); q != e.Sessions.Status(u.ID).Queue { // kept
		t.Fatalf("queue %+v, Status says %+v", q, e.Sessions.Status(u.ID).Queue)
	}
	if err := e.Sessions.Logout(context.Background(), u.ID); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "logged out", func() bool { return e.Sessions.Status(u.ID).Status != domain.StatusConnected })
	st := e.Sessions.Status(u.ID)
	body, _, _, _ := e.Sessions.StatusAnswer(u.ID, render)
	if want := st.Status + "|" + st.StatusReason; string(body) != want || renders != 2 {
		t.Fatalf("after the logout: %q after %d renders, want %q after 2", body, renders, want)
	}
	if _, _, _, ok := e.Sessions.StatusAnswer("nobody", render); ok {
		t.Fatal("an answer for a user without a session")
	}
}

// A StatusRef gives the answer StatusAnswer gives, through every change of the user's sessions:
// a newer session assigned to them, that session reassigned away, a user with no session who
// is given one. Each change raises the index's version, so the ref finds the session again.
func TestStatusRefFollowsTheIndex(t *testing.T) {
	recs := persist.NewRecords(persist.NewMemory())
	e, u := linkedEngine(t, recs, recs.Outbox)
	ctx := context.Background()
	render := func(dst []byte, st *domain.Session) ([]byte, int) {
		return append(append(dst, st.ID+"|"...), st.Status...), len(st.ID)
	}
	same := func(ref *StatusRef, uid, wantPrefix string) {
		t.Helper()
		for range 2 { // found, then from the ref
			body, split, _, ok := e.Sessions.StatusAnswerAt(ref, uid, render)
			want, wantSplit, _, wantOK := e.Sessions.StatusAnswer(uid, render)
			if ok != wantOK || string(body) != string(want) || split != wantSplit || !strings.HasPrefix(string(body), wantPrefix) {
				t.Fatalf("StatusAnswerAt = %q %v, StatusAnswer = %q %v, want prefix %q", body, ok, want, wantOK, wantPrefix)
			}
		}
	}
	var ref StatusRef
	first := e.Sessions.Status(u.ID).ID
	same(&ref, u.ID, first+"|")
	second, err := e.Sessions.Create(ctx, "second", u.ID)
	if err != nil {
		t.Fatal(err)
	}
	same(&ref, u.ID, second.ID+"|")
	if _, err := e.Users.Create(ctx, NewUser{ID: "bob"}); err != nil {
		t.Fatal(err)
	}
	if err := e.Sessions.Assign(ctx, second.ID, "bob"); err != nil {
		t.Fatal(err)
	}
	same(&ref, u.ID, first+"|")
	var bobs StatusRef
	same(&bobs, "bob", second.ID+"|")
	var carols StatusRef
	if _, err := e.Users.Create(ctx, NewUser{ID: "carol"}); err != nil {
		t.Fatal(err)
	}
	same(&carols, "carol", "")
	third, err := e.Sessions.Create(ctx, "third", "carol")
	if err != nil {
		t.Fatal(err)
	}
	same(&carols, "carol", third.ID+"|")
}
