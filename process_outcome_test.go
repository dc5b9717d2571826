package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/goccy/go-json"
)

// An outcome's events are committed before its record is written: a kill -9 between the two
// (held there by the test build's fault point, so the kill lands in the window every time)
// leaves the message pending with its events out. After the restart the message went to the
// network once, its status is answered, its allowance counted once, and its events come again
// under the webhook-ids they had (a receiver dedupes them).
func TestKill9BetweenOutcomeEventAndRecord(t *testing.T) {
	sideBySide(t)
	bin := gatewayFakeWABinary(t) // the test build: its fault points (engine/messages_fault.go)
	hook := newStatusHook(t)
	// has tells whether every id's status events reached the receiver.
	has := func(ids []string, statuses ...string) bool {
		for _, id := range ids {
			for _, st := range statuses {
				if hook.count(id, st) == 0 {
					return false
				}
			}
		}
		return true
	}

	start := time.Now()
	step := func(what string) { t.Logf("%6.2fs %s", time.Since(start).Seconds(), what) }
	data := t.TempDir()
	plans := writePlans(t, 1000) // 100 messages a month
	fault := []string{"GATEWAY_TEST_FAULT=outcome-unrecorded"}
	p := startProcEnv(t, bin, data, fault, "--webhook-allow-private", "--plans", plans)
	tg := p.gw(t, data)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	want(t, tg.do("POST", "/api/client/webhooks", bearerAuth(s.tok), map[string]any{"url": hook.url(), "events": []string{"message.status"}}), 201, "")
	const n = 3
	var ids []string
	for i := range n {
		r := tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": fmt.Sprintf("1555090%04d", i), "message": fmt.Sprintf("m%d", i)})
		want(t, r, 200, "")
		ids = append(ids, r.str("message_id"))
	}
	// The outcomes' events are committed (the receiver has them); their records never come.
	eventually(t, 10*time.Second, "the outcomes' events at the receiver", func() bool { return has(ids, "sent") })
	step("events at the receiver")
	p.kill9(t)

	// The fault point off (the test's own environment never had it).
	p = startProcBin(t, bin, data, "--webhook-allow-private", "--plans", plans)
	tg = p.gw(t, data)
	step("restarted")
	eventually(t, 10*time.Second, "every message recorded sent, and counted", func() bool {
		for _, id := range ids {
			if st := tg.do("GET", "/api/v1/messages/"+id, keyAuth(s.key), nil).str("status"); st != "sent" && st != "delivered" {
				return false
			}
		}
		a := tg.account(s.key)
		return tg.metric("gateway_outbox_pending") == 0 && a["messagesSent"] == float64(n)
	})
	// Counted once, and its allowance used (a kill -9 leaves what lay between the count and the
	// durable mark used too: account.Counter).
	if a := tg.account(s.key); a["remaining_month"].(float64) > 100-n {
		t.Fatalf("after the restart: %v", a)
	}
	step("recorded")
	// Sent again: the events come again (at least once), under their webhook-ids.
	eventually(t, 10*time.Second, "the events of the messages sent again", func() bool {
		for _, id := range ids {
			if hook.count(id, "sent") < 2 {
				return false
			}
		}
		return true
	})
	for i := range n {
		if got := tg.simMessages(fmt.Sprintf("1555090%04d", i)); len(got) != 1 || got[0]["text"] != fmt.Sprintf("m%d", i) {
			t.Fatalf("number %d got %v", i, got)
		}
	}

	step("events again")
	// Counted once: a second restart finds nothing left to send or count.
	p.kill9(t)
	p = startProcBin(t, bin, data, "--webhook-allow-private", "--plans", plans)
	tg = p.gw(t, data)
	tg.waitStatus(s.tok, "CONNECTED")
	step("restarted again")
	// A kill -9 may lose the last settlements' count (messagesSent), never give back their
	// allowance (account.Counter: what lies between the count and the mark stays used).
	if a := tg.account(s.key); a["messagesSent"].(float64) > n || a["remaining_month"].(float64) > 100-n {
		t.Fatalf("after a second restart: %v", a)
	}
	for i := range n {
		if got := tg.simMessages(fmt.Sprintf("1555090%04d", i)); len(got) != 1 {
			t.Fatalf("number %d got %d messages after a second restart", i, len(got))
		}
	}
	// An event that came twice came under one webhook-id: a receiver dedupes it.
	for _, id := range ids {
		for _, st := range []string{"sent", "delivered"} {
			if whs := hook.webhookIDs(id, st); len(whs) != 1 {
				t.Errorf("message %s's %s event came under webhook-ids %v", id, st, whs)
			}
		}
	}
}

// statusHook is a webhook receiver of message.status events: each delivery's webhook-id, and
// its message and status.
type statusHook struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []struct{ id, msg, status string }
}

func newStatusHook(t *testing.T) *statusHook {
	h := &statusHook{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var env struct {
			Data map[string]any `json:"data"`
		}
		_ = json.NewDecoder(r.Body).Decode(&env)
		h.mu.Lock()
		h.got = append(h.got, struct{ id, msg, status string }{r.Header.Get("webhook-id"), fmt.Sprint(env.Data["messageId"]), fmt.Sprint(env.Data["status"])})
		h.mu.Unlock()
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *statusHook) url() string { return h.srv.URL + "/hook" }

// count is how many deliveries told message msg's status.
func (h *statusHook) count(msg, status string) int {
	return len(h.deliveries(msg, status))
}

// webhookIDs are the webhook-ids message msg's status came under.
func (h *statusHook) webhookIDs(msg, status string) map[string]bool {
	ids := map[string]bool{}
	for _, id := range h.deliveries(msg, status) {
		ids[id] = true
	}
	return ids
}

func (h *statusHook) deliveries(msg, status string) []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var ids []string
	for _, g := range h.got {
		if g.msg == msg && g.status == status {
			ids = append(ids, g.id)
		}
	}
	return ids
}
