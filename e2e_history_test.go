package main

// The message history (DESIGN.md section 15): both directions, filters, pages by cursor.

import (
	"fmt"
	"net/url"
	"slices"
	"testing"
	"time"
)

// historyPage reads one page of a history route.
func (tg *testGW) historyPage(t *testing.T, path string, a auth) (items []map[string]any, next string) {
	t.Helper()
	r := tg.do("GET", path, a, nil)
	want(t, r, 200, "")
	for _, m := range r.obj()["messages"].([]any) {
		items = append(items, m.(map[string]any))
	}
	next, _ = r.obj()["next"].(string)
	return items, next
}

func itemTime(t *testing.T, m map[string]any) time.Time {
	t.Helper()
	s, _ := m["timestamp"].(string)
	if m["direction"] == "out" {
		s, _ = m["created_at"].(string)
	}
	at, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t.Fatalf("item without a time: %v", m)
	}
	return at
}

func TestMessageHistory(t *testing.T) { messageHistory(t) }

// The same on the outbox's own log (--outbox log, a lone gateway's: on Badger whatever
// GATEWAY_STORE says): its outgoing messages are listed from their users' chains in the log,
// merged with the incoming ones the index keeps.
func TestMessageHistoryLog(t *testing.T) { messageHistory(t, "--store", "badger", "--outbox", "log") }

