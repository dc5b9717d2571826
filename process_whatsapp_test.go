package main

// The gateway process on WhatsApp: a test build (-tags fakewa, node/fakewa.go) reaches the fake
// WhatsApp server of this test process, with the device store on a throwaway PostgreSQL
// (`--whatsapp-store postgres://`): link by pair code, send, kill -9, restart, send again.

import (
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.mau.fi/whatsmeow/proto/waE2E"

	"github.com/gateway/gateway/ecom/ecomtest"
	"github.com/gateway/gateway/internal/pgtest"
	"github.com/gateway/gateway/network/whatsapp/fakewa"
)

// fakeWABinary is built with -trimpath as the plain one is, so it recompiles only what its tag
// changes (without it, every package again: about a minute on a clean cache).
var fakeWABinary = builtBinary{flags: []string{"-trimpath", "-tags", "fakewa"}}

// gatewayFakeWABinary builds the gateway with the fakewa hook once per test run.
func gatewayFakeWABinary(t testing.TB) string {
	t.Helper()
	return fakeWABinary.get(t)
}

// startFakeWAProc starts the fakewa build of the gateway on network whatsapp against srv.
func startFakeWAProc(t *testing.T, srv *fakewa.Server, data string, args ...string) *proc {
	t.Helper()
	cert := filepath.Join(t.TempDir(), "fakewa.pem")
	if err := os.WriteFile(cert, srv.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("GATEWAY_TEST_FAKEWA_ADDR", srv.Addr())
	t.Setenv("GATEWAY_TEST_FAKEWA_CERT", cert)
	base := []string{"--network", "whatsapp", "--boot-window", "0",
		"--pace-min-gap", "0", "--pace-jitter", "0", "--pace-per-minute", "0", "--pace-new-contacts", "0"}
	return startProcBin(t, gatewayFakeWABinary(t), data, append(base, args...)...)
}

func TestWhatsAppProcessOnPostgres(t *testing.T) {
	pg := pgtest.Start(t)
	store := pg.CreateDB(t)
	srv, err := fakewa.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	const phone, customer = "15550001111", "15550002222"
	srv.AddAccount(customer)
	data := t.TempDir()
	p := startFakeWAProc(t, srv, data, "--whatsapp-store", store)
	tg := p.gw(t, data)
	admin := tg.token("root", "admin")
	alice := tg.newClient("alice")

	if st := pairOnFake(t, srv, tg, alice, phone); st["phone"] != phone {
		t.Fatalf("status %v", st)
	}
	key := tg.newKey(admin, "alice", nil).str("rawKey")
	sent := func(text string) {
		t.Helper()
		r := tg.do("POST", "/api/v1/messages/send", bearerAuth(key), map[string]any{"phone": customer, "message": text, "type": "text"})
		want(t, r, 200, "")
		id := r.str("message_id")
		eventually(t, 20*time.Second, "the message at the fake server", func() bool {
			for _, m := range srv.Messages() {
				if m.ID == id && m.From == phone && m.Error == 0 {
					return true
				}
			}
			return false
		})
	}
	sent("before the crash")
	// The library's age, from the binary's build information (the pin's commit date).
	m := regexp.MustCompile(`(?m)^gateway_network_library_age_days\{library="go.mau.fi/whatsmeow",version="(v0\.0\.0-\d{14}-[0-9a-f]{12})"\} (\S+)$`).
		FindStringSubmatch(string(tg.do("GET", "/metrics", nil, nil).raw))
	if m == nil {
		t.Fatal("no gateway_network_library_age_days on /metrics")
	}
	if age, err := strconv.ParseFloat(m[2], 64); err != nil || age < 1 {
		t.Fatalf("library age %q days (%s)", m[2], m[1])
	}
	if _, err := os.Stat(filepath.Join(data, "whatsapp.db")); !os.IsNotExist(err) {
		t.Fatalf("a SQLite device store was made in the data directory with --whatsapp-store: %v", err)
	}

	// A voice note WhatsApp cannot play (WAV) is refused at accept without --ffmpeg.
	voice := map[string]any{"phone": customer, "type": "audio", "fileUrl": "data:audio/wav;base64," + base64.StdEncoding.EncodeToString(wav())}
	want(t, tg.do("POST", "/api/client/send", bearerAuth(alice), voice), 415, "unsupported_media_type")

	// The customer writes four messages; the gateway is killed (-9) the moment the server has
	// the first one's ack (a message is acked only once kept). After the restart every one is in
	// the history once: the acked one kept before its ack, the others delivered again by the
	// server at the login (never acked by the dead process).
	var killed atomic.Bool
	gw := p.cmd.Process
	srv.OnAck(func(class, _ string) {
		if class == "message" && killed.CompareAndSwap(false, true) {
			_ = gw.Signal(syscall.SIGKILL)
		}
	})
	var asked []string
	for i := range 4 {
		id, err := srv.SendText(customer, phone, fmt.Sprintf("where is order %d?", 1001+i))
		if err != nil {
			break // the process is gone: the server holds what it wrote for the next login
		}
		asked = append(asked, id)
	}
	eventually(t, 20*time.Second, "the first message's ack, and the kill", killed.Load)
	srv.OnAck(nil)

	// kill -9 (done above): the device, its keys and its lock live in PostgreSQL; the restarted
	// process takes the lock again (the dead one's went with its connection) and reconnects.
	// With --ffmpeg the WAV is accepted and goes out as an Ogg/Opus voice note.
	p.kill9(t)
	ffmpeg, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Fatalf("ffmpeg not found (apt-get install ffmpeg; .ci/run installs it): %v", err)
	}
	p = startFakeWAProc(t, srv, data, "--whatsapp-store", store, "--ffmpeg", ffmpeg)
	tg = p.gw(t, data)
	tg.waitStatus(alice, "CONNECTED")
	eventually(t, 20*time.Second, "every message the customer wrote in the history, once", func() bool {
		items, _ := tg.historyPage(t, "/api/client/messages?direction=in&limit=200", bearerAuth(alice)) // not the key's daily cap
		seen := map[any]int{}
		for _, it := range items {
			seen[it["id"]]++
		}
		for _, id := range asked {
			if seen[id] != 1 {
				return false
			}
		}
		return len(asked) > 0 && len(seen) == len(items)
	})
	eventually(t, 20*time.Second, "nothing left unacked on the server", func() bool { return len(srv.Unacked(phone)) == 0 })
	sent("after the crash")
	r := tg.do("POST", "/api/client/send", bearerAuth(alice), voice)
	want(t, r, 200, "")
	eventually(t, 20*time.Second, "the voice note at the fake server", func() bool {
		for _, m := range srv.Messages() {
			if m.MediaType == "ptt" && m.Error == 0 {
				return true
			}
		}
		return false
	})
	if n := srv.Online(phone); n != 1 {
		t.Fatalf("%d connections of the device, want 1", n)
	}
}

