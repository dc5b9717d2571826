package main

import (
	"encoding/base64"
	"fmt"
	"testing"
	"time"

	"github.com/gateway/gateway/persist/natstest"
)

// A gateway on a NATS server whose max_payload is 256 KiB: a 200 KiB image (its record with
// the media inline, 273 KiB of base64, over the server's max_payload; under persist.BlobMin)
// and a 600 KiB one (over BlobMin) are both accepted and delivered whole, their media kept in
// the object store. Before, the inline threshold was BlobMin alone: the 200 KiB image was
// refused (its record over the server's max_payload).
func TestNATSSmallMaxPayloadMedia(t *testing.T) {
	ns := natstest.Start(t, natstest.Options{MaxPayload: 256 << 10})
	data := t.TempDir()
	p := startProc(t, data, "--store", "nats", "--nats", ns.URL, "--nats-prefix", "smallpayload")
	tg := p.gw(t, data)
	s := tg.newSender(tg.token("root", "admin"), "alice", "447700900001", nil)
	for i, size := range []int{200 << 10, 600 << 10} {
		to := fmt.Sprintf("1555071000%d", i)
		img := append(jpegBytes(t), make([]byte, size)...)[:size]
		r := tg.do("POST", "/api/v1/messages/send-image", keyAuth(s.key), map[string]any{"to": to, "image": "data:image/jpeg;base64," + base64.StdEncoding.EncodeToString(img)})
		want(t, r, 200, "")
		id := r.str("message_id")
		eventually(t, 30*time.Second, fmt.Sprintf("the %d KiB image delivered", size>>10), func() bool { return len(tg.simMessages(to)) == 1 })
		if got := tg.simMessages(to)[0]; got["bytes"] != float64(size) || got["id"] != id {
			t.Fatalf("delivered %v, want %d bytes of message %s", got, size, id)
		}
	}
}
