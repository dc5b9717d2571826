package persist

import (
	"errors"

	"github.com/gateway/gateway/domain"
)

// OutboxReader is an outbox read by message id: the one a switch of --outbox left behind.
//
// A node starts on one outbox only when the other holds nothing pending (node's otherOutbox),
// but the other still holds what it sent in its last days: a message's status read by its id
// (without it, 404 after the switch) and its Idempotency-Key's record for 24 hours. So the
// outbox in use reads the other under its own, for a message it does not hold.
//
// A receipt (delivered, read, a late failure) for a message the outbox does not hold goes to
// the other too: it is written where its message is (a receipt failing there would be refused
// to the network, whose retries would publish its event again each time).
type OutboxReader interface {
	Get(id string) (domain.OutboxEntry, error)
	IdemOf(messageID string) (domain.IdemRecord, error)
	Receipt(id string, c domain.StatusChange, done func(error))
	// Holds says whether the outbox holds any message (a switch's other outbox is read only
	// then: each message the one in use does not hold would cost a read of it).
	Holds() (bool, error)
}

// SetOlder makes the outbox read r for a message it does not hold (Get, IdemOf, and a
// Receipt's write). Call it before the outbox is used.
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

// errStop ends a scan early.
var errStop = errors.New("stop")

// Holds says whether the outbox holds any message: any outcome (a message sent or failed in
// its last 14 days; paged or not) or any pending mark.
func (o *Outbox) Holds() (bool, error) {
	for _, prefix := range []string{outboxStatusTable + "/", outboxPageTable + "/", outboxPendingTable + "/"} {
		found := false
		err := o.kv.Scan([]byte(prefix), func(_, _ []byte) error {
			found = true
			return errStop
		})
		if err != nil && !errors.Is(err, errStop) {
			return false, err
		}
		if found {
			return true, nil
		}
	}
	return false, nil
}

// Holds says whether the log holds any message: any segment (the log drops each once every
// message in it is past its lifetime).
func (lo *LogOutbox) Holds() (bool, error) {
	segs, err := lo.log.Segments()
	return len(segs) > 0, err
}

// holds says whether the outbox holds message id: pending here, or with its outcome.
func (o *Outbox) holds(id string) bool {
	o.mu.Lock()
	p := o.index[id]
	o.mu.Unlock()
	if p != nil {
		return true
	}
	_, _, err := o.outcomeByID(id, pageReadBack)
	return !errors.Is(err, domain.ErrRecordNotFound)
}
