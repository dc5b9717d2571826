package main

import (
	"testing"
	"time"
)

// toBeforeMidnight moves c to d before the next UTC midnight.
func (c *skewClock) toBeforeMidnight(d time.Duration) {
	now := c.Now()
	c.Advance(now.UTC().Truncate(24 * time.Hour).Add(24 * time.Hour).Add(-d).Sub(now))
}

// An Idempotency-Key binds for its 24 hours and no longer: used again after them (the SPEC
// lets it) it makes a new message (a new campaign) with a new id while the old one is still
// kept; a retry that straddles midnight is the first message (campaign), made once. The ids
// were a function of the key alone: the key used again was answered with the old message and
// sent nothing.
func TestIdempotencyKeyAfterItsDay(t *testing.T) {
	sideBySide(t)
	clock := newSkewClock()
	tg := startGWSkew(t, clock)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900071", nil)
	keyed := func(key string, path string, body any) resp {
		a := keyAuth(s.key)
		a["Idempotency-Key"] = key
		return tg.do("POST", path, a, body)
	}
	replayed := func(r resp) bool { return r.header.Get("Idempotent-Replayed") == "true" }
	const send, bulk = "/api/v1/messages/send", "/api/v1/messages/send-bulk"

	// A send and a campaign 3 seconds before midnight, retried a second after it: the first
	// message and campaign, made once.
	clock.toBeforeMidnight(3 * time.Second)
	body := map[string]any{"phone": "15550700071", "message": "order 71 shipped"}
	camp := map[string]any{"numbers": []string{"15550700072"}, "message": "sale", "delay": 0, "async": true}
	r1, c1 := keyed("order-71", send, body), keyed("sale-1", bulk, camp)
	want(t, r1, 200, "")
	want(t, c1, 202, "")
	clock.Advance(4 * time.Second)
	r2, c2 := keyed("order-71", send, body), keyed("sale-1", bulk, camp)
	want(t, r2, 200, "")
	want(t, c2, 202, "")
	if !replayed(r2) || r2.str("message_id") != r1.str("message_id") {
		t.Fatalf("the retry after midnight: %s, want the replay of %s", r2.raw, r1.raw)
	}
	if !replayed(c2) || c2.str("campaign_id") != c1.str("campaign_id") {
		t.Fatalf("the campaign's retry after midnight: %s, want the replay of %s", c2.raw, c1.raw)
	}

	// The next day, a second before its end (24 hours and 2 seconds after the first): the key
	// makes a new message (the same body too), sent; the old one is still there.
	clock.toBeforeMidnight(time.Second)
	r3 := keyed("order-71", send, body)
	want(t, r3, 200, "")
	if replayed(r3) || r3.str("message_id") == r1.str("message_id") {
		t.Fatalf("the key used again after 24 h: %s, want a new message (the first: %s)", r3.raw, r1.raw)
	}
	want(t, tg.do("GET", "/api/v1/messages/"+r1.str("message_id"), keyAuth(s.key), nil), 200, "")
	eventually(t, 10*time.Second, "both messages delivered", func() bool { return len(tg.simMessages("15550700071")) >= 2 })
	got := tg.simMessages("15550700071")
	if len(got) != 2 || got[0]["id"] != r1.str("message_id") || got[1]["id"] != r3.str("message_id") {
		t.Fatalf("the phone got %v, want %s then %s", got, r1.str("message_id"), r3.str("message_id"))
	}
	// And a new campaign, which runs.
	c3 := keyed("sale-1", bulk, camp)
	want(t, c3, 202, "")
	if replayed(c3) || c3.str("campaign_id") == c1.str("campaign_id") {
		t.Fatalf("the bulk key used again after 24 h: %s, want a new campaign (the first: %s)", c3.raw, c1.raw)
	}
	want(t, tg.do("GET", "/api/v1/campaigns/"+c1.str("campaign_id"), keyAuth(s.key), nil), 200, "")
	eventually(t, 10*time.Second, "both campaigns' messages delivered", func() bool { return len(tg.simMessages("15550700072")) >= 2 })
	if got := tg.simMessages("15550700072"); len(got) != 2 || got[0]["id"] == got[1]["id"] {
		t.Fatalf("the campaigns' number got %v, want two messages", got)
	}
}
