package httpapi

import (
	"strings"
	"testing"
	"time"

	"github.com/goccy/go-json"
)

// tinyWebP is a 1x1 lossless WebP (a sticker).
const tinyWebP = "UklGRhoAAABXRUJQVlA4TA0AAAAvAAAAEAcQERGIiP4HAA=="

// linked links alice's session to phone and waits for it to be connected; it keeps its id as
// {sid}.
func (a *api) linked(t testing.TB, phone string) {
	t.Helper()
	a.vars["sid"] = a.do(t, "GET", "/api/client/qr", "alice", nil, nil).str("sessionId")
	if r := a.do(t, "POST", "/api/dev/sim/scan", "", nil, `{"sessionId":"{sid}","phone":"`+phone+`"}`); r.status != 200 {
		t.Fatalf("scan: %d %s", r.status, r.body)
	}
	eventually(t, 5*time.Second, "alice's session connected", func() bool {
		return a.do(t, "GET", "/api/client/status", "alice", nil, nil).str("status") == "CONNECTED"
	})
}

// settled waits until message {id} has left the queue (sent or beyond, or failed).
func (a *api) settled(t *testing.T, id string) res {
	t.Helper()
	var r res
	eventually(t, 10*time.Second, "message "+id+" to leave the queue", func() bool {
		r = a.do(t, "GET", "/api/v1/messages/"+a.expand(id), "key", nil, nil)
		s := r.str("status")
		return s != "" && s != "queued"
	})
	return r
}

func (r res) list(field string) []any { l, _ := r.obj()[field].([]any); return l }

