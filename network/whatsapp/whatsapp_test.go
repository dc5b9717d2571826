package whatsapp

import (
	"bytes"
	"context"
	"errors"
	"image"
	"image/color"
	"image/png"
	"strings"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/network/whatsapp/fakewa"
)

const (
	phoneA = "15550001111" // the linked device's phone
	phoneB = "15550002222" // a recipient on the network
	phoneC = "15550003333" // a number not on the network
	phoneD = "15550004444" // another recipient on the network (added where needed)
)

func TestLinkByQRThenConnected(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s := h.open("s1")
	if _, ok := s.c.Paired(); ok {
		t.Fatal("new session reports paired")
	}
	s.connect()
	qr := s.expect("QRCode", isQR).(network.QRCode)
	// Today's format (whatsmeow 876de1e9): a wa.me link whose fragment is
	// ref,noise,identity,adv,platform.
	frag, ok := strings.CutPrefix(qr.Code, fakewa.QRPrefix)
	if n := len(strings.Split(frag, ",")); !ok || n != 5 {
		t.Fatalf("QR code %q: want %sref,noise,identity,adv,platform", qr.Code, fakewa.QRPrefix)
	}
	if err := h.srv.Scan(qr.Code, phoneA); err != nil {
		t.Fatal(err)
	}
	if p := s.expect("Paired", isPaired).(network.Paired); p.Phone != phoneA {
		t.Fatalf("Paired.Phone = %q", p.Phone)
	}
	if c := s.expect("Connected", isConnected).(network.Connected); c.Phone != phoneA {
		t.Fatalf("Connected.Phone = %q", c.Phone)
	}
	if phone, ok := s.c.Paired(); !ok || phone != phoneA {
		t.Fatalf("Paired() = %q, %v", phone, ok)
	}
	if devs := h.srv.Devices(phoneA); len(devs) != 1 {
		t.Fatalf("server lists devices %v, want one", devs)
	}
}

// The session table survives a restart: the session logs in again without a QR code.
func TestLinkSurvivesRestart(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.link(h.open("s1"), phoneA)
	h.reopen()
	s := h.open("s1")
	if phone, ok := s.c.Paired(); !ok || phone != phoneA {
		t.Fatalf("after restart Paired() = %q, %v", phone, ok)
	}
	s.connect()
	s.expect("Connected", isConnected)
	s.expectNone("QRCode", 0, isQR)

	// Another session of the same store is not linked.
	if _, ok := h.open("s2").c.Paired(); ok {
		t.Fatal("unrelated session reports paired")
	}
}

func TestSendTextAcknowledgedWithCallerID(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s := h.open("s1")
	h.link(s, phoneA)
	h.srv.AddAccount(phoneB)

	const id = "3EB0C0FFEE0123456789"
	r, err := s.c.Send(ctxT(t), domain.Message{ID: id, To: "+1 (555) 000-2222", Kind: domain.KindText, Text: "hello"})
	if err != nil {
		t.Fatal(err)
	}
	if r.ID != id || r.At.IsZero() {
		t.Fatalf("receipt = %+v, want id %s and a time", r, id)
	}
	// A DM goes to the recipient's LID, with the number as peer_recipient_pn (whatsmeow
	// 4f8f64e0, "send: always use LID for DMs").
	msgs := h.srv.Messages()
	if len(msgs) != 1 || msgs[0].ID != id || msgs[0].To != h.srv.LID(phoneB)+"@lid" ||
		msgs[0].RecipientPN != phoneB+"@s.whatsapp.net" || msgs[0].Type != "text" {
		t.Fatalf("server got %+v, want a text to %s@lid for %s", msgs, h.srv.LID(phoneB), phoneB)
	}

	// The recipient lookup is cached: a second send does not ask again.
	lookups := h.srv.Lookups()
	if _, err := s.c.Send(ctxT(t), domain.Message{ID: id + "2", To: phoneB, Kind: domain.KindText, Text: "again"}); err != nil {
		t.Fatal(err)
	}
	if h.srv.Lookups() != lookups {
		t.Fatalf("second send looked the number up again (%d → %d lookups)", lookups, h.srv.Lookups())
	}
	if ok, err := s.c.IsOnNetwork(ctxT(t), phoneB); err != nil || !ok {
		t.Fatalf("IsOnNetwork(%s) = %v, %v", phoneB, ok, err)
	}
}

