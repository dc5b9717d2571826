package main

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

func (tg *testGW) bulk(key string, body map[string]any) resp {
	tg.t.Helper()
	return tg.do("POST", "/api/v1/messages/send-bulk", keyAuth(key), body)
}

func TestBulkSyncResult(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	want(t, tg.do("POST", "/api/dev/sim/unregistered", nil, map[string]any{"numbers": []string{"15550100002"}}), 200, "")
	before := tg.account(s.key)["messagesSent"].(float64)

	r := tg.bulk(s.key, map[string]any{"numbers": []string{"+1 555 010 0001", "15550100002", "1-555-010-0003"}, "message": "sale!", "delay": 0})
	want(t, r, 200, "")
	o := r.obj()
	if o["success"] != true || o["total_requested"] != float64(3) || o["total_processed"] != float64(3) ||
		o["successful"] != float64(2) || o["failed"] != float64(1) || r.str("campaign_id") == "" || r.str("timestamp") == "" {
		t.Fatalf("bulk result: %s", r.raw)
	}
	details := o["details"].([]any)
	if len(details) != 3 {
		t.Fatalf("details: %v", details)
	}
	for i, d := range details {
		d := d.(map[string]any)
		failed := i == 1
		if d["success"] == failed || (failed && d["error"] == nil) || (!failed && d["error"] != nil) || d["messageId"] == "" {
			t.Fatalf("detail %d: %v", i, d)
		}
	}
	if details[0].(map[string]any)["number"] != "+1 555 010 0001" {
		t.Fatalf("detail numbers are as given: %v", details[0])
	}
	// The sim received the two, in the request's order.
	m1, m3 := tg.simMessages("15550100001"), tg.simMessages("15550100003")
	at := func(m map[string]any) time.Time { // RFC 3339 with trailing zeros dropped: compare as times
		ts, _ := time.Parse(time.RFC3339Nano, m["timestamp"].(string))
		return ts
	}
	if len(m1) != 1 || len(m3) != 1 || m1[0]["text"] != "sale!" || at(m1[0]).After(at(m3[0])) {
		t.Fatalf("deliveries: %v %v", m1, m3)
	}
	// A message is counted once its outcome's record is durable, which may land a moment after
	// the campaign answers (engine/messages.go, Outcome).
	eventually(t, 5*time.Second, "messagesSent +2", func() bool { return tg.account(s.key)["messagesSent"].(float64) == before+2 })
	if after := tg.account(s.key)["messagesSent"].(float64); after != before+2 {
		t.Fatalf("messagesSent %v → %v, want +2", before, after)
	}
	// The campaign is readable afterwards.
	c := tg.do("GET", "/api/v1/campaigns/"+r.str("campaign_id"), keyAuth(s.key), nil)
	if want(t, c, 200, ""); c.str("status") != "completed" || len(c.obj()["details"].([]any)) != 3 {
		t.Fatalf("campaign: %s", c.raw)
	}
}

func TestBulkDelay(t *testing.T) {
	tg := startGW(t)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	start := time.Now()
	r := tg.bulk(s.key, map[string]any{"numbers": []string{"15550100001", "15550100002", "15550100003"}, "message": "m", "delay": 1})
	want(t, r, 200, "")
	if d := time.Since(start); d < 2*time.Second {
		t.Fatalf("three numbers with delay 1 took %v", d)
	}
	// The campaign starts a send every second: each message is accepted a second after the one
	// before (its created_at). What the network adds after that (the sim's own timestamp) varies
	// with the machine's load and is not the campaign's to keep.
	items, _ := tg.historyPage(t, "/api/v1/messages?direction=out&limit=10", keyAuth(s.key))
	accepted := map[string]time.Time{}
	for _, m := range items {
		accepted[m["to"].(string)] = itemTime(t, m)
	}
	var times []time.Time
	for _, n := range []string{"15550100001", "15550100002", "15550100003"} {
		if m := tg.simMessages(n); len(m) != 1 {
			t.Fatalf("%s: %v", n, m)
		}
		ts, ok := accepted[n]
		if !ok {
			t.Fatalf("%s not in the history: %v", n, items)
		}
		times = append(times, ts)
	}
	for i := 1; i < 3; i++ {
		if gap := times[i].Sub(times[i-1]); gap < 950*time.Millisecond || gap > 1500*time.Millisecond {
			t.Fatalf("gap %d between accepts is %v, want about 1 s", i, gap)
		}
	}
}

