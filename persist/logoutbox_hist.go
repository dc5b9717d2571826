package persist

import (
	"context"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist/outlog"
)

// A LogOutbox's history: each listed accept gets its history entry in Badger as the older
// layout's outgoing entry (msg_log/<uid>/<ms>/out/<id>, version 2: its session and peer, read
// by MessageLog as before), written in the background in batches, not on the accept's path.
// The log is the truth: the checkpoint stays at or before the oldest accept whose entry is not
// yet written, and boot writes the entries of every accept since the checkpoint again.
// (bench/README.md, "Eleventh pass", says why this rather than the chain of the design.)

// histBatch: the most entries one commit writes.
const histBatch = 512

// histItem is a history entry waiting for its commit: its op and its accept's position.
type histItem struct {
	op  Op
	pos outlog.Pos
}

// historyOp is e's history entry, accepted at pos (ok false: a kind the history does not list).
func historyOp(e *domain.OutboxEntry) (Op, bool, error) {
	if !listedKind(e.Message.Kind) {
		return Op{}, false, nil
	}
	v, err := Encode(logOutVersion, logOut{SessionID: e.SessionID, Peer: e.Message.To})
	if err != nil {
		return Op{}, false, err
	}
	return Op{Key: acceptKey(e.UserID, int64(e.CreatedAt), e.ID), Value: v, TTL: OutboxRetention}, true, nil
}

// queueHistory queues the history entries of entries accepted at ps.
func (lo *LogOutbox) queueHistory(es []*domain.OutboxEntry, ps []outlog.Pos) error {
	items := make([]histItem, 0, len(es))
	for i, e := range es {
		op, ok, err := historyOp(e)
		if err != nil {
			return err
		}
		if ok {
			items = append(items, histItem{op, ps[i]})
		}
	}
	if len(items) == 0 {
		return nil
	}
	lo.hmu.Lock()
	for _, it := range items {
		lo.hinflight[it.pos]++
	}
	lo.hq = append(lo.hq, items...)
	lo.hmu.Unlock()
	select {
	case lo.hwake <- struct{}{}:
	default:
	}
	return nil
}

// oldestHistory is the oldest accept whose history entry is not written (0: none).
func (lo *LogOutbox) oldestHistory() outlog.Pos {
	lo.hmu.Lock()
	defer lo.hmu.Unlock()
	var oldest outlog.Pos
	for p := range lo.hinflight {
		if oldest == 0 || p < oldest {
			oldest = p
		}
	}
	return oldest
}

// historyWriter writes the queued history entries until stop is closed and none is left; a
// failed commit is tried again a second later (the checkpoint waits for it meanwhile).
func (lo *LogOutbox) historyWriter() {
	defer close(lo.hdone)
	for {
		lo.hmu.Lock()
		items := lo.hq
		if len(items) > histBatch {
			items = items[:histBatch:histBatch]
		}
		lo.hq = lo.hq[len(items):]
		lo.hmu.Unlock()
		if len(items) == 0 {
			select {
			case <-lo.hwake:
				continue
			case <-lo.hstop:
				lo.hmu.Lock()
				n := len(lo.hq)
				lo.hmu.Unlock()
				if n == 0 {
					return
				}
				continue
			}
		}
		ops := make([]Op, len(items))
		for i, it := range items {
			ops[i] = it.op
		}
		if err := lo.kv.Commit(context.Background(), ops...); err != nil {
			lo.logger.Load().Error("outbox: history entries not written (tried again)", "entries", len(items), "err", err)
			lo.hmu.Lock()
			lo.hq = append(items, lo.hq...)
			lo.hmu.Unlock()
			select {
			case <-time.After(time.Second):
			case <-lo.hstop:
				return // left to the next boot (the checkpoint is before them)
			}
			continue
		}
		lo.hmu.Lock()
		for _, it := range items {
			if lo.hinflight[it.pos]--; lo.hinflight[it.pos] <= 0 {
				delete(lo.hinflight, it.pos)
			}
		}
		lo.hmu.Unlock()
	}
}
