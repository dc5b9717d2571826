package main

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// simMessages returns what the sim delivered to a number.
// simDelivered waits until the sim has delivered at least n messages to to (a v1 send answers
// once the message is queued), then returns them.
func (tg *testGW) simDelivered(to string, n int) []map[string]any {
	tg.t.Helper()
	var got []map[string]any
	eventually(tg.t, 10*time.Second, fmt.Sprintf("%d messages delivered to %s", n, to), func() bool {
		got = tg.simMessages(to)
		return len(got) >= n
	})
	return got
}

func (tg *testGW) simMessages(to string) []map[string]any {
	tg.t.Helper()
	r := tg.do("GET", "/api/dev/sim/messages?to="+to, nil, nil)
	want(tg.t, r, 200, "")
	var out []map[string]any
	for _, m := range r.obj()["messages"].([]any) {
		out = append(out, m.(map[string]any))
	}
	return out
}

// sender is a linked user with an API key.
type sender struct {
	tok, key, session, phone string
}

// newSender signs uid in, links a session with phone and gives it a key with scopes (nil = all).
func (tg *testGW) newSender(admin, uid, phone string, scopes []string) sender {
	tg.t.Helper()
	tok := tg.newClient(uid)
	sid := tg.link(tok, phone)
	extra := map[string]any{}
	if scopes != nil {
		extra["scopes"] = scopes
	}
	return sender{tok: tok, key: tg.newKey(admin, uid, extra).str("rawKey"), session: sid, phone: phone}
}

func pngDataURI(t testing.TB, size int) string {
	img := image.NewRGBA(image.Rect(0, 0, size, size))
	for i := range img.Pix {
		img.Pix[i] = byte(i * 7)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b.Bytes())
}

