package main

import (
	"fmt"
	"testing"
	"time"
)

// Send later across kill -9 (issue 30): messages accepted with sendAt 5 s and 30 s ahead are
// killed with the process right after their accept; the restarted gateway sends each at its
// time (±1 s), exactly once, and a second kill -9 after the first went sends nothing twice.
// GATEWAY_STORE=nats (make test-nats) runs it on NATS JetStream.
func TestSendAtAcrossKillNine(t *testing.T) {
	sideBySide(t)
	data := t.TempDir()
	var args []string
	if testStore == "nats" {
		// A restart after kill -9 waits for the old lease to lapse: keep it well under 5 s.
		args = []string{"--lease-ttl", "2s"}
	}
	p := startProc(t, data, args...)
	tg := p.gw(t, data)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)

	type later struct {
		to string
		at time.Time
		id string
	}
	now := time.Now()
	ls := []*later{{to: "15550600005", at: now.Add(5 * time.Second)}, {to: "15550600030", at: now.Add(30 * time.Second)}}
	for _, l := range ls {
		r := tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": l.to, "message": "at " + l.to, "sendAt": l.at.UTC().Format(time.RFC3339Nano)})
		if want(t, r, 200, ""); r.str("status") != "scheduled" {
			t.Fatalf("accepted: %s", r.raw)
		}
		l.id = r.str("message_id")
		m := tg.do("GET", "/api/v1/messages/"+l.id, keyAuth(s.key), nil).obj()
		if m["status"] != "scheduled" || m["sendAt"] == nil {
			t.Fatalf("scheduled message %v", m)
		}
	}
	// Their allowance is reserved at the accept.
	if a := tg.account(s.key); a["remaining_month"] != float64(1000-len(ls)) || a["messagesSent"] != float64(0) {
		t.Fatalf("account after the accepts: %v", a)
	}
	p.kill9(t)

	p = startProc(t, data, args...)
	tg = p.gw(t, data)
	at := func(l *later) time.Time {
		t.Helper()
		var got []map[string]any
		eventually(t, time.Until(l.at)+15*time.Second, "the message sent later to "+l.to, func() bool {
			got = tg.simMessages(l.to)
			return len(got) > 0
		})
		if len(got) != 1 || got[0]["text"] != "at "+l.to {
			t.Fatalf("%s got %v", l.to, got)
		}
		ts, err := time.Parse(time.RFC3339Nano, got[0]["timestamp"].(string))
		if err != nil {
			t.Fatal(err)
		}
		if d := ts.Sub(l.at); d < -time.Second || d > time.Second {
			t.Fatalf("%s went at %v, %v from its sendAt %v", l.to, ts, d, l.at)
		}
		return ts
	}
	at(ls[0])
	if n := len(tg.simMessages(ls[1].to)); n != 0 {
		t.Fatalf("the 30 s message went early (%d)", n)
	}
	eventually(t, 10*time.Second, "the first counted", func() bool {
		return tg.account(s.key)["messagesSent"] == float64(1)
	})
	p.kill9(t)

	p = startProc(t, data, args...)
	tg = p.gw(t, data)
	// The second restart must come before the 30 s message is due (its time is then checked
	// within ±1 s); a restart takes seconds, so this fails only on a machine far too slow.
	if left := time.Until(ls[1].at); left < time.Second {
		t.Fatalf("the second restart was up %v after the 30 s message was due: the machine is too slow for this test", -left)
	}
	at(ls[1])
	if got := tg.simMessages(ls[0].to); len(got) != 1 {
		t.Fatalf("the 5 s message went %d times", len(got))
	}
	for _, l := range ls {
		m := tg.do("GET", "/api/v1/messages/"+l.id, keyAuth(s.key), nil).obj()
		hist := m["history"].([]any)
		if st := m["status"]; (st != "sent" && st != "delivered") || hist[0].(map[string]any)["status"] != "scheduled" {
			t.Fatalf("message %s: %v", l.id, m)
		}
	}
	// messagesSent is written behind (README: Allowance): the kill right after the first went
	// may lose its count, never count one twice.
	if a := tg.account(s.key); a["messagesSent"].(float64) < 1 || a["messagesSent"].(float64) > float64(len(ls)) {
		t.Fatal(fmt.Sprint("counted ", a["messagesSent"]))
	}
}
