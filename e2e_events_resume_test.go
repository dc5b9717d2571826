package main

// The live stream resumes (DESIGN.md section 20): a client that lost its connection sends the
// last id it saw and gets the events it missed, in order, then the live ones.

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"
)

func (s *sseStream) ids() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, e := range s.events {
		out = append(out, e.ID)
	}
	return out
}

func (s *sseStream) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.events)
}

// An SSE client disconnected for 30 events resumes with Last-Event-ID and receives exactly those
// 30, in order, then live ones; ?lastEventId= does the same for a client that opens a new
// EventSource; an id the journal does not hold gets a "resync" event.
func TestEventStreamResumes(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	bob := tg.newSender(admin, "bob", "447700900002", nil)
	stream := "/api/client/events/stream?token=" + s.tok
	watch := openStream(t, tg, stream, nil) // stays connected: what happened, in order
	away := openStream(t, tg, stream, nil)
	n := 0
	send := func(key string) {
		t.Helper()
		n++
		want(t, tg.do("POST", "/api/v1/messages/send", keyAuth(key), map[string]any{"phone": fmt.Sprintf("1555020%04d", n), "message": "m"}), 200, "")
	}
	send(s.key)
	eventually(t, 10*time.Second, "queued, sent, delivered on the stream", func() bool { return away.count() == 3 })
	last := away.ids()[2]
	away.cancel()
	<-away.ended

	// 30 events of alice while it is away (10 messages: queued, sent, delivered), bob's between.
	for range 10 {
		send(s.key)
		send(bob.key)
	}
	eventually(t, 20*time.Second, "the 30 events on the connected stream", func() bool { return watch.count() == 33 })
	missed := watch.ids()[3:]

	back := openStream(t, tg, stream, http.Header{"Last-Event-ID": {last}})
	eventually(t, 10*time.Second, "the 30 missed events replayed", func() bool { return back.count() >= 30 })
	if got := back.ids(); !slices.Equal(got, missed) {
		t.Fatalf("resumed with\n%v\nwant\n%v", got, missed)
	}
	// Then the live ones, once each.
	send(s.key)
	eventually(t, 10*time.Second, "the next message's events, live", func() bool { return watch.count() == 36 && back.count() >= 33 })
	if got, all := back.ids(), watch.ids(); !slices.Equal(got, all[3:]) {
		t.Fatalf("after the replay:\n%v\nwant\n%v", got, all[3:])
	}

	// A new EventSource passes the id in the query.
	q := openStream(t, tg, stream+"&lastEventId="+missed[27], nil)
	eventually(t, 10*time.Second, "the 5 events after the 28th", func() bool { return q.count() >= 5 })
	if got := q.ids(); !slices.Equal(got, watch.ids()[31:]) {
		t.Fatalf("resumed from the query with %v", got)
	}

	// An id the journal does not hold (too old, another user's, made up): resync, then live.
	for _, id := range []string{"evt_000000000000000000000000", "not-an-id"} {
		r := openStream(t, tg, stream, http.Header{"Last-Event-ID": {id}})
		eventually(t, 10*time.Second, "a resync event", func() bool { return r.count() == 1 })
		r.mu.Lock()
		ev := r.events[0]
		r.mu.Unlock()
		if ev.Type != "resync" || ev.ID != "" {
			t.Fatalf("after an unknown id: %+v", ev)
		}
	}
	bobStream := openStream(t, tg, "/api/client/events/stream?token="+bob.tok, http.Header{"Last-Event-ID": {last}})
	eventually(t, 10*time.Second, "bob's resync", func() bool { return bobStream.count() == 1 })
	if bobStream.ids()[0] != "" {
		t.Fatalf("bob resumed from alice's event: %v", bobStream.ids())
	}
}
