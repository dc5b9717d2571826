package main

// Core v2 (DESIGN.md sections 3 and 9): accept, then deliver; ?wait; the message's history;
// pacing per session.

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// A v1 send answers queued at once while the network takes 2 s; ?wait=5 answers sent; the
// message's history shows queued, then sent, with times.
func TestSendAcceptThenDeliver(t *testing.T) {
	tg := startGW(t)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	want(t, tg.do("POST", "/api/dev/sim/latency", nil, map[string]any{"ms": 2000}), 200, "")

	start := time.Now()
	r := tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": "15550100001", "message": "hello"})
	want(t, r, 200, "")
	if took := time.Since(start); r.str("status") != "queued" || took > time.Second {
		t.Fatalf("accept took %v: %s", took, r.raw)
	}
	id := r.str("message_id")
	m := tg.do("GET", "/api/v1/messages/"+id, keyAuth(s.key), nil)
	want(t, m, 200, "")
	if m.str("status") != "queued" || m.str("id") != id {
		t.Fatalf("right after accept: %s", m.raw)
	}
	// Sent, then delivered (the sim's receipt).
	eventually(t, 10*time.Second, "the message sent", func() bool {
		st := tg.do("GET", "/api/v1/messages/"+id, keyAuth(s.key), nil).str("status")
		return st == "sent" || st == "delivered"
	})
	hist := tg.do("GET", "/api/v1/messages/"+id, keyAuth(s.key), nil).obj()["history"].([]any)
	if len(hist) < 2 || hist[0].(map[string]any)["status"] != "queued" || hist[1].(map[string]any)["status"] != "sent" {
		t.Fatalf("history %v", hist)
	}
	q, _ := time.Parse(time.RFC3339, hist[0].(map[string]any)["at"].(string))
	sent, _ := time.Parse(time.RFC3339, hist[1].(map[string]any)["at"].(string))
	if sent.Sub(q) < 1500*time.Millisecond {
		t.Fatalf("sent %v after queued, want about the network's 2 s", sent.Sub(q))
	}

	// ?wait=5 and Prefer: wait=5 wait for the network's acknowledgement.
	r = tg.do("POST", "/api/v1/messages/send?wait=5", keyAuth(s.key), map[string]any{"phone": "15550100002", "message": "wait"})
	if want(t, r, 200, ""); r.str("status") != "sent" {
		t.Fatalf("?wait=5: %s", r.raw)
	}
	a := keyAuth(s.key)
	a["Prefer"] = "wait=5"
	if r = tg.do("POST", "/api/v1/messages/send", a, map[string]any{"phone": "15550100003", "message": "prefer"}); r.str("status") != "sent" {
		t.Fatalf("Prefer: wait=5: %s", r.raw)
	}
	// A wait shorter than the network answers queued, not an error.
	if r = tg.do("POST", "/api/v1/messages/send?wait=0.2", keyAuth(s.key), map[string]any{"phone": "15550100004", "message": "short"}); r.status != 200 || r.str("status") != "queued" {
		t.Fatalf("?wait=0.2: %d %s", r.status, r.raw)
	}
	want(t, tg.do("POST", "/api/v1/messages/send?wait=61", keyAuth(s.key), map[string]any{"phone": "15550100004", "message": "x"}), 400, "validation_failed")

	// A linked session that drops its link still accepts; its queue waits for the link.
	want(t, tg.do("POST", "/api/dev/sim/latency", nil, map[string]any{"ms": 0}), 200, "")
	want(t, tg.do("POST", "/api/dev/sim/drop", nil, map[string]any{"sessionId": s.session}), 200, "")
	r = tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": "15550100005", "message": "later"})
	if want(t, r, 200, ""); r.str("status") != "queued" {
		t.Fatalf("while reconnecting: %s", r.raw)
	}
	eventually(t, 15*time.Second, "the message sent once the link is back", func() bool {
		return len(tg.simMessages("15550100005")) == 1
	})
}

