package main

// Routing across kill -9 (issue 29, DESIGN.md section 17): the gateway binary routes messages
// between a linked session on its embedded sim and a cloud number on the fake Graph API, and
// is killed while messages of every path are in flight (warm over the linked phone, cold as
// the cold template, inside the window as they are, a timelock's first messages over the
// cloud number and its replies linked, messages waiting for their contacts): after each
// restart every accepted message reaches its contact once. The fake answers slowly, so the
// kill leaves a message Meta took whose answer never came back: its status settles it.

import (
	"bytes"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gateway/gateway/cloudapi"
	"github.com/gateway/gateway/network/cloud/fakegraph"
)

// cloudProc is the gateway process with its cloud number subscribed on the fake.
type cloudProc struct {
	p      *proc
	tg     *testGW
	data   string
	args   []string
	fake   *fakegraph.Server
	num    *cloudNumber
	sid    string // the cloud session
	key    string // erin's API key
	verify string
}

// restart kills the process with -9 and starts it again on its data; Meta's app is pointed
// at the new address (the public URL a real deployment keeps).
func (c *cloudProc) kill9Restart(t *testing.T) {
	t.Helper()
	c.p.kill9(t)
	c.p = startProc(t, c.data, c.args...)
	c.tg = c.p.gw(t, c.data)
	if err := c.fake.Subscribe(c.num.app, c.p.url+"/api/cloud/webhook?session="+url.QueryEscape(c.sid), c.verify); err != nil {
		t.Fatal(err)
	}
}

// sendAll accepts each body (phone, message) and returns the accepted ids by phone.
func sendAll(t *testing.T, tg *testGW, key string, phones []string, text string) map[string]string {
	t.Helper()
	ids := map[string]string{}
	for _, ph := range phones {
		r := tg.do("POST", "/api/v1/messages/send", keyAuth(key), map[string]any{"phone": ph, "message": text + " " + ph})
		want(t, r, 200, "")
		ids[ph] = r.str("message_id")
	}
	return ids
}

// onceEach waits until every message went where want says (linked or cloud), once.
func (c *cloudProc) onceEach(t *testing.T, ids map[string]string, want string) {
	t.Helper()
	for ph, id := range ids {
		eventually(t, 60*time.Second, "message "+id+" to "+ph+" delivered", func() bool {
			return c.count(ph, id, want) >= 1 && c.tg.do("GET", "/api/v1/messages/"+id, keyAuth(c.key), nil).str("status") != "queued"
		})
	}
	for ph, id := range ids {
		if n, other := c.count(ph, id, want), c.count(ph, id, otherWay(want)); n != 1 || other != 0 {
			t.Fatalf("message %s to %s went %d times %s and %d times the other way", id, ph, n, want, other)
		}
		m := c.tg.do("GET", "/api/v1/messages/"+id, keyAuth(c.key), nil)
		if m.str("status") == "failed" || m.str("via") != want {
			t.Fatalf("message %s: %s", id, m.raw)
		}
	}
}

func otherWay(w string) string {
	if w == "linked" {
		return "cloud"
	}
	return "linked"
}

// count is how many times message id reached ph the way w (the sim for linked, the fake for
// cloud).
func (c *cloudProc) count(ph, id, w string) int {
	n := 0
	if w == "linked" {
		for _, m := range c.tg.simMessages(ph) {
			if m["id"] == id {
				n++
			}
		}
		return n
	}
	for _, got := range sentIDs(c.fake, ph) {
		if got == id {
			n++
		}
	}
	return n
}

func phones(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%02d", prefix, i)
	}
	return out
}

// heldAnswers is the fake Graph API's latency while a kill is coming: no answer comes back
// before it (the fake drops the answer when the killed process's connection closes).
const heldAnswers = time.Hour