func TestSendErrors(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s := h.open("s1")

	_, err := s.c.Send(ctxT(t), domain.Message{ID: "1", To: phoneB, Kind: domain.KindText, Text: "x"})
	if !errors.Is(err, domain.ErrNotConnected) {
		t.Fatalf("send before linking: %v, want ErrNotConnected", err)
	}

	h.link(s, phoneA)
	h.srv.AddAccount(phoneB)

	if ok, err := s.c.IsOnNetwork(ctxT(t), phoneC); err != nil || ok {
		t.Fatalf("IsOnNetwork(%s) = %v, %v; want false", phoneC, ok, err)
	}
	_, err = s.c.Send(ctxT(t), domain.Message{ID: "2", To: phoneC, Kind: domain.KindText, Text: "x"})
	if !errors.Is(err, network.ErrNotOnNetwork) {
		t.Fatalf("send to unknown number: %v, want ErrNotOnNetwork", err)
	}

	_, err = s.c.Send(ctxT(t), domain.Message{ID: "3", To: phoneB, Kind: "hologram"})
	if !errors.Is(err, network.ErrUnsupported) {
		t.Fatalf("send of a kind WhatsApp has not: %v, want ErrUnsupported", err)
	}

	h.srv.SetTimelock(phoneA, true)
	_, err = s.c.Send(ctxT(t), domain.Message{ID: "4", To: phoneB, Kind: domain.KindText, Text: "x"})
	if !errors.Is(err, network.ErrTimelock) {
		t.Fatalf("send under timelock: %v, want ErrTimelock", err)
	}
	if !strings.Contains(err.Error(), "463") {
		t.Fatalf("timelock error %q lacks the server code", err)
	}
}

func TestSendMediaUploads(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s := h.open("s1")
	h.link(s, phoneA)
	h.srv.AddAccount(phoneB)

	img := image.NewRGBA(image.Rect(0, 0, 320, 200))
	for i := range img.Pix {
		img.Pix[i] = 0x80
	}
	img.Set(3, 3, color.RGBA{R: 255, A: 255})
	var pngData bytes.Buffer
	if err := png.Encode(&pngData, img); err != nil {
		t.Fatal(err)
	}
	msgs := []domain.Message{
		{ID: "IMG1", To: phoneB, Kind: domain.KindImage, Data: pngData.Bytes(), MimeType: "image/png", Caption: "pic"},
		{ID: "DOC1", To: phoneB, Kind: domain.KindDocument, Data: []byte("%PDF-1.4 fake"), MimeType: "application/pdf", FileName: "invoice.pdf"},
		{ID: "LOC1", To: phoneB, Kind: domain.KindLocation, Lat: 52.52, Lng: 13.405, Address: "Berlin"},
		{ID: "VCF1", To: phoneB, Kind: domain.KindContact, ContactName: "Ada", ContactPhone: "+44 20 7946 0000"},
	}
	for _, m := range msgs {
		if r, err := s.c.Send(ctxT(t), m); err != nil || r.ID != m.ID {
			t.Fatalf("send %s: %+v, %v", m.Kind, r, err)
		}
	}
	ups := h.srv.Uploads()
	if len(ups) != 2 || ups[0].Type != "image" || ups[1].Type != "document" {
		t.Fatalf("uploads = %+v, want image then document", ups)
	}
	got := h.srv.Messages()
	want := []struct{ id, typ, media string }{
		{"IMG1", "media", "image"}, {"DOC1", "media", "document"}, {"LOC1", "text", ""}, {"VCF1", "media", "vcard"},
	}
	if len(got) != len(want) {
		t.Fatalf("server got %+v", got)
	}
	for i, w := range want {
		if got[i].ID != w.id || got[i].Type != w.typ || got[i].MediaType != w.media {
			t.Errorf("message %d = %+v, want %+v", i, got[i], w)
		}
	}
}

func TestStreamError503Reconnects(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s := h.open("s1")
	h.link(s, phoneA)
	if n := h.srv.StreamError(phoneA, "503"); n != 1 {
		t.Fatalf("stream error reached %d connections", n)
	}
	s.expect("Disconnected{Reconnecting: true}", isDisconnected(true))
	s.expect("Connected", isConnected)
	h.srv.AddAccount(phoneB)
	if _, err := s.c.Send(ctxT(t), domain.Message{ID: "AFTER503", To: phoneB, Kind: domain.KindText, Text: "x"}); err != nil {
		t.Fatalf("send after reconnect: %v", err)
	}
}

