package main

import (
	"bytes"
	"encoding/base64"
	"image/png"
	"regexp"
	"strings"
	"testing"
	"time"
)

var uuidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)

// status returns the caller's session status response.
func (tg *testGW) status(tok string) map[string]any {
	tg.t.Helper()
	r := tg.do("GET", "/api/client/status", bearerAuth(tok), nil)
	want(tg.t, r, 200, "")
	return r.obj()
}

// waitStatus polls the caller's session until it reports status.
func (tg *testGW) waitStatus(tok, status string) map[string]any {
	tg.t.Helper()
	var last map[string]any
	eventually(tg.t, 10*time.Second, "session status "+status, func() bool {
		last = tg.status(tok)
		return last["status"] == status
	})
	return last
}

// link creates the user's session through the QR route and scans it with phone.
func (tg *testGW) link(tok, phone string) string {
	tg.t.Helper()
	qr := tg.do("GET", "/api/client/qr", bearerAuth(tok), nil)
	want(tg.t, qr, 200, "")
	id := qr.str("sessionId")
	want(tg.t, tg.do("POST", "/api/dev/sim/scan", nil, map[string]any{"sessionId": id, "phone": phone}), 200, "")
	tg.waitStatus(tok, "CONNECTED")
	return id
}

func TestSessionLinkByQRLifecycle(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	alice := tg.newClient("alice")
	if st := tg.status(alice); st["status"] != "NOT_CREATED" || st["id"] != nil {
		t.Fatalf("before any session: %v", st)
	}

	qr := tg.do("GET", "/api/client/qr", bearerAuth(alice), nil)
	want(t, qr, 200, "")
	id := qr.str("sessionId")
	if !uuidRE.MatchString(id) {
		t.Fatalf("session id %q is not a UUID", id)
	}
	data, ok := strings.CutPrefix(qr.str("qr"), "data:image/png;base64,")
	if !ok {
		t.Fatalf("qr is not a PNG data URI: %.60s", qr.str("qr"))
	}
	raw, err := base64.StdEncoding.DecodeString(data)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil || img.Bounds().Dx() < 100 {
		t.Fatalf("QR PNG does not decode: %v", err)
	}
	if st := tg.status(alice); st["status"] != "SCAN_QR" || st["id"] != id {
		t.Fatalf("after qr: %v", st)
	}
	// Asking again shows the same session.
	if again := tg.do("GET", "/api/client/qr", bearerAuth(alice), nil); again.str("sessionId") != id {
		t.Fatalf("second qr made another session: %s", again.raw)
	}

	want(t, tg.do("POST", "/api/dev/sim/scan", nil, map[string]any{"sessionId": id, "phone": "+44 7700 900123"}), 200, "")
	st := tg.waitStatus(alice, "CONNECTED")
	if st["phone"] != "447700900123" {
		t.Fatalf("connected status: %v", st)
	}
	want(t, tg.do("GET", "/api/client/qr", bearerAuth(alice), nil), 409, "already_connected")
	want(t, tg.do("POST", "/api/dev/sim/scan", nil, map[string]any{"sessionId": id, "phone": "447700900123"}), 409, "")

	// A dropped link reconnects by itself.
	want(t, tg.do("POST", "/api/dev/sim/drop", nil, map[string]any{"sessionId": id}), 200, "")
	tg.waitStatus(alice, "DISCONNECTED")
	tg.waitStatus(alice, "CONNECTED")

	// Logged out from the phone: disconnected until started again, then a new QR.
	want(t, tg.do("POST", "/api/dev/sim/drop", nil, map[string]any{"sessionId": id, "logout": true}), 200, "")
	tg.waitStatus(alice, "DISCONNECTED")
	want(t, tg.do("POST", "/api/client/start", bearerAuth(alice), ""), 200, "")
	tg.waitStatus(alice, "SCAN_QR")
	want(t, tg.do("GET", "/api/client/qr", bearerAuth(alice), nil), 200, "")
	want(t, tg.do("POST", "/api/dev/sim/scan", nil, map[string]any{"sessionId": id, "phone": "447700900999"}), 200, "")
	if st := tg.waitStatus(alice, "CONNECTED"); st["phone"] != "447700900999" {
		t.Fatalf("relinked: %v", st)
	}
}

