package persist

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// Wrote records that number wrote to the phone at at (its first time, and when it last
// wrote, kept to the hour), with the LID and profile name the network gave, and clears its
// recipient mark, in one commit; a number whose record would not change and that is not marked
// costs no write. It returns the contact as it now stands.
func (p Protections) Wrote(ctx context.Context, sessionID, phone, number string, at time.Time, lid, name string) (domain.Contact, error) {
	key := phoneKey(sessionID, phone) + "/" + number
	c, err := p.Contact(sessionID, phone, number)
	if err != nil {
		return c, err
	}
	var ops []Op
	changed := c.Seen(domain.MillisOf(at), true, lid, name)
	if c.Wrote == 0 {
		c.Wrote, changed = domain.MillisOf(at), true
	}
	if changed {
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

// Sent records that the phone wrote to numbers at at (last written to, kept to the hour, and
// the LID the network addressed each by), in one commit.
func (p Protections) Sent(ctx context.Context, sessionID, phone string, at time.Time, sent []domain.NumberCheck) error {
	var ops []Op
	for _, n := range sent {
		c, err := p.Contact(sessionID, phone, n.Phone)
		if err != nil {
			return err
		}
		if !c.Seen(domain.MillisOf(at), false, n.LID, "") {
			continue
		}
		op, err := p.book.PutOp(phoneKey(sessionID, phone)+"/"+n.Phone, c)
		if err != nil {
			return err
		}
		ops = append(ops, op)
	}
	if len(ops) == 0 {
		return nil
	}
	return p.book.KV().Commit(ctx, ops...)
}

// Book lists up to limit numbers of the phone's contact book after number after ("" = from the
// first), in number order.
func (p Protections) Book(sessionID, phone, after string, limit int) ([]domain.BookEntry, error) {
	prefix := p.book.key(phoneKey(sessionID, phone) + "/")
	start := prefix
	if after != "" {
		start = append(append(slices.Clone(prefix), after...), 0)
	}
	out := []domain.BookEntry{}
	err := scanFrom(p.book.KV(), prefix, start, func(key, value []byte) error {
		if len(out) == limit {
			return errStopScan
		}
		var c domain.Contact
		if _, err := Decode(value, recordVersion1, &c); err != nil {
			return fmt.Errorf("%s %q: %w", contactBookTable, key, err)
		}
		out = append(out, domain.BookEntry{Number: string(key[len(prefix):]), Contact: c})
		return nil
	})
	if errors.Is(err, errStopScan) {
		err = nil
	}
	return out, err
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

// deleteUnder removes every record of t whose id starts with prefix, 500 per commit (a
// JetStream batch takes 1,000 messages, a cluster's commits one more for the fence).
func deleteUnder[T any](ctx context.Context, t *Table[T], prefix string) error {
	var ops []Op
	err := t.Scan(prefix, func(id string, _ T) error {
		ops = append(ops, t.DeleteOp(id))
		return nil
	})
	for len(ops) > 0 && err == nil {
		n := min(len(ops), 500)
		err, ops = t.KV().Commit(ctx, ops[:n]...), ops[n:]
	}
	return err
}

// CopySession copies every protection record of a session into to: a cluster moving the
// session to a user of another partition (DESIGN.md section 13.1). A record to already holds
// is left as it is (a move resumed after a crash copies again); marks keep their end.
func (p Protections) CopySession(ctx context.Context, to Protections, sessionID string, now time.Time) error {
	prefix := sessionID + "/"
	return errors.Join(
		copyUnder(ctx, p.prot, to.prot, prefix, func(domain.Protections) time.Duration { return 0 }),
		copyUnder(ctx, p.book, to.book, prefix, func(domain.Contact) time.Duration { return 0 }),
		copyUnder(ctx, p.marks, to.marks, prefix, func(m domain.RecipientMark) time.Duration {
			if d := m.Until.Time().Sub(now); d > 0 {
				return d
			}
			return -1 // ended
		}))
}

// copyUnder copies the records of from under prefix into to, each put only where absent,
// 250 per commit (one record alone when a commit meets one already there). ttl < 0: the
// record has ended and is not copied.
func copyUnder[T any](ctx context.Context, from, to *Table[T], prefix string, ttl func(T) time.Duration) error {
	type rec struct {
		id string
		v  T
	}
	var recs []rec
	if err := from.Scan(prefix, func(id string, v T) error {
		recs = append(recs, rec{id, v})
		return nil
	}); err != nil {
		return err
	}
	opsOf := func(r rec) ([]Op, error) {
		d := ttl(r.v)
		if d < 0 {
			return nil, nil
		}
		op, err := to.PutTTLOp(r.id, r.v, d)
		return []Op{IfAbsentOp(to.key(r.id)), op}, err
	}
	for len(recs) > 0 {
		page := recs[:min(len(recs), 250)]
		recs = recs[len(page):]
		var ops []Op
		for _, r := range page {
			more, err := opsOf(r)
			if err != nil {
				return err
			}
			ops = append(ops, more...)
		}
		err := to.KV().Commit(ctx, ops...)
		if !errors.Is(err, domain.ErrRecordExists) {
			if err != nil {
				return err
			}
			continue
		}
		for _, r := range page {
			ops, err := opsOf(r)
			if err == nil && len(ops) > 0 {
				err = to.KV().Commit(ctx, ops...)
			}
			if err != nil && !errors.Is(err, domain.ErrRecordExists) {
				return err
			}
		}
	}
	return nil
}