func jpegBytes(t testing.TB) []byte {
	img := image.NewRGBA(image.Rect(0, 0, 8, 8))
	img.Set(1, 1, color.RGBA{R: 200, A: 255})
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func (tg *testGW) account(key string) map[string]any {
	tg.t.Helper()
	r := tg.do("GET", "/api/v1/account", keyAuth(key), nil)
	want(tg.t, r, 200, "")
	return r.obj()
}

func TestSendEveryKind(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)

	// v1 send with a number written with +, spaces and dashes.
	r := tg.do("POST", "/api/v1/messages/send", bearerAuth(s.key), map[string]any{"phone": "+1 555-010-0001", "message": "hello {name}", "type": "text"})
	want(t, r, 200, "")
	if o := r.obj(); o["success"] != true || o["to"] != "15550100001" || o["session"] != s.session || !strings.HasPrefix(r.str("message_id"), "3EB0") || r.str("timestamp") == "" {
		t.Fatalf("send response: %s", r.raw)
	}
	got := tg.simDelivered("15550100001", 1)
	if len(got) != 1 || got[0]["text"] != "hello {name}" || got[0]["type"] != "text" || got[0]["from"] != "447700900001" || got[0]["id"] != r.str("message_id") {
		t.Fatalf("delivered: %v", got)
	}
	// The message's status: sent, or delivered once the sim's receipt is in.
	var st resp
	eventually(t, 5*time.Second, "the message sent", func() bool {
		st = tg.do("GET", "/api/v1/messages/"+r.str("message_id"), keyAuth(s.key), nil)
		return st.str("status") == "sent" || st.str("status") == "delivered"
	})
	if want(t, st, 200, ""); st.str("to") != "15550100001" {
		t.Fatalf("message status: %s", st.raw)
	}

	// v1 send-image with a data URI.
	img := pngDataURI(t, 16)
	r = tg.do("POST", "/api/v1/messages/send-image", keyAuth(s.key), map[string]any{"to": "15550100002", "image": img, "caption": "look"})
	want(t, r, 200, "")
	got = tg.simDelivered("15550100002", 1)
	raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(img, "data:image/png;base64,"))
	if len(got) != 1 || got[0]["type"] != "image" || got[0]["caption"] != "look" || got[0]["fileName"] != "image.png" ||
		got[0]["mimeType"] != "image/png" || got[0]["bytes"] != float64(len(raw)) {
		t.Fatalf("image delivered: %v", got)
	}

	// Every kind from the dashboard.
	media := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/photo.jpg":
			w.Write(jpegBytes(t))
		case "/report.pdf":
			w.Write([]byte("%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj\n<<>>\nendobj\ntrailer\n<<>>\n%%EOF\n"))
		case "/clip.mp4":
			w.Write(append([]byte{0, 0, 0, 0x18, 'f', 't', 'y', 'p', 'm', 'p', '4', '2', 0, 0, 0, 0, 'm', 'p', '4', '2', 'i', 's', 'o', 'm'}, make([]byte, 64)...))
		case "/voice.ogg":
			w.Write(append([]byte("OggS\x00\x02"), make([]byte, 64)...))
		default:
			http.NotFound(w, r)
		}
	}))
	defer media.Close()
	tg.stop()
	tg.args = append(tg.args, "--media-allow-private")
	tg.start()
	s.tok = tg.token("alice", "")
	tg.waitStatus(s.tok, "CONNECTED")

	cases := []struct {
		body  map[string]any
		check func(m map[string]any) bool
	}{
		{map[string]any{"phone": "15550100010", "text": "hi"}, func(m map[string]any) bool { return m["type"] == "text" && m["text"] == "hi" }},
		{map[string]any{"phone": "15550100011", "type": "image", "fileUrl": media.URL + "/photo.jpg", "caption": "c1"},
			func(m map[string]any) bool {
				return m["type"] == "image" && m["mimeType"] == "image/jpeg" && m["caption"] == "c1"
			}},
		{map[string]any{"phone": "15550100012", "type": "video", "fileUrl": media.URL + "/clip.mp4", "caption": "c2"},
			func(m map[string]any) bool {
				return m["type"] == "video" && m["mimeType"] == "video/mp4" && m["caption"] == "c2"
			}},
		{map[string]any{"phone": "15550100013", "type": "audio", "fileUrl": media.URL + "/voice.ogg"},
			func(m map[string]any) bool {
				return m["type"] == "audio" && strings.HasPrefix(m["mimeType"].(string), "audio/")
			}},
		{map[string]any{"phone": "15550100014", "type": "document", "fileUrl": media.URL + "/report.pdf", "fileName": "Q3.pdf", "caption": "c3"},
			func(m map[string]any) bool {
				return m["type"] == "document" && m["fileName"] == "Q3.pdf" && m["mimeType"] == "application/pdf" && m["bytes"].(float64) > 10
			}},
		{map[string]any{"phone": "15550100015", "type": "location", "lat": 51.5, "lng": -0.12, "address": "London"},
			func(m map[string]any) bool {
				return m["type"] == "location" && m["lat"] == 51.5 && m["lng"] == -0.12 && m["address"] == "London"
			}},
		{map[string]any{"phone": "15550100018", "type": "location", "lat": 51.4779, "lng": 0, "name": "Greenwich"},
			func(m map[string]any) bool {
				lng, ok := m["lng"]
				return m["type"] == "location" && m["lat"] == 51.4779 && ok && lng == 0.0
			}},
		{map[string]any{"phone": "15550100016", "type": "contact", "contactName": "Bob", "contactPhone": "+44 7700 900555"},
			func(m map[string]any) bool {
				return m["type"] == "contact" && m["contactName"] == "Bob" && m["contactPhone"] == "447700900555"
			}},
	}
	for _, c := range cases {
		r := tg.do("POST", "/api/client/send", bearerAuth(s.tok), c.body)
		want(t, r, 200, "")
		if r.obj()["success"] != true {
			t.Fatalf("client send: %s", r.raw)
		}
		got := tg.simMessages(c.body["phone"].(string))
		if len(got) != 1 || !c.check(got[0]) {
			t.Fatalf("%v delivered as %v", c.body, got)
		}
	}
	want(t, tg.do("POST", "/api/client/templates/test", bearerAuth(s.tok), map[string]any{"phone": "15550100017", "text": "template"}), 200, "")
	if got := tg.simMessages("15550100017"); len(got) != 1 || got[0]["text"] != "template" {
		t.Fatalf("template test: %v", got)
	}
	// A message is counted once its outcome is durable, a moment after the answer.
	eventually(t, 5*time.Second, "messagesSent to reach 11", func() bool { return tg.account(s.key)["messagesSent"] == float64(11) })
	// The API shows a location's coordinate of 0 too.
	loc := tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": "15550100019", "type": "location", "lat": 0, "lng": 0})
	want(t, loc, 200, "")
	if m := tg.do("GET", "/api/v1/messages/"+loc.str("message_id"), keyAuth(s.key), nil).obj(); m["lat"] != 0.0 || m["lng"] != 0.0 {
		t.Fatalf("a location at 0, 0 reads %v", m)
	}
}

