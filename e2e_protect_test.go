package main

// Sessions on the live network (DESIGN.md section 14), end to end through the HTTP API on the
// sim: a refusing recipient never holds the queue, queued messages follow their account,
// timelocks, caps and half rate.

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// sendTo accepts a text for to with key and returns its message id.
func (tg *testGW) sendTo(key, to, text string) string {
	tg.t.Helper()
	r := tg.do("POST", "/api/v1/messages/send", keyAuth(key), map[string]any{"phone": to, "message": text})
	want(tg.t, r, 200, "")
	return r.str("message_id")
}

// message reads a message as its sender sees it.
func (tg *testGW) message(key, id string) map[string]any {
	tg.t.Helper()
	r := tg.do("GET", "/api/v1/messages/"+id, keyAuth(key), nil)
	want(tg.t, r, 200, "")
	return r.obj()
}

// recorded waits until the gateway has recorded message id's outcome (no longer queued) and
// returns it: the phone may show a message a moment before the gateway records the network's
// answer (under load).
func (tg *testGW) recorded(key, id string) map[string]any {
	tg.t.Helper()
	var m map[string]any
	eventually(tg.t, 10*time.Second, "message "+id+" recorded", func() bool {
		m = tg.message(key, id)
		return m["status"] != "queued"
	})
	return m
}

// waitFailed waits until message id failed, and checks its code.
func (tg *testGW) waitFailed(key, id, code string) map[string]any {
	tg.t.Helper()
	var m map[string]any
	eventually(tg.t, 10*time.Second, id+" failed", func() bool {
		m = tg.message(key, id)
		return m["status"] == "failed"
	})
	if m["code"] != code {
		tg.t.Fatalf("%s failed with %v, want %s: %v", id, m["code"], code, m)
	}
	return m
}

// hook subscribes the user of tok to events at a new receiver; it returns the receiver and the
// subscription's secret.
func (tg *testGW) hook(t *testing.T, tok string, events ...string) (*hookSink, string) {
	t.Helper()
	sink := newHookSink(t)
	sub := tg.do("POST", "/api/client/webhooks", bearerAuth(tok), map[string]any{"url": sink.URL + "/hook", "events": events})
	want(tg.t, sub, 201, "")
	return sink, sub.str("secret")
}

// deliveredAt is when the sim delivered m.
func deliveredAt(t *testing.T, m map[string]any) time.Time {
	t.Helper()
	at, err := time.Parse(time.RFC3339, m["timestamp"].(string))
	if err != nil {
		t.Fatal(err)
	}
	return at
}

// texts lists the texts the sim delivered to a number, in order.
func (tg *testGW) texts(to string) []string {
	var out []string
	for _, m := range tg.simMessages(to) {
		out = append(out, m["text"].(string))
	}
	return out
}

