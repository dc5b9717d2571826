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