// A ban without a stated end keeps the session down (DISCONNECTED banned) until Connect.
func TestTemporaryBanStopsReconnecting(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s := h.open("s1")
	h.link(s, phoneA)
	h.srv.AddAccount(phoneB)
	h.srv.Ban(phoneA, 101, 0)

	s.expect("Disconnected{Reconnecting: true}", isDisconnected(true)) // the drop
	d := s.expect("Disconnected{Reconnecting: false}", isDisconnected(false)).(network.Disconnected)
	if !strings.Contains(d.Reason, "banned") || d.StatusReason != network.ReasonBanned || !d.Until.IsZero() {
		t.Fatalf("ban event %+v, want reason banned with no end", d)
	}
	_, err := s.c.Send(ctxT(t), domain.Message{ID: "BANNED", To: phoneB, Kind: domain.KindText, Text: "x"})
	if !errors.Is(err, network.ErrBanned) {
		t.Fatalf("send while banned: %v, want ErrBanned", err)
	}
	s.expectNone("Connected", 300*time.Millisecond, isConnected)
	if phone, ok := s.c.Paired(); !ok || phone != phoneA {
		t.Fatal("a ban unlinked the device")
	}

	// Once the ban is lifted, Connect logs in again.
	h.srv.Unban(phoneA)
	s.connect()
	s.expect("Connected", isConnected)
}

// A ban with an end: DISCONNECTED banned until that end, then the session reconnects by itself.
func TestTemporaryBanEndsAndReconnects(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s := h.open("s1")
	h.link(s, phoneA)
	h.srv.Ban(phoneA, 101, 2*time.Second)
	before := time.Now()
	d := s.expect("Disconnected banned", func(e network.Event) bool {
		d, ok := e.(network.Disconnected)
		return ok && d.StatusReason == network.ReasonBanned
	}).(network.Disconnected)
	if !d.Reconnecting || d.Until.Before(before.Add(time.Second)) || d.Until.After(before.Add(3*time.Second)) {
		t.Fatalf("ban event %+v, want Reconnecting and Until about 2 s from now", d)
	}
	s.expect("Connected after the ban", isConnected)
	if time.Now().Before(d.Until) {
		t.Fatalf("reconnected at %v, before the ban's end %v", time.Now(), d.Until)
	}
}

func TestStreamReplacedStopsReconnecting(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s := h.open("s1")
	h.link(s, phoneA)
	h.srv.ReplaceStream(phoneA)
	d := s.expect("Disconnected{Reconnecting: false}", isDisconnected(false)).(network.Disconnected)
	if !strings.Contains(d.Reason, "replaced") {
		t.Fatalf("reason %q", d.Reason)
	}
	s.expectNone("reconnect", 300*time.Millisecond, func(e network.Event) bool { return isConnected(e) || isDisconnected(true)(e) })
}

func TestDeviceRemovedLogsOutAndNeedsQR(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s := h.open("s1")
	h.link(s, phoneA)
	h.srv.RemoveDevices(phoneA)
	s.expect("LoggedOut", isLoggedOut)
	if _, ok := s.c.Paired(); ok {
		t.Fatal("still paired after LoggedOut")
	}
	assertNoSessionRow(t, h, "s1")

	s.connect()
	qr := s.expect("QRCode", isQR).(network.QRCode)
	h.srv.AddAccount(phoneB)
	if err := h.srv.Scan(qr.Code, phoneB); err != nil {
		t.Fatal(err)
	}
	s.expect("Paired", isPaired)
	s.expect("Connected", isConnected)
	if phone, _ := s.c.Paired(); phone != phoneB {
		t.Fatalf("relinked to %q, want %s", phone, phoneB)
	}
}

func TestLogout(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s := h.open("s1")
	h.link(s, phoneA)
	if err := s.c.Logout(ctxT(t)); err != nil {
		t.Fatal(err)
	}
	s.expect("LoggedOut", isLoggedOut)
	if devs := h.srv.Devices(phoneA); len(devs) != 0 {
		t.Fatalf("server still lists devices %v", devs)
	}
	assertNoSessionRow(t, h, "s1")
	s.connect()
	s.expect("QRCode", isQR)
}

func TestQRTimeoutThenNewCodes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s := h.open("s1")
	s.connect()
	s.expect("QRCode", isQR)
	if n := h.srv.EndLinking(); n != 1 {
		t.Fatalf("ended %d linking connections", n)
	}
	s.expect("QRTimeout", isQRTimeout)
	s.connect()
	qr := s.expect("QRCode", isQR).(network.QRCode)
	if err := h.srv.Scan(qr.Code, phoneA); err != nil {
		t.Fatal(err)
	}
	s.expect("Connected", isConnected)
}