// Conversations on WhatsApp, through the real binary and the fake server's phones (which decrypt
// what the device sends them and encrypt what they send it, as whatsmeow's source does): a poll
// and its votes (encrypted with the poll's message secret, decrypted and counted by the gateway,
// one voter changing its vote), a message from a contact known by its LID only (carried with its
// phone, from the device's LID map), a reply quoting it, a reaction and its removal, an edit and
// a revoke (protocol messages naming the message), a group and a message to it; a store order's
// confirmation asked as a poll, voted on by a customer known by its LID only, and written back to
// the fake Shopify (the store loop end to end on the real adapter).
func TestWhatsAppConversationsProcess(t *testing.T) {
	srv, err := fakewa.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	shop := ecomtest.New()
	t.Cleanup(shop.Close)
	const phone, customer, other = "15550001111", "15550002222", "15550003333"
	srv.AddAccount(customer, other)
	data := t.TempDir()
	p := startFakeWAProc(t, srv, data, "--ecom-api-base", shop.APIBase(), "--public-url", testPublicURL)
	tg := p.gw(t, data)
	admin := tg.token("root", "admin")
	alice := tg.newClient("alice")
	pairOnFake(t, srv, tg, alice, phone)
	key := keyAuth(tg.newKey(admin, "alice", nil).str("rawKey"))
	send := func(body map[string]any) string {
		t.Helper()
		r := tg.do("POST", "/api/v1/messages/send", key, body)
		want(t, r, 200, "")
		return r.str("message_id")
	}
	// received waits for the phone of to to read message id, and returns it.
	received := func(to, id string) *waE2E.Message {
		t.Helper()
		var m *waE2E.Message
		eventually(t, 20*time.Second, "message "+id+" read by "+to, func() bool {
			for _, r := range srv.Received(to) {
				if r.ID == id {
					m = r.Message
					return true
				}
			}
			return false
		})
		return m
	}

	// A group of the two; a poll in it, two voters, the first changing its vote.
	g := tg.do("POST", "/api/v1/groups", key, map[string]any{"name": "Order 1001", "participants": []string{customer, other}})
	want(t, g, 201, "")
	group := g.str("id")
	if _, members, ok := srv.Group(group); !ok || len(members) != 3 || !members[phone] {
		t.Fatalf("the server's group %s: %v", group, members)
	}
	poll := send(map[string]any{"phone": group, "type": "poll", "question": "Confirm order 1001?", "options": []string{"Yes", "No"}})
	if q := received(group, poll).GetPollCreationMessage(); q.GetName() != "Confirm order 1001?" || len(q.GetOptions()) != 2 || q.GetSelectableOptionsCount() != 1 {
		t.Fatalf("the group read the poll as %v", q)
	}
	for _, v := range []struct{ from, option string }{{customer, "Yes"}, {other, "No"}, {customer, "No"}} {
		if _, err := srv.Do(v.from, phone, fakewa.Act{Type: "poll_vote", MessageID: poll, Options: []string{v.option}, Group: group}); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			p.mu.Lock()
			t.Log(p.stderr.String())
			p.mu.Unlock()
		}
	})
	eventually(t, 20*time.Second, "two votes for No", func() bool {
		r := tg.do("GET", "/api/v1/messages/"+poll+"/votes", key, nil)
		return strings.Contains(string(r.raw), `{"name":"No","count":2,`) && strings.Contains(string(r.raw), `{"name":"Yes","count":0,`)
	})

	// The customer writes known by its LID only: the message carries its phone.
	in, err := srv.Do(customer, phone, fakewa.Act{Text: "is it shipped?", HidePN: true})
	if err != nil {
		t.Fatal(err)
	}
	var item map[string]any
	eventually(t, 20*time.Second, "the message in the history", func() bool {
		items, _ := tg.historyPage(t, "/api/v1/messages?direction=in", key)
		for _, m := range items {
			if m["id"] == in {
				item = m
				return true
			}
		}
		return false
	})
	if item["from"] != customer || item["phone"] != customer || item["lid"] != srv.LID(customer) {
		t.Fatalf("a LID-only sender's message reads %v, want %s with its LID", item, customer)
	}

	// A reply quoting it, a reaction to it and its removal.
	reply := send(map[string]any{"phone": customer, "message": "yes, today", "replyTo": in})
	if ci := received(customer, reply).GetExtendedTextMessage().GetContextInfo(); ci.GetStanzaID() != in || ci.GetQuotedMessage().GetConversation() != "is it shipped?" {
		t.Fatalf("the reply's quote reads %v", ci)
	}
	for _, emoji := range []string{"👍", ""} {
		id := send(map[string]any{"type": "reaction", "messageId": in, "emoji": emoji})
		if rm := received(customer, id).GetReactionMessage(); rm.GetKey().GetID() != in || rm.GetText() != emoji || rm.GetKey().GetFromMe() {
			t.Fatalf("the reaction %q reads %v", emoji, rm)
		}
	}

	// An edit and a revoke of the reply.
	r := tg.do("POST", "/api/v1/messages/"+reply+"/edit", key, map[string]any{"message": "yes, this afternoon"})
	want(t, r, 200, "")
	pm := received(customer, r.str("message_id")).GetEditedMessage().GetMessage().GetProtocolMessage()
	if pm.GetType() != waE2E.ProtocolMessage_MESSAGE_EDIT || pm.GetKey().GetID() != reply || !pm.GetKey().GetFromMe() || pm.GetEditedMessage().GetConversation() != "yes, this afternoon" {
		t.Fatalf("the edit reads %v", pm)
	}
	r = tg.do("DELETE", "/api/v1/messages/"+reply, key, nil)
	want(t, r, 200, "")
	if pm := received(customer, r.str("message_id")).GetProtocolMessage(); pm.GetType() != waE2E.ProtocolMessage_REVOKE || pm.GetKey().GetID() != reply {
		t.Fatalf("the revoke reads %v", pm)
	}

	// A message to the group.
	msg := send(map[string]any{"phone": group, "message": "stock is back"})
	if m := received(group, msg); m.GetConversation() != "stock is back" {
		t.Fatalf("the group read %v", m)
	}

	// An order of alice's shop asks its confirmation as a poll; the customer votes no, known by its
	// LID only; the vote (decrypted with the poll's secret) cancels the order at the fake Shopify.
	shop.AddShop(aliceShop, "Alice Shop", aliceToken)
	want(t, tg.do("POST", "/api/ecom/manual-connect", bearerAuth(alice), map[string]any{"shop": aliceShop, "accessToken": aliceToken, "webhookSecret": hookSecret}), 200, "")
	tg.setConfirm(alice, "orders/create", map[string]any{"cancelOnNo": true, "followUpAfter": "0"})
	tg.shopifyOrder("orders/create", "wa-order", 3001, "+1 555-000-3333", nil)
	var poll3001 string
	eventually(t, 20*time.Second, "the order's poll read by the customer", func() bool {
		for _, r := range srv.Received(other) {
			if q := r.Message.GetPollCreationMessage(); strings.Contains(q.GetName(), "Please confirm your order #3001") && len(q.GetOptions()) == 2 {
				poll3001 = r.ID
				return true
			}
		}
		return false
	})
	if _, err := srv.Do(other, phone, fakewa.Act{Type: "poll_vote", MessageID: poll3001, Options: []string{"No, cancel"}, HidePN: true}); err != nil {
		t.Fatal(err)
	}
	o := fakeOrder(t, shop, aliceShop, 3001, "the order cancelled by the vote", func(o ecomtest.Order) bool { return o.Cancelled })
	if len(o.Tags) != 1 || o.Tags[0] != "cod-cancelled" || !strings.Contains(o.StaffNote, "voted") {
		t.Fatalf("the order at the shop: %+v", o)
	}
}

