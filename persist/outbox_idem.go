package persist

import (
	"errors"
	"fmt"
	"slices"

	"github.com/gateway/gateway/domain"
)

// IdemFind looks up, together, the idempotency records the messages ids carry (IdemOf each)
// and the record idemID of its own (Idem), and returns the first of them, in that order, that
// keep accepts (an empty id has none), or domain.ErrRecordNotFound. On a store that reads many
// keys in one round trip (Getter: NATS), everything a never-used key reads (each id's outcome
// and pending mark, and idemID's record) goes in one, where IdemOf and Idem one at a time took
// two an id and one more; only the ids found need a second (their accept records), and a
// message still pending here is read first on its own, as IdemOf does. On a store that reads
// one key at a time (Badger), batching saves nothing and reads more for a replay: it answers
// errors.ErrUnsupported and the caller reads one by one.
func (o *Outbox) IdemFind(ids []string, idemID string, keep func(domain.IdemRecord) bool) (domain.IdemRecord, error) {
	if _, ok := o.kv.(Getter); !ok || o.older != nil {
		return domain.IdemRecord{}, errors.ErrUnsupported // (with older: IdemOf each reads it too)
	}
	ids = slices.Clone(ids) // those read on their own are blanked
	var own *domain.IdemRecord
	pos := make([]string, len(ids))
	keys := make([][]byte, 0, 2*len(ids)+1)
	var slot []int // keys' index of ids[i]'s outcome (its mark follows), -1 when not read
	o.mu.Lock()
	for i, id := range ids {
		if p := o.index[id]; p != nil && id != "" {
			pos[i] = posOf(p.uid, p.at) // pending here: its accept's place is known
		}
	}
	o.mu.Unlock()
	for i := 0; i < len(ids) && pos[i] != ""; i++ {
		// A replay of a message pending here (the usual one: a retry within seconds): its
		// accept alone, as IdemOf reads it.
		rec, err := o.IdemOf(ids[i])
		switch {
		case err == nil && keep(rec):
			return rec, nil
		case err != nil && !errors.Is(err, domain.ErrRecordNotFound):
			return domain.IdemRecord{}, err
		}
		pos[i] = "" // read: not again below
		ids[i] = ""
	}
	for i, id := range ids {
		if pos[i] != "" || id == "" {
			slot = append(slot, -1)
			continue
		}
		slot = append(slot, len(keys))
		keys = append(keys, o.status.key(id), pendingKey(id))
	}
	if idemID != "" {
		keys = append(keys, o.idem.key(idemID))
	}
	vals, err := GetMany(o.kv, keys)
	if err != nil {
		return domain.IdemRecord{}, err
	}
	// A record that cannot be read is an error where one by one would read it: only if no
	// record before it in the order is kept (errAt, ownErr).
	var ownErr error
	errAt := make([]error, len(ids))
	if idemID != "" {
		if v := vals[len(vals)-1]; v != nil {
			if rec, err := o.idem.value(idemID, v); err != nil {
				ownErr = err
			} else {
				own = &rec
			}
		}
	}
	// The places of the ids' accepts, as read() finds them: an outcome names it, else a mark
	// another process wrote (not booted here).
	var accepts [][]byte
	which := make([]int, len(ids)) // accepts' index of ids[i]'s, -1 when not read
	for i, id := range ids {
		which[i] = -1
		if j := slot[i]; j >= 0 {
			if st := vals[j]; st != nil {
				c, err := o.status.value(id, st)
				if err != nil {
					errAt[i] = err
					continue
				}
				pos[i] = c.Pos
			} else if m := vals[j+1]; len(m) > 9 && m[0] == pendingMarkV3 {
				pos[i] = string(m[9:])
			} else if o.pages != nil {
				// Neither: its outcome may be in its window's pages (an id that names its
				// accept's window: a derived one by chance), as read() finds it. Only an id
				// whose window is within the key's TTL is looked for (a scan about 0.2 % of
				// the time for an absent id).
				c, _, found, err := o.pageOutcome(id, idemReadBack)
				if err != nil {
					errAt[i] = err
					continue
				}
				if found {
					pos[i] = c.Pos
				}
			}
		}
		if pos[i] != "" {
			which[i] = len(accepts)
			accepts = append(accepts, acceptKeyAt(pos[i], id))
		}
	}
	if len(accepts) > 0 {
		if vals, err = GetMany(o.kv, accepts); err != nil {
			return domain.IdemRecord{}, err
		}
	}
	for i, k := range which {
		if errAt[i] != nil {
			return domain.IdemRecord{}, errAt[i]
		}
		if k < 0 || vals[k] == nil {
			continue // none, or dropped since its outcome was read: as IdemOf, not found
		}
		e, hash, err := o.decodeFull(vals[k])
		if err != nil {
			return domain.IdemRecord{}, fmt.Errorf("%s %q: %w", messageLogTable, ids[i], err)
		}
		rec := domain.IdemRecord{BodyHash: hash, MessageID: e.ID, At: e.CreatedAt}
		if hash != "" && o.now().Sub(e.CreatedAt.Time()) <= domain.IdempotencyTTL && keep(rec) {
			return rec, nil
		}
	}
	if ownErr != nil {
		return domain.IdemRecord{}, ownErr
	}
	if own != nil && keep(*own) {
		return *own, nil
	}
	return domain.IdemRecord{}, domain.ErrRecordNotFound
}