func TestSendBadInput(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	k := keyAuth(s.key)
	c := bearerAuth(s.tok)
	cases := []struct {
		name, path string
		a          auth
		body       any
		status     int
		code, text string
	}{
		{"bad phone", "/api/v1/messages/send", k, map[string]any{"phone": "12ab", "message": "x"}, 400, "invalid_phone", ""},
		{"short phone", "/api/v1/messages/send", k, map[string]any{"phone": "1234", "message": "x"}, 400, "invalid_phone", ""},
		{"no phone", "/api/v1/messages/send", k, map[string]any{"message": "x"}, 400, "validation_failed", "phone"},
		{"no message", "/api/v1/messages/send", k, map[string]any{"phone": "15550100001"}, 400, "validation_failed", "message"},
		{"message number", "/api/v1/messages/send", k, `{"phone":"15550100001","message":5}`, 400, "validation_failed", "message"},
		{"bad type", "/api/v1/messages/send", k, map[string]any{"phone": "15550100001", "message": "x", "type": "image"}, 400, "validation_failed", "type"},
		{"malformed", "/api/v1/messages/send", k, `{"phone"`, 400, "invalid_json", ""},
		{"national number", "/api/v1/messages/send", k, map[string]any{"phone": "0 555 010 0430", "message": "x"}, 400, "invalid_phone", "country code"},
		{"reaction of three emoji", "/api/v1/messages/send", k, map[string]any{"type": "reaction", "messageId": "3EB0AA", "emoji": "👍👍👍"}, 400, "validation_failed", "emoji"},
		{"reaction not an emoji", "/api/v1/messages/send", k, map[string]any{"type": "reaction", "messageId": "3EB0AA", "emoji": "<b>"}, 400, "validation_failed", "emoji"},
		{"wait NaN", "/api/v1/messages/send?wait=NaN", k, map[string]any{"phone": "15550100001", "message": "x"}, 400, "validation_failed", "wait"},
		{"contact name too long", "/api/v1/messages/send", k, map[string]any{"phone": "15550100001", "type": "contact", "contactName": strings.Repeat("n", 1025), "contactPhone": "15550100002"}, 400, "validation_failed", "contactName"},
		{"address too long", "/api/client/send", c, map[string]any{"phone": "15550100001", "type": "location", "lat": 1, "lng": 1, "address": strings.Repeat("a", 1025)}, 400, "validation_failed", "address"},
		{"image no to", "/api/v1/messages/send-image", k, map[string]any{"image": "x"}, 400, "validation_failed", "to"},
		{"image no image", "/api/v1/messages/send-image", k, map[string]any{"to": "15550100001"}, 400, "validation_failed", "image"},
		{"image not a ref", "/api/v1/messages/send-image", k, map[string]any{"to": "15550100001", "image": "hello"}, 400, "invalid_media", ""},
		{"client no text", "/api/client/send", c, map[string]any{"phone": "15550100001"}, 400, "validation_failed", "text"},
		{"client no fileUrl", "/api/client/send", c, map[string]any{"phone": "15550100001", "type": "video"}, 400, "validation_failed", "fileUrl"},
		{"client no lat", "/api/client/send", c, map[string]any{"phone": "15550100001", "type": "location", "lng": 1}, 400, "validation_failed", "lat"},
		{"client no lng", "/api/client/send", c, map[string]any{"phone": "15550100001", "type": "location", "lat": 1}, 400, "validation_failed", "lng"},
		{"client lat string", "/api/client/send", c, `{"phone":"15550100001","type":"location","lat":"north","lng":1}`, 400, "validation_failed", "lat"},
		{"client no contactName", "/api/client/send", c, map[string]any{"phone": "15550100001", "type": "contact", "contactPhone": "15550100002"}, 400, "validation_failed", "contactName"},
		{"client no contactPhone", "/api/client/send", c, map[string]any{"phone": "15550100001", "type": "contact", "contactName": "B"}, 400, "validation_failed", "contactPhone"},
		{"client bad type", "/api/client/send", c, map[string]any{"phone": "15550100001", "type": "sticker"}, 400, "validation_failed", "type"},
		{"client bad phone", "/api/client/send", c, map[string]any{"phone": "x", "text": "t"}, 400, "invalid_phone", ""},
		{"template no text", "/api/client/templates/test", c, map[string]any{"phone": "15550100001"}, 400, "validation_failed", "text"},
		{"unknown message id", "/api/v1/messages/3EB0NOPE", k, nil, 404, "message_not_found", ""},
	}
	for _, cs := range cases {
		t.Run(cs.name, func(t *testing.T) {
			tg := tg.with(t)
			method := "POST"
			if cs.body == nil {
				method = "GET"
			}
			r := tg.do(method, cs.path, cs.a, cs.body)
			want(t, r, cs.status, cs.code)
			if !strings.Contains(r.str("error"), cs.text) {
				t.Fatalf("error %q does not name %q", r.str("error"), cs.text)
			}
		})
	}
	if a := tg.account(s.key); a["messagesSent"] != float64(0) {
		t.Fatalf("bad input sent messages: %v", a)
	}
}

