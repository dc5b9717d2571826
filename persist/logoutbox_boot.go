package persist

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist/outlog"
)

// What is pending in a LogOutbox: the marks (outlog_mark/<id>: a message pending longer than
// markAfter), and the accepts from the checkpoint on with no outcome. Pending reads them at
// boot; Checkpoint marks the messages pending long and moves the checkpoint to the oldest
// accept pending without a mark (or the log's end); Renew drops the segments past retention.

// logCand is a message that may be pending at boot.
type logCand struct {
	id     string
	pos    outlog.Pos
	body   []byte // its body record (accept or requeue), version byte first
	marked bool
	// ops[ops:opsEnd] are the Badger records boot writes again for it (its history entry,
	// its outlog_pos).
	ops, opsEnd int
}

// Pending lists every message without an outcome, in acceptance order, and indexes them (run
// at boot, before any accept). Stale marks (their outcome written) are removed, and the
// outlog_pos records of accepts since the checkpoint written again (a crash may have kept one
// from being written after its accept). Then it writes the checkpoint again.
func (lo *LogOutbox) Pending() ([]domain.OutboxEntry, error) {
	var ckpt outlog.Pos
	switch v, err := lo.kv.Get(logCheckpointKey); {
	case errors.Is(err, domain.ErrRecordNotFound):
	case err != nil:
		return nil, err
	case len(v) != 8:
		return nil, fmt.Errorf("%w: %s: %d bytes", domain.ErrRecordInvalid, logCheckpointKey, len(v))
	default:
		ckpt = outlog.Pos(binary.LittleEndian.Uint64(v))
	}
	if err := lo.loadHeads(); err != nil {
		return nil, err
	}
	byPos := map[outlog.Pos]*logCand{}
	var ops []Op
	// The marks.
	prefix := []byte(logMarkTable + "/")
	type mark struct {
		id  string
		pos outlog.Pos
	}
	var marks []mark
	if err := lo.kv.Scan(prefix, func(key, value []byte) error {
		if len(value) != 8 {
			return fmt.Errorf("%w: %s: %d bytes", domain.ErrRecordInvalid, key, len(value))
		}
		marks = append(marks, mark{string(key[len(prefix):]), outlog.Pos(binary.LittleEndian.Uint64(value))})
		return nil
	}); err != nil {
		return nil, err
	}
	for _, m := range marks {
		f, err := lo.readAccept(m.pos, m.id)
		switch {
		case errors.Is(err, domain.ErrRecordNotFound):
			lo.logger.Load().Error("a pending message's accept is gone from the log", "id", m.id, "pos", m.pos.String())
			ops = append(ops, Op{Key: logMarkKey(m.id), Delete: true})
			continue
		case err != nil:
			return nil, err
		}
		if f.slots[slotOutcome] != nil {
			ops = append(ops, Op{Key: logMarkKey(m.id), Delete: true}) // settled: a stale mark
			continue
		}
		body := f.rec[bodyAt(f.rec):]
		if s := f.slots[slotRequeue]; s != nil {
			q, err := lo.readLinked(s, recRequeue, f.pos)
			if err != nil {
				return nil, err
			}
			if q != nil {
				body = q
			}
		}
		byPos[m.pos] = &logCand{id: m.id, pos: m.pos, body: slices.Clone(body), marked: true}
	}
	// The accepts since the checkpoint, and the outcomes and requeues after them.
	err := lo.log.Scan(ckpt, func(p outlog.Pos, rec []byte) error {
		if len(rec) < 9 {
			return fmt.Errorf("%w: %s at %v: %d bytes", domain.ErrRecordInvalid, outboxTable, p, len(rec))
		}
		switch rec[0] {
		case recAccept:
			at := bodyAt(rec)
			var b struct {
				ID   string `json:"id"`
				User string `json:"user"`
			}
			if _, err := Decode(rec[at:], bodyVersion3, &b); err != nil {
				return fmt.Errorf("%s at %v: %w", outboxTable, p, err)
			}
			if _, skip, ms, ok := chainOf(rec, userHash(b.User)); ok {
				// On its user's chain: the head moves to it.
				lo.bootHead(b.User, chainLink{pos: p, skip: skip, ms: ms}, false)
			}
			if _, ok := byPos[p]; ok {
				return nil // marked
			}
			c := &logCand{id: b.ID, pos: p, body: slices.Clone(rec[at:]), ops: len(ops)}
			byPos[p] = c
			if rec[1]&acceptChained == 0 {
				// An accept of the layout before the chain: its Badger history entry, which
				// the crash may have kept from being written.
				if e, _, err := decodeBody(rec[at:]); err != nil {
					return fmt.Errorf("%s at %v: %w", outboxTable, p, err)
				} else if op, ok, err := historyOp(&e); err != nil {
					return err
				} else if ok {
					ops = append(ops, op)
				}
			}
			if rec[1]&acceptCallerID != 0 {
				// Its outlog_pos record, which a crash may have kept from being written.
				ops = append(ops, Op{Key: logPosKey(b.ID), Value: posBytes(p), TTL: logPosTTL})
			}
			c.opsEnd = len(ops)
		case recVoid:
			// An accept answered as refused: not pending, and its records are not written.
			if c := byPos[outlog.Pos(binary.LittleEndian.Uint64(rec[1:9]))]; c != nil && !c.marked {
				for i := c.ops; i < c.opsEnd; i++ {
					ops[i] = Op{}
				}
				delete(byPos, c.pos)
			}
		case recOutcome, recRequeue:
			c := byPos[outlog.Pos(binary.LittleEndian.Uint64(rec[1:9]))]
			if c == nil {
				return nil
			}
			if rec[0] == recRequeue {
				c.body = slices.Clone(rec[9:])
				return nil
			}
			if c.marked {
				ops = append(ops, Op{Key: logMarkKey(c.id), Delete: true})
			}
			delete(byPos, c.pos)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	cands := make([]*logCand, 0, len(byPos))
	for _, c := range byPos {
		if !c.marked {
			// Its outcome slot, as the marks' loop reads it: an outcome record lost in a
			// power cut may have left its slot (Get answers the slot's status), and a void
			// record its slot likewise.
			settled, err := lo.slotSettled(c.pos)
			if err != nil {
				return nil, err
			}
			if settled == recVoid {
				for i := c.ops; i < c.opsEnd; i++ {
					ops[i] = Op{}
				}
			}
			if settled != 0 {
				continue
			}
		}
		cands = append(cands, c)
	}
	slices.SortFunc(cands, func(a, b *logCand) int { return cmpPos(a.pos, b.pos) })
	out := make([]domain.OutboxEntry, 0, len(cands))
	refs := make([]string, 0, len(cands))
	kept := cands[:0]
	named := map[string]bool{} // the media files pending messages name
	for _, c := range cands {
		e, _, ref, err := decodeRef(c.body)
		if err == nil {
			err = lo.loadMedia(&e, ref)
		}
		if errors.Is(err, domain.ErrRecordNotFound) {
			// Its file is written and synced before its accept is queued, and removed only
			// once its outcome is durable: gone, it was removed by hand. Passed by, as a body
			// expired on the outbox on Badger is, so that the others are sent.
			lo.logger.Load().Error("outbox: a pending message's media file is gone: not sent", "message_id", c.id, "err", err)
			if c.marked {
				ops = append(ops, Op{Key: logMarkKey(c.id), Delete: true})
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s at %v: %w", outboxTable, c.pos, err)
		}
		named[ref] = true
		out, refs, kept = append(out, e), append(refs, ref), append(kept, c)
	}
	now := lo.now()
	lo.mu.Lock()
	first := !lo.booted
	for i, c := range kept {
		p := &logPending{pos: c.pos, since: now, state: waiting, media: refs[i]}
		if c.marked {
			p.mark = marked
		}
		lo.pending[c.id] = p
	}
	lo.booted = true
	lo.mu.Unlock()
	if first {
		// The files no pending message names: settled before a crash removed them, or
		// written for an accept that never was.
		if n, err := lo.media.sweep(named); err != nil {
			lo.logger.Load().Warn("outbox: remove the media files no pending message names", "err", err)
		} else if n > 0 {
			lo.logger.Load().Info("outbox: removed the media files no pending message names", "files", n)
		}
	}
	ops = slices.DeleteFunc(ops, func(o Op) bool { return o.Key == nil })
	for len(ops) > 0 {
		n := min(len(ops), histBatch)
		if err := lo.kv.Commit(context.Background(), ops[:n]...); err != nil {
			return nil, err
		}
		ops = ops[n:]
	}
	return out, lo.Checkpoint()
}

// slotSettled is the kind of record the outcome slot of the accept at p names (recOutcome:
// settled; recVoid: answered as refused), 0 while it is empty. The slot alone decides: it is
// written once its record is, and under --fsync interval a power cut can keep the slot and
// lose the record (readLinked).
func (lo *LogOutbox) slotSettled(p outlog.Pos) (byte, error) {
	_, slots, err := lo.log.ReadSlots(p)
	if err != nil {
		return 0, fmt.Errorf("%s at %v: %w", outboxTable, p, err)
	}
	if len(slots) != acceptSlots || slots[slotOutcome] == nil {
		return 0, nil
	}
	return slots[slotOutcome][0], nil
}

func cmpPos(a, b outlog.Pos) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Checkpoint marks the messages pending longer than markAfter, removes the marks of those
// settled since, writes the outlog_pos records of the accepts with ids of their own since the
// last (unindexed), and writes the checkpoint: the oldest accept pending without a mark or not
// yet indexed, or the log's end. Nothing before boot's Pending.
func (lo *LogOutbox) Checkpoint() error {
	lo.ckptMu.Lock()
	defer lo.ckptMu.Unlock()
	now := lo.now()
	var ops []Op
	var toMark []string
	lo.mu.Lock()
	if !lo.booted {
		lo.mu.Unlock()
		return nil
	}
	for id, p := range lo.pending {
		if p.mark == unmarked && p.state == waiting && now.Sub(p.since) >= markAfter {
			p.mark = marking
			toMark = append(toMark, id)
			ops = append(ops, Op{Key: logMarkKey(id), Value: posBytes(p.pos)})
		}
	}
	unmark := lo.unmark
	lo.unmark = nil
	lo.mu.Unlock()
	for _, id := range unmark {
		ops = append(ops, Op{Key: logMarkKey(id), Delete: true})
	}
	if len(ops) > 0 {
		err := lo.kv.Commit(context.Background(), ops...)
		lo.mu.Lock()
		for _, id := range toMark {
			if p := lo.pending[id]; p != nil && p.mark == marking {
				if err == nil {
					p.mark = marked
				} else {
					p.mark = unmarked
				}
			} else if p == nil && err == nil {
				lo.unmark = append(lo.unmark, id) // settled while its mark was written
			}
		}
		if err != nil {
			lo.unmark = append(lo.unmark, unmark...)
		}
		lo.mu.Unlock()
		if err != nil {
			return err
		}
	}
	// The heads as they stood at d, on disk, and the checkpoint at or before d: boot takes
	// them and moves them on with the accepts it scans from the checkpoint. Heads written
	// before the checkpoint are never ahead of what it scans (a head only moves forward).
	if err := lo.log.Sync(); err != nil { // SyncInterval: Durable up to what is queued now
		return err
	}
	d := lo.log.Durable()
	lo.removeMedia(d) // the media of the messages settled before d: their outcomes are on disk
	hops, saved := lo.headsOps(d)
	for len(hops) > 0 {
		n := min(len(hops), histBatch)
		if err := lo.kv.Commit(context.Background(), hops[:n]...); err != nil {
			return err
		}
		hops = hops[n:]
	}
	saved()
	// The outlog_pos records of the accepts since the last checkpoint (finishAccept leaves them
	// to it); one not written holds the checkpoint, so that boot writes it.
	perr := lo.writePositions(d)
	lo.mu.Lock()
	ckpt := min(lo.log.End(), d)
	for _, p := range lo.pending {
		if p.mark != marked && p.pos < ckpt {
			ckpt = p.pos
		}
	}
	for _, pos := range lo.unindexed {
		ckpt = min(ckpt, pos)
	}
	lo.mu.Unlock()
	if perr != nil {
		return perr
	}
	return lo.kv.Commit(context.Background(), Op{Key: logCheckpointKey, Value: posBytes(ckpt)})
}

// histBatch: the most records one of boot's or the checkpoint's commits writes.
const histBatch = 512

// Renew drops the log's segments last written more than OutboxRetention ago, up to the first
// that holds a pending message's accept (their bodies are kept where they are, not written
// again: a segment holding one stays, with every segment after it). It returns 0 (no body is
// written again).
func (lo *LogOutbox) Renew() (int, error) {
	lo.mu.Lock()
	keep := lo.log.End().Seg()
	for _, p := range lo.pending {
		keep = min(keep, p.pos.Seg())
	}
	booted := lo.booted
	lo.mu.Unlock()
	if !booted {
		return 0, nil
	}
	segs, err := lo.log.Segments()
	if err != nil {
		return 0, err
	}
	cutoff := lo.now().Add(-OutboxRetention)
	var through uint32
	for _, s := range segs {
		if s.Seg >= keep || !s.Modified.Before(cutoff) {
			break
		}
		through = s.Seg
	}
	if through > 0 {
		if _, err := lo.log.Drop(through); err != nil {
			return 0, err
		}
		lo.dropHeads(through)
	}
	return 0, nil
}
