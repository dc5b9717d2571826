package engine

// The message history (DESIGN.md section 15): a user's messages in both directions, from the
// history index (persist.MessageLog), outgoing ones with their status as it stands.

import (
	"errors"
	"fmt"
	"time"

	"github.com/gateway/gateway/domain"
)

// MessageHistory is the history index the engine lists from (persist.MessageLog): entries are
// written with the messages they index (the outbox's accept, the saving of an incoming message).
// ScanLog calls fn with each entry and the opaque cursor that continues after it; a cursor it
// did not hand out is domain.ErrBadCursor.
type MessageHistory interface {
	ScanLog(uid string, s domain.LogScan, fn func(next string, e domain.LogEntry) (bool, error)) error
	// InboundOf is one of the user's incoming messages by id (domain.ErrRecordNotFound: none
	// kept): the copy session sid got when it got one (a group message two of the user's
	// sessions got is kept once per session), else the first session's.
	InboundOf(uid, id, sid string) (domain.InboundMessage, error)
}

// historyLister is an outbox that keeps its outgoing messages' history itself (persist.LogOutbox:
// a chain per user in its log, no index entry a message) and lists it merged by time with the
// index's entries, as MessageHistory.ScanLog lists them, with the same cursors.
type historyLister interface {
	ScanLog(uid string, s domain.LogScan, fn func(next string, e domain.LogEntry) (bool, error)) error
}

// HistoryMaxLimit is the most items one page of the history holds.
const HistoryMaxLimit = 1000

// HistoryQuery selects a page of a user's history.
type HistoryQuery struct {
	// Direction: DirOut, DirIn or "" (both).
	Direction string
	// Status: only outgoing messages with this status (incoming ones have none).
	Status string
	// To: outgoing messages to this number; From: incoming messages from this number (digits).
	// Each applies to its direction; with only one of them, the other direction is left out,
	// and with both (the same number: a conversation) each direction matches its own.
	To, From string
	// Since: oldest first from this time; zero: newest first.
	Since time.Time
	// Limit: 1 to HistoryMaxLimit (0 = 100). Cursor: the Next of the page before.
	Limit  int
	Cursor string
}

// HistoryItem is one message of the history: Out for an outgoing one (as GET
// /api/v1/messages/{id} reads it), In for an incoming one; Notes, what happened to it since
// (reactions, an edit, a revoke, poll votes).
type HistoryItem struct {
	Dir   string
	Out   domain.OutboxEntry
	In    domain.InboundMessage
	Notes domain.MessageNotes
}

// History returns a page of uid's messages and the cursor of the next page ("" when this page
// is the last).
func (ms *Messages) History(uid string, q HistoryQuery) ([]HistoryItem, string, error) {
	if q.Limit <= 0 {
		q.Limit = 100
	}
	if q.Limit > HistoryMaxLimit {
		return nil, "", fmt.Errorf("%w: limit must be 1 to %d", domain.ErrValidation, HistoryMaxLimit)
	}
	var (
		out  []HistoryItem
		next string
		last string
	)
	scan := ms.history.ScanLog
	if h, ok := ms.msgs.outbox.(historyLister); ok {
		scan = h.ScanLog // the outbox lists its own outgoing messages with the index's entries
	}
	err := scan(uid, domain.LogScan{Cursor: q.Cursor, Since: q.Since}, func(after string, e domain.LogEntry) (bool, error) {
		item, ok := ms.historyItem(uid, e, q)
		if !ok {
			return true, nil
		}
		if len(out) == q.Limit { // one more matches: there is a next page
			next = last
			return false, nil
		}
		out, last = append(out, item), after
		return true, nil
	})
	if errors.Is(err, domain.ErrBadCursor) {
		return nil, "", err
	}
	if err != nil {
		return nil, "", fmt.Errorf("%w: message history: %w", domain.ErrUnavailable, err)
	}
	return out, next, nil
}

// historyItem resolves an index entry and tells whether it matches q.
func (ms *Messages) historyItem(uid string, e domain.LogEntry, q HistoryQuery) (HistoryItem, bool) {
	if q.Direction != "" && e.Dir != q.Direction {
		return HistoryItem{}, false
	}
	switch e.Dir {
	case domain.DirIn:
		if e.In == nil || q.Status != "" || (q.To != "" && q.From == "") || (q.From != "" && e.Peer != q.From) {
			return HistoryItem{}, false
		}
		in := *e.In
		in.UserID = uid
		n, _ := ms.notes.get(uid, in.ID) // notes that cannot be read are left out of the listing
		return HistoryItem{Dir: e.Dir, In: in, Notes: n}, true
	case domain.DirOut:
		if (q.From != "" && q.To == "") || (q.To != "" && e.Peer != q.To) {
			return HistoryItem{}, false
		}
		m, err := ms.Get(uid, e.ID)
		if err != nil || (q.Status != "" && m.Status != q.Status) {
			return HistoryItem{}, false // expired meanwhile, or not this status
		}
		m.Message.Data = nil // the listing carries media metadata, never the bytes
		if m.LID == "" {
			m.LID = ms.lids.get(m.Message.To)
		}
		n, _ := ms.notes.get(uid, m.ID)
		return HistoryItem{Dir: e.Dir, Out: m, Notes: n}, true
	}
	return HistoryItem{}, false
}