func TestSendScopeOwnershipAndState(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	admin := tg.token("root", "admin")
	alice := tg.newSender(admin, "alice", "447700900001", []string{"send_media"})
	bob := tg.newSender(admin, "bob", "447700900002", nil)

	want(t, tg.do("POST", "/api/v1/messages/send", keyAuth(alice.key), map[string]any{"phone": "15550100001", "message": "x"}), 403, "insufficient_scope")
	textOnly := tg.newKey(admin, "bob", map[string]any{"scopes": []string{"send_text"}}).str("rawKey")
	want(t, tg.do("POST", "/api/v1/messages/send-image", keyAuth(textOnly), map[string]any{"to": "15550100001", "image": pngDataURI(t, 4)}), 403, "insufficient_scope")
	// Another user's session.
	want(t, tg.do("POST", "/api/v1/messages/send-image", keyAuth(alice.key), map[string]any{"to": "15550100001", "image": pngDataURI(t, 4), "session_id": bob.session}), 403, "forbidden")
	want(t, tg.do("POST", "/api/v1/messages/send-image", keyAuth(alice.key), map[string]any{"to": "15550100001", "image": pngDataURI(t, 4), "session_id": alice.session}), 200, "")
	// Another user's message id.
	r := tg.do("POST", "/api/v1/messages/send", keyAuth(bob.key), map[string]any{"phone": "15550100001", "message": "x"})
	want(t, r, 200, "")
	want(t, tg.do("GET", "/api/v1/messages/"+r.str("message_id"), keyAuth(alice.key), nil), 404, "message_not_found")

	// An unlinked session.
	carol := tg.newClient("carol")
	ck := tg.newKey(admin, "carol", nil).str("rawKey")
	want(t, tg.do("POST", "/api/v1/messages/send", keyAuth(ck), map[string]any{"phone": "15550100001", "message": "x"}), 409, "session_not_connected")
	want(t, tg.do("GET", "/api/client/qr", bearerAuth(carol), nil), 200, "")
	want(t, tg.do("POST", "/api/v1/messages/send", keyAuth(ck), map[string]any{"phone": "15550100001", "message": "x"}), 409, "session_not_connected")
	want(t, tg.do("POST", "/api/client/send", bearerAuth(carol), map[string]any{"phone": "15550100001", "text": "x"}), 409, "session_not_connected")

	// An unregistered number: an error once the caller waits for the outcome, and
	// messagesSent unchanged.
	want(t, tg.do("POST", "/api/dev/sim/unregistered", nil, map[string]any{"numbers": []string{"15550109999"}}), 200, "")
	// Bob's one message above is counted once its outcome's record lands, which can trail it.
	eventually(t, 5*time.Second, "bob's first message counted", func() bool { return tg.account(bob.key)["messagesSent"] == float64(1) })
	before := tg.account(bob.key)["messagesSent"]
	r = tg.do("POST", "/api/v1/messages/send?wait=10", keyAuth(bob.key), map[string]any{"phone": "15550109999", "message": "x"})
	want(t, r, 400, "recipient_not_on_network")
	if after := tg.account(bob.key)["messagesSent"]; after != before {
		t.Fatalf("messagesSent %v → %v after a failed send", before, after)
	}
	if len(tg.simMessages("15550109999")) != 0 {
		t.Fatal("delivered to an unregistered number")
	}
}

