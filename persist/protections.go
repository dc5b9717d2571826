package persist

import (
	"context"
	"errors"
	"time"

	"github.com/gateway/gateway/domain"
)

// Protections keeps what protects each linked phone's account (DESIGN.md section 14), keyed by
// (session, phone): the protections record (link time, timelock, today's counts, half rate),
// the phone's contact book, and its recipient marks.
//
//	protect/<sessionID>/<phone>                     domain.Protections
//	contact_book/<sessionID>/<phone>/<number>       domain.Contact
//	recipient_mark/<sessionID>/<phone>/<number>     domain.RecipientMark, until its end
type Protections struct {
	prot  *Table[domain.Protections]
	book  *Table[domain.Contact]
	marks *Table[domain.RecipientMark]
}

// NewProtections returns the protection records on kv.
func NewProtections(kv KV) Protections {
	return Protections{
		prot:  NewTable[domain.Protections](kv, protectTable, recordVersion1),
		book:  NewTable[domain.Contact](kv, contactBookTable, recordVersion1),
		marks: NewTable[domain.RecipientMark](kv, recipientMarkTable, recordVersion1),
	}
}

func phoneKey(sessionID, phone string) string { return sessionID + "/" + phone }

// GetProtections reads a phone's protections on a session (ok false when it has none yet: the
// phone was never linked to the session).
func (p Protections) GetProtections(sessionID, phone string) (domain.Protections, bool, error) {
	pr, err := p.prot.Get(phoneKey(sessionID, phone))
	if errors.Is(err, domain.ErrRecordNotFound) {
		return domain.Protections{}, false, nil
	}
	return pr, err == nil, err
}

// PutProtections writes a phone's protections.
func (p Protections) PutProtections(ctx context.Context, pr domain.Protections) error {
	return p.prot.Put(ctx, phoneKey(pr.SessionID, pr.Phone), pr)
}

// CountSends writes the protections with today's counts and, in the same commit, the numbers
// written to for the first time (their contact records): the counts and the book never
// disagree after a crash.
func (p Protections) CountSends(ctx context.Context, pr domain.Protections, firsts []string) error {
	base := phoneKey(pr.SessionID, pr.Phone)
	op, err := p.prot.PutOp(base, pr)
	if err != nil {
		return err
	}
	ops := []Op{op}
	for _, to := range firsts {
		c, err := p.Contact(pr.SessionID, pr.Phone, to)
		if err != nil {
			return err
		}
		if c.SentDay != 0 {
			continue
		}
		c.SentDay = pr.Day
		op, err := p.book.PutOp(base+"/"+to, c)
		if err != nil {
			return err
		}
		ops = append(ops, op)
	}
	return p.prot.KV().Commit(ctx, ops...)
}

// Contact is what the phone's contact book knows of number (zero when nothing).
func (p Protections) Contact(sessionID, phone, number string) (domain.Contact, error) {
	c, err := p.book.Get(phoneKey(sessionID, phone) + "/" + number)
	if errors.Is(err, domain.ErrRecordNotFound) {
		return domain.Contact{}, nil
	}
	return c, err
}

// Wrote records that number wrote to the phone at at (the first time only), and clears its
// recipient mark, in one commit; a number known to have written and not marked costs no write.
// It returns the contact as it now stands.
func (p Protections) Wrote(ctx context.Context, sessionID, phone, number string, at time.Time) (domain.Contact, error) {
	key := phoneKey(sessionID, phone) + "/" + number
	c, err := p.Contact(sessionID, phone, number)
	if err != nil {
		return c, err
	}
	var ops []Op
	if c.Wrote == 0 {
		c.Wrote = domain.MillisOf(at)
		op, err := p.book.PutOp(key, c)
		if err != nil {
			return c, err
		}
		ops = append(ops, op)
	}
	if _, err := p.marks.Get(key); err == nil {
		ops = append(ops, p.marks.DeleteOp(key))
	} else if !errors.Is(err, domain.ErrRecordNotFound) {
		return c, err
	}
	if len(ops) == 0 {
		return c, nil
	}
	return c, p.book.KV().Commit(ctx, ops...)
}

// PutMark marks a recipient of the phone until m.Until (the record expires then).
func (p Protections) PutMark(ctx context.Context, sessionID, phone string, m domain.RecipientMark, now time.Time) error {
	ttl := m.Until.Time().Sub(now)
	if ttl <= 0 {
		return nil
	}
	op, err := p.marks.PutTTLOp(phoneKey(sessionID, phone)+"/"+m.To, m, ttl)
	if err != nil {
		return err
	}
	return p.marks.KV().Commit(ctx, op)
}

// Marks lists the phone's recipient marks still in force.
func (p Protections) Marks(sessionID, phone string) ([]domain.RecipientMark, error) {
	var out []domain.RecipientMark
	err := p.marks.Scan(phoneKey(sessionID, phone)+"/", func(_ string, m domain.RecipientMark) error {
		out = append(out, m)
		return nil
	})
	return out, err
}

// DeleteSession removes every protection record of a session, of every phone it had.
func (p Protections) DeleteSession(ctx context.Context, sessionID string) error {
	prefix := sessionID + "/"
	return errors.Join(deleteUnder(ctx, p.prot, prefix), deleteUnder(ctx, p.book, prefix), deleteUnder(ctx, p.marks, prefix))
}

// deleteUnder removes every record of t whose id starts with prefix, a thousand per commit.
func deleteUnder[T any](ctx context.Context, t *Table[T], prefix string) error {
	var ops []Op
	err := t.Scan(prefix, func(id string, _ T) error {
		ops = append(ops, t.DeleteOp(id))
		return nil
	})
	for len(ops) > 0 && err == nil {
		n := min(len(ops), 1000)
		err, ops = t.KV().Commit(ctx, ops[:n]...), ops[n:]
	}
	return err
}
