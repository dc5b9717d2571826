package main

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// A send with an Idempotency-Key is in flight when the gateway is killed (-9); after the
// restart the retry with the same key returns the same message_id and the recipient gets
// exactly one message. The same for send-bulk: one campaign. A replay after the daily cap is
// used up returns the stored success, not 429.
func TestKill9IdempotencyKeyRetries(t *testing.T) {
	data := t.TempDir()
	plans := writePlans(t, 10) // free: 10 requests a day
	p := startProc(t, data, "--plans", plans)
	tg := p.gw(t, data)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	want(t, tg.do("POST", "/api/dev/sim/latency", nil, map[string]any{"ms": 60000}), 200, "")

	post := func(path, idem, body string) {
		// The request dies with the process: its answer is not read.
		go func() {
			req, _ := http.NewRequest("POST", p.url+path, strings.NewReader(body))
			req.Header.Set("x-api-key", s.key)
			req.Header.Set("Idempotency-Key", idem)
			if res, err := http.DefaultClient.Do(req); err == nil {
				res.Body.Close()
			}
		}()
	}
	sendBody := `{"phone":"15550700001","message":"exactly once"}`
	bulkBody := `{"numbers":["15550700002","15550700003"],"message":"bulk once","delay":0,"async":true}`
	post("/api/v1/messages/send", "send-1", sendBody)
	post("/api/v1/messages/send-bulk", "bulk-1", bulkBody)
	eventually(t, 10*time.Second, "both in the outbox", func() bool {
		return tg.metric("gateway_outbox_pending") == 2 // the send, and the campaign's first number
	})
	p.kill9(t)

	p = startProc(t, data, "--plans", plans)
	tg = p.gw(t, data)
	want(t, tg.do("POST", "/api/dev/sim/latency", nil, map[string]any{"ms": 0}), 200, "")
	a := keyAuth(s.key)
	a["Idempotency-Key"] = "send-1"
	r1 := tg.do("POST", "/api/v1/messages/send", a, sendBody)
	want(t, r1, 200, "")
	if r1.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("retry after the crash made a new message: %s", r1.raw)
	}
	a["Idempotency-Key"] = "bulk-1"
	b1 := tg.do("POST", "/api/v1/messages/send-bulk", a, bulkBody)
	want(t, b1, 202, "")
	if b1.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("bulk retry after the crash made a new campaign: %s", b1.raw)
	}
	for _, n := range []string{"15550700001", "15550700002", "15550700003"} {
		eventually(t, 10*time.Second, n+" delivered", func() bool { return len(tg.simMessages(n)) >= 1 })
		if got := tg.simMessages(n); len(got) != 1 {
			t.Fatalf("%s received %d messages", n, len(got))
		}
	}
	c := tg.do("GET", "/api/v1/campaigns/"+b1.str("campaign_id"), keyAuth(s.key), nil)
	eventually(t, 10*time.Second, "the campaign completed", func() bool {
		if c.str("status") != "completed" {
			c = tg.do("GET", "/api/v1/campaigns/"+b1.str("campaign_id"), keyAuth(s.key), nil)
		}
		return c.str("status") == "completed"
	})
	// The message is the one the first request made.
	m := tg.do("GET", "/api/v1/messages/"+r1.str("message_id"), keyAuth(s.key), nil)
	if st := m.str("status"); (st != "sent" && st != "delivered") || m.obj()["attempts"].(float64) < 1 {
		t.Fatalf("message: %s", m.raw)
	}

	// Use up the day's requests, then replay: the stored success, not 429.
	for i := 0; ; i++ {
		r := tg.do("GET", "/api/v1/account", keyAuth(s.key), nil)
		if r.status == 429 {
			break
		}
		if i > 20 {
			t.Fatalf("the daily cap of 10 never answered 429")
		}
	}
	a["Idempotency-Key"] = "send-1"
	r2 := tg.do("POST", "/api/v1/messages/send", a, sendBody)
	want(t, r2, 200, "")
	if r2.str("message_id") != r1.str("message_id") {
		t.Fatalf("replay after the cap: %s vs %s", r2.raw, r1.raw)
	}
	a["Idempotency-Key"] = "send-2"
	want(t, tg.do("POST", "/api/v1/messages/send", a, sendBody), 429, "rate_limited")
	if got := tg.simMessages("15550700001"); len(got) != 1 {
		t.Fatalf("received %d messages", len(got))
	}
}