// With a minimum gap of 1 s on a session, 5 accepted messages reach the network at least 1 s
// apart, in order.
func TestSessionPacing(t *testing.T) {
	tg := startGW(t)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	r := tg.do("PATCH", "/api/admin/sessions", bearerAuth(admin), map[string]any{"id": s.session, "pacing": map[string]any{"minGapMs": 1000}})
	want(t, r, 200, "")
	if r.obj()["applied"].(map[string]any)["minGapMs"] != float64(1000) {
		t.Fatalf("pacing: %s", r.raw)
	}
	want(t, tg.do("PATCH", "/api/admin/sessions", bearerAuth(s.tok), map[string]any{"id": s.session, "pacing": nil}), 403, "forbidden")
	// A proxy alone leaves the pacing as it is; its password never comes back.
	r = tg.do("PATCH", "/api/admin/sessions", bearerAuth(admin), map[string]any{"id": s.session, "proxy": "socks5://u:secret@127.0.0.1:1080"})
	want(t, r, 200, "")
	if r.obj()["applied"].(map[string]any)["minGapMs"] != float64(1000) || strings.Contains(string(r.raw), "secret") {
		t.Fatalf("proxy: %s", r.raw)
	}
	want(t, tg.do("PATCH", "/api/admin/sessions", bearerAuth(admin), map[string]any{"id": s.session, "proxy": "ftp://x"}), 400, "validation_failed")
	want(t, tg.do("PATCH", "/api/admin/sessions", bearerAuth(admin), map[string]any{"id": s.session, "proxy": ""}), 200, "")
	want(t, tg.do("PATCH", "/api/admin/sessions", bearerAuth(admin), map[string]any{"id": "nope"}), 404, "session_not_found")

	const to = "15550100009"
	for i := range 5 {
		want(t, tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": to, "message": fmt.Sprint("m", i)}), 200, "")
	}
	st := tg.status(s.tok)
	if q := st["queue"].(map[string]any); q["depth"].(float64) < 3 || q["oldestAt"] == nil {
		t.Fatalf("queue right after 5 sends: %v", q)
	}
	eventually(t, 15*time.Second, "5 deliveries", func() bool { return len(tg.simMessages(to)) == 5 })
	got := tg.simMessages(to)
	var prev time.Time
	for i, m := range got {
		if m["text"] != fmt.Sprint("m", i) {
			t.Fatalf("delivery %d is %v: out of order", i, m["text"])
		}
		at, err := time.Parse(time.RFC3339, m["timestamp"].(string))
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 && at.Sub(prev) < 990*time.Millisecond {
			t.Fatalf("deliveries %d and %d only %v apart", i-1, i, at.Sub(prev))
		}
		prev = at
	}
	eventually(t, 5*time.Second, "an empty queue", func() bool {
		return tg.status(s.tok)["queue"].(map[string]any)["depth"] == float64(0)
	})
}

// Receipts: a sent message becomes delivered (the sim's receipt after its latency), then read
// when the recipient reads it; the history has every step in order.
func TestMessageReceipts(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	r := tg.do("POST", "/api/v1/messages/send?wait=5", keyAuth(s.key), map[string]any{"phone": "15550100001", "message": "hi"})
	want(t, r, 200, "")
	id := r.str("message_id")
	eventually(t, 10*time.Second, "delivered", func() bool {
		return tg.do("GET", "/api/v1/messages/"+id, keyAuth(s.key), nil).str("status") == "delivered"
	})
	want(t, tg.do("POST", "/api/dev/sim/read", nil, map[string]any{"messageId": id}), 200, "")
	want(t, tg.do("POST", "/api/dev/sim/read", nil, map[string]any{"messageId": "3EB0NOPE"}), 404, "message_not_found")
	var m resp
	eventually(t, 10*time.Second, "read", func() bool {
		m = tg.do("GET", "/api/v1/messages/"+id, keyAuth(s.key), nil)
		return m.str("status") == "read"
	})
	var steps []string
	for _, h := range m.obj()["history"].([]any) {
		steps = append(steps, h.(map[string]any)["status"].(string))
	}
	if fmt.Sprint(steps) != "[queued sent delivered read]" {
		t.Fatalf("history %v", steps)
	}
}