func TestMonthlyAllowance(t *testing.T) {
	sideBySide(t)
	p := writePlans(t, 0) // free: no daily cap, 100 messages a month
	tg := startGW(t, "--plans", p)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	for i := 0; i < 90; i++ {
		want(t, tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": fmt.Sprintf("155501%05d", i), "message": "x"}), 200, "")
	}
	// Accepted at once, counted in messagesSent once the network acknowledged each.
	var a map[string]any
	eventually(t, 10*time.Second, "90 messages sent", func() bool {
		a = tg.account(s.key)
		return a["messagesSent"] == float64(90)
	})
	if a["monthly_limit"] != float64(100) || a["remaining_month"] != float64(10) {
		t.Fatalf("account: %v", a)
	}
	// 25 concurrent sends against 10 left: exactly 10 succeed.
	var mu sync.Mutex
	statuses := map[int]int{}
	var wg sync.WaitGroup
	for i := 0; i < 25; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": fmt.Sprintf("155502%05d", i), "message": "x"})
			if r.status == 429 && (r.str("code") != "quota_exceeded" || r.header.Get("Retry-After") == "") {
				t.Errorf("429: %v %s", r.header, r.raw)
			}
			mu.Lock()
			statuses[r.status]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if statuses[200] != 10 || statuses[429] != 15 {
		t.Fatalf("statuses %v, want 10×200 and 15×429", statuses)
	}
	want(t, tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": "15550300000", "message": "x"}), 429, "quota_exceeded")
	tg.restart()
	eventually(t, 10*time.Second, "100 sent after the restart", func() bool {
		a = tg.account(s.key)
		return a["messagesSent"] == float64(100) && a["remaining_month"] == float64(0)
	})
}

func TestSendMediaLimits(t *testing.T) {
	sideBySide(t)
	const capBytes = 4096
	tg := startGW(t, "--media-max-bytes", fmt.Sprint(capBytes))
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	send := func(image string) resp {
		return tg.do("POST", "/api/v1/messages/send-image", keyAuth(s.key), map[string]any{"to": "15550100001", "image": image})
	}
	want(t, send(pngDataURI(t, 4)), 200, "")
	want(t, send("data:image/jpeg;base64,"+base64.StdEncoding.EncodeToString(jpegBytes(t))), 200, "")
	want(t, send("data:text/plain;base64,"+base64.StdEncoding.EncodeToString([]byte("just some text, not an image"))), 415, "unsupported_media_type")
	// Exactly the cap passes; one byte over is refused.
	exact := append(jpegBytes(t), make([]byte, capBytes)...)[:capBytes]
	want(t, send("data:image/jpeg;base64,"+base64.StdEncoding.EncodeToString(exact)), 200, "")
	over := append(exact, 0)
	want(t, send("data:image/jpeg;base64,"+base64.StdEncoding.EncodeToString(over)), 413, "media_too_large")

	// A URL on loopback is refused by default...
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write(jpegBytes(t)) }))
	defer srv.Close()
	want(t, send(srv.URL+"/a.jpg"), 400, "media_url_blocked")
	// ...and accepted with --media-allow-private.
	tg.stop()
	tg.args = append(tg.args, "--media-allow-private")
	tg.start()
	tg.waitStatus(tg.token("alice", ""), "CONNECTED")
	want(t, send(srv.URL+"/a.jpg"), 200, "")
	eventually(t, 10*time.Second, "4 deliveries", func() bool { return len(tg.simMessages("15550100001")) == 4 })
}

