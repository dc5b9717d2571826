package main

// Conversations on the sim, end to end (issue 28, DESIGN.md section 16): a reply quotes the
// right message, a reaction and its removal reach the phone, a poll's votes (two voters, one
// changing its vote) are counted right, an edit after 15 minutes is 409 not_editable, revoking a
// queued message cancels it and releases the allowance, a group send counts once against the
// cap; and the events of each, naming contacts by phone and LID. One gateway for every case.

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/goccy/go-json"
)

// conversation is one user's linked session, its key and its webhook subscription.
type conversation struct {
	tg     *testGW
	s      sender
	sink   *hookSink
	secret string
}

func (c conversation) send(t *testing.T, body map[string]any) string {
	t.Helper()
	r := c.tg.do("POST", "/api/v1/messages/send", keyAuth(c.s.key), body)
	want(t, r, 200, "")
	return r.str("message_id")
}

// settled waits for a message to leave the queue and returns it.
func (c conversation) settled(t *testing.T, id string) resp {
	t.Helper()
	var r resp
	eventually(t, 10*time.Second, "message "+id+" sent", func() bool {
		r = c.tg.do("GET", "/api/v1/messages/"+id, keyAuth(c.s.key), nil)
		return r.status == 200 && r.str("status") != "queued"
	})
	return r
}

// act is the phone from acting on the session through the sim (POST /api/dev/sim/inbound).
func (c conversation) act(t *testing.T, body map[string]any) string {
	t.Helper()
	body["sessionId"] = c.s.session
	r := c.tg.do("POST", "/api/dev/sim/inbound", nil, body)
	want(t, r, 200, "")
	return r.str("id")
}

// event waits for an event of type typ whose data match.
func (c conversation) event(t *testing.T, typ string, match func(map[string]any) bool) map[string]any {
	t.Helper()
	var got map[string]any
	eventually(t, 10*time.Second, typ, func() bool {
		for _, e := range c.sink.events(t, c.secret) {
			if e.Type == typ && match(e.Data) {
				got = e.Data
				return true
			}
		}
		return false
	})
	return got
}

func (c conversation) account(t *testing.T) resp {
	t.Helper()
	r := c.tg.do("GET", "/api/v1/account", keyAuth(c.s.key), nil)
	want(t, r, 200, "")
	return r
}

