//go:build ui

package uitest

// Conversations in the dashboard (DESIGN.md section 16): a poll sent from the Send screen to a
// group picked there, its votes counted live on the Messages screen (one voter changing theirs);
// a reply from a message that quotes it; a reaction from a message and its removal; a contact's
// reaction, edit and revoke shown as they happen; no reload throughout.

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// simMessages is what the phone (or group) to received from the session (GET /api/dev/sim/messages).
func (g *gw) simMessages(to string) []map[string]any {
	g.t.Helper()
	var out []map[string]any
	for _, m := range g.call("GET", "/api/dev/sim/messages?to="+to, "", nil)["messages"].([]any) {
		out = append(out, m.(map[string]any))
	}
	return out
}

// simGot waits until the phone to received a message that match accepts.
func (g *gw) simGot(what, to string, match func(map[string]any) bool) map[string]any {
	g.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		ms := g.simMessages(to)
		if i := slices.IndexFunc(ms, match); i >= 0 {
			return ms[i]
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("%s: +%s got %v", what, to, ms)
		}
	}
}

func TestConversationsInTheDashboard(t *testing.T) {
	g := startGateway(t)
	b := newBrowser(t)
	admin := g.token("root", "admin", 3600)
	tok := g.token("alice", "client", 3600)
	sid := g.link(tok, "4915112345678")
	key := g.call("POST", "/api/admin/apikeys", admin, map[string]any{"userId": "alice", "name": "Shop"})["rawKey"].(string)
	const ann, bea = "4915550001001", "4915550001002"
	group := g.call("POST", "/api/v1/groups", key, map[string]any{"name": "Pickup times", "participants": []string{ann, bea}})["id"].(string)
	act := func(body map[string]any) string {
		body["sessionId"] = sid
		id, _ := g.call("POST", "/api/dev/sim/inbound", "", body)["id"].(string)
		return id
	}

	// A poll to the group picked on the Send screen.
	b.open(g.url + "/dashboard/#token=" + tok)
	b.waitFor("the session screen", `document.querySelector('#session-status')`)
	b.go_("#/send")
	b.waitFor("the group in the picker", fmt.Sprintf(`document.querySelector('#send-group option[value=%q]')`, group))
	if s := b.text(fmt.Sprintf(`#send-group option[value=%q]`, group)); s != "Pickup times (3 members)" {
		t.Errorf("the picker says %q", s)
	}
	b.set("#send-group", group)
	b.waitFor("the number not asked", `document.querySelector('#send-phone').disabled`)
	b.set("#send-type", "poll")
	b.set("#send-form [name=question]", "Which day suits you?")
	b.set("#send-form [name=options]", "Monday\nTuesday\n\nFriday")
	b.eval(`document.querySelector('#send-form [name=typing]').click(), true`, nil)
	b.click("#send-form button[type=submit]")
	b.waitFor("the sent notice", `[...document.querySelectorAll('.notice.ok, .notice.info')].some(n => n.textContent.includes('Pickup times'))`, 10*time.Second)
	got := g.simGot("the poll", group, func(m map[string]any) bool { return m["question"] == "Which day suits you?" })
	if got["group"] != group || got["typing"] != true || fmt.Sprint(got["options"]) != "[Monday Tuesday Friday]" {
		t.Errorf("the group's member got %v", got)
	}

	// Its votes, counted live on the Messages screen.
	b.go_("#/messages")
	b.waitFor("the poll", `document.querySelector('li.msg[data-kind=poll] .poll') && document.querySelector('li.msg[data-kind=poll] .actions')`, 10*time.Second)
	var poll string
	b.eval(`document.querySelector('li.msg[data-kind=poll]').dataset.id`, &poll)
	b.waitFor("the live stream", `document.querySelector('#live').dataset.state === 'live'`)
	act(map[string]any{"from": ann, "type": "poll_vote", "messageId": poll, "options": []string{"Monday"}})
	act(map[string]any{"from": bea, "type": "poll_vote", "messageId": poll, "options": []string{"Friday"}})
	count := func(option string) string {
		return fmt.Sprintf(`document.querySelector('li.msg[data-id=%q] .poll li[data-option=%q]').dataset.count`, poll, option)
	}
	b.waitFor("two votes", count("Monday")+` === '1' && `+count("Friday")+` === '1'`)
	act(map[string]any{"from": ann, "type": "poll_vote", "messageId": poll, "options": []string{"Friday"}}) // changes their vote
	b.waitFor("the changed vote", count("Monday")+` === '0' && `+count("Friday")+` === '2' && `+count("Tuesday")+` === '0'`)
	if s := b.text(fmt.Sprintf(`li.msg[data-id=%q] .poll`, poll)); !strings.Contains(s, "2 people voted") {
		t.Errorf("the poll says %q", s)
	}
	b.shot("poll-votes")

	// A customer writes; the reply from their message quotes it.
	in := act(map[string]any{"from": ann, "text": "can I come at 5?"})
	inLi := fmt.Sprintf(`li.msg[data-id=%q]`, in)
	b.waitFor("the incoming message", `document.querySelector('`+inLi+`')`)
	b.click(inLi + ` button[data-reply]`)
	b.set(inLi+` .reply textarea`, "yes, 5 is fine")
	b.click(inLi + ` .reply button[type=submit]`)
	b.waitFor("the reply with its quote", `[...document.querySelectorAll('li.msg[data-direction=out]')].some((li) => li.querySelector('.text') &&
		li.querySelector('.text').textContent === 'yes, 5 is fine' && (li.querySelector('blockquote.quote')||{}).textContent === '+`+ann+`can I come at 5?')`, 10*time.Second)
	reply := g.simGot("the reply", ann, func(m map[string]any) bool { return m["text"] == "yes, 5 is fine" })
	if reply["replyTo"] != in || reply["quoted"] != "can I come at 5?" {
		t.Errorf("the customer got %v", reply)
	}

	// A reaction from the message, then taken back.
	b.click(inLi + ` button[data-react]`)
	b.click(inLi + ` .picker button[data-emoji="👍"]`)
	b.waitFor("our reaction on the message", `document.querySelector('`+inLi+` .reaction[data-emoji="👍"]')`, 10*time.Second)
	g.simGot("the reaction", ann, func(m map[string]any) bool { return m["emoji"] == "👍" && m["replyTo"] == nil })
	b.click(inLi + ` button[data-react]`)
	b.click(inLi + ` .picker button[data-emoji=""]`)
	b.waitFor("our reaction taken back", `!document.querySelector('`+inLi+` .reaction')`, 10*time.Second)

	// The customer reacts to the reply, edits their message, then deletes it for everyone.
	var ours string
	b.eval(`[...document.querySelectorAll('li.msg[data-direction=out]')].find((li) => li.textContent.includes('yes, 5 is fine')).dataset.id`, &ours)
	act(map[string]any{"from": ann, "type": "reaction", "messageId": ours, "emoji": "❤️"})
	b.waitFor("their reaction", fmt.Sprintf(`document.querySelector('li.msg[data-id=%q] .reaction[data-emoji="❤️"]')`, ours))
	act(map[string]any{"from": ann, "type": "edit", "messageId": in, "text": "can I come at 6?"})
	b.waitFor("the edit", `document.querySelector('`+inLi+`[data-edited] .text').textContent === 'can I come at 6?' && document.querySelector('`+inLi+` .edited')`)
	b.shot("conversation")
	act(map[string]any{"from": ann, "type": "revoke", "messageId": in})
	b.waitFor("the revoke", `document.querySelector('`+inLi+`[data-revoked] .text').textContent === 'This message was deleted' && !document.querySelector('`+inLi+` button[data-reply]')`)

	// After a reload, the history shows the same.
	if n := b.navigations(); n != 1 {
		t.Errorf("the page loaded %d times", n)
	}
	b.open(g.url + "/dashboard/#token=" + tok)
	b.waitFor("the session screen", `document.querySelector('#session-status')`)
	b.go_("#/messages")
	b.waitFor("the history's poll results", count("Friday")+` === '2'`)
	b.waitFor("the history's reply, reaction and revoke", fmt.Sprintf(`document.querySelector('li.msg[data-id=%q] blockquote.quote') &&
		document.querySelector('li.msg[data-id=%q] .reaction[data-emoji="❤️"]') && document.querySelector('`+inLi+`[data-revoked]')`, ours, ours))
	// The group's name comes with the phone's groups, read once a group's message shows.
	b.waitFor("the poll's line naming its group", fmt.Sprintf(`document.querySelector('li.msg[data-id=%q] .meta strong').textContent === 'To Pickup times'`, poll))
}
