package main

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/gateway/gateway/persist/natstest"
)

// A kill -9 between outcomes' events and their records (the test build's fault point holds the
// records), with a webhook, an event stream and a broker taking alice's events. After the
// restart a message told failed is not sent again: settled failed, its allowance given back,
// no second event anywhere (a webhook delivery repeated under its webhook-id is the same event,
// which the receiver dedupes). A message told sent goes again under its id (the network dedupes
// it) and its status events are published again: the broker's copies carry the Nats-Msg-Id of
// the first, so JetStream's duplicate window drops them (the stream holds each status once).
func TestKill9BetweenToldOutcomesAndRecords(t *testing.T) {
	sideBySide(t)
	bin := gatewayFakeWABinary(t) // the test build: its fault points (engine/messages_fault.go)
	ns := natstest.Start(t)
	const prefix, stream = "told.events", "told_events"
	statusSubject := prefix + ".alice.message.status"
	hook := newStatusHook(t)
	// A receiver dedupes by webhook-id: a delivery whose 2xx the kill -9 kept from being
	// recorded comes again under its id (at least once), and counts once.
	hooked := func(msg, status string) int { return len(hook.webhookIDs(msg, status)) }

	data := t.TempDir()
	args := []string{"--webhook-allow-private", "--plans", writePlans(t, 1000), "--events-nats", ns.URL, "--events-subject-prefix", prefix}
	p := startProcEnv(t, bin, data, []string{"GATEWAY_TEST_FAULT=outcome-unrecorded"}, args...)
	tg := p.gw(t, data)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	want(t, tg.do("POST", "/api/client/webhooks", bearerAuth(s.tok), map[string]any{"url": hook.url(), "events": []string{"message.status"}}), 201, "")
	events := "/api/client/events/stream?token=" + s.tok
	live := openStream(t, tg, events, nil) // alice's events are journaled from now on
	const refusing, fine, marker = "15550094790", "15550094791", "15550094792"
	want(t, tg.do("POST", "/api/dev/sim/refuse", nil, map[string]any{"to": refusing, "code": 479}), 200, "")
	failedID := tg.sendTo(s.key, refusing, "refused")
	sentID := tg.sendTo(s.key, fine, "fine")
	// Both outcomes told (the webhook and the broker have them); their records never come.
	eventually(t, 15*time.Second, "the outcomes' events out", func() bool {
		return hooked(failedID, "failed") == 1 && hooked(sentID, "sent") == 1 && subjectLen(ns.URL, stream, statusSubject) >= 4
	})
	// A resume after the failed message's queued replays the journal from there (the stream
	// may have seen other events of alice's before it: her session's, say).
	var first string
	eventually(t, 5*time.Second, "the stream's events", func() bool {
		live.mu.Lock()
		defer live.mu.Unlock()
		for _, e := range live.events {
			if e.Body.Data["messageId"] == failedID && e.Body.Data["status"] == "queued" {
				first = e.ID
			}
		}
		return first != "" && len(live.events) >= 4
	})
	p.kill9(t)

	// The fault point off (the test's own environment never had it; the sim forgot its refusal
	// too).
	p = startProcBin(t, bin, data, args...)
	tg = p.gw(t, data)
	eventually(t, 15*time.Second, "both messages recorded", func() bool {
		f := tg.do("GET", "/api/v1/messages/"+failedID, keyAuth(s.key), nil).str("status")
		st := tg.do("GET", "/api/v1/messages/"+sentID, keyAuth(s.key), nil).str("status")
		return f != "queued" && (st == "sent" || st == "delivered") && tg.metric("gateway_outbox_pending") == 0
	})
	if m := tg.message(s.key, failedID); m["status"] != "failed" || m["code"] != "network_error" {
		t.Fatalf("the message told failed, after the restart: %v", m)
	}
	if got := tg.simMessages(refusing); len(got) != 0 {
		t.Fatalf("the message told failed was sent after the restart: %v", got)
	}
	if got := tg.simMessages(fine); len(got) != 1 {
		t.Fatalf("the message told sent reached its number %d times", len(got))
	}
	// The failed message's allowance given back, the sent one's counted once.
	eventually(t, 10*time.Second, "the allowance settled", func() bool {
		a := tg.account(s.key)
		return a["messagesSent"] == float64(1) && a["remaining_month"] == a["monthly_limit"].(float64)-1
	})
	// A marker sent now: its events come after whatever the boot published.
	markerID := tg.sendTo(s.key, marker, "marker")
	back := openStream(t, tg, events, http.Header{"Last-Event-ID": {first}})
	var seen string
	eventually(t, 15*time.Second, "the marker's events everywhere", func() bool {
		h, l, n := hooked(markerID, "sent"), len(back.labels(func(e sseEvent) bool {
			return e.Body.Data["messageId"] == markerID && e.Body.Data["status"] == "sent"
		})), subjectLen(ns.URL, stream, statusSubject)
		if s := fmt.Sprintf("webhook %d, stream %d, broker %d", h, l, n); s != seen {
			seen = s
			t.Logf("the marker's sent: %s", s)
		}
		return h == 1 && l == 1 && n >= 6
	})
	eventually(t, 15*time.Second, "the marker's sent on the broker", func() bool {
		for _, m := range readStream(t, ns.URL, stream, time.Time{}) {
			if m.message == markerID && m.status == "sent" {
				return true
			}
		}
		return false
	})
	// No second event of the failed message anywhere, and no sent one.
	if n, m := hooked(failedID, "failed"), hooked(failedID, "sent"); n != 1 || m != 0 {
		t.Fatalf("the webhook got the failed message's failed under %d webhook-ids, sent under %d", n, m)
	}
	ofFailed := back.labels(func(e sseEvent) bool { return e.Body.Data["messageId"] == failedID })
	if len(ofFailed) != 1 || ofFailed[0] != "message.status:failed" { // its queued is the resume's place
		t.Fatalf("the stream resumed holds the failed message's events %v", ofFailed)
	}
	// The broker holds each status of each message once: the repeats were dropped.
	steps := map[string]int{}
	for _, m := range readStream(t, ns.URL, stream, time.Time{}) {
		if m.subject == statusSubject {
			steps[m.message+"/"+m.status]++
		}
	}
	for k, n := range steps {
		if n != 1 {
			t.Errorf("%s on the broker %d times", k, n)
		}
	}
	for _, k := range []string{failedID + "/failed", sentID + "/sent", markerID + "/sent"} {
		if steps[k] != 1 {
			t.Errorf("%s on the broker %d times", k, steps[k])
		}
	}
	if steps[failedID+"/sent"] != 0 {
		t.Errorf("the failed message sent on the broker")
	}
}
