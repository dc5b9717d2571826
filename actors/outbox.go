package actors

import (
	"errors"
	"fmt"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// Outbox statuses of a message.
const (
	MsgQueued = domain.MsgQueued
	MsgSent   = domain.MsgSent
	MsgFailed = domain.MsgFailed
)

// The outbox's records, declared in domain.
type (
	OutboxEntry = domain.OutboxEntry
	Millis      = domain.Millis
)

// MillisOf converts a time.
func MillisOf(t time.Time) Millis { return domain.MillisOf(t) }

// Send errors the caller sees.
var (
	ErrRecipientNotOnNetwork = domain.ErrRecipientNotOnNetwork
	ErrNetwork               = domain.ErrNetwork
)

// classify turns a network's definite failure into the gateway's error (the network's error
// stays in the chain, so errors.Is matches either).
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, network.ErrNotOnNetwork):
		return fmt.Errorf("%w: %w", ErrRecipientNotOnNetwork, err)
	case errors.Is(err, network.ErrNotConnected):
		return fmt.Errorf("%w: %w", ErrNotConnected, err)
	}
	return fmt.Errorf("%w: %w", ErrNetwork, err)
}