func TestBulkClippedToAllowance(t *testing.T) {
	sideBySide(t)
	tg := startGW(t, "--plans", writePlans(t, 0)) // 100 messages a month
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	for i := 0; i < 98; i++ {
		want(t, tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": fmt.Sprintf("155501%05d", i), "message": "x"}), 200, "")
	}
	nums := []string{"15550200001", "15550200002", "15550200003", "15550200004", "15550200005"}
	r := tg.bulk(s.key, map[string]any{"numbers": nums, "message": "m", "delay": 0})
	want(t, r, 200, "")
	if o := r.obj(); o["total_requested"] != float64(5) || o["total_processed"] != float64(2) || o["successful"] != float64(2) {
		t.Fatalf("clipped result: %s", r.raw)
	}
	delivered := 0
	for _, n := range nums {
		delivered += len(tg.simMessages(n))
	}
	if delivered != 2 {
		t.Fatalf("%d deliveries, want 2", delivered)
	}
	want(t, tg.bulk(s.key, map[string]any{"numbers": nums, "message": "m", "delay": 0}), 429, "quota_exceeded")

	// Two concurrent bulks from one user never exceed the allowance together.
	bob := tg.newSender(admin, "bob", "447700900002", nil)
	for i := 0; i < 94; i++ {
		want(t, tg.do("POST", "/api/v1/messages/send", keyAuth(bob.key), map[string]any{"phone": fmt.Sprintf("155503%05d", i), "message": "x"}), 200, "")
	}
	var wg sync.WaitGroup
	processed := make([]float64, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var ns []string
			for j := 0; j < 5; j++ {
				ns = append(ns, fmt.Sprintf("1555040%d%03d", i, j))
			}
			r := tg.bulk(bob.key, map[string]any{"numbers": ns, "message": "m", "delay": 0})
			if r.status == 200 {
				processed[i] = r.obj()["successful"].(float64)
			}
		}()
	}
	wg.Wait()
	if processed[0]+processed[1] != 6 {
		t.Fatalf("two concurrent bulks sent %v, want 6 in all", processed)
	}
	// A success is counted once its outcome is durable, a moment after the bulk's answer.
	var a map[string]any
	eventually(t, 5*time.Second, "bob's 100 messages counted", func() bool {
		a = tg.account(bob.key)
		return a["messagesSent"] == float64(100)
	})
	if a["remaining_month"] != float64(0) {
		t.Fatalf("bob's account: %v", a)
	}
}

func TestBulkInvalidInput(t *testing.T) {
	sideBySide(t)
	tg := startGW(t, "--bulk-max-recipients", "3")
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	cases := []struct {
		name string
		body any
	}{
		{"no numbers", map[string]any{"message": "m"}},
		{"empty numbers", map[string]any{"numbers": []string{}, "message": "m"}},
		{"numbers not an array", map[string]any{"numbers": "15550100001", "message": "m"}},
		{"numbers of numbers", map[string]any{"numbers": []int{15550100001}, "message": "m"}},
		{"delay -1", map[string]any{"numbers": []string{"15550100001"}, "message": "m", "delay": -1}},
		{"delay 3601", map[string]any{"numbers": []string{"15550100001"}, "message": "m", "delay": 3601}},
		{"delay string", map[string]any{"numbers": []string{"15550100001"}, "message": "m", "delay": "5"}},
		{"too many", map[string]any{"numbers": []string{"15550100001", "15550100002", "15550100003", "15550100004"}, "message": "m"}},
		{"empty message", map[string]any{"numbers": []string{"15550100001"}, "message": ""}},
		{"no message", map[string]any{"numbers": []string{"15550100001"}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tg := tg.with(t)
			r := tg.bulk(s.key, c.body.(map[string]any))
			if r.status != 400 || r.str("code") == "" {
				t.Fatalf("%d %s", r.status, r.raw)
			}
		})
	}
	want(t, tg.do("POST", "/api/v1/messages/send-bulk", keyAuth(s.key), `{"numbers":`), 400, "invalid_json")
	// A null in the list is no string, as 5 is not.
	want(t, tg.do("POST", "/api/v1/messages/send-bulk", keyAuth(s.key), `{"numbers":["15550100001",null],"message":"m"}`), 400, "validation_failed")
	// Invalid numbers inside the list are failed entries.
	r := tg.bulk(s.key, map[string]any{"numbers": []string{"12", "15550100001", "abc"}, "message": "m", "delay": 0})
	want(t, r, 200, "")
	if o := r.obj(); o["successful"] != float64(1) || o["failed"] != float64(2) || o["total_processed"] != float64(3) {
		t.Fatalf("invalid numbers: %s", r.raw)
	}
	if a := tg.account(s.key); a["remaining_month"] != float64(999) {
		t.Fatalf("invalid numbers used allowance: %v", a)
	}
	noBulk := tg.newKey(admin, "alice", map[string]any{"scopes": []string{"send_text"}}).str("rawKey")
	want(t, tg.bulk(noBulk, map[string]any{"numbers": []string{"15550100001"}, "message": "m"}), 403, "insufficient_scope")
}

