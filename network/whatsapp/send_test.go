package whatsapp

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/types"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

func TestClassifyError(t *testing.T) {
	timelock := fmt.Errorf("%w %d", whatsmeow.ErrServerReturnedError, 463)
	other := fmt.Errorf("%w %d", whatsmeow.ErrServerReturnedError, 479)
	tests := []struct {
		err  error
		want error
	}{
		{whatsmeow.ErrNotConnected, domain.ErrNotConnected},
		{whatsmeow.ErrNotLoggedIn, domain.ErrNotConnected},
		{&whatsmeow.DisconnectedError{Action: "message send"}, domain.ErrNotConnected},
		{whatsmeow.ErrMessageTimedOut, whatsmeow.ErrMessageTimedOut},
		{other, whatsmeow.ErrServerReturnedError},
		{whatsmeow.ErrIQRateOverLimit, network.ErrRateLimited},
	}
	for _, tt := range tests {
		got := classifyError(tt.err)
		if !errors.Is(got, tt.want) || !errors.Is(got, tt.err) {
			t.Errorf("classifyError(%v) = %v, want it to wrap %v and the original", tt.err, got, tt.want)
		}
	}
	if errors.Is(classifyError(other), network.ErrTimelock) {
		t.Error("error 479 classified as timelock")
	}
	if classifyError(nil) != nil {
		t.Error("nil error classified")
	}
	if got := serverErrorCode(timelock); got != 463 {
		t.Errorf("serverErrorCode = %d", got)
	}
}

func TestPhoneDigits(t *testing.T) {
	for in, want := range map[string]string{
		"15550001111":         "15550001111",
		"+1 (555) 000-1111":   "15550001111",
		"+44.20.7946.0000":    "442079460000",
		"+86 139 1234 5678 9": "8613912345678" + "9",
	} {
		if got, err := phoneDigits(in); err != nil || got != want {
			t.Errorf("phoneDigits(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "1234567", "1234567890123456", "555-BILL-123", "05550001111"} {
		if got, err := phoneDigits(bad); err == nil {
			t.Errorf("phoneDigits(%q) = %q, want an error", bad, got)
		}
	}
}

func TestLookupCache(t *testing.T) {
	now := time.Now()
	lc := newLookupCache(time.Hour, time.Minute, 10)
	jid := types.NewJID("15550002222", types.DefaultUserServer)
	lc.put("15550002222", lookupResult{in: true, jid: jid}, now)
	lc.put("15550003333", lookupResult{}, now)

	if r, ok := lc.get("15550002222", now.Add(59*time.Minute)); !ok || !r.in || r.jid != jid {
		t.Fatalf("positive answer within TTL: %+v %v", r, ok)
	}
	if _, ok := lc.get("15550002222", now.Add(time.Hour)); ok {
		t.Fatal("positive answer past TTL")
	}
	if r, ok := lc.get("15550003333", now.Add(30*time.Second)); !ok || r.in {
		t.Fatalf("negative answer within its TTL: %+v %v", r, ok)
	}
	if _, ok := lc.get("15550003333", now.Add(time.Minute)); ok {
		t.Fatal("negative answer kept as long as a positive one")
	}

	for i := range 50 {
		lc.put(fmt.Sprintf("1555000%04d", i), lookupResult{in: true}, now)
	}
	if n := len(lc.m); n > 10 {
		t.Fatalf("cache holds %d entries, max 10", n)
	}
	lc.clear()
	if len(lc.m) != 0 {
		t.Fatal("clear left entries")
	}
}