// wav is a second of a 440 Hz tone, 16-bit mono PCM at 16 kHz.
func wav() []byte {
	const rate, n = 16000, 16000
	b := make([]byte, 44+2*n)
	copy(b, "RIFF")
	binary.LittleEndian.PutUint32(b[4:], 36+2*n)
	copy(b[8:], "WAVEfmt ")
	binary.LittleEndian.PutUint32(b[16:], 16)
	binary.LittleEndian.PutUint16(b[20:], 1)
	binary.LittleEndian.PutUint16(b[22:], 1)
	binary.LittleEndian.PutUint32(b[24:], rate)
	binary.LittleEndian.PutUint32(b[28:], rate*2)
	binary.LittleEndian.PutUint16(b[32:], 2)
	binary.LittleEndian.PutUint16(b[34:], 16)
	copy(b[36:], "data")
	binary.LittleEndian.PutUint32(b[40:], 2*n)
	for i := range n {
		binary.LittleEndian.PutUint16(b[44+2*i:], uint16(int16(8000*math.Sin(2*math.Pi*440*float64(i)/rate))))
	}
	return b
}

// pairOnFake links user's session to phone on the fake server by pair code, and returns its
// status once CONNECTED.
func pairOnFake(t *testing.T, srv *fakewa.Server, tg *testGW, user, phone string) map[string]any {
	t.Helper()
	r := tg.do("POST", "/api/client/pair-code", bearerAuth(user), map[string]any{"phone": "+" + phone})
	want(t, r, 200, "")
	if err := srv.EnterCode(phone, r.str("code")); err != nil {
		t.Fatal(err)
	}
	return tg.waitStatus(user, "CONNECTED")
}