func TestKill9CloudRoutingEveryMessageOnce(t *testing.T) {
	sideBySide(t)
	num := &cloudNumber{id: "106540352200077", waba: "102290129300077", display: "+1 555-010-0777", token: "EAAJB-proc", secret: "proc-secret"}
	fake := newFakeGraph(t, num)
	data := t.TempDir()
	// A send whose answer was lost waits up to 30 s for Meta's status naming it (the test
	// points Meta at the restarted process at once; the status comes within seconds). Meta's
	// answers are held until the kill (heldAnswers): a session sends one message at a time, so
	// the kill finds one message taken by Meta and none begun but not yet at Meta (that one
	// would wait out the 30 s before going again: cloud_test.go's TestInDoubtSendSettledByItsStatus).
	// The key's plan has no daily cap: the test's polls of GET /api/v1/messages/{id} are
	// requests too, and under load they are many (a free plan's 1,000 ran out in one CI run).
	args := []string{"--cloud-graph-url", fake.URL(), "--webhook-allow-private", "--cloud-in-doubt", "30s",
		"--plans", writePlans(t, 0), "--default-plan", "unlimited"}
	c := &cloudProc{p: startProc(t, data, args...), data: data, args: args, fake: fake, num: num}
	c.tg = c.p.gw(t, data)
	tg := c.tg
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "erin", "447700900088", nil)
	c.key = s.key
	c.sid, c.verify = tg.connectCloudVerify(fake, s.tok, num)
	want(t, tg.do("PATCH", "/api/client/routing", bearerAuth(s.tok), map[string]any{"mode": "auto",
		"coldTemplate": map[string]any{"name": "cold_notice", "language": "en_US"}}), 200, "")

	warm, cold, window := phones("155504001", 4), phones("155504002", 4), phones("155504003", 4)
	for _, ph := range warm {
		want(t, tg.do("POST", "/api/dev/sim/inbound", nil, map[string]any{"sessionId": s.session, "from": ph, "text": "hi"}), 200, "")
	}
	for _, ph := range window {
		if _, err := fake.Write(num.id, fakegraph.Inbound{From: ph, Text: "hi"}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Second, "the contacts' messages kept", func() bool {
		items, _ := tg.historyPage(t, "/api/v1/messages?direction=in&limit=100", keyAuth(s.key))
		return len(items) == len(warm)+len(window)
	})

	// Warm, cold and window messages in flight: the sim holds its deliveries, Meta its answers.
	want(t, tg.do("POST", "/api/dev/sim/latency", nil, map[string]any{"ms": 60000}), 200, "")
	fake.SetLatency(heldAnswers)
	warmIDs, coldIDs, windowIDs := sendAll(t, tg, s.key, warm, "warm"), sendAll(t, tg, s.key, cold, "cold"), sendAll(t, tg, s.key, window, "window")
	eventually(t, 10*time.Second, "a cloud message taken by Meta, its answer not back", func() bool { return len(sentIDs(fake, "")) >= 1 })
	c.kill9Restart(t)
	fake.SetLatency(0)
	c.onceEach(t, warmIDs, "linked")
	c.onceEach(t, coldIDs, "cloud")
	c.onceEach(t, windowIDs, "cloud")
	for ph, id := range coldIDs {
		if tpl := fake.Sent(ph)[0].Request.Template; tpl == nil || tpl.Name != "cold_notice" {
			t.Fatalf("cold message %s went as %+v", id, fake.Sent(ph)[0].Request)
		}
	}

	// Meta fails a message for its pair rate in a status webhook, and the process dies before
	// the backoff (6 s) ends: the restarted one sends it again (the send log kept it), and
	// only once more.
	limited := window[0]
	eventually(t, 10*time.Second, "Meta's webhooks all taken", func() bool { return fake.Pending() == 0 })
	taken := fake.Delivered()
	fake.Fail(limited, fakegraph.Failure{Code: cloudapi.CodePairRate})
	lid := sendAll(t, c.tg, s.key, []string{limited}, "limited")[limited]
	eventually(t, 10*time.Second, "Meta's failed status taken by the gateway", func() bool {
		for _, m := range fake.Sent(limited) {
			if m.Request.BizOpaqueCallbackData == lid && m.Status == cloudapi.StatusFailed {
				return fake.Delivered() > taken && fake.Pending() == 0
			}
		}
		return false
	})
	c.kill9Restart(t)
	eventually(t, 60*time.Second, "the limited message sent again after the restart, delivered", func() bool {
		return c.count(limited, lid, "cloud") >= 2 && c.tg.do("GET", "/api/v1/messages/"+lid, keyAuth(s.key), nil).str("status") == "delivered"
	})
	if n := c.count(limited, lid, "cloud"); n != 2 {
		t.Fatalf("the limited message went %d times, want 2 (the one Meta failed and one more)", n)
	}

	// A timelock: first messages over the cloud number, replies over the linked phone.
	tg = c.tg
	until := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	want(t, tg.do("POST", "/api/dev/sim/timelock", nil, map[string]any{"sessionId": s.session, "until": until}), 200, "")
	eventually(t, 10*time.Second, "the timelock", func() bool {
		return tg.do("GET", "/api/client/status", bearerAuth(tg.token("erin", "")), nil).obj()["restrictedUntil"] != nil
	})
	want(t, tg.do("POST", "/api/dev/sim/latency", nil, map[string]any{"ms": 60000}), 200, "")
	fake.SetLatency(heldAnswers)
	firsts := sendAll(t, tg, s.key, phones("155504004", 4), "first")
	replies := sendAll(t, tg, s.key, warm, "reply")
	eventually(t, 10*time.Second, "a first message taken by Meta", func() bool {
		for ph := range firsts {
			if len(fake.Sent(ph)) > 0 {
				return true
			}
		}
		return false
	})
	c.kill9Restart(t)
	fake.SetLatency(0)
	c.onceEach(t, firsts, "cloud")
	c.onceEach(t, replies, "linked")
	for _, id := range firsts {
		if m := c.tg.do("GET", "/api/v1/messages/"+id, keyAuth(s.key), nil); m.str("viaReason") != "timelock" {
			t.Fatalf("a first message under the timelock: %s", m.raw)
		}
	}
	want(t, c.tg.do("POST", "/api/dev/sim/timelock", nil, map[string]any{"sessionId": s.session, "until": ""}), 200, "")

	// No cold template: messages wait for their contacts across a kill, then go once when
	// they write (to the cloud number, or to the linked phone), across another.
	tg = c.tg
	want(t, tg.do("PATCH", "/api/client/routing", bearerAuth(tg.token("erin", "")), map[string]any{"coldTemplate": nil}), 200, "")
	toCloud, toLinked := phones("155504005", 3), phones("155504006", 3)
	waitCloud, waitLinked := sendAll(t, tg, s.key, toCloud, "waited"), sendAll(t, tg, s.key, toLinked, "waited")
	for _, id := range waitCloud {
		if m := tg.do("GET", "/api/v1/messages/"+id, keyAuth(s.key), nil); m.str("code") != "waiting_for_contact" {
			t.Fatalf("a message to a cold contact: %s", m.raw)
		}
	}
	c.kill9Restart(t)
	tg = c.tg
	for _, id := range waitLinked {
		if m := tg.do("GET", "/api/v1/messages/"+id, keyAuth(s.key), nil); m.str("status") != "queued" || m.str("code") != "waiting_for_contact" {
			t.Fatalf("after a restart a waiting message is %s", m.raw)
		}
	}
	for _, ph := range toCloud {
		if _, err := fake.Write(num.id, fakegraph.Inbound{From: ph, Text: "here I am"}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ph := range toLinked {
		want(t, tg.do("POST", "/api/dev/sim/inbound", nil, map[string]any{"sessionId": s.session, "from": ph, "text": "here I am"}), 200, "")
	}
	eventually(t, 20*time.Second, "the waiting messages released", func() bool {
		for _, id := range waitCloud {
			if tg.do("GET", "/api/v1/messages/"+id, keyAuth(s.key), nil).str("code") == "waiting_for_contact" {
				return false
			}
		}
		for _, id := range waitLinked {
			if tg.do("GET", "/api/v1/messages/"+id, keyAuth(s.key), nil).str("code") == "waiting_for_contact" {
				return false
			}
		}
		return true
	})
	c.kill9Restart(t)
	c.onceEach(t, waitCloud, "cloud")
	c.onceEach(t, waitLinked, "linked")

	c.killAtMetasOK(t, windowIDs)
	c.p.mu.Lock() // its log is still being written
	p := c.p.stderr.String()
	c.p.mu.Unlock()
	if strings.Contains(p, "panic") {
		t.Fatalf("the gateway panicked:\n%s", p)
	}
}

// killAtMetasOK: Meta's 200 means durable (Meta never sends again a notification it got a 200
// for). The process is killed the moment Meta has the 200 for a notification of a customer's
// messages and of read receipts of the cloud messages sent (ids, by phone); after the restart
// every message is in the history and every receipt applied.
func (c *cloudProc) killAtMetasOK(t *testing.T, sent map[string]string) {
	t.Helper()
	const customer = "15550400701"
	now := cloudapi.Timestamp(time.Now())
	v := cloudapi.Value{Contacts: []cloudapi.WebhookContact{{Profile: &cloudapi.Profile{Name: "Kim"}, WaID: customer}}}
	for i := range 8 {
		v.Messages = append(v.Messages, cloudapi.InboundMessage{From: customer, ID: fmt.Sprintf("wamid.kill-%d", i), Timestamp: now,
			Type: cloudapi.TypeText, Text: &cloudapi.Text{Body: fmt.Sprintf("message %d", i)}})
	}
	for ph, id := range sent {
		for _, m := range c.fake.Sent(ph) {
			if m.Request.BizOpaqueCallbackData == id {
				v.Statuses = append(v.Statuses, cloudapi.Status{ID: m.ID, Status: cloudapi.StatusRead, Timestamp: now, RecipientID: ph,
					BizOpaqueCallbackData: id})
			}
		}
	}
	eventually(t, 10*time.Second, "Meta's webhooks all taken", func() bool { return c.fake.Pending() == 0 })
	var killed atomic.Bool
	gw := c.p.cmd.Process
	c.fake.OnDelivered(func(body []byte) {
		if bytes.Contains(body, []byte("wamid.kill-0")) && killed.CompareAndSwap(false, true) {
			_ = gw.Signal(syscall.SIGKILL)
		}
	})
	defer c.fake.OnDelivered(nil)
	if err := c.fake.Notify(c.num.id, v); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "Meta's 200 for the notification, and the kill", killed.Load)
	c.kill9Restart(t)
	items, _ := c.tg.historyPage(t, "/api/v1/messages?direction=in&limit=200", keyAuth(c.key))
	kept := map[any]bool{}
	for _, it := range items {
		kept[it["id"]] = true
	}
	for _, m := range v.Messages {
		if !kept[m.ID] {
			t.Fatalf("Meta got its 200 for %s, which the restarted gateway does not have", m.ID)
		}
	}
	for _, id := range sent {
		if m := c.tg.do("GET", "/api/v1/messages/"+id, keyAuth(c.key), nil); m.str("status") != "read" {
			t.Fatalf("Meta got its 200 for the read receipt of %s, which the restarted gateway does not have: %s", id, m.raw)
		}
	}
}