func TestDisconnectKeepsLink(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s := h.open("s1")
	h.link(s, phoneA)
	s.c.Disconnect()
	s.expectNone("reconnect", 300*time.Millisecond, isConnected)
	if h.srv.Online(phoneA) != 0 {
		t.Fatal("server still has the device online")
	}
	if _, ok := s.c.Paired(); !ok {
		t.Fatal("Disconnect unlinked the device")
	}
	s.connect()
	s.expect("Connected", isConnected)
}

// A failed first connection is retried (with backoff) until the server answers.
func TestConnectRetriesUntilServerIsUp(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s := h.open("s1")
	h.link(s, phoneA)
	s.c.Disconnect()
	h.srv.SetDown(true)
	s.connect()
	d := s.expect("Disconnected{Reconnecting: true}", isDisconnected(true)).(network.Disconnected)
	if !strings.Contains(d.Reason, "connect failed") {
		t.Fatalf("reason %q", d.Reason)
	}
	h.srv.SetDown(false)
	s.expect("Connected", isConnected)
}

// If the login right after linking fails, it is retried until the server answers.
func TestConnectsAfterLinkWhenReconnectFails(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s := h.open("s1")
	// The link socket stays up; the reconnection after pair-success fails.
	h.scan(s, phoneA, func() { h.srv.SetDown(true) })
	// The failed reconnection's Disconnected may be reported before or after Paired (two
	// goroutines of whatsmeow race there): wait for it in either order.
	deadline := time.Now().Add(wait)
	for !s.seen(isDisconnected(true)) {
		if time.Now().After(deadline) {
			t.Fatal("no Disconnected{Reconnecting: true} event")
		}
		time.Sleep(5 * time.Millisecond)
	}
	h.srv.SetDown(false)
	s.expect("Connected", isConnected)
}

// The link's socket closes before the client has handled the server's 515 (a loaded client, or
// a network that loses the last frame with the socket): whatsmeow expects that disconnect and
// reports nothing, so the adapter must notice the link connection is gone and log in itself,
// not leave the device linked and offline.
func TestLinkLogsInWhenTheRestartIsLost(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	h.srv.SetCutLink(true)
	h.link(h.open("s1"), phoneA)
	if n := h.srv.Online(phoneA); n != 1 {
		t.Fatalf("%d logged-in connections of the device, want 1", n)
	}
}

// The server's 515 comes while the link's first connect loop has not returned yet (a loaded
// machine: its goroutine not scheduled since its connection was made): the login waits for
// that loop and follows it, rather than being dropped.
func TestLinkLogsInAfterAConnectLoopStillRunning(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s := h.open("s1")
	late := &connectLoop{stop: make(chan struct{}), done: make(chan struct{})}
	h.scan(s, phoneA, func() {
		s.c.mu.Lock()
		s.c.loop = late // as the first connect loop still running
		s.c.mu.Unlock()
	})
	waitFor(t, "the login put off", func() bool {
		s.c.mu.Lock()
		defer s.c.mu.Unlock()
		return s.c.wantLogin
	})
	s.c.mu.Lock()
	if s.c.loop == late {
		s.c.loop = nil // the loop returns
	}
	s.c.mu.Unlock()
	s.expect("Connected", isConnected)
}

func TestPairPhoneReturnsCode(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	s := h.open("s1")
	code, err := s.c.PairPhone(ctxT(t), "+1 555 000 1111")
	if err != nil {
		t.Fatal(err)
	}
	if len(code) != 8 || strings.ContainsAny(code, "-0IOU") {
		t.Fatalf("code %q: want 8 characters of the linking alphabet", code)
	}
	h.link(h.open("s2"), phoneB)
	if _, err := h.open("s2").c.PairPhone(ctxT(t), phoneB); !errors.Is(err, network.ErrAlreadyPaired) {
		t.Fatalf("PairPhone on a linked device: %v, want ErrAlreadyPaired", err)
	}
}

func TestOpenTwiceReturnsSameClientWithNewSink(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	first := h.open("s1")
	second := h.open("s1")
	if first.c != second.c {
		t.Fatal("second Open made a second client for the same session")
	}
	second.connect()
	second.expect("QRCode", isQR)
	first.expectNone("QRCode on the old sink", 0, isQR)
}

func assertNoSessionRow(t *testing.T, h *harness, sessionID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	// The row is dropped by the event goroutine before the sink hears LoggedOut.
	if _, ok, err := lookupSessionDevice(ctx, h.net.db, sessionID); err != nil || ok {
		t.Fatalf("session row of %s: present=%v err=%v", sessionID, ok, err)
	}
}
