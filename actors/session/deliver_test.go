package session

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/gateway/gateway/network"
)

// What the deliverer does with each network error (network.go's list): hold the queue (and
// until when), or settle the message as failed. An unknown outcome is never a failure; a
// timelock is never re-sent before its end.
func TestHeldBy(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	end := now.Add(3 * time.Hour)
	for _, tc := range []struct {
		name     string
		err      error
		attempts int
		hold     bool
		until    time.Time // zero: the queue's own backoff
	}{
		{"sent", nil, 1, false, time.Time{}},
		{"not on the network", fmt.Errorf("x: %w", network.ErrNotOnNetwork), 1, false, time.Time{}},
		{"unsupported", network.ErrUnsupported, 1, false, time.Time{}},
		{"unknown outcome", fmt.Errorf("ack: %w", network.ErrUnknownOutcome), 1, true, time.Time{}},
		{"not connected", network.ErrNotConnected, 1, true, time.Time{}},
		{"our timeout", context.DeadlineExceeded, 1, true, time.Time{}},
		{"banned", network.ErrBanned, 1, true, time.Time{}},
		{"outdated", network.ErrOutdated, 1, true, time.Time{}},
		{"timelock with its end", &network.TimelockError{Until: end, Code: 463}, 1, true, end},
		{"timelock without an end", &network.TimelockError{Code: 463}, 1, true, now.Add(time.Hour)},
		{"rate limited", &network.RetryLaterError{Err: network.ErrRateLimited, Code: 429, After: 15 * time.Minute}, 1, true, now.Add(15 * time.Minute)},
		{"refused once", &network.RetryLaterError{Err: network.ErrRefused, Code: 479, After: 5 * time.Minute}, 1, true, now.Add(5 * time.Minute)},
		{"refused again", &network.RetryLaterError{Err: network.ErrRefused, Code: 479, After: 5 * time.Minute}, 2, false, time.Time{}},
		{"other", errors.New("boom"), 1, false, time.Time{}},
	} {
		hold, until := heldBy(tc.err, now, tc.attempts)
		if hold != tc.hold || !until.Equal(tc.until) {
			t.Errorf("%s: held %v until %v, want %v until %v", tc.name, hold, until, tc.hold, tc.until)
		}
	}
}
