package actors

import (
	"context"
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

// Outbox is the durable outbox (group-committed: many concurrent appends share one sync).
type Outbox interface {
	// Append commits a queued entry durably.
	Append(ctx context.Context, e OutboxEntry) error
	// Settle records the outcome. It need not be durable before returning: if it is lost in a
	// crash, the entry is sent again at boot under the same id and the network delivers it once.
	Settle(e OutboxEntry)
}

// SendMessage asks a session to send one message through its outbox.
type SendMessage struct {
	Entry OutboxEntry
	Reply chan SendResult
}

// SendResult is the outcome of a send.
type SendResult struct {
	Entry OutboxEntry // with its outcome
	Err   error
}

// Send errors the caller sees.
var (
	ErrRecipientNotOnNetwork = domain.ErrRecipientNotOnNetwork
	ErrNetwork               = domain.ErrNetwork
)

// classify turns a network error into the gateway's.
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, network.ErrNotOnNetwork):
		return fmt.Errorf("%w: %v", ErrRecipientNotOnNetwork, err)
	case errors.Is(err, network.ErrNotConnected):
		return fmt.Errorf("%w: %v", ErrNotConnected, err)
	}
	return fmt.Errorf("%w: %v", ErrNetwork, err)
}