func TestConversationsEndToEnd(t *testing.T) {
	sideBySide(t)
	clock := newSkewClock()
	plans := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(plans, []byte(`{"free": {"rate_limit": 1000, "monthly_messages": 1000}, "tiny": {"rate_limit": 1000, "monthly_messages": 3}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tg := startGWSkew(t, clock, "--webhook-allow-private", "--plans", plans)
	admin := tg.token("root", "admin")
	c := conversation{tg: tg, s: tg.newSender(admin, "alice", "447700900031", nil), sink: newHookSink(t)}
	sub := tg.do("POST", "/api/client/webhooks", bearerAuth(c.s.tok), map[string]any{"url": c.sink.URL + "/hook",
		"events": []string{"message.status", "message.received", "message.reaction", "message.edited", "message.revoked", "poll.vote"}})
	want(t, sub, 201, "")
	c.secret = sub.str("secret")
	const customer, other = "15550100201", "15550100202"

	t.Run("ReplyQuotesTheRightMessage", func(t *testing.T) {
		first := c.send(t, map[string]any{"phone": customer, "message": "order 1001 shipped"})
		second := c.send(t, map[string]any{"phone": customer, "message": "order 1002 shipped"})
		// The customer quotes the first of the two, once both reached the phone (a phone quotes
		// only what it has: on a busy machine an accepted message may still be queued).
		c.settled(t, first)
		c.settled(t, second)
		in := c.act(t, map[string]any{"from": customer, "text": "which one is mine?", "replyTo": first})
		got := c.event(t, "message.received", func(d map[string]any) bool { return d["id"] == in })
		q, _ := got["quoted"].(map[string]any)
		if got["replyTo"] != first || q["text"] != "order 1001 shipped" || q["fromMe"] != true || got["phone"] != customer || got["lid"] == nil || got["kind"] != "text" {
			t.Fatalf("message.received %v, want a reply quoting %s", got, first)
		}
		// Another customer's message is not quoted to this one (it would show it to them).
		want(t, tg.do("POST", "/api/v1/messages/send", keyAuth(c.s.key), map[string]any{"phone": other, "message": "yes", "replyTo": in}), 400, "validation_failed")
		// The answer quotes the customer's message: the phone shows which.
		reply := c.send(t, map[string]any{"phone": customer, "message": "the first one", "replyTo": in, "typing": true})
		c.settled(t, reply)
		for _, d := range tg.simMessages(customer) {
			if d["id"] == reply {
				if d["replyTo"] != in || d["quoted"] != "which one is mine?" || d["typing"] != true {
					t.Fatalf("the phone shows %v, want the reply quoting %s after typing", d, in)
				}
				return
			}
		}
		t.Fatalf("the reply %s never reached the phone", reply)
	})

	t.Run("ReactionAndItsRemovalReachThePhone", func(t *testing.T) {
		in := c.act(t, map[string]any{"from": customer, "text": "thanks, got it"})
		c.event(t, "message.received", func(d map[string]any) bool { return d["id"] == in })
		on := c.send(t, map[string]any{"type": "reaction", "messageId": in, "emoji": "👍"})
		off := c.send(t, map[string]any{"type": "reaction", "messageId": in, "emoji": ""})
		c.settled(t, off)
		var seen []string
		for _, d := range tg.simMessages(customer) {
			if d["type"] == "reaction" && d["messageId"] == in {
				e, _ := d["emoji"].(string)
				seen = append(seen, d["id"].(string)+":"+e)
			}
		}
		if !slices.Equal(seen, []string{on + ":👍", off + ":"}) {
			t.Fatalf("the phone saw reactions %v, want 👍 then its removal", seen)
		}
		// Both reached their subscribers (fromMe), and the message shows no reaction now.
		// The history's note of a reaction is written after its event (a kill -9 between them
		// repeats the event, it does not lose it), so the read polls.
		c.event(t, "message.reaction", func(d map[string]any) bool { return d["messageId"] == in && d["emoji"] == "" && d["fromMe"] == true })
		eventually(t, 10*time.Second, "the reaction taken back gone from the history", func() bool {
			items, _ := tg.historyPage(t, "/api/v1/messages?direction=in&from="+customer, keyAuth(c.s.key))
			for _, m := range items {
				if m["id"] == in {
					return m["reactions"] == nil
				}
			}
			return false
		})
		// The customer's reaction to ours: an event naming them by phone and LID.
		ours := c.send(t, map[string]any{"phone": customer, "message": "anything else?"})
		c.settled(t, ours)
		c.act(t, map[string]any{"from": customer, "type": "reaction", "messageId": ours, "emoji": "❤️"})
		r := c.event(t, "message.reaction", func(d map[string]any) bool { return d["messageId"] == ours })
		if r["from"] != customer || r["phone"] != customer || r["lid"] == nil || r["fromMe"] != false || r["emoji"] != "❤️" {
			t.Fatalf("message.reaction %v", r)
		}
	})

	t.Run("PollVotesCounted", func(t *testing.T) {
		// Two voters: the poll goes to a group of both (a direct poll has one voter).
		g := tg.do("POST", "/api/v1/groups", keyAuth(c.s.key), map[string]any{"name": "Pickup times", "participants": []string{customer, other}})
		want(t, g, 201, "")
		poll := c.send(t, map[string]any{"phone": g.str("id"), "type": "poll", "question": "Confirm order 1001?", "options": []string{"Yes", "No", "Call me"}})
		c.settled(t, poll)
		// Who never got the poll cannot vote in it.
		want(t, tg.do("POST", "/api/dev/sim/inbound", nil, map[string]any{"sessionId": c.s.session, "from": "15550100299", "type": "poll_vote", "messageId": poll, "options": []string{"Yes"}}), 404, "message_not_found")
		c.act(t, map[string]any{"from": customer, "type": "poll_vote", "messageId": poll, "options": []string{"Yes"}})
		c.act(t, map[string]any{"from": other, "type": "poll_vote", "messageId": poll, "options": []string{"No"}})
		c.act(t, map[string]any{"from": customer, "type": "poll_vote", "messageId": poll, "options": []string{"No"}}) // changes its vote
		// Counted by webhook-id: a delivery the gateway tried again (at least once) is one
		// event, and under a loaded machine a retry's backoff may pass 10 s.
		eventually(t, 30*time.Second, "three poll.vote events", func() bool {
			ids := map[string]bool{}
			for _, r := range c.sink.all() {
				var e hookEvent
				if !signed(r, c.secret) || json.Unmarshal(r.body, &e) != nil {
					t.Fatalf("bad event %s", r.body)
				}
				if e.Type == "poll.vote" && e.Data["messageId"] == poll {
					ids[r.header.Get("webhook-id")] = true
				}
			}
			return len(ids) == 3
		})
		// A vote's record follows its event's commit (events before records): the last vote may
		// be recorded a moment after its event is seen.
		var v resp
		counts := map[string]float64{}
		voters := map[string][]any{}
		eventually(t, 10*time.Second, "the three votes recorded", func() bool {
			v = tg.do("GET", "/api/v1/messages/"+poll+"/votes", keyAuth(c.s.key), nil)
			want(t, v, 200, "")
			for _, o := range v.obj()["options"].([]any) {
				o := o.(map[string]any)
				counts[o["name"].(string)], voters[o["name"].(string)] = o["count"].(float64), o["voters"].([]any)
			}
			return counts["Yes"]+counts["No"]+counts["Call me"] == 2 && counts["Yes"] == 0
		})
		if counts["Yes"] != 0 || counts["No"] != 2 || counts["Call me"] != 0 || len(voters["No"]) != 2 || v.obj()["question"] != "Confirm order 1001?" {
			t.Fatalf("votes %s, want No twice (the first voter changed its vote)", v.raw)
		}
		// Each vote reached the subscribers, naming the group and the voter by phone and LID.
		e := c.event(t, "poll.vote", func(d map[string]any) bool { return d["messageId"] == poll && d["voter"] == other })
		if e["group"] != g.str("id") || e["phone"] != other || e["lid"] == nil {
			t.Fatalf("poll.vote %v", e)
		}
	})

	t.Run("RevokeSentAndEditWithinTheWindow", func(t *testing.T) {
		id := c.send(t, map[string]any{"phone": customer, "message": "total: 10 EUR"})
		c.settled(t, id)
		r := tg.do("POST", "/api/v1/messages/"+id+"/edit", keyAuth(c.s.key), map[string]any{"message": "total: 12 EUR"})
		want(t, r, 200, "")
		if r.str("type") != "edit" || r.str("target") != id {
			t.Fatalf("edit answered %s", r.raw)
		}
		e := c.event(t, "message.edited", func(d map[string]any) bool { return d["messageId"] == id })
		if e["text"] != "total: 12 EUR" || e["fromMe"] != true {
			t.Fatalf("message.edited %v", e)
		}
		gone := c.send(t, map[string]any{"phone": customer, "message": "sent by mistake"})
		c.settled(t, gone)
		want(t, tg.do("DELETE", "/api/v1/messages/"+gone, keyAuth(c.s.key), nil), 200, "")
		c.event(t, "message.revoked", func(d map[string]any) bool { return d["messageId"] == gone && d["fromMe"] == true })
		for _, d := range tg.simMessages(customer) {
			switch d["id"] {
			case id:
				if d["text"] != "total: 12 EUR" || d["edited"] != true {
					t.Fatalf("the phone shows the edited message as %v", d)
				}
			case gone:
				if d["revoked"] != true {
					t.Fatalf("the phone shows the revoked message as %v", d)
				}
			}
		}
		// One revoke a message, even while the first is still on its way (each delivery held 1 s)
		// and with DELETEs racing: every other one is refused.
		twice := c.send(t, map[string]any{"phone": customer, "message": "sent twice by mistake"})
		c.settled(t, twice)
		want(t, tg.do("POST", "/api/dev/sim/latency", nil, map[string]any{"ms": 1000}), 200, "")
		codes := make(chan int, 6)
		var wg sync.WaitGroup
		for range 6 {
			wg.Go(func() { codes <- tg.do("DELETE", "/api/v1/messages/"+twice, keyAuth(c.s.key), nil).status })
		}
		wg.Wait()
		close(codes)
		ok := 0
		for code := range codes {
			switch code {
			case 200:
				ok++
			case 409:
			default:
				t.Fatalf("a racing DELETE answered %d", code)
			}
		}
		if ok != 1 {
			t.Fatalf("%d of 6 racing DELETEs revoked the message, want 1", ok)
		}
		want(t, tg.do("DELETE", "/api/v1/messages/"+twice, keyAuth(c.s.key), nil), 409, "not_revocable")
		want(t, tg.do("POST", "/api/dev/sim/latency", nil, map[string]any{"ms": 0}), 200, "")
		c.event(t, "message.revoked", func(d map[string]any) bool { return d["messageId"] == twice })
		// Its note is written after its event (noteChange: the event first, so a kill -9 between
		// them repeats the event rather than losing it): a second DELETE once the note is there.
		eventually(t, 5*time.Second, "the revoked message's note", func() bool {
			return tg.do("GET", "/api/v1/messages/"+gone, keyAuth(c.s.key), nil).obj()["revoked"] == true
		})
		want(t, tg.do("DELETE", "/api/v1/messages/"+gone, keyAuth(c.s.key), nil), 409, "not_revocable")
	})

	t.Run("RevokingAQueuedMessageCancelsItAndReleasesTheAllowance", func(t *testing.T) {
		// A user on a plan of 3 messages a month.
		want(t, tg.do("POST", "/api/admin/users", bearerAuth(admin), map[string]any{"id": "tina", "plan": "tiny"}), 201, "")
		tina := conversation{tg: tg, s: tg.newSender(admin, "tina", "447700900032", nil)}
		// Each delivery takes 1.5 s: the second message waits in the queue behind the first,
		// sent once the first is on its way (the deliverer took it out of the queue; sent at
		// once, both could go in one batch, and the second would be revoked, not cancelled).
		want(t, tg.do("POST", "/api/dev/sim/latency", nil, map[string]any{"ms": 1500}), 200, "")
		tina.send(t, map[string]any{"phone": customer, "message": "one"})
		eventually(t, 5*time.Second, "the first message taken by the deliverer", func() bool {
			return tg.status(tina.s.tok)["queue"].(map[string]any)["depth"] == 0.0
		})
		queued := tina.send(t, map[string]any{"phone": customer, "message": "two"})
		before := tina.account(t).obj()["remaining_month"].(float64)
		r := tg.do("DELETE", "/api/v1/messages/"+queued, keyAuth(tina.s.key), nil)
		want(t, r, 200, "")
		if r.str("status") != "cancelled" || r.str("type") != "cancel" {
			t.Fatalf("DELETE of a queued message answered %s", r.raw)
		}
		// Released once the cancellation is durable (as a failure's is).
		eventually(t, 5*time.Second, "the cancelled message's allowance released", func() bool {
			return tina.account(t).obj()["remaining_month"].(float64) == before+1
		})
		want(t, tg.do("POST", "/api/dev/sim/latency", nil, map[string]any{"ms": 0}), 200, "")
		// The released message is sendable: 3 in all (one, three, four), then the month is used up.
		tina.send(t, map[string]any{"phone": customer, "message": "three"})
		last := tina.send(t, map[string]any{"phone": customer, "message": "four"})
		want(t, tg.do("POST", "/api/v1/messages/send", keyAuth(tina.s.key), map[string]any{"phone": customer, "message": "five"}), 429, "quota_exceeded")
		tina.settled(t, last)
		for _, d := range tg.simMessages(customer) {
			if d["id"] == queued {
				t.Fatalf("the cancelled message was delivered: %v", d)
			}
		}
		if m := tina.settled(t, queued); m.str("status") != "cancelled" {
			t.Fatalf("the cancelled message reads %s", m.raw)
		}
		// A cancel is idempotent: a DELETE sent again answers the cancelled message, whenever.
		if again := tg.do("DELETE", "/api/v1/messages/"+queued, keyAuth(tina.s.key), nil); again.status != 200 || again.str("status") != "cancelled" || again.str("type") != "cancel" {
			t.Fatalf("DELETE of a cancelled message answered %d %s", again.status, again.raw)
		}
		eventually(t, 5*time.Second, "messagesSent 3", func() bool { return tina.account(t).obj()["messagesSent"].(float64) == 3 })
	})

	t.Run("GroupSendCountsOnce", func(t *testing.T) {
		g := tg.do("POST", "/api/v1/groups", keyAuth(c.s.key), map[string]any{"name": "Order 1001", "participants": []string{customer, other}})
		want(t, g, 201, "")
		group := g.str("id")
		if len(g.obj()["participants"].([]any)) != 3 || g.obj()["admin"] != true {
			t.Fatalf("group %s", g.raw)
		}
		// The earlier subtests' messages are counted once their outcomes' records land, which
		// can trail their delivery: the count starts once none is reserved and uncounted.
		var before resp
		eventually(t, 10*time.Second, "the earlier messages counted", func() bool {
			before = c.account(t)
			a := before.obj()
			return a["remaining_month"] == a["monthly_limit"].(float64)-a["messagesSent"].(float64)
		})
		sentBefore := before.obj()["messagesSent"].(float64)
		rem, _ := strconv.Atoi(before.header.Get("X-RateLimit-Remaining"))
		r := tg.do("POST", "/api/v1/messages/send", keyAuth(c.s.key), map[string]any{"phone": group, "message": "stock is back"})
		want(t, r, 200, "")
		if r.str("group") != group || r.str("phone") != "" {
			t.Fatalf("group send answered %s", r.raw)
		}
		if got, _ := strconv.Atoi(r.header.Get("X-RateLimit-Remaining")); got != rem-1 {
			t.Fatalf("the daily cap went from %d to %d, want one call", rem, got)
		}
		c.settled(t, r.str("message_id"))
		eventually(t, 5*time.Second, "one message counted", func() bool {
			return c.account(t).obj()["messagesSent"].(float64) == sentBefore+1
		})
		if got := tg.simMessages(group); len(got) != 1 || got[0]["group"] != group {
			t.Fatalf("the group got %v", got)
		}
		// send-image takes a group for its "to" as send takes it for its "phone".
		img := tg.do("POST", "/api/v1/messages/send-image?wait=10", keyAuth(c.s.key), map[string]any{"to": group, "image": pngDataURI(t, 4)})
		want(t, img, 200, "")
		if got := tg.simMessages(group); len(got) != 2 || got[1]["type"] != "image" {
			t.Fatalf("the group got %v after an image", got)
		}
		// A member writes in the group: message.received names the group and the member.
		in := c.act(t, map[string]any{"from": other, "text": "great!", "group": group})
		e := c.event(t, "message.received", func(d map[string]any) bool { return d["id"] == in })
		if e["group"] != group || e["from"] != other {
			t.Fatalf("message.received in a group: %v", e)
		}
		invite := tg.do("GET", "/api/v1/groups/"+group+"/invite", keyAuth(c.s.key), nil)
		want(t, invite, 200, "")
	})

	t.Run("ContactsKnowTheirLIDs", func(t *testing.T) {
		r := tg.do("GET", "/api/v1/contacts", keyAuth(c.s.key), nil)
		want(t, r, 200, "")
		var found map[string]any
		for _, x := range r.obj()["contacts"].([]any) {
			if x := x.(map[string]any); x["phone"] == customer {
				found = x
			}
		}
		if found == nil || found["lid"] == nil || found["name"] == nil || found["lastInbound"] == nil || found["lastOutbound"] == nil {
			t.Fatalf("contacts %s, want %s with its LID, name and both times", r.raw, customer)
		}
		chk := tg.do("POST", "/api/v1/contacts/check", keyAuth(c.s.key), map[string]any{"phones": []string{customer}})
		want(t, chk, 200, "")
		if res := chk.obj()["results"].([]any)[0].(map[string]any); res["onNetwork"] != true || res["lid"] != found["lid"] {
			t.Fatalf("check %s, want the same LID as the book (%v)", chk.raw, found["lid"])
		}
		// A send's answer names the LID the network gave.
		s := tg.do("POST", "/api/v1/messages/send", keyAuth(c.s.key), map[string]any{"phone": customer, "message": "hi"})
		want(t, s, 200, "")
		if s.str("lid") != found["lid"] || s.str("phone") != customer {
			t.Fatalf("send answered %s", s.raw)
		}
		st := c.event(t, "message.status", func(d map[string]any) bool { return d["messageId"] == s.str("message_id") && d["status"] == "sent" })
		if st["lid"] != found["lid"] || st["phone"] != customer {
			t.Fatalf("message.status %v", st)
		}
	})

	t.Run("MarkRead", func(t *testing.T) {
		in := c.act(t, map[string]any{"from": customer, "text": "hello?"})
		c.event(t, "message.received", func(d map[string]any) bool { return d["id"] == in })
		want(t, tg.do("POST", "/api/v1/messages/"+in+"/read", keyAuth(c.s.key), nil), 200, "")
		r := tg.do("GET", "/api/dev/sim/read?from="+customer, nil, nil)
		want(t, r, 200, "")
		if !slices.Contains(r.obj()["read"].([]any), any(in)) {
			t.Fatalf("the phone sees read %s, want %s", r.raw, in)
		}
	})

	// Last: it moves the clock.
	t.Run("EditAfterFifteenMinutesIs409", func(t *testing.T) {
		id := c.send(t, map[string]any{"phone": customer, "message": "see you at 5"})
		c.settled(t, id)
		clock.Advance(15*time.Minute + time.Second)
		r := tg.do("POST", "/api/v1/messages/"+id+"/edit", keyAuth(c.s.key), map[string]any{"message": "see you at 6"})
		want(t, r, 409, "not_editable")
		for _, d := range tg.simMessages(customer) {
			if d["id"] == id && d["edited"] == true {
				t.Fatalf("a refused edit reached the phone: %v", d)
			}
		}
		// Revoking is still allowed (48 hours).
		want(t, tg.do("DELETE", "/api/v1/messages/"+id, keyAuth(c.s.key), nil), 200, "")
		clock.Advance(48 * time.Hour)
		other := c.send(t, map[string]any{"phone": customer, "message": "x"})
		c.settled(t, other)
		clock.Advance(48*time.Hour + time.Minute)
		want(t, tg.do("DELETE", "/api/v1/messages/"+other, keyAuth(c.s.key), nil), 409, "not_revocable")
	})
}