// One recipient refuses every message with 463 (no timelock notice), nine messages to three
// others are queued with it: the nine are delivered in order, the refused one fails
// recipient_not_reachable after 2 attempts (and the one queued behind it at once, unsent), a
// later message to it is refused at accept with nothing charged, and a message from it clears
// the mark.
func TestRecipientRefusing463NeverHoldsTheQueue(t *testing.T) {
	sideBySide(t)
	clk := newSkewClock()
	tg := startGWSkew(t, clk)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	const bad = "15550004630"
	want(t, tg.do("POST", "/api/dev/sim/refuse", nil, map[string]any{"to": bad, "code": 463, "times": 0}), 200, "")

	first := tg.sendTo(s.key, bad, "refused 1")
	second := tg.sendTo(s.key, bad, "refused 2")
	others := []string{"15550004001", "15550004002", "15550004003"}
	for i := range 9 {
		tg.sendTo(s.key, others[i%3], fmt.Sprint("other ", i))
	}
	var stamps []time.Time
	for i, to := range others {
		got := tg.simDelivered(to, 3)
		if texts := tg.texts(to); !slices.Equal(texts, []string{fmt.Sprint("other ", i), fmt.Sprint("other ", i+3), fmt.Sprint("other ", i+6)}) {
			t.Fatalf("to %s: %v", to, texts)
		}
		for _, m := range got {
			stamps = append(stamps, deliveredAt(t, m))
		}
	}
	// In acceptance order across recipients too: other 0, 1, 2, 3...
	order := []time.Time{stamps[0], stamps[3], stamps[6], stamps[1], stamps[4], stamps[7], stamps[2], stamps[5], stamps[8]}
	if !slices.IsSortedFunc(order, time.Time.Compare) {
		t.Fatalf("the nine out of acceptance order: %v", order)
	}
	if m := tg.message(s.key, first); m["status"] != "queued" {
		t.Fatalf("the refused message before its second try: %v", m)
	}
	clk.Advance(time.Minute)
	if m := tg.waitFailed(s.key, first, "recipient_not_reachable"); m["attempts"] != float64(2) {
		t.Fatalf("attempts %v, want 2", m["attempts"])
	}
	if m := tg.waitFailed(s.key, second, "recipient_not_reachable"); m["attempts"] != float64(0) {
		t.Fatalf("the message behind it was sent: %v", m)
	}
	if got := tg.simMessages(bad); len(got) != 0 {
		t.Fatalf("delivered to the refusing recipient: %v", got)
	}

	// Settled: nine sent, and the two failed messages' reservations released.
	eventually(t, 5*time.Second, "the allowance settled", func() bool {
		a := tg.account(s.key)
		return a["messagesSent"] == float64(9) && a["remaining_month"] == a["monthly_limit"].(float64)-9
	})
	before := tg.account(s.key)["remaining_month"]
	want(t, tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": bad, "message": "again"}), 400, "recipient_not_reachable")
	if after := tg.account(s.key)["remaining_month"]; after != before {
		t.Fatalf("a refused accept was charged: remaining %v, then %v", before, after)
	}

	// It writes to the session: the mark is cleared and its messages are accepted again.
	want(t, tg.do("POST", "/api/dev/sim/refuse", nil, map[string]any{"to": bad, "code": 0}), 200, "")
	want(t, tg.do("POST", "/api/dev/sim/inbound", nil, map[string]any{"sessionId": s.session, "from": bad, "text": "hello?"}), 200, "")
	var r resp
	eventually(t, 10*time.Second, "accepted again", func() bool {
		r = tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": bad, "message": "welcome"})
		return r.status == 200
	})
	if got := tg.simDelivered(bad, 1); got[0]["text"] != "welcome" {
		t.Fatalf("after the reply: %v", got)
	}
}

// 479 is tried twice then failed, never re-sent; a single 479 is retried and delivered; 429
// holds the session's queue (the message behind it waits) and never fails a message; over
// 10 % of an hour's sends refused slows the session with a session.warning.
func TestRefusalsAndRateLimitThroughTheSim(t *testing.T) {
	sideBySide(t)
	tg := startGW(t, "--webhook-allow-private")
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	sink, secret := tg.hook(t, s.tok, "session.warning")

	want(t, tg.do("POST", "/api/dev/sim/refuse", nil, map[string]any{"to": "15550004790", "code": 500}), 400, "validation_failed")
	want(t, tg.do("POST", "/api/dev/sim/refuse", nil, map[string]any{"to": "15550004790"}), 400, "validation_failed")
	want(t, tg.do("POST", "/api/dev/sim/refuse", nil, map[string]any{"to": "12", "code": 463}), 400, "invalid_phone")
	want(t, tg.do("POST", "/api/dev/sim/timelock", nil, map[string]any{"sessionId": "nope"}), 404, "session_not_found")
	want(t, tg.do("POST", "/api/dev/sim/refuse", nil, map[string]any{"to": "15550004790", "code": 479}), 200, "")
	refused := tg.sendTo(s.key, "15550004790", "479 forever")
	if m := tg.waitFailed(s.key, refused, "network_error"); m["attempts"] != float64(2) {
		t.Fatalf("479: %v", m)
	}
	want(t, tg.do("POST", "/api/dev/sim/refuse", nil, map[string]any{"to": "15550004791", "code": 479, "times": 1}), 200, "")
	once := tg.sendTo(s.key, "15550004791", "479 once")
	tg.simDelivered("15550004791", 1)
	if m := tg.recorded(s.key, once); m["attempts"] != float64(2) {
		t.Fatalf("479 once: %v", m)
	}

	want(t, tg.do("POST", "/api/dev/sim/refuse", nil, map[string]any{"to": "15550004290", "code": 429, "times": 2}), 200, "")
	limited := tg.sendTo(s.key, "15550004290", "rate limited")
	behind := tg.sendTo(s.key, "15550004292", "behind")
	a := tg.simDelivered("15550004290", 1)[0]
	b := tg.simDelivered("15550004292", 1)[0]
	if deliveredAt(t, a).After(deliveredAt(t, b)) {
		t.Fatalf("the message behind a 429 went first: %v then %v", a, b)
	}
	if m := tg.recorded(s.key, limited); m["attempts"] != float64(3) || m["status"] == "failed" {
		t.Fatalf("429 twice: %v", m)
	}
	if m := tg.message(s.key, behind); m["status"] == "failed" {
		t.Fatalf("behind: %v", m)
	}
	// Still under 20 answers: no warning. 16 more sends, one more refused message (2 tries):
	// 6 of 24 answers refused.
	want(t, tg.do("POST", "/api/dev/sim/refuse", nil, map[string]any{"to": "15550004790", "code": 479}), 200, "")
	for i := range 16 {
		tg.sendTo(s.key, fmt.Sprint("155500049", 10+i), "filler")
	}
	tg.waitFailed(s.key, tg.sendTo(s.key, "15550004790", "479 again"), "network_error")
	eventually(t, 10*time.Second, "a session.warning", func() bool { return len(sink.all()) == 1 })
	ev := sink.events(t, secret)[0]
	until, _ := time.Parse(time.RFC3339, ev.Data["until"].(string))
	if ev.Type != "session.warning" || ev.Data["reason"] != "refusals" || ev.Data["session"] != s.session || time.Until(until) < 23*time.Hour {
		t.Fatalf("warning: %+v", ev)
	}
}

// Queued messages follow their account: reassigned with 3 queued, all 3 fail
// session_reassigned, none goes out from the new owner's phone, the old owner's allowance is
// released, and the old owner hears it; a logout fails them session_logged_out, a deletion
// session_deleted.
func TestQueuedMessagesFollowTheirAccount(t *testing.T) {
	sideBySide(t)
	tg := startGW(t, "--webhook-allow-private")
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	sink, secret := tg.hook(t, s.tok, "message.status")
	want(t, tg.do("PATCH", "/api/admin/sessions", bearerAuth(admin), map[string]any{"id": s.session, "pacing": map[string]any{"minGapMs": 600_000}}), 200, "")
	first := tg.sendTo(s.key, "15550005000", "alice one")
	tg.simDelivered("15550005000", 1)
	var queued []string
	for i := range 3 {
		queued = append(queued, tg.sendTo(s.key, fmt.Sprint("1555000500", i+1), fmt.Sprint("alice private ", i)))
	}
	eventually(t, 5*time.Second, "3 queued", func() bool {
		return tg.status(s.tok)["queue"].(map[string]any)["depth"] == float64(3)
	})
	eventually(t, 5*time.Second, "the first counted", func() bool { return tg.account(s.key)["messagesSent"] == float64(1) })
	limit := tg.account(s.key)["monthly_limit"].(float64)
	if rem := tg.account(s.key)["remaining_month"]; rem != limit-4 {
		t.Fatalf("remaining %v with 1 sent and 3 reserved of %v", rem, limit)
	}

	bob := tg.newClient("bob")
	want(t, tg.do("POST", "/api/admin/sessions/assign", nil, map[string]any{"sessionId": s.session, "userId": "bob"}), 200, "")
	for _, id := range queued {
		tg.waitFailed(s.key, id, "session_reassigned")
	}
	if sid := tg.link(bob, "447700900999"); sid != s.session {
		t.Fatalf("bob linked %s, not the reassigned session", sid)
	}
	for i := range 3 {
		if got := tg.simMessages(fmt.Sprint("1555000500", i+1)); len(got) != 0 {
			t.Fatalf("alice's queued message went out: %v", got)
		}
	}
	if tg.message(s.key, first)["status"] == "failed" {
		t.Fatal("the message sent before the reassignment failed")
	}
	if a := tg.account(s.key); a["remaining_month"] != limit-1 || a["messagesSent"] != float64(1) {
		t.Fatalf("alice's allowance after the reassignment: %v", a)
	}
	eventually(t, 10*time.Second, "3 failed events", func() bool {
		n := 0
		for _, e := range sink.events(t, secret) {
			if e.Data["status"] == "failed" && e.Data["code"] == "session_reassigned" && slices.Contains(queued, e.Data["messageId"].(string)) {
				n++
			}
		}
		return n == 3
	})

	// Bob's own queue: a logout fails it session_logged_out; deleting the session
	// session_deleted.
	bobKey := tg.newKey(admin, "bob", nil).str("rawKey")
	want(t, tg.do("PATCH", "/api/admin/sessions", bearerAuth(admin), map[string]any{"id": s.session, "pacing": map[string]any{"minGapMs": 2000}}), 200, "")
	tg.sendTo(bobKey, "15550006000", "bob one")
	tg.simDelivered("15550006000", 1)
	out := tg.sendTo(bobKey, "15550006001", "bob queued")
	want(t, tg.do("POST", "/api/client/logout", bearerAuth(bob), nil), 200, "")
	tg.waitFailed(bobKey, out, "session_logged_out")
	tg.link(bob, "447700900999")
	gone := tg.sendTo(bobKey, "15550006002", "bob queued again")
	want(t, tg.do("DELETE", "/api/admin/sessions?id="+s.session, bearerAuth(admin), nil), 200, "")
	tg.waitFailed(bobKey, gone, "session_deleted")
	for _, to := range []string{"15550006001", "15550006002"} {
		if got := tg.simMessages(to); len(got) != 0 {
			t.Fatalf("went out after its session left: %v", got)
		}
	}
}

// A ban's end slows the session to half rate for a day with a session.warning: gaps doubled
// and the daily total halved (3 of --pace-per-day 6); the rest waits for the next UTC day.
func TestBanEndSlowsToHalfRate(t *testing.T) {
	clk := newSkewClock()
	tg := startGWSkew(t, clk, "--webhook-allow-private", "--pace-min-gap", "300ms", "--pace-per-day", "6")
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	sink, secret := tg.hook(t, s.tok, "session.status", "session.warning")
	end := clk.Now().Add(time.Second).UTC().Format(time.RFC3339Nano)
	want(t, tg.do("POST", "/api/dev/sim/ban", nil, map[string]any{"sessionId": s.session, "until": end}), 200, "")
	want(t, tg.do("POST", "/api/dev/sim/ban", nil, map[string]any{"sessionId": "nope", "until": end}), 404, "session_not_found")
	want(t, tg.do("POST", "/api/dev/sim/ban", nil, map[string]any{"sessionId": s.session, "until": "tomorrow"}), 400, "validation_failed")
	eventually(t, 10*time.Second, "banned, then back, then warned", func() bool {
		var got []string
		for _, e := range sink.events(t, secret) {
			l := e.Type + ":" + fmt.Sprintf("%v %v", e.Data["status"], e.Data["reason"])
			got = append(got, l)
		}
		if !slices.Equal(got, []string{"session.status:DISCONNECTED banned", "session.status:CONNECTED <nil>", "session.warning:<nil> ban_ended"}) {
			t.Logf("events so far: %v", got)
			return false
		}
		return true
	})
	for i := range 4 {
		tg.sendTo(s.key, "15550007000", fmt.Sprint("after the ban ", i))
	}
	got := tg.simDelivered("15550007000", 3)
	for i := 1; i < len(got); i++ {
		if gap := deliveredAt(t, got[i]).Sub(deliveredAt(t, got[i-1])); gap < 590*time.Millisecond {
			t.Fatalf("sends %v apart at half rate with a 300 ms gap", gap)
		}
	}
	if q := tg.status(s.tok)["queue"].(map[string]any); q["depth"] != float64(1) {
		t.Fatalf("the fourth went over half the daily total: %v", q)
	}
	now := clk.Now().UTC()
	clk.Advance(time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 1, 0, time.UTC).Sub(now))
	tg.simDelivered("15550007000", 4)
}
