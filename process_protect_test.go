package main

// The session's protections survive kill -9 (DESIGN.md section 14): the real binary is killed,
// then the gateway starts again on the same data (in this process, on a clock the test moves).

import (
	"fmt"
	"testing"
	"time"
)

// afterMidnightGuard waits out the last minutes of a UTC day: these tests count "today" in
// two processes and must not see the day change between them.
func afterMidnightGuard() {
	now := time.Now().UTC()
	next := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC)
	if left := next.Sub(now); left < 3*time.Minute {
		time.Sleep(left + time.Second)
	}
}

// Timelock until T, kill -9, restart: no first message to a new contact goes before T (the
// sim, restarted too, has forgotten the timelock: only the gateway's records hold it); a reply
// to a contact who wrote goes at once; after T the held message goes.
func TestKill9TimelockHoldsFirstMessagesOnly(t *testing.T) {
	data := t.TempDir()
	p := startProc(t, data)
	tg := p.gw(t, data)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	const customer, cold = "15550008001", "15550008002"
	want(t, tg.do("POST", "/api/dev/sim/inbound", nil, map[string]any{"sessionId": s.session, "from": customer, "text": "hi"}), 200, "")
	end := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	want(t, tg.do("POST", "/api/dev/sim/timelock", nil, map[string]any{"sessionId": s.session, "until": end.Format(time.RFC3339)}), 200, "")
	eventually(t, 10*time.Second, "restrictedUntil in the status", func() bool {
		st := tg.status(s.tok)
		return st["restrictedUntil"] == end.Format("2006-01-02T15:04:05.000Z") && st["timelockUntil"] == st["restrictedUntil"]
	})
	held := tg.sendTo(s.key, cold, "first message")
	eventually(t, 5*time.Second, "the first message queued", func() bool {
		return tg.status(s.tok)["queue"].(map[string]any)["depth"] == float64(1)
	})
	p.kill9(t)

	clk := newSkewClock()
	tg = startGWSkew(t, clk, "--data", data)
	tg.waitStatus(s.tok, "CONNECTED")
	if st := tg.status(s.tok); st["restrictedUntil"] != end.Format("2006-01-02T15:04:05.000Z") {
		t.Fatalf("after kill -9: %v", st)
	}
	tg.sendTo(s.key, customer, "a reply")
	tg.simDelivered(customer, 1)
	// The reply was queued after the held message and went first: the held one is held, not late.
	if got := tg.simMessages(cold); len(got) != 0 {
		t.Fatalf("a first message went during the timelock: %v", got)
	}
	if m := tg.message(s.key, held); m["status"] != "queued" {
		t.Fatalf("held message: %v", m)
	}
	clk.Advance(time.Until(end) + time.Second)
	tg.simDelivered(cold, 1)
	eventually(t, 5*time.Second, "restrictedUntil cleared", func() bool { return tg.status(s.tok)["restrictedUntil"] == nil })
}

// New-contact cap 5 (day 0 of a 10-a-day ramp over 2 days), 5 sent, kill -9, restart: the 6th
// waits for the next UTC day, then goes (day 1: 7). A new phone linked to the same session
// starts its own book and ramp at day 0: 5 new contacts, one of them the first phone's.
func TestKill9NewContactCapAndANewPhone(t *testing.T) {
	afterMidnightGuard()
	flags := []string{"--pace-new-contacts", "10", "--pace-ramp-days", "2"}
	data := t.TempDir()
	p := startProc(t, data, flags...)
	tg := p.gw(t, data)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	var ids []string
	for i := range 6 {
		ids = append(ids, tg.sendTo(s.key, fmt.Sprint("1555000900", i), "hello"))
	}
	for i := range 5 {
		tg.simDelivered(fmt.Sprint("1555000900", i), 1)
	}
	eventually(t, 5*time.Second, "the sixth held", func() bool {
		return tg.status(s.tok)["queue"].(map[string]any)["depth"] == float64(1)
	})
	p.kill9(t)

	clk := newSkewClock()
	tg = startGWSkew(t, clk, append([]string{"--data", data}, flags...)...)
	tg.waitStatus(s.tok, "CONNECTED")
	// A second message to a contact of today is not a new contact: it goes, the sixth waits.
	tg.sendTo(s.key, "15550009000", "again")
	tg.simDelivered("15550009000", 2)
	if got := tg.simMessages("15550009005"); len(got) != 0 {
		t.Fatalf("the sixth new contact went after kill -9: %v", got)
	}
	if m := tg.message(s.key, ids[5]); m["status"] != "queued" {
		t.Fatalf("the sixth: %v", m)
	}
	now := clk.Now().UTC()
	clk.Advance(time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 1, 0, time.UTC).Sub(now))
	tg.simDelivered("15550009005", 1)

	// Phone B on the same session: day 0 again (cap 5), and the first phone's contacts are
	// new to it.
	want(t, tg.do("POST", "/api/client/logout", bearerAuth(s.tok), nil), 200, "")
	if sid := tg.link(s.tok, "447700900002"); sid != s.session {
		t.Fatalf("linked %s, not the same session", sid)
	}
	for i := range 6 {
		tg.sendTo(s.key, fmt.Sprint("1555000910", i), "from B")
	}
	tg.sendTo(s.key, "15550009000", "from B to A's contact")
	for i := range 5 {
		tg.simDelivered(fmt.Sprint("1555000910", i), 1)
	}
	eventually(t, 5*time.Second, "two held on B's first day", func() bool {
		return tg.status(s.tok)["queue"].(map[string]any)["depth"] == float64(2)
	})
	if got := tg.simMessages("15550009105"); len(got) != 0 {
		t.Fatalf("phone B sent a sixth new contact on its first day: %v", got)
	}
	if got := tg.simMessages("15550009000"); len(got) != 2 {
		t.Fatalf("A's contact counted as known to B: %v", got)
	}
}
