package domain

import (
	"errors"
	"strconv"
	"sync/atomic"
	"time"
)

// Storage's outcomes the core tests with errors.Is; persist returns them (domain.ErrRecordNotFound
// and domain.ErrRecordExists are these), so the core never imports persist.
var (
	// ErrRecordNotFound: a key or record is absent or expired.
	ErrRecordNotFound = errors.New("not found")
	// ErrRecordExists: a put-if-absent found the key present; nothing was written.
	ErrRecordExists = errors.New("persist: key exists")
	// ErrRecordInvalid: storage refused a malformed input (an empty key or id, an oversized
	// key or value); nothing of the commit was written, and retrying cannot help.
	ErrRecordInvalid = errors.New("persist: invalid input")
	// ErrInboxEntry: a store webhook's inbox entry does not encode; nothing was written.
	ErrInboxEntry = errors.New("persist: inbox entry does not encode")
)

// IdempotencyTTL is how long an Idempotency-Key's record is kept for a retry.
const IdempotencyTTL = 24 * time.Hour

// IdemRecord is what an Idempotency-Key stands for: the request's body hash and what it made (a
// message or a campaign), committed with the outbox entry or the campaign record it names, so a
// retry after a crash finds both or neither.
type IdemRecord struct {
	BodyHash   string `json:"bodyHash"` // hex SHA-256 of the request body
	MessageID  string `json:"messageId,omitempty"`
	CampaignID string `json:"campaignId,omitempty"`
	// At is when it was made (the message's acceptance, the campaign's start): it binds its key
	// for IdempotencyTTL from then, on the engine's clock (engine.Idem). 0 in older records.
	At Millis `json:"at,omitempty"`
	// Status and Body: a stored response, for routes whose answer is not rebuilt from a record.
	Status int    `json:"status,omitempty"`
	Body   []byte `json:"body,omitempty"`
}

// OAuthNonceTTL is how long an OAuth install may take: the nonce expires from storage then,
// and a callback presenting an older one is refused.
const OAuthNonceTTL = 10 * time.Minute

// OAuthNonce is a pending OAuth install: who started it, for which shop, with which app.
type OAuthNonce struct {
	UserID         string    `json:"userId"`
	Shop           string    `json:"shop"`
	ClientID       string    `json:"clientId"`
	ClientSecret   string    `json:"clientSecret,omitempty"` // sealed
	AppCredentials bool      `json:"appCredentials,omitempty"`
	CreatedAt      time.Time `json:"createdAt"`
}

// FinishedEvent is one store event's outcome as it is stored: its record, the inbox entry it
// removes (Seq "" = none), and the dedupe key it marks as sent ("" = none).
type FinishedEvent struct {
	Seq     string
	Record  StoreEvent
	SentKey string
}

// InboxSeq hands out one shop's inbox sequence numbers: fixed-width and increasing, the clock
// in nanoseconds bumped past the last one (so they also increase across restarts). Safe for
// concurrent use.
type InboxSeq struct{ last atomic.Int64 }

// Next returns the next sequence number.
func (q *InboxSeq) Next(now time.Time) string {
	for {
		last := q.last.Load()
		n := max(last+1, now.UnixNano())
		if q.last.CompareAndSwap(last, n) {
			var b [20]byte
			v := strconv.AppendInt(b[:0], n, 10)
			out := make([]byte, 20)
			for i := range out {
				out[i] = '0'
			}
			copy(out[20-len(v):], v)
			return string(out)
		}
	}
}

// Observe raises the sequence past seq, one found in the inbox at boot.
func (q *InboxSeq) Observe(seq string) {
	if n, err := strconv.ParseInt(seq, 10, 64); err == nil && n > q.last.Load() {
		q.last.Store(n)
	}
}

// Continue makes q go on from where other is (a reconnected shop keeps its order).
func (q *InboxSeq) Continue(other *InboxSeq) { q.last.Store(other.last.Load()) }

// Directions of a message in the history (GET /api/v1/messages).
const (
	DirOut = "out"
	DirIn  = "in"
)

// LogEntry is one line of a user's message history: an outgoing message's reference (its
// status and text are read from the outbox as they stand) or an incoming message as a whole.
type LogEntry struct {
	Dir       string          `json:"dir"` // DirOut or DirIn
	ID        string          `json:"id"`
	SessionID string          `json:"session"`
	Peer      string          `json:"peer"` // the recipient (out) or the sender (in)
	At        time.Time       `json:"at"`
	In        *InboundMessage `json:"in,omitempty"`
}

// LogScan is where a walk of one user's history starts and which way it goes.
type LogScan struct {
	// Cursor: continue after this place (a cursor an earlier walk handed out); "" = from the
	// start.
	Cursor string
	// Since: oldest first, from this time on; zero: newest first.
	Since time.Time
}

// ErrBadCursor: a history cursor this gateway did not hand out.
var ErrBadCursor = E("validation_failed", "cursor is not one this gateway handed out")