func TestSessionLinkByPairCode(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	bob := tg.newClient("bob")
	r := tg.do("POST", "/api/client/pair-code", bearerAuth(bob), map[string]any{"phone": "+1 (555) 010-2030"})
	want(t, r, 200, "")
	code, id := r.str("code"), r.str("sessionId")
	if len(code) != 8 || !uuidRE.MatchString(id) {
		t.Fatalf("pair-code response: %s", r.raw)
	}
	want(t, tg.do("POST", "/api/dev/sim/pair", nil, map[string]any{"sessionId": id, "code": "WRONG123"}), 400, "bad_code")
	want(t, tg.do("POST", "/api/dev/sim/pair", nil, map[string]any{"sessionId": id, "code": code}), 200, "")
	if st := tg.waitStatus(bob, "CONNECTED"); st["phone"] != "15550102030" {
		t.Fatalf("paired status: %v", st)
	}
	want(t, tg.do("POST", "/api/client/pair-code", bearerAuth(bob), map[string]any{"phone": "15550102030"}), 409, "already_connected")
	want(t, tg.do("POST", "/api/client/pair-code", bearerAuth(bob), map[string]any{"phone": "12"}), 400, "invalid_phone")
	want(t, tg.do("POST", "/api/client/pair-code", bearerAuth(bob), map[string]any{}), 400, "validation_failed")
	want(t, tg.do("POST", "/api/client/pair-code", bearerAuth(bob), `{"phone":`), 400, "invalid_json")
}

func TestAdminSessions(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	tg.newClient("alice")
	carol := tg.newClient("carol")

	c := tg.do("POST", "/api/admin/sessions/create", nil, map[string]any{"sessionName": "support line"})
	want(t, c, 200, "")
	s := c.obj()["session"].(map[string]any)
	if c.obj()["success"] != true || s["status"] != "created" || s["name"] != "support line" || !uuidRE.MatchString(s["id"].(string)) {
		t.Fatalf("create: %s", c.raw)
	}
	id := s["id"].(string)
	c2 := tg.do("POST", "/api/admin/sessions/create", nil, map[string]any{"sessionName": "sales", "assignToUserId": "carol"})
	want(t, c2, 200, "")
	id2 := c2.obj()["session"].(map[string]any)["id"].(string)
	// Carol's dashboard sees her assigned session (not started: DISCONNECTED).
	if st := tg.status(carol); st["id"] != id2 || st["status"] != "DISCONNECTED" {
		t.Fatalf("carol's status: %v", st)
	}

	want(t, tg.do("POST", "/api/admin/sessions/assign", nil, map[string]any{"sessionId": id, "userId": "alice"}), 200, "")
	list := tg.do("GET", "/api/admin/sessions", nil, nil)
	want(t, list, 200, "")
	byID := map[string]map[string]any{}
	for _, l := range list.list() {
		byID[l["id"].(string)] = l
	}
	first := byID[id]
	for _, f := range []string{"id", "name", "status", "phone", "assignedTo", "clientName", "createdAt", "lastActivity"} {
		if _, ok := first[f]; !ok {
			t.Fatalf("admin list lacks %s: %v", f, first)
		}
	}
	if first["assignedTo"] != "alice" || first["clientName"] != "Alice" || first["status"] != "created" || byID[id2]["assignedTo"] != "carol" {
		t.Fatalf("admin list: %s", list.raw)
	}

	// Unknown ids and bad input.
	want(t, tg.do("POST", "/api/admin/sessions/assign", nil, map[string]any{"sessionId": "nope", "userId": "alice"}), 404, "session_not_found")
	want(t, tg.do("POST", "/api/admin/sessions/assign", nil, map[string]any{"sessionId": id, "userId": "nobody"}), 404, "user_not_found")
	want(t, tg.do("POST", "/api/admin/sessions/create", nil, map[string]any{"sessionName": "x", "assignToUserId": "nobody"}), 404, "user_not_found")
	want(t, tg.do("POST", "/api/admin/sessions/create", nil, map[string]any{}), 400, "validation_failed")
	want(t, tg.do("POST", "/api/admin/sessions/create", nil, `{"sessionName": 3}`), 400, "validation_failed")
	want(t, tg.do("POST", "/api/admin/sessions/assign", nil, map[string]any{"sessionId": id}), 400, "validation_failed")
	want(t, tg.do("POST", "/api/admin/sessions/assign", nil, `nope`), 400, "invalid_json")

	// Assignments survive a restart.
	tg.restart()
	for _, l := range tg.do("GET", "/api/admin/sessions", nil, nil).list() {
		if l["id"] == id && l["assignedTo"] != "alice" {
			t.Fatalf("after restart: %v", l)
		}
	}
}

