package httpapi

import (
	"errors"
	"fmt"
	"testing"

	"github.com/gateway/gateway/domain"
)

// A request whose partition's store refused because the partition left this node stored
// nothing and runs again on the next owner, also when the core kept the store's error as text
// only (a failed write is reported unavailable with the cause as %v); an unexpected error
// while the partition left may have stored part of what it did and is not run again.
func TestNotRun(t *testing.T) {
	left := fmt.Errorf("%w: %w", errors.New("persist: store closed"), domain.ErrNodeUnavailable)
	for _, c := range []struct {
		name string
		err  error
		want bool
	}{
		{"no error", nil, false},
		{"the partition's store refused", fmt.Errorf("outbox: %w", left), true},
		{"the same kept as text by the core", fmt.Errorf("service temporarily unavailable: outbox: %v", left), true},
		{"a storage outage", errors.New("service temporarily unavailable: outbox: nats: timeout"), false},
		{"an unexpected error while the partition left", fmt.Errorf("%w: partition 3: %w: %v", domain.ErrNodeUnavailable, errLeft, errors.New("boom")), false},
	} {
		if got := notRun(c.err); got != c.want {
			t.Errorf("%s: notRun = %v, want %v", c.name, got, c.want)
		}
	}
}