func TestBulkAsyncProgressAndCancel(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	bob := tg.newSender(admin, "bob", "447700900002", nil)
	var nums []string
	for i := 0; i < 20; i++ {
		nums = append(nums, fmt.Sprintf("155501%05d", i))
	}
	r := tg.bulk(s.key, map[string]any{"numbers": nums, "message": "m", "delay": 0.2, "async": true})
	want(t, r, 202, "")
	id := r.str("campaign_id")
	if o := r.obj(); o["success"] != true || o["total_requested"] != float64(20) || o["status_url"] != "/api/v1/campaigns/"+id {
		t.Fatalf("async: %s", r.raw)
	}
	eventually(t, 10*time.Second, "progress", func() bool {
		c := tg.do("GET", "/api/v1/campaigns/"+id, keyAuth(s.key), nil).obj()
		return c["status"] == "running" && c["total_processed"].(float64) >= 3
	})
	want(t, tg.do("GET", "/api/v1/campaigns/"+id, keyAuth(bob.key), nil), 404, "campaign_not_found")
	want(t, tg.do("DELETE", "/api/v1/campaigns/"+id, keyAuth(bob.key), nil), 404, "campaign_not_found")
	c := tg.do("DELETE", "/api/v1/campaigns/"+id, keyAuth(s.key), nil)
	want(t, c, 200, "")
	if c.str("status") != "cancelled" {
		t.Fatalf("cancel: %s", c.raw)
	}
	processed := int(c.obj()["total_processed"].(float64))
	count := func() int {
		n := 0
		for _, num := range nums {
			n += len(tg.simMessages(num))
		}
		return n
	}
	if got := count(); got != processed {
		t.Fatalf("%d delivered, cancel reported %d processed", got, processed)
	}
	// Nothing more is delivered after the cancel was acknowledged (three delays' worth).
	deadline := time.Now().Add(600 * time.Millisecond)
	for time.Now().Before(deadline) {
		if got := count(); got != processed {
			t.Fatalf("delivery after cancel: %d, want %d", got, processed)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if a := tg.account(s.key); a["remaining_month"] != float64(1000-processed) {
		t.Fatalf("the unused reservation was not released: %v", a)
	}
}

// A graceful restart in the middle of a campaign keeps its whole batch: the reservation the
// last process held is taken back, not taken twice (which would clip the rest of the batch).
func TestBulkSurvivesRestartWithinAllowance(t *testing.T) {
	sideBySide(t)
	tg := startGW(t, "--plans", writePlans(t, 0)) // 100 messages a month
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	var nums []string
	for i := 0; i < 80; i++ {
		nums = append(nums, fmt.Sprintf("155506%05d", i))
	}
	r := tg.bulk(s.key, map[string]any{"numbers": nums, "message": "m", "delay": 0.05, "async": true})
	want(t, r, 202, "")
	id := r.str("campaign_id")
	eventually(t, 10*time.Second, "campaign mid-way", func() bool {
		return tg.do("GET", "/api/v1/campaigns/"+id, keyAuth(s.key), nil).obj()["total_processed"].(float64) >= 10
	})
	tg.restart()
	tg.waitStatus(tg.token("alice", ""), "CONNECTED")
	var c map[string]any
	eventually(t, 30*time.Second, "campaign completed", func() bool {
		c = tg.do("GET", "/api/v1/campaigns/"+id, keyAuth(s.key), nil).obj()
		return c["status"] == "completed"
	})
	if c["total_processed"] != float64(80) || c["successful"] != float64(80) {
		t.Fatalf("after a restart the campaign processed %v, %v successful; want 80", c["total_processed"], c["successful"])
	}
	// A message is counted in messagesSent once its outcome's record is durable (engine
	// Outcome), which may come a moment after the campaign counted it: poll for it.
	deadline := time.Now().Add(10 * time.Second)
	for a := tg.account(s.key); a["messagesSent"] != float64(80) || a["remaining_month"] != float64(20); a = tg.account(s.key) {
		if time.Now().After(deadline) {
			t.Fatalf("account after the campaign: %v", a)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A campaign waits out a dropped link (or a session reconnecting after a restart) rather than
// failing the numbers it reaches meanwhile.
func TestBulkWaitsForSessionToReconnect(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	var nums []string
	for i := 0; i < 30; i++ {
		nums = append(nums, fmt.Sprintf("155507%05d", i))
	}
	r := tg.bulk(s.key, map[string]any{"numbers": nums, "message": "m", "delay": 0.05, "async": true})
	want(t, r, 202, "")
	id := r.str("campaign_id")
	eventually(t, 10*time.Second, "campaign mid-way", func() bool {
		return tg.do("GET", "/api/v1/campaigns/"+id, keyAuth(s.key), nil).obj()["total_processed"].(float64) >= 5
	})
	want(t, tg.do("POST", "/api/dev/sim/drop", nil, map[string]any{"sessionId": s.session}), 200, "")
	var c map[string]any
	eventually(t, 30*time.Second, "campaign completed", func() bool {
		c = tg.do("GET", "/api/v1/campaigns/"+id, keyAuth(s.key), nil).obj()
		return c["status"] == "completed"
	})
	if c["successful"] != float64(30) || c["failed"] != float64(0) {
		t.Fatalf("after a dropped link: %v successful, %v failed; want 30 and 0", c["successful"], c["failed"])
	}
}

// The dashboard's campaign list: the signed-in user's campaigns, newest first, running ones as
// they stand; another user sees none of them; the dashboard's cancel is the API's.
func TestClientCampaignListAndCancel(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	bob := tg.newSender(admin, "bob", "447700900002", nil)
	done := tg.bulk(s.key, map[string]any{"numbers": []string{"15550100001"}, "message": "first"})
	want(t, done, 200, "")
	running := tg.bulk(s.key, map[string]any{"numbers": []string{"15550100002", "15550100003", "15550100004"}, "message": "second", "delay": 5, "async": true})
	want(t, running, 202, "")
	list := func(tok string) []any {
		r := tg.do("GET", "/api/client/campaigns", bearerAuth(tok), nil)
		want(t, r, 200, "")
		return r.obj()["campaigns"].([]any)
	}
	eventually(t, 10*time.Second, "the running campaign listed with its first number sent", func() bool {
		l := list(s.tok)
		return len(l) == 2 && l[0].(map[string]any)["total_processed"] == float64(1)
	})
	l := list(s.tok)
	first, second := l[1].(map[string]any), l[0].(map[string]any)
	if second["campaign_id"] != running.str("campaign_id") || second["status"] != "running" || second["total_requested"] != float64(3) {
		t.Fatalf("newest: %v", second)
	}
	if first["campaign_id"] != done.str("campaign_id") || first["status"] != "completed" || first["successful"] != float64(1) {
		t.Fatalf("oldest: %v", first)
	}
	if got := list(bob.tok); len(got) != 0 {
		t.Fatalf("bob sees %v", got)
	}
	want(t, tg.do("DELETE", "/api/client/campaigns", bearerAuth(s.tok), nil), 400, "validation_failed")
	want(t, tg.do("DELETE", "/api/client/campaigns?id="+running.str("campaign_id"), bearerAuth(bob.tok), nil), 404, "campaign_not_found")
	c := tg.do("DELETE", "/api/client/campaigns?id="+running.str("campaign_id"), bearerAuth(s.tok), nil)
	want(t, c, 200, "")
	if c.str("status") != "cancelled" {
		t.Fatalf("cancel: %s", c.raw)
	}
	if l := list(s.tok); l[0].(map[string]any)["status"] != "cancelled" {
		t.Fatalf("after cancel: %v", l[0])
	}
}