func TestLinkedSessionReconnectsAfterRestart(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	alice := tg.newClient("alice")
	id := tg.link(alice, "447700900123")
	tg.restart()
	alice = tg.token("alice", "")
	st := tg.waitStatus(alice, "CONNECTED")
	if st["id"] != id || st["phone"] != "447700900123" {
		t.Fatalf("after restart: %v", st)
	}
}

func TestInternalRoutesOutsideInternalCIDRs(t *testing.T) {
	sideBySide(t)
	tg := startGW(t, "--internal-cidrs", "10.0.0.0/8")
	admin := tg.token("root", "admin")
	client := tg.newClient("alice")
	routes := []route{
		{"GET", "/api/admin/sessions", nil},
		{"POST", "/api/admin/sessions/create", map[string]any{"sessionName": "x"}},
		{"POST", "/api/admin/sessions/assign", nil},
	}
	for _, r := range routes {
		want(t, tg.do(r.method, r.path, nil, r.body), 403, "internal_only")
		want(t, tg.do(r.method, r.path, bearerAuth(client), r.body), 403, "internal_only")
		want(t, tg.do(r.method, r.path, bearerAuth("garbage"), r.body), 401, "invalid_token")
	}
	want(t, tg.do("GET", "/api/admin/sessions", bearerAuth(admin), nil), 200, "")
	c := tg.do("POST", "/api/admin/sessions/create", bearerAuth(admin), map[string]any{"sessionName": "x"})
	want(t, c, 200, "")
	id := c.obj()["session"].(map[string]any)["id"]
	want(t, tg.do("POST", "/api/admin/sessions/assign", bearerAuth(admin), map[string]any{"sessionId": id, "userId": "alice"}), 200, "")
	// validate stays public everywhere.
	want(t, tg.do("POST", "/api/admin/apikeys/validate", nil, map[string]any{"rawKey": "x"}), 401, "")
}

// Unlinking: the user logs their session out; an admin reassigning a linked session logs the
// previous owner's device out first; an admin deletes a session.
func TestSessionLogoutReassignDelete(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	want(t, tg.do("POST", "/api/client/logout", bearerAuth(s.tok), nil), 200, "")
	if st := tg.status(s.tok); st["status"] != "DISCONNECTED" || st["phone"] != nil {
		t.Fatalf("after logout: %v", st)
	}
	want(t, tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": "15550100001", "message": "x"}), 409, "session_not_connected")
	// Linked again with a new scan.
	want(t, tg.do("GET", "/api/client/qr", bearerAuth(s.tok), nil), 200, "")
	want(t, tg.do("POST", "/api/dev/sim/scan", nil, map[string]any{"sessionId": s.session, "phone": "447700900001"}), 200, "")
	tg.waitStatus(s.tok, "CONNECTED")

	// Reassigned to bob: alice's phone is unlinked first, so bob cannot send as her.
	bob := tg.newClient("bob")
	want(t, tg.do("POST", "/api/admin/sessions/assign", bearerAuth(admin), map[string]any{"sessionId": s.session, "userId": "bob"}), 200, "")
	if st := tg.status(bob); st["status"] != "DISCONNECTED" || st["phone"] != nil {
		t.Fatalf("reassigned session: %v", st)
	}

	// Deleted: gone from the list, and the owner has no session.
	want(t, tg.do("DELETE", "/api/admin/sessions?id="+s.session, bearerAuth(bob), nil), 403, "forbidden")
	want(t, tg.do("DELETE", "/api/admin/sessions?id="+s.session, bearerAuth(admin), nil), 200, "")
	want(t, tg.do("DELETE", "/api/admin/sessions?id="+s.session, bearerAuth(admin), nil), 404, "session_not_found")
	for _, v := range tg.do("GET", "/api/admin/sessions", nil, nil).list() {
		if v["id"] == s.session {
			t.Fatal("a deleted session is still listed")
		}
	}
	if st := tg.status(bob); st["status"] != "NOT_CREATED" {
		t.Fatalf("after delete: %v", st)
	}
}
