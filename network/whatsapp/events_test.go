package whatsapp

import (
	"errors"
	"reflect"
	"sync"
	"testing"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/gateway/gateway/network"
)

func TestTranslate(t *testing.T) {
	paired := linkState{paired: true, phone: "15550001111"}
	unpaired := linkState{}
	banned := linkState{paired: true, phone: "15550001111", banUntil: time.Date(2026, 9, 1, 12, 0, 0, 0, time.UTC)}
	dev := types.JID{User: "15550001111", Server: types.DefaultUserServer, Device: 12}
	tests := []struct {
		name string
		evt  any
		st   linkState
		want network.Event
	}{
		{"qr code", qrItem{whatsmeow.QRChannelItem{Event: whatsmeow.QRChannelEventCode, Code: "ref,a,b,c"}}, unpaired, network.QRCode{Code: "ref,a,b,c"}},
		{"qr timeout", qrItem{whatsmeow.QRChannelTimeout}, unpaired, network.QRTimeout{}},
		{"qr success is reported by PairSuccess", qrItem{whatsmeow.QRChannelSuccess}, unpaired, nil},
		{"qr error is reported by PairError", qrItem{whatsmeow.QRChannelItem{Event: whatsmeow.QRChannelEventError, Error: errors.New("x")}}, unpaired, nil},
		{"pair success", &events.PairSuccess{ID: dev}, unpaired, network.Paired{Phone: "15550001111"}},
		{"pair error", &events.PairError{Error: errors.New("bad hmac")}, unpaired, network.Disconnected{Reason: "linking failed: bad hmac", StatusReason: network.ReasonNetwork}},
		{"connected", &events.Connected{}, paired, network.Connected{Phone: "15550001111"}},
		{"disconnected while paired reconnects", &events.Disconnected{}, paired, network.Disconnected{Reason: "connection lost", Reconnecting: true, StatusReason: network.ReasonNetwork}},
		{"disconnected while linking is a QR timeout", &events.Disconnected{}, unpaired, nil},
		{"logged out from the phone", &events.LoggedOut{}, paired, network.LoggedOut{Reason: "device removed from the phone"}},
		{"logged out on connect", &events.LoggedOut{OnConnect: true, Reason: events.ConnectFailureLoggedOut}, paired, network.LoggedOut{Reason: "401: logged out from another device"}},
		{"stream replaced", &events.StreamReplaced{}, paired, network.Disconnected{Reason: "stream replaced: another client connected with this device", StatusReason: network.ReasonReplaced}},
		{"temporary ban", &events.TemporaryBan{Code: events.TempBanBlockedByUsers, Expire: time.Hour}, banned,
			network.Disconnected{Reason: "You've been temporarily banned: 102: too many people blocked you. The ban expires in 1h0m0s",
				StatusReason: network.ReasonBanned, Until: banned.banUntil, Reconnecting: true}},
		{"temporary ban without an end stays down", &events.TemporaryBan{Code: events.TempBanBlockedByUsers}, paired,
			network.Disconnected{Reason: "You've been temporarily banned: 102: too many people blocked you", StatusReason: network.ReasonBanned}},
		{"client outdated", &events.ClientOutdated{}, paired, network.Disconnected{
			Reason:       "client outdated (405): WhatsApp refuses this client version; upgrade the gateway (it fetches the current web version at start)",
			StatusReason: network.ReasonOutdated}},
		{"connect failure", &events.ConnectFailure{Reason: events.ConnectFailureBadUserAgent}, paired, network.Disconnected{Reason: "connect failure 409: client user agent was rejected", StatusReason: network.ReasonNetwork}},
		{"keepalive timeout", &events.KeepAliveTimeout{ErrorCount: 1, LastSuccess: time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)}, paired,
			network.Disconnected{Reason: "keepalive: no answer from the server since 2026-08-01T00:00:00Z", Reconnecting: true, StatusReason: network.ReasonKeepalive}},
		{"keepalive restored", &events.KeepAliveRestored{}, paired, network.Connected{Phone: "15550001111"}},
		{"adapter event passes through", network.LoggedOut{Reason: "x"}, paired, network.LoggedOut{Reason: "x"}},
		{"other whatsmeow events are not reported", &events.PushNameSetting{}, paired, nil},
		{"stream errors are followed by Disconnected", &events.StreamError{Code: "500"}, paired, nil},
		{"QR event itself is not reported (the channel is)", &events.QR{Codes: []string{"a"}}, unpaired, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := translate(tt.evt, tt.st); !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("translate(%T) = %#v, want %#v", tt.evt, got, tt.want)
			}
		})
	}
}

// Events reach the handler in push order, from one goroutine, even with concurrent pushers.
func TestEventQueueOrder(t *testing.T) {
	q := newEventQueue()
	var mu sync.Mutex
	got := map[uint64][]int{}
	done := make(chan struct{})
	const pushers, per = 4, 500
	go q.run(func(it queued) {
		mu.Lock()
		got[it.gen] = append(got[it.gen], it.evt.(int))
		n := 0
		for _, v := range got {
			n += len(v)
		}
		mu.Unlock()
		if n == pushers*per {
			close(done)
		}
	})
	for p := range pushers {
		go func() {
			for i := range per {
				q.push(queued{gen: uint64(p), evt: i})
			}
		}()
	}
	select {
	case <-done:
	case <-time.After(wait):
		t.Fatal("events not all delivered")
	}
	q.close()
	for p, seq := range got {
		for i, v := range seq {
			if v != i {
				t.Fatalf("pusher %d: event %d delivered as #%d", p, v, i)
			}
		}
	}
	q.push(queued{evt: 1}) // after close: dropped, must not block
}

func TestBackoff(t *testing.T) {
	base, ceiling := time.Second, time.Minute
	for attempt, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, time.Minute, time.Minute} {
		lo, hi := backoff(attempt, base, ceiling, 0), backoff(attempt, base, ceiling, 0.999999)
		if lo != want/2 || hi < want*99/100 || hi > want {
			t.Errorf("attempt %d: range [%v, %v], want [%v, %v]", attempt, lo, hi, want/2, want)
		}
	}
	if d := backoff(500, base, ceiling, 0.5); d > ceiling || d < ceiling/2 {
		t.Errorf("huge attempt: %v", d)
	}
}

func TestBanExpiry(t *testing.T) {
	now := time.Now()
	if got := banExpiry(now, time.Hour); !got.Equal(now.Add(time.Hour)) {
		t.Fatalf("banExpiry = %v", got)
	}
	if got := banExpiry(now, 0); got.Before(now.Add(365 * 24 * time.Hour)) {
		t.Fatalf("a ban without expiry ends at %v", got)
	}
}
