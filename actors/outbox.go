package actors

import (
	"time"

	"github.com/gateway/gateway/domain"
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
