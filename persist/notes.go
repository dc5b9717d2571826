package persist

import (
	"context"
	"errors"

	"github.com/gateway/gateway/domain"
)

// MessageNotes keeps what happened to each message after it was written (DESIGN.md section
// 16): reactions, the last edit, a revoke, poll votes. One record per (user, message), written
// whole by the engine (which serialises the writes of one message), kept as long as the
// history (7 days from its last change).
//
//	msg_note/<uid>/<msgID>   domain.MessageNotes (1)   7 days
//
// The user id is path-escaped, as in the history index.
type MessageNotes struct{ t *Table[domain.MessageNotes] }

// NewMessageNotes returns the notes table on kv.
func NewMessageNotes(kv KV) *MessageNotes {
	return &MessageNotes{t: NewTable[domain.MessageNotes](kv, messageNotesTable, recordVersion1)}
}

func noteKey(uid, id string) string { return logUserPrefix(uid) + id }

// Notes returns a message's notes (zero when nothing happened to it).
func (n *MessageNotes) Notes(uid, id string) (domain.MessageNotes, error) {
	v, err := n.t.Get(noteKey(uid, id))
	if errors.Is(err, domain.ErrRecordNotFound) {
		return domain.MessageNotes{}, nil
	}
	return v, err
}

// PutNotes writes a message's notes.
func (n *MessageNotes) PutNotes(ctx context.Context, uid, id string, notes domain.MessageNotes) error {
	op, err := n.t.PutTTLOp(noteKey(uid, id), notes, domain.InboundRetention)
	if err != nil {
		return err
	}
	return n.t.KV().Commit(ctx, op)
}
