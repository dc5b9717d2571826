package persist

import (
	"encoding/binary"
	"errors"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist/outlog"
)

// LogRecount is Accounts.Recount for the log outbox (LogOutbox, a lone gateway's default): the
// same count of the messages a kill -9 left out of the account snapshots, read from the log's
// outcome records (each names its accept, which holds the message's kind; its "p" the user).
// With it the lone gateway writes its allowance counts as seldom as a cluster node does
// (engine/allowance_recount.go).
type LogRecount struct {
	Accounts Accounts
	Outbox   *LogOutbox
}

// Recount implements engine.AccountRecounter: the messages sent (their outcome's send time)
// from each user's threshold on (recountWindow), less those its snapshot counts. The log is
// written in time order, so only the segments from the newest one whose first outcome was
// written before the window (less RecountSkew) are read (recountStart): about a margin's
// worth of records and at most one segment more, not the whole log. A message's outcomes are
// read in order and the last one stands (a late failure keeps the send time: still counted;
// a cancellation is not), as the Badger outbox's one record a message does; its accept is read
// for its kind (an edit or a revoke is not charged).
func (r LogRecount) Recount(now time.Time, margin time.Duration) (map[string]domain.AccountRecount, error) {
	w, err := r.Accounts.recountWindow(margin)
	if err != nil || w == nil {
		return nil, err
	}
	lo := r.Outbox
	start, err := lo.recountStart(w.from - RecountSkew.Milliseconds())
	if err != nil {
		return nil, err
	}
	type sent struct {
		uid string
		at  domain.Millis
	}
	cands := map[outlog.Pos]sent{}
	var order []outlog.Pos
	if err := lo.scanPast(start, func(rec []byte) error {
		apos, c, ok := outcomeRecord(rec)
		if !ok {
			return nil
		}
		uid, ok := posUser(c.Pos)
		if thr, _ := w.threshold(uid); !ok || !c.counts() || int64(c.SentAt) < thr {
			delete(cands, apos) // a later outcome that does not count stands
			return nil
		}
		if _, seen := cands[apos]; !seen {
			order = append(order, apos)
		}
		cands[apos] = sent{uid, c.SentAt}
		return nil
	}); err != nil {
		return nil, err
	}
	read := w.newest
	byUser := map[string][]domain.Millis{}
	for _, apos := range order {
		c, ok := cands[apos]
		if !ok {
			continue
		}
		delete(cands, apos) // once (order may name it twice: dropped, then counted again)
		read = max(read, int64(c.at))
		rec, err := lo.log.Read(apos)
		if errors.Is(err, outlog.ErrNotFound) || errors.Is(err, outlog.ErrCorrupt) {
			continue // its segment dropped: no such message (as a body not found)
		}
		if err != nil {
			return nil, err
		}
		if len(rec) <= acceptHeader || rec[0] != recAccept || len(rec) <= bodyAt(rec) {
			continue
		}
		e, _, err := decodeBody(rec[bodyAt(rec):])
		if err != nil || !e.Message.Kind.Charged() || e.UserID != c.uid {
			continue
		}
		byUser[c.uid] = append(byUser[c.uid], c.at)
	}
	if len(byUser) == 0 {
		return nil, nil
	}
	return w.recounted(now, read, byUser), nil
}

// outcomeRecord decodes an outcome record (LogOutbox.Settle): its accept's position and the
// outcome; false for any other record.
func outcomeRecord(rec []byte) (outlog.Pos, outcome, bool) {
	var c outcome
	if len(rec) < 10 || rec[0] != recOutcome {
		return 0, c, false
	}
	if v, err := Decode(rec[9:], statusVersion2, &c); err != nil || v != statusVersion2 {
		return 0, c, false
	}
	return outlog.Pos(binary.LittleEndian.Uint64(rec[1:9])), c, true
}

// scanPast scans the log from start as Scan does, but a record that does not check (a bad
// sector) skips the rest of its segment with a warning instead of failing the recount, and
// with it the boot (review18 R2): the log's own boot reads only from its checkpoint, and a
// recount reading further back must not keep the gateway down over an allowance's count (the
// messages of the part skipped go uncounted: a user may send a few more this month).
func (lo *LogOutbox) scanPast(start outlog.Pos, fn func(rec []byte) error) error {
	from := start
	for {
		var last outlog.Pos
		err := lo.log.Scan(from, func(p outlog.Pos, rec []byte) error {
			last = p
			return fn(rec)
		})
		if !errors.Is(err, outlog.ErrCorrupt) {
			return err
		}
		seg := max(from.Seg(), last.Seg()) // the corrupt record's segment: none read past it
		lo.logger.Load().Warn("the allowances' recount skips the rest of a log segment with a record that does not check",
			"segment", seg, "after", last.String())
		from = outlog.At(seg+1, 0)
	}
}

// recountStart is where a recount reads the log from: the start of the newest segment whose
// first chained accept's time is before cutoff (ms), or of the oldest. An accept's time is
// taken as it is queued (its CreatedAt, the engine's now at the accept, or its user's previous
// accept's when later), and the log is written in queue order: every record of an earlier
// segment was written before that accept was queued, and an outcome's send time is no later
// than its write, so every outcome of an earlier segment was sent before cutoff (RecountSkew,
// taken off cutoff by the caller, covers the accept's time to its queue). An outcome's own
// time is no such bound (review18 R1): it is the outcome's, not its write's, which can come
// much later (held behind its events' commit, a failure retried, a late failure's network
// time). Reading backward, segment by segment, it reads each segment's head up to its first
// chained accept; a segment with none, or whose head does not check, does not bound.
func (lo *LogOutbox) recountStart(cutoff int64) (outlog.Pos, error) {
	segs, err := lo.log.Segments()
	if err != nil {
		return 0, err
	}
	for i := len(segs) - 1; i > 0; i-- {
		seg := segs[i].Seg
		var first int64 // the segment's first chained accept's time (0: none)
		err := lo.log.Scan(outlog.At(seg, 0), func(p outlog.Pos, rec []byte) error {
			if p.Seg() != seg {
				return errStopScan
			}
			if len(rec) > chainHeader && rec[0] == recAccept && rec[1]&acceptChained != 0 {
				first = int64(binary.LittleEndian.Uint64(rec[acceptHeader+16:]))
				return errStopScan
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStopScan) && !errors.Is(err, outlog.ErrCorrupt) {
			return 0, err
		}
		if first != 0 && first < cutoff {
			return outlog.At(seg, 0), nil
		}
	}
	return 0, nil
}
