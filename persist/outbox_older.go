package persist

import (
	"errors"

	"github.com/gateway/gateway/domain"
)

// OutboxReader is an outbox read by message id: the one a switch of --outbox left behind.
//
// A node starts on one outbox only when the other holds nothing pending (node's
// otherOutboxEmpty), but the other still holds what it sent in its last days: a message's
// status read by its id, and its Idempotency-Key's record for 24 hours. Without it a retry
// after the switch would not find the message its key made and would send a second one.
// So the outbox in use reads the other under its own, for a message it does not hold.
type OutboxReader interface {
	Get(id string) (domain.OutboxEntry, error)
	IdemOf(messageID string) (domain.IdemRecord, error)
}

// SetOlder makes the outbox read r for a message it does not hold (Get, IdemOf). Call it
// before the outbox is used.
func (o *Outbox) SetOlder(r OutboxReader) { o.older = r }

// SetOlder is Outbox.SetOlder.
func (lo *LogOutbox) SetOlder(r OutboxReader) { lo.older = r }

// orOlder answers a read the outbox could not from older, when there is one.
func orOlder[T any](v T, err error, older OutboxReader, read func(OutboxReader) (T, error)) (T, error) {
	if older != nil && errors.Is(err, domain.ErrRecordNotFound) {
		return read(older)
	}
	return v, err
}