// Media up to --media-max-bytes (16 MiB by default) is accepted and delivered whole, on
// whichever outbox the gateway picks (its log by default, where the record's base64 of 15 MiB
// was over the log's largest record and answered 503 for ever).
func TestSendMediaNearTheLimit(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	const size = 15 << 20
	png, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(pngDataURI(t, 4), "data:image/png;base64,"))
	if err != nil {
		t.Fatal(err)
	}
	img := append(png, make([]byte, size-len(png))...)
	for i := len(png); i < size; i++ {
		img[i] = byte(i*31 + i>>13) // not all zeros: nothing along the way may shrink it
	}
	r := tg.do("POST", "/api/v1/messages/send-image", keyAuth(s.key), map[string]any{"to": "15550100021",
		"image": "data:image/png;base64," + base64.StdEncoding.EncodeToString(img)})
	want(t, r, 200, "")
	id := r.str("message_id")
	var got []map[string]any
	eventually(t, 20*time.Second, "the 15 MiB image delivered", func() bool {
		got = tg.simMessages("15550100021")
		return len(got) > 0
	})
	if len(got) != 1 || got[0]["bytes"] != float64(size) || got[0]["type"] != "image" {
		t.Fatalf("delivered %v, want one image of %d bytes", got, size)
	}
	// Its status reads as any message's once sent (its media is no longer kept).
	eventually(t, 10*time.Second, "the image's status", func() bool {
		m := tg.do("GET", "/api/v1/messages/"+id, keyAuth(s.key), nil)
		return m.status == 200 && (m.str("status") == "sent" || m.str("status") == "delivered")
	})
}

func TestIdempotencyKey(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	a := keyAuth(s.key)
	a["Idempotency-Key"] = "order-1001"
	body := map[string]any{"phone": "15550100001", "message": "once"}
	r1 := tg.do("POST", "/api/v1/messages/send", a, body)
	want(t, r1, 200, "")
	r2 := tg.do("POST", "/api/v1/messages/send", a, body)
	want(t, r2, 200, "")
	if r1.str("message_id") != r2.str("message_id") || r2.header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay: %s vs %s (%v)", r1.raw, r2.raw, r2.header)
	}
	// The same key with another body is refused; another key sends again.
	want(t, tg.do("POST", "/api/v1/messages/send", a, map[string]any{"phone": "15550100001", "message": "other"}), 409, "idempotency_key_reused")
	a["Idempotency-Key"] = "order-1002"
	want(t, tg.do("POST", "/api/v1/messages/send", a, body), 200, "")
	// Kept across a restart.
	tg.restart()
	a["Idempotency-Key"] = "order-1001"
	if r3 := tg.do("POST", "/api/v1/messages/send", a, body); r3.str("message_id") != r1.str("message_id") {
		t.Fatalf("after restart: %s", r3.raw)
	}
	if got := tg.simMessages("15550100001"); len(got) != 2 {
		t.Fatalf("deliveries %d, want 2", len(got))
	}
}

// Network I/O never blocks a session actor: while one session's send waits on a slow network,
// every one of 1,000 linked sessions answers its status at once.
func TestThousandSessionsAnswerWhileASendIsHeld(t *testing.T) {
	if testing.Short() {
		t.Skip("1,000 sessions")
	}
	tg := startGW(t, "--sim-autopair", "1ms")
	admin := tg.token("root", "admin")
	const n = 1000
	toks := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			toks[i] = tg.token(fmt.Sprintf("user%04d", i), "")
			want(t, tg.do("GET", "/api/client/qr", bearerAuth(toks[i]), nil), 200, "")
		}()
	}
	wg.Wait()
	for i := 0; i < n; i++ {
		tg.waitStatus(toks[i], "CONNECTED")
	}
	key := tg.newKey(admin, "user0000", nil).str("rawKey")
	want(t, tg.do("POST", "/api/dev/sim/latency", nil, map[string]any{"ms": 8000}), 200, "")
	held := make(chan resp, 1)
	go func() {
		held <- tg.do("POST", "/api/v1/messages/send?wait=30", keyAuth(key), map[string]any{"phone": "15550100001", "message": "slow"})
	}()
	eventually(t, 5*time.Second, "the send to be in flight", func() bool {
		return bytes.Contains(tg.do("GET", "/metrics", nil, nil).raw, []byte("gateway_outbox_pending 1"))
	})
	var slowest time.Duration
	for i := 0; i < n; i++ {
		start := time.Now()
		if st := tg.status(toks[i]); st["status"] != "CONNECTED" {
			t.Fatalf("session %d: %v", i, st)
		}
		slowest = max(slowest, time.Since(start))
	}
	if slowest > time.Second {
		t.Fatalf("the slowest status call took %v while a send was held", slowest)
	}
	select {
	case <-held:
		t.Fatal("the held send finished before the status calls")
	default:
	}
	if r := <-held; r.status != 200 {
		t.Fatalf("held send: %d %s", r.status, r.raw)
	}
}
