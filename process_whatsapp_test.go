package main

// The gateway process on WhatsApp: a test build (-tags fakewa, node/fakewa.go) reaches the fake
// WhatsApp server of this test process, with the device store on a throwaway PostgreSQL
// (`--whatsapp-store postgres://`): link by pair code, send, kill -9, restart, send again.

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/gateway/gateway/internal/pgtest"
	"github.com/gateway/gateway/network/whatsapp/fakewa"
)

var fakeWABinary builtBinary

// gatewayFakeWABinary builds the gateway with the fakewa hook once per test run.
func gatewayFakeWABinary(t testing.TB) string {
	t.Helper()
	return fakeWABinary.get(t, "-tags", "fakewa")
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

	r := tg.do("POST", "/api/client/pair-code", bearerAuth(alice), map[string]any{"phone": "+" + phone})
	want(t, r, 200, "")
	if err := srv.EnterCode(phone, r.str("code")); err != nil {
		t.Fatal(err)
	}
	if st := tg.waitStatus(alice, "CONNECTED"); st["phone"] != phone {
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

	// kill -9: the device, its keys and its lock live in PostgreSQL; the restarted process
	// takes the lock again (the dead one's went with its connection) and reconnects. With
	// --ffmpeg the WAV is accepted and goes out as an Ogg/Opus voice note.
	p.kill9(t)
	ffmpeg, err := exec.LookPath("ffmpeg")
	if err != nil {
		t.Fatalf("ffmpeg not found (apt-get install ffmpeg; .ci/run installs it): %v", err)
	}
	p = startFakeWAProc(t, srv, data, "--whatsapp-store", store, "--ffmpeg", ffmpeg)
	tg = p.gw(t, data)
	tg.waitStatus(alice, "CONNECTED")
	sent("after the crash")
	r = tg.do("POST", "/api/client/send", bearerAuth(alice), voice)
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