// Every kind on the v1 send, replies, reactions, edits, revokes and cancellations, read marks,
// poll votes, the contact book and groups: each route answered as the OpenAPI document says.
func TestConversations(t *testing.T) {
	a := newAPI(t)
	a.linked(t, "447700900021")
	a.run(t, "conversations", []call{
		{method: "POST", path: "/api/admin/apikeys", as: "root", status: 201, body: map[string]any{"userId": "alice", "name": "app"}, keep: map[string]string{"rawKey": "key"}},
		{method: "POST", path: "/api/admin/apikeys", as: "root", status: 201, body: map[string]any{"userId": "alice", "name": "texts", "scopes": []string{"send_text"}}, keep: map[string]string{"rawKey": "textkey"}},
		// Every kind (after a first message: the network has named the recipient's LID).
		{method: "POST", path: "/api/v1/messages/send?wait=5", as: "key", body: map[string]any{"phone": "15550100101", "message": "hi"}, status: 200},
		{name: "text", method: "POST", path: "/api/v1/messages/send", as: "key", body: map[string]any{"phone": "+1 555 010 0101", "message": "your order shipped"}, status: 200, keep: map[string]string{"message_id": "text"}},
		{name: "text by its other name", method: "POST", path: "/api/v1/messages/send", as: "key", body: map[string]any{"phone": "15550100101", "type": "text", "text": "hello"}, status: 200},
		{name: "image", method: "POST", path: "/api/v1/messages/send", as: "key", body: map[string]any{"phone": "15550100101", "type": "image", "media": "data:image/png;base64," + tinyPNG, "caption": "receipt"}, status: 200},
		{name: "sticker", method: "POST", path: "/api/v1/messages/send", as: "key", body: map[string]any{"phone": "15550100101", "type": "sticker", "media": "data:image/webp;base64," + tinyWebP}, status: 200},
		{name: "sticker not WebP", method: "POST", path: "/api/v1/messages/send", as: "key", body: map[string]any{"phone": "15550100101", "type": "sticker", "media": "data:image/png;base64," + tinyPNG}, status: 415, code: "unsupported_media_type"},
		{name: "media without its scope", method: "POST", path: "/api/v1/messages/send", header: map[string]string{"x-api-key": "{textkey}"}, body: map[string]any{"phone": "15550100101", "type": "image", "media": "data:image/png;base64," + tinyPNG}, status: 403, code: "insufficient_scope"},
		{name: "media missing", method: "POST", path: "/api/v1/messages/send", as: "key", body: map[string]any{"phone": "15550100101", "type": "document"}, status: 400, code: "validation_failed"},
		{name: "location", method: "POST", path: "/api/v1/messages/send", as: "key", body: map[string]any{"phone": "15550100101", "type": "location", "lat": 52.52, "lng": 13.405, "name": "Our shop", "address": "Alexanderplatz 1"}, status: 200},
		{name: "contact", method: "POST", path: "/api/v1/messages/send", as: "key", body: map[string]any{"phone": "15550100101", "type": "contact", "contactName": "Support", "contactPhone": "+49 30 1234567"}, status: 200},
		{name: "poll", method: "POST", path: "/api/v1/messages/send", as: "key", body: map[string]any{"phone": "15550100101", "type": "poll", "question": "Confirm order 1001?", "options": []string{"Yes", "No"}}, status: 200, keep: map[string]string{"message_id": "poll"}},
		{name: "poll with one option", method: "POST", path: "/api/v1/messages/send", as: "key", body: map[string]any{"phone": "15550100101", "type": "poll", "question": "?", "options": []string{"Yes"}}, status: 400, code: "validation_failed"},
		{name: "poll with an option twice", method: "POST", path: "/api/v1/messages/send", as: "key", body: map[string]any{"phone": "15550100101", "type": "poll", "question": "?", "options": []string{"Yes", "Yes"}}, status: 400, code: "validation_failed"},
		{name: "reply", method: "POST", path: "/api/v1/messages/send", as: "key", body: `{"phone":"15550100101","message":"tracking 1Z999","replyTo":"{text}","typing":true}`, status: 200, keep: map[string]string{"message_id": "reply"}},
		{name: "reply to nothing", method: "POST", path: "/api/v1/messages/send", as: "key", body: map[string]any{"phone": "15550100101", "message": "x", "replyTo": "3EB0000000000000000000AA"}, status: 404, code: "message_not_found"},
		{name: "reaction", method: "POST", path: "/api/v1/messages/send", as: "key", body: `{"type":"reaction","messageId":"{text}","emoji":"👍"}`, status: 200},
		{name: "reaction without an emoji", method: "POST", path: "/api/v1/messages/send", as: "key", body: `{"type":"reaction","messageId":"{text}"}`, status: 400, code: "validation_failed"},
		{name: "reaction in another conversation", method: "POST", path: "/api/v1/messages/send", as: "key", body: `{"type":"reaction","phone":"15550100999","messageId":"{text}","emoji":"👍"}`, status: 400, code: "validation_failed"},
		{name: "reaction to nothing", method: "POST", path: "/api/v1/messages/send", as: "key", body: map[string]any{"type": "reaction", "messageId": "nope", "emoji": "👍"}, status: 404, code: "message_not_found"},
		{name: "a group id that is not one", method: "POST", path: "/api/v1/messages/send", as: "key", body: map[string]any{"phone": "abc@g.us", "message": "x"}, status: 400, code: "invalid_phone"},
	})
	a.settled(t, "{text}")
	a.settled(t, "{reply}")
	a.run(t, "conversations_2", []call{
		{name: "edited", method: "POST", path: "/api/v1/messages/{text}/edit", as: "key", body: map[string]any{"message": "your order shipped today"}, status: 200, keep: map[string]string{"message_id": "edit"}},
		{name: "edit of a poll", method: "POST", path: "/api/v1/messages/{poll}/edit", as: "key", body: map[string]any{"message": "x"}, status: 409, code: "not_editable"},
		{name: "edit of nothing", method: "POST", path: "/api/v1/messages/3EB0000000000000000000AB/edit", as: "key", body: map[string]any{"message": "x"}, status: 404, code: "message_not_found"},
		{name: "edit without text", method: "POST", path: "/api/v1/messages/{text}/edit", as: "key", body: map[string]any{}, status: 400, code: "validation_failed"},
		{name: "revoked", method: "DELETE", path: "/api/v1/messages/{reply}", as: "key", status: 200, keep: map[string]string{"message_id": "revoke"}},
		{name: "revoke of nothing", method: "DELETE", path: "/api/v1/messages/3EB0000000000000000000AC", as: "key", status: 404, code: "message_not_found"},
		{name: "a message to nobody", method: "POST", path: "/api/dev/sim/unregistered", body: map[string]any{"numbers": []string{"15550100199"}}, status: 200},
		{method: "POST", path: "/api/v1/messages/send?wait=5", as: "key", body: map[string]any{"phone": "15550100199", "message": "x"}, status: 400, code: "recipient_not_on_network"},
	})
	a.settled(t, "{edit}")
	a.settled(t, "{revoke}")
	// A failed message cannot be revoked; a revoked one not again.
	page := a.do(t, "GET", "/api/v1/messages?direction=out&to=15550100199", "key", nil, nil)
	failed := page.list("messages")[0].(map[string]any)["id"].(string)
	a.vars["failed"] = failed
	eventually(t, 5*time.Second, "the reply shown revoked", func() bool {
		return a.do(t, "GET", "/api/v1/messages/{reply}", "key", nil, nil).obj()["revoked"] == true
	})

	// A message still queued is cancelled: the sim takes 1.5 s per delivery and the session
	// waits 3 s between sends, so the second waits in the queue. (Without the gap the worker
	// may take both in one batch when they come together: the second is then in flight, and
	// its DELETE a revoke. That happened under CI's load.)
	a.run(t, "conversations_3", []call{
		{name: "revoke of a failed message", method: "DELETE", path: "/api/v1/messages/{failed}", as: "key", status: 409, code: "not_revocable"},
		{name: "revoke again", method: "DELETE", path: "/api/v1/messages/{reply}", as: "key", status: 409, code: "not_revocable"},
		{method: "POST", path: "/api/dev/sim/latency", body: map[string]any{"ms": 1500}, status: 200},
		{method: "PATCH", path: "/api/admin/sessions", as: "root", body: `{"id":"{sid}","pacing":{"minGapMs":3000}}`, status: 200},
		{method: "POST", path: "/api/v1/messages/send", as: "key", body: map[string]any{"phone": "15550100102", "message": "first"}, status: 200},
		{method: "POST", path: "/api/v1/messages/send", as: "key", body: map[string]any{"phone": "15550100103", "message": "second"}, status: 200, keep: map[string]string{"message_id": "queued"}},
		{name: "cancelled", method: "DELETE", path: "/api/v1/messages/{queued}", as: "key", status: 200, check: func(t testing.TB, r res) {
			if r.str("status") != "cancelled" || r.str("type") != "cancel" || r.str("message_id") != a.vars["queued"] {
				t.Fatalf("cancel answered %s", r.body)
			}
		}},
		{name: "cancelled again", method: "DELETE", path: "/api/v1/messages/{queued}", as: "key", status: 200},
		{method: "POST", path: "/api/dev/sim/latency", body: map[string]any{"ms": 0}, status: 200},
		{method: "PATCH", path: "/api/admin/sessions", as: "root", body: `{"id":"{sid}","pacing":{"minGapMs":0}}`, status: 200},
		{name: "the cancelled message", method: "GET", path: "/api/v1/messages/{queued}", as: "key", status: 200},
	})

	// The phone votes in the poll (twice: its second vote replaces its first), writes and is
	// read, reacts, edits.
	vote := func(from string, options ...string) {
		b, _ := json.Marshal(map[string]any{"sessionId": a.vars["sid"], "from": from, "type": "poll_vote", "messageId": a.vars["poll"], "options": options})
		if r := a.do(t, "POST", "/api/dev/sim/inbound", "", nil, string(b)); r.status != 200 {
			t.Fatalf("vote: %d %s", r.status, r.body)
		}
	}
	vote("15550100101", "Yes")
	vote("15550100101", "No")
	eventually(t, 5*time.Second, "the changed vote counted", func() bool {
		r := a.do(t, "GET", "/api/v1/messages/{poll}/votes", "key", nil, nil)
		return strings.Contains(string(r.body), `{"name":"Yes","count":0,"voters":[]}`) && strings.Contains(string(r.body), `{"name":"No","count":1,"voters":["15550100101"]}`)
	})
	a.run(t, "conversations_4", []call{
		{name: "votes", method: "GET", path: "/api/v1/messages/{poll}/votes", as: "key", status: 200},
		{name: "votes of a text", method: "GET", path: "/api/v1/messages/{text}/votes", as: "key", status: 404, code: "message_not_found"},
		{name: "a bad vote", method: "POST", path: "/api/dev/sim/inbound", body: `{"sessionId":"{sid}","from":"15550100101","type":"poll_vote","messageId":"{poll}","options":["Maybe"]}`, status: 400, code: "validation_failed"},
		{name: "a vote by who never got the poll", method: "POST", path: "/api/dev/sim/inbound", body: `{"sessionId":"{sid}","from":"15550100104","type":"poll_vote","messageId":"{poll}","options":["Yes"]}`, status: 404, code: "message_not_found"},
		{name: "the phone writes", method: "POST", path: "/api/dev/sim/inbound", body: `{"sessionId":"{sid}","from":"15550100101","text":"thanks!","replyTo":"{text}"}`, status: 200, keep: map[string]string{"id": "in"}},
	})
	eventually(t, 5*time.Second, "the incoming message kept", func() bool {
		return strings.Contains(string(a.do(t, "GET", "/api/v1/messages?direction=in", "key", nil, nil).body), a.vars["in"])
	})
	a.run(t, "conversations_5", []call{
		{name: "read", method: "POST", path: "/api/v1/messages/{in}/read", as: "key", status: 200},
		{name: "read of nothing", method: "POST", path: "/api/v1/messages/nope/read", as: "key", status: 404, code: "message_not_found"},
		{name: "read by the phone", method: "GET", path: "/api/dev/sim/read?from=15550100101", status: 200, check: func(t testing.TB, r res) {
			if l := r.list("read"); len(l) != 1 || l[0] != a.vars["in"] {
				t.Fatalf("read marks: %s", r.body)
			}
		}},
		{name: "reaction to the incoming message", method: "POST", path: "/api/v1/messages/send", as: "key", body: `{"type":"reaction","messageId":"{in}","emoji":"❤️"}`, status: 200},
		{method: "POST", path: "/api/dev/sim/inbound", body: `{"sessionId":"{sid}","from":"15550100101","type":"reaction","messageId":"{text}","emoji":"🙏"}`, status: 200},
		{method: "POST", path: "/api/dev/sim/inbound", body: `{"sessionId":"{sid}","from":"15550100101","type":"edit","messageId":"{in}","text":"thanks a lot!"}`, status: 200},
		{name: "an edit of another's message", method: "POST", path: "/api/dev/sim/inbound", body: `{"sessionId":"{sid}","from":"15550100104","type":"edit","messageId":"{in}","text":"x"}`, status: 404, code: "message_not_found"},
	})
	eventually(t, 5*time.Second, "the reaction and the edit noted", func() bool {
		r := string(a.do(t, "GET", "/api/v1/messages?to=15550100101&from=15550100101", "key", nil, nil).body)
		return strings.Contains(r, `"emoji":"🙏"`) && strings.Contains(r, "thanks a lot!") && strings.Contains(r, `"emoji":"❤️"`)
	})
	a.run(t, "conversations_6", []call{
		// (Messages accepted in the same millisecond list in either order: no golden body.)
		{method: "GET", path: "/api/v1/messages?to=15550100101&from=15550100101&limit=20", as: "key", status: 200, check: func(t testing.TB, r res) {
			kinds := map[string]int{}
			for _, m := range r.list("messages") {
				m := m.(map[string]any)
				kinds[m["type"].(string)]++
				if m["direction"] == "in" && (m["edited"] != true || m["replyTo"] != a.vars["text"] || m["lid"] == nil) {
					t.Fatalf("the incoming reply: %v", m)
				}
				if m["type"] == "poll" && m["poll"] == nil {
					t.Fatalf("the poll without its results: %v", m)
				}
			}
			// Reactions, edits and revokes are shown on their messages, not listed.
			if kinds["reaction"] != 0 || kinds["edit"] != 0 || kinds["revoke"] != 0 || kinds["poll"] != 1 || kinds["text"] != 5 {
				t.Fatalf("the conversation lists %v", kinds)
			}
		}},
		{name: "the edited message", method: "GET", path: "/api/v1/messages/{text}", as: "key", status: 200},
		// The contact book and lookups.
		{name: "contacts", method: "GET", path: "/api/v1/contacts?limit=1", as: "key", status: 200, keep: map[string]string{"next": "cursor"}},
		{name: "contacts, next page", method: "GET", path: "/api/v1/contacts?limit=1&cursor={cursor}", as: "key", status: 200},
		{name: "contacts with a bad cursor", method: "GET", path: "/api/v1/contacts?cursor=%%%", as: "key", status: 400, code: "validation_failed"},
		{name: "check", method: "POST", path: "/api/v1/contacts/check", as: "key", body: map[string]any{"phones": []string{"+1 555 010 0101", "15550100199"}}, status: 200},
		{name: "check of nothing", method: "POST", path: "/api/v1/contacts/check", as: "key", body: map[string]any{"phones": []string{}}, status: 400, code: "validation_failed"},
		{name: "check of a bad number", method: "POST", path: "/api/v1/contacts/check", as: "key", body: map[string]any{"phones": []string{"12"}}, status: 400, code: "invalid_phone"},
		// Groups.
		{name: "group created", method: "POST", path: "/api/v1/groups", as: "key", body: map[string]any{"name": "Order 1001", "participants": []string{"+1 555 010 0101"}}, status: 201, keep: map[string]string{"id": "group"}},
		{name: "group with nobody", method: "POST", path: "/api/v1/groups", as: "key", body: map[string]any{"name": "Empty", "participants": []string{}}, status: 400, code: "validation_failed"},
		{name: "group with someone not on the network", method: "POST", path: "/api/v1/groups", as: "key", body: map[string]any{"name": "X", "participants": []string{"15550100199"}}, status: 400, code: "recipient_not_on_network"},
		{name: "groups", method: "GET", path: "/api/v1/groups", as: "key", status: 200},
		{name: "the dashboard's groups", method: "GET", path: "/api/client/groups", as: "alice", status: 200},
		{name: "participants changed", method: "POST", path: "/api/v1/groups/{group}/participants", as: "key", body: map[string]any{"add": []string{"15550100104"}, "remove": []string{"15550100101"}}, status: 200},
		{name: "participants of another group", method: "POST", path: "/api/v1/groups/120363000000000099/participants", as: "key", body: map[string]any{"add": []string{"15550100104"}}, status: 404, code: "group_not_found"},
		{name: "invite", method: "GET", path: "/api/v1/groups/{group}/invite", as: "key", status: 200},
		{name: "to the group", method: "POST", path: "/api/v1/messages/send", as: "key", body: `{"phone":"{group}","message":"stock is back"}`, status: 200, keep: map[string]string{"message_id": "groupmsg"}},
		{name: "the sim's groups", method: "GET", path: "/api/dev/sim/groups?sessionId={sid}", status: 200},
	})
	a.settled(t, "{groupmsg}")
	msgs := a.sim.Messages(a.vars["group"])
	if len(msgs) != 1 || msgs[0].Text != "stock is back" || msgs[0].Group != a.vars["group"] {
		t.Fatalf("the group got %+v", msgs)
	}
	to := a.sim.Messages("15550100101")
	var reply, reaction bool
	for _, d := range to {
		reply = reply || (d.ID == a.vars["reply"] && d.ReplyTo == a.vars["text"] && d.Quoted == "your order shipped" && d.Typing && d.Revoked)
		reaction = reaction || (d.Type == "reaction" && d.Target == a.vars["text"] && d.Emoji == "👍")
		if d.ID == a.vars["text"] && (!d.Edited || d.Text != "your order shipped today") {
			t.Fatalf("the edited text shows %+v", d)
		}
	}
	if !reply || !reaction {
		t.Fatalf("the phone shows %+v; want the reply (typing, revoked) and the reaction", to)
	}

	// The day's lookups: 200 numbers a session, then 429 until the UTC day ends.
	numbers := make([]string, 50)
	for i := range numbers {
		numbers[i] = "1555020" + strings.Repeat("0", 4-len(itoa(i))) + itoa(i)
	}
	for range 3 {
		if r := a.do(t, "POST", "/api/v1/contacts/check", "key", nil, map[string]any{"phones": numbers}); r.status != 200 {
			t.Fatalf("check: %d %s", r.status, r.body)
		}
	}
	a.run(t, "conversations_7", []call{
		{name: "check over the day's bound", method: "POST", path: "/api/v1/contacts/check", as: "key", body: map[string]any{"phones": numbers}, status: 429, code: "check_limit_reached", check: func(t testing.TB, r res) {
			if r.header.Get("Retry-After") == "" {
				t.Fatal("no Retry-After")
			}
		}},
		{name: "check of more than 50", method: "POST", path: "/api/v1/contacts/check", as: "key", body: map[string]any{"phones": append(numbers, numbers[0])}, status: 400, code: "validation_failed"},
	})
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }
