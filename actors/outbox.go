package actors

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gateway/gateway/network"
)

// Outbox statuses of a message.
const (
	MsgQueued = "queued"
	MsgSent   = "sent"
	MsgFailed = "failed"
)

// OutboxEntry is one accepted message: committed before it goes to the network, its outcome
// recorded after. An entry without an outcome at boot is sent again with the same id, which the
// network treats as the same message.
type OutboxEntry struct {
	ID        string          `json:"id"`
	SessionID string          `json:"sessionId"`
	UserID    string          `json:"userId"`
	Origin    string          `json:"origin"` // api, dashboard, campaign:<id>, store:<shop>
	Message   network.Message `json:"message"`
	Status    string          `json:"status"`
	NetworkID string          `json:"networkId,omitempty"`
	SentAt    Millis          `json:"sentAt,omitempty"` // 0 until sent
	Error     string          `json:"error,omitempty"`
	CreatedAt Millis          `json:"createdAt"`
	UpdatedAt Millis          `json:"updatedAt"`
}

// Millis is a time in Unix milliseconds. Outbox entries are encoded twice per message, and
// encoding time.Time as text cost about 5 % of a send's CPU (profiled): an integer is cheap.
type Millis int64

// MillisOf converts a time.
func MillisOf(t time.Time) Millis { return Millis(t.UnixMilli()) }

// Time converts back (UTC).
func (m Millis) Time() time.Time { return time.UnixMilli(int64(m)).UTC() }

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
	// ErrRecipientNotOnNetwork: the number has no account on the messaging network.
	ErrRecipientNotOnNetwork = errors.New("the recipient is not on the messaging network")
	// ErrNetwork: the network refused or failed the send.
	ErrNetwork = errors.New("the messaging network failed the send")
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