func messageHistory(t *testing.T, args ...string) {
	tg := startGW(t, args...)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	other := tg.newSender(admin, "bob", "447700900002", nil)

	// 250 messages, both directions interleaved: 125 sent, 125 received.
	want(t, tg.do("POST", "/api/v1/messages/send", keyAuth(other.key), map[string]any{"phone": "15550100001", "message": "bob's"}), 200, "")
	sent := map[string]bool{}
	for i := range 250 {
		if i%2 == 0 {
			r := tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": fmt.Sprintf("1555010%04d", i), "message": fmt.Sprintf("out %d", i)})
			want(t, r, 200, "")
			sent[r.str("message_id")] = true
		} else {
			want(t, tg.do("POST", "/api/dev/sim/inbound", nil, map[string]any{"sessionId": s.session, "from": fmt.Sprintf("1555020%04d", i), "text": fmt.Sprintf("in %d", i)}), 200, "")
		}
	}
	// Incoming messages are kept in the background of the session: wait for all of them.
	eventually(t, 10*time.Second, "125 incoming messages kept", func() bool {
		items, _ := tg.historyPage(t, "/api/v1/messages?direction=in&limit=1000", keyAuth(s.key))
		return len(items) == 125
	})

	// Newest first, 100 at a time: 100, 100, 50, then no next.
	var newest []map[string]any
	path := "/api/v1/messages?limit=100"
	for page := 0; ; page++ {
		items, next := tg.historyPage(t, path, keyAuth(s.key))
		newest = append(newest, items...)
		if page < 2 && (len(items) != 100 || next == "") || page == 2 && (len(items) != 50 || next != "") {
			t.Fatalf("page %d: %d items, next %q", page, len(items), next)
		}
		if next == "" {
			break
		}
		path = "/api/v1/messages?limit=100&cursor=" + url.QueryEscape(next)
	}
	seen := map[string]bool{}
	outs, ins := 0, 0
	for i, m := range newest {
		key := m["direction"].(string) + m["id"].(string)
		if seen[key] {
			t.Fatalf("%s listed twice", key)
		}
		seen[key] = true
		if i > 0 && itemTime(t, m).After(itemTime(t, newest[i-1])) {
			t.Fatalf("item %d is newer than the one before it", i)
		}
		switch m["direction"] {
		case "out":
			outs++
			if !sent[m["id"].(string)] || m["text"] == "bob's" {
				t.Fatalf("an outgoing message that is not alice's: %v", m)
			}
		case "in":
			ins++
			if m["from"] == nil || m["session"] != s.session {
				t.Fatalf("incoming item %v", m)
			}
		}
	}
	if outs != 125 || ins != 125 {
		t.Fatalf("%d outgoing and %d incoming, want 125 each", outs, ins)
	}

	// Oldest first from a time before all of them: the same 250 in the opposite order, by cursor.
	var oldest []map[string]any
	since := url.QueryEscape(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
	path = "/api/v1/messages?limit=100&since=" + since
	for {
		items, next := tg.historyPage(t, path, keyAuth(s.key))
		oldest = append(oldest, items...)
		if next == "" {
			break
		}
		path = "/api/v1/messages?limit=100&since=" + since + "&cursor=" + url.QueryEscape(next)
	}
	ids := func(ms []map[string]any) []string {
		var out []string
		for _, m := range ms {
			out = append(out, m["direction"].(string)+m["id"].(string))
		}
		return out
	}
	rev := ids(oldest)
	slices.Reverse(rev)
	if !slices.Equal(rev, ids(newest)) {
		t.Fatalf("oldest first is not newest first reversed (%d vs %d items)", len(rev), len(newest))
	}
	// since at Go's zero time (what an unset time.Time serialises to) is a since too: oldest first.
	if items, _ := tg.historyPage(t, "/api/v1/messages?limit=1&since=0001-01-01T00:00:00Z", keyAuth(s.key)); len(items) != 1 || items[0]["id"] != oldest[0]["id"] {
		t.Fatalf("since=0001-01-01 listed %v first, want the oldest, %v", items, oldest[0]["id"])
	}

	// The first message sent, out 0, is listed first, but for others of its millisecond: the
	// history is ordered by time to the millisecond (DESIGN.md section 15), an outgoing message's
	// its accept, an incoming one's the network's timestamp, and messages of one millisecond have
	// no order of their own (the index's keys put "in" before "out"). On NATS "in 1", sent to the
	// sim once out 0's send was answered, had out 0's millisecond in 2 to 3 runs of 15 and was
	// listed first; the test took that for a wrong order.
	at := slices.IndexFunc(oldest, func(m map[string]any) bool { return m["direction"] == "out" && m["text"] == "out 0" })
	if at < 0 {
		t.Fatal("out 0 is not in the history")
	}
	first := oldest[at]
	for _, m := range oldest[:at] {
		if !itemTime(t, m).Equal(itemTime(t, first)) {
			t.Fatalf("%v is listed before the first message sent, %v", m, first)
		}
	}

	// Statuses as they stand: the sim delivers, then the recipient reads one.
	want(t, tg.do("POST", "/api/dev/sim/read", nil, map[string]any{"messageId": first["id"]}), 200, "")
	eventually(t, 10*time.Second, "the read status in the history", func() bool {
		items, _ := tg.historyPage(t, "/api/client/messages?status=read", bearerAuth(s.tok))
		return len(items) == 1 && items[0]["id"] == first["id"] && items[0]["text"] == "out 0"
	})

	// Filters: a conversation with one number (both directions), one direction, one sender.
	items, _ := tg.historyPage(t, "/api/client/messages?to=15550100000&from=15550100000", bearerAuth(s.tok))
	if len(items) != 1 || items[0]["to"] != "15550100000" {
		t.Fatalf("conversation: %v", items)
	}
	items, _ = tg.historyPage(t, "/api/client/messages?from=%2B1%20555%20020%200001", bearerAuth(s.tok))
	if len(items) != 1 || items[0]["text"] != "in 1" || items[0]["direction"] != "in" {
		t.Fatalf("from filter: %v", items)
	}
	items, _ = tg.historyPage(t, "/api/client/messages?direction=out&limit=5", bearerAuth(s.tok))
	if len(items) != 5 || items[0]["direction"] != "out" {
		t.Fatalf("direction filter: %v", items)
	}
	// Bob sees only his own.
	if items, _ := tg.historyPage(t, "/api/client/messages", bearerAuth(other.tok)); len(items) != 1 || items[0]["text"] != "bob's" {
		t.Fatalf("bob's history: %v", items)
	}

	// Bad input: 400 with a sentence.
	for _, q := range []string{"limit=0", "limit=1001", "direction=both", "status=lost", "since=yesterday", "to=12", "cursor=xyz"} {
		want(t, tg.do("GET", "/api/client/messages?"+q, bearerAuth(s.tok), nil), 400, "validation_failed")
	}
	narrow := tg.newKey(admin, "alice", map[string]any{"scopes": []string{"send_text"}}).str("rawKey")
	want(t, tg.do("GET", "/api/v1/messages", keyAuth(narrow), nil), 403, "insufficient_scope")
}
