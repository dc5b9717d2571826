package persist

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/gateway/gateway/domain"
)

// What is pending: the marks, and the accepts since the checkpoint without an outcome (see
// Outbox). Pending reads them at boot; Checkpoint, every few seconds while the gateway
// runs (the engine's rhythm), marks the messages pending longer than markAfter and moves the checkpoint on; Renew
// writes again the bodies of the marked messages that near their expiry.

// checkpointVersion starts the checkpoint's value (then the time, ms, 8 bytes).
const checkpointVersion = 1

func encodeCheckpoint(ms int64) []byte {
	return binary.BigEndian.AppendUint64([]byte{checkpointVersion}, uint64(max(ms, 0)))
}

// readCheckpoint reads the checkpoint (found false: none was written, every accept is read).
func (o *Outbox) readCheckpoint() (int64, bool, error) {
	ms, found, _, err := o.readCheckpointAt()
	return ms, found, err
}

// readCheckpointAt is readCheckpoint with, on a store that answers it (WrittenReader), a time
// on the store's clock that had passed when the read ended (zero: unknown).
func (o *Outbox) readCheckpointAt() (int64, bool, time.Time, error) {
	v, ref, err := o.readWritten(checkpointKey)
	switch {
	case errors.Is(err, domain.ErrRecordNotFound):
		return 0, false, time.Time{}, nil
	case err != nil:
		return 0, false, time.Time{}, err
	case len(v) != 9 || v[0] != checkpointVersion:
		return 0, false, time.Time{}, fmt.Errorf("%w: %s: a checkpoint of %d bytes, version %d", domain.ErrRecordInvalid, checkpointKey, len(v), v[0])
	}
	return int64(binary.BigEndian.Uint64(v[1:])), true, ref, nil
}

// The accepts' floor. On a store that reads records by their write time (NATS: ScanSince, by
// the server's clock), the boot reads the accepts written at or after the floor, a time on the
// store's clock kept beside the checkpoint (floorKey), instead of the partition's whole accept
// log (two weeks of it: bodyTTL). The floor is a bound no node's clock takes part in:
//
//   - The outbox keeps the store time it read last (stored): Checkpoint, and the boot, read
//     the checkpoint record with the time the server stored it (readWritten); that time had
//     passed on the stamping server's clock when the read ended.
//   - Every pending message this process accepted was indexed (index1) after that read, with
//     the time it read (after), and before its accept was sent, however long it then waited
//     in a commit's queue or a batch in flight: the server stored the accept later in real
//     time than it stored the record whose time was read, so stamped it at or after that
//     time, less how far the accept's stamping server's clock is behind the other's.
//   - The floor written is the least of those times over the messages pending without a mark
//     once the commit that writes it lands (those this Checkpoint marks are in that commit or
//     one before it), and the time this Checkpoint read (a message indexed later is indexed
//     after that read), less RecountSkew: the stream's records are stamped by whichever
//     server leads it, and a leader's clock may be behind the last one's. A message indexed
//     before the outbox read any store time has no bound: while one is pending without a
//     mark no floor is written (the last one stays).
//   - A message the boot found (not accepted here) was stored at or after the floor the boot
//     read from (bootFloor), which the floor written never passes while one is pending
//     without a mark; after a boot that read every accept, no floor is written until each of
//     them is marked or settled (markAfter).
//
// So every message pending without a mark when a floor is computed was stored at or after it,
// and every accept sent later is stored later: a floor holds from when it is written on, an
// older one is only a longer read. A message accepted by another node before this one fenced
// it is in the stream before the fence and was read by this node's boot (or is refused by the
// fence), so it is one of the boot's; a checkpoint written by another node carries that
// node's own floor. A write whose answer was lost (doubtful) or sent again was indexed once,
// before its first send, whenever it lands. What the argument assumes: a record the stream
// stores later in real time is stamped at most RecountSkew before any record it stored
// earlier, whichever servers lead it (a server's clock does not step back by more; a new
// leader's is not behind an earlier one's by more). A leader AHEAD of an earlier one by any
// amount is safe (review rev28: the floor taken as W less the time since indexing, on the
// process's clock, assumed it within RecountSkew and lost a message past it); a move back
// from it is a leader behind (the README's "Clocks": the cluster assumes its servers' clocks
// within 2 s). No process's clock takes part (a process paused or a VM suspended between the
// read and its indexing only makes the time read older).
// Without a server time (Badger, Memory), without a checkpoint or a floor (a store written
// by a release before this one, or one that never ran Checkpoint), every accept is read.

// floorKey holds the accepts' floor (floorVersion, then ms on the store's clock, 8 bytes).
var floorKey = []byte("outbox_checkpoint/floor")

const floorVersion = 1

// WrittenReader is a store that answers when it stored a record, by its own clock (natskv).
type WrittenReader interface {
	ReadWritten(key []byte) ([]byte, time.Time, error)
}

// readWritten reads key with the time the store stored it, by its own clock, and keeps that
// time as the last read (stored), or reads it plainly (the time zero: unknown) on a store that
// does not answer it.
func (o *Outbox) readWritten(key []byte) ([]byte, time.Time, error) {
	wr, ok := o.kv.(WrittenReader)
	if !ok {
		v, err := o.kv.Get(key)
		return v, time.Time{}, err
	}
	v, at, err := wr.ReadWritten(key)
	if err != nil {
		return nil, time.Time{}, err
	}
	if !at.IsZero() {
		o.mu.Lock()
		o.stored = max(at.UnixMilli(), 1)
		o.mu.Unlock()
	}
	return v, at, nil
}

// readFloor reads the accepts' floor (found false: none, or a store that does not read by
// write time: every accept is read).
func (o *Outbox) readFloor() (int64, bool, error) {
	if _, ok := o.kv.(sinceScanner); !ok {
		return 0, false, nil
	}
	if _, ok := o.kv.(WrittenReader); !ok {
		return 0, false, nil
	}
	v, err := o.kv.Get(floorKey)
	switch {
	case errors.Is(err, domain.ErrRecordNotFound):
		return 0, false, nil
	case err != nil:
		return 0, false, err
	case len(v) != 9 || v[0] != floorVersion:
		return 0, false, nil // a later release's: read every accept
	}
	ms := int64(binary.BigEndian.Uint64(v[1:]))
	return ms, ms > 0, nil
}

// acceptsFloor is the floor Checkpoint writes (ok false: none can be, the last one stays): the
// least bound over the messages pending without a mark (see above). Called under mu.
func (o *Outbox) acceptsFloor(ref time.Time) (int64, bool) {
	if ref.IsZero() {
		return 0, false
	}
	f := ref.UnixMilli()
	for _, p := range o.index {
		switch {
		case p.mark != unmarked:
		case p.found && o.bootFloor == 0:
			return 0, false // found by a boot that read every accept
		case p.found:
			f = min(f, o.bootFloor)
		case p.after == 0:
			return 0, false // indexed before any store time was read
		default:
			f = min(f, p.after)
		}
	}
	return f - RecountSkew.Milliseconds(), true
}

// candidate is a message that may be pending at boot.
type candidate struct {
	id, pos string
	body    []byte // its accept record, when read already
	marked  bool
	expires int64 // the mark's body expiry (Unix seconds)
	e       domain.OutboxEntry
}

// Pending lists every message without an outcome, in acceptance order, and indexes them (run
// at boot, before any accept): the marks, and the accepts at or after the checkpoint whose
// outcome is not written. Marks of the older layouts are moved to this one; stale marks (their
// outcome written: the outcome's commit raced the mark's) are removed; marked bodies with less
// than renewBelow left are renewed. Then it writes the checkpoint again.
func (o *Outbox) Pending() ([]domain.OutboxEntry, error) {
	now := o.now()
	// The checkpoint and the marks are read at once, and the accepts beside them on a store
	// that scans the whole prefix whatever the checkpoint (scanGroupsFromLazy): on NATS each
	// is a round trip or a few, and one after the other the first two were 135-250 ms of a
	// 600 ms read with 1,666 messages queued in a partition taken over at load 11.
	var (
		reads      sync.WaitGroup
		ckpt       int64
		found      bool
		ref        time.Time
		ckErr      error
		floor      int64
		floorFound bool
		floorErr   error
		cands      []*candidate
		older      []olderMark
		marksErr   error
		byID       = map[string]*candidate{}
		ops        []Op
		readsEnded bool
	)
	defer reads.Wait() // nothing of a failed read runs on
	reads.Go(func() { ckpt, found, ref, ckErr = o.readCheckpointAt() })
	reads.Go(func() { cands, older, marksErr = o.scanMarks() })
	var floorRead sync.WaitGroup
	floorRead.Go(func() { floor, floorFound, floorErr = o.readFloor() })
	// waitReads waits for the checkpoint and the marks (once) and indexes the marks.
	waitReads := func() error {
		if !readsEnded {
			reads.Wait()
			readsEnded = true
			for _, c := range cands {
				byID[c.id] = c
			}
		}
		return errors.Join(ckErr, marksErr)
	}
	// The accepts since the checkpoint (those of marked messages are read with their mark):
	// on a store that reads by write time, those written since the floor, when there is one.
	prefix := []byte(messageLogTable + "/")
	from := func() ([]byte, error) {
		if err := waitReads(); err != nil || !found {
			return nil, err
		}
		return appendLogPosPrefix(nil, ckpt), nil
	}
	visit := func(key, value []byte) error {
		id, pos, ok := acceptOfKey(key)
		if !ok || len(value) == 0 || value[0] != bodyVersion3 || byID[id] != nil {
			return nil
		}
		c := &candidate{id: id, pos: pos, body: slices.Clone(value)}
		cands, byID[id] = append(cands, c), c
		return nil
	}
	floorRead.Wait()
	if floorErr != nil {
		return nil, floorErr
	}
	var err error
	if ss, ok := o.kv.(sinceScanner); ok && floorFound {
		err = filterGroupsFrom(func(p []byte, fn func(key, value []byte) error) error {
			return ss.ScanSince(p, time.UnixMilli(floor), fn)
		}, prefix, from, visit)
	} else {
		floor = 0
		err = scanGroupsFromLazy(o.kv, prefix, from, visit)
	}
	if err == nil {
		err = waitReads() // no accept seen: the scan did not wait
	}
	if err != nil {
		return nil, err
	}
	if floor > 0 && !found {
		// A floor without a checkpoint: not one this code writes (both go in one commit);
		// every accept is read.
		floor = 0
		if err := scanGroupsFromLazy(o.kv, prefix, from, visit); err != nil {
			return nil, err
		}
	}
	// Those whose outcome is written are not pending (a mark left behind goes).
	settled, err := o.settled(cands, ckpt, found, floor)
	if err != nil {
		return nil, err
	}
	if err := o.readMarkedBodies(cands, settled); err != nil {
		return nil, err
	}
	var out []*candidate
	for i, c := range cands {
		if settled[i] {
			if c.marked {
				ops = append(ops, Op{Key: pendingKey(c.id), Delete: true})
			}
			continue
		}
		if c.body == nil {
			o.logger.Load().Error("outbox: a queued message's body expired before it could be sent: dropped",
				"message_id", c.id, "expired_at", time.Unix(c.expires, 0))
			ops = append(ops, Op{Key: pendingKey(c.id), Delete: true})
			continue
		}
		var ref string
		if c.e, _, ref, err = decodeRef(c.body); err == nil {
			err = o.loadMedia(&c.e, ref)
		}
		if err != nil {
			return nil, fmt.Errorf("%s %q: %w", messageLogTable, c.id, err)
		}
		if c.marked && time.Unix(c.expires, 0).Sub(now) < renewBelow {
			if ref != "" { // put again: it outlives the body
				if _, err := o.putMediaObject(context.Background(), c.e); err != nil {
					return nil, err
				}
			}
			renewed := Op{Key: acceptKeyAt(c.pos, c.id), Value: c.body, TTL: bodyTTL}
			c.expires = now.Add(bodyTTL).Unix()
			ops = append(ops, renewed, Op{Key: pendingKey(c.id), Value: markV3(c.pos, time.Unix(c.expires, 0))})
		}
		c.body = nil
		out = append(out, c)
	}
	if err := o.commitChunks(ops); err != nil {
		return nil, err
	}
	// The older layouts' pending messages, moved to this one (marked: they may be older than
	// the checkpoint).
	moved, err := o.moveOlder(older, now)
	if err != nil {
		return nil, err
	}
	out = append(out, moved...)

	o.mu.Lock()
	entries := make([]domain.OutboxEntry, 0, len(out))
	for _, c := range out {
		if o.index[c.id] == nil {
			p := &pendingMsg{uid: c.e.UserID, at: int64(c.e.CreatedAt), since: now, state: waiting, found: true}
			if c.marked {
				p.mark, p.expires = marked, c.expires
			}
			o.index[c.id] = p
		}
		entries = append(entries, c.e)
	}
	o.booted = true
	o.bootFloor = floor
	o.mu.Unlock()
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].CreatedAt < entries[j].CreatedAt })
	// The checkpoint moves on now (a boot after this one reads from here), its floor from the
	// store's time the checkpoint's read brought.
	return entries, o.checkpoint(ref)
}

// readMarkedBodies reads the accept records of the marked candidates not settled (the others'
// came with the accepts' scan) together (GetMany: on NATS in a few round trips, not one per
// message; a partition taken over after its messages waited past markAfter has thousands). A
// body not found (expired) stays nil.
func (o *Outbox) readMarkedBodies(cands []*candidate, settled []bool) error {
	var (
		keys [][]byte
		of   []*candidate
	)
	for i, c := range cands {
		if !settled[i] && c.body == nil {
			keys, of = append(keys, acceptKeyAt(c.pos, c.id)), append(of, c)
		}
	}
	bodies, err := GetMany(o.kv, keys)
	if err != nil {
		return err
	}
	for i, c := range of {
		c.body = bodies[i]
	}
	return nil
}

// scanMarks reads the pending marks of every layout: this layout's as candidates, the older
// ones to be moved (moveOlder).
func (o *Outbox) scanMarks() (cands []*candidate, older []olderMark, err error) {
	prefix := []byte(outboxPendingTable + "/")
	err = o.kv.Scan(prefix, func(key, value []byte) error {
		id := string(key[len(prefix):])
		switch {
		case len(value) > 9 && value[0] == pendingMarkV3:
			cands = append(cands, &candidate{id: id, pos: string(value[9:]), marked: true, expires: int64(binary.BigEndian.Uint64(value[1:9]))})
		case len(value) == 9 && value[0] == pendingMarkV2:
			older = append(older, olderMark{id: id})
		case len(value) > 0 && value[0] == recordVersion1:
			older = append(older, olderMark{id: id, whole: slices.Clone(value)})
		default:
			return fmt.Errorf("%w: %s %q: unknown pending mark", domain.ErrRecordInvalid, outboxPendingTable, id)
		}
		return nil
	})
	return cands, older, err
}

// olderMark is a pending mark of an older layout: version 2 (the body at outbox/<id>), or the
// whole entry (version 1).
type olderMark struct {
	id    string
	whole []byte
}

// moveOlder moves the older layouts' pending messages to this layout: each one's accept
// record and mark written, its older mark and body removed, in one commit per batch.
func (o *Outbox) moveOlder(older []olderMark, now time.Time) ([]*candidate, error) {
	var (
		out []*candidate
		ops []Op
	)
	for _, m := range older {
		var e domain.OutboxEntry
		if m.whole != nil {
			if _, err := Decode(m.whole, recordVersion1, &e); err != nil {
				return nil, fmt.Errorf("%s %q: %w", outboxPendingTable, m.id, err)
			}
		} else {
			data, err := o.kv.Get(bodyKey(m.id))
			if errors.Is(err, domain.ErrRecordNotFound) {
				o.logger.Load().Error("outbox: a queued message's body expired before it could be sent: dropped", "message_id", m.id)
				ops = append(ops, Op{Key: pendingKey(m.id), Delete: true})
				continue
			} else if err != nil {
				return nil, err
			}
			if e, _, err = o.decodeFull(data); err != nil {
				return nil, fmt.Errorf("%s %q: %w", outboxTable, m.id, err)
			}
		}
		if e.ID == "" {
			e.ID = m.id
		}
		put, err := o.acceptOp(context.Background(), e, "")
		if err != nil {
			return nil, err
		}
		pos := posOf(e.UserID, int64(e.CreatedAt))
		expires := now.Add(bodyTTL)
		ops = append(ops, put, Op{Key: pendingKey(m.id), Value: markV3(pos, expires)}, Op{Key: bodyKey(m.id), Delete: true})
		out = append(out, &candidate{id: m.id, pos: pos, marked: true, expires: expires.Unix(), e: e})
	}
	return out, o.commitChunks(ops)
}

// commitChunks commits ops in batches under the store's limits (the ops are independent).
func (o *Outbox) commitChunks(ops []Op) error {
	for len(ops) > 0 {
		n, size := 0, 0
		for n < len(ops) && n < bgBatchMax && size < bgBatchBytes {
			size += len(ops[n].Key) + len(ops[n].Value)
			n++
		}
		if err := o.kv.Commit(context.Background(), ops[:n]...); err != nil {
			return err
		}
		ops = ops[n:]
	}
	return nil
}

// acceptOfKey reads an accept record's key: msg_log/<uid>/<ms>/out/<id> → id, "<uid>/<ms>".
func acceptOfKey(key []byte) (id, pos string, ok bool) {
	rest := key[len(messageLogTable)+1:]
	i := bytes.IndexByte(rest, '/')
	// <uid>/ then 13 digits, then /out/ and the id.
	if i < 0 || len(rest) < i+1+13+5+1 || string(rest[i+14:i+19]) != "/"+domain.DirOut+"/" {
		return "", "", false
	}
	return string(rest[i+19:]), string(rest[:i+14]), true
}

// Checkpoint marks the messages pending longer than markAfter, reads back the accepts that
// answered an error (forgotten when not stored, marked when stored), and writes the checkpoint
// when it moved: the acceptance time of the oldest message pending without a mark (or a moment
// ago when there is none), in the same commit as the marks. It does nothing before Pending ran
// (an index without the messages of the last process could move it past them).
func (o *Outbox) Checkpoint() error {
	o.ckptMu.Lock()
	defer o.ckptMu.Unlock()
	o.mu.Lock()
	booted := o.booted
	o.mu.Unlock()
	if !booted {
		return nil
	}
	// A time on the store's clock that has passed, for the accepts' floor, read before the
	// messages pending are looked at (a message indexed after it is stored after it). None
	// when the read fails: the floor written last still holds.
	var ref time.Time
	if _, ok := o.kv.(WrittenReader); ok {
		if _, r, err := o.readWritten(checkpointKey); err == nil {
			ref = r
		}
	}
	return o.checkpointLocked(ref)
}

// checkpoint is Checkpoint with ref read already (the boot's read of the checkpoint).
func (o *Outbox) checkpoint(ref time.Time) error {
	o.ckptMu.Lock()
	defer o.ckptMu.Unlock()
	return o.checkpointLocked(ref)
}

// checkpointLocked is Checkpoint under ckptMu, ref a time on the store's clock (zero: no floor
// is written).
func (o *Outbox) checkpointLocked(ref time.Time) error {
	now := o.now()
	type job struct {
		id, pos string
		at      int64
	}
	var marks, doubts []job
	o.mu.Lock()
	if !o.booted {
		o.mu.Unlock()
		return nil
	}
	for id, p := range o.index {
		if p.mark != unmarked || now.Sub(p.since) < markAfter {
			continue
		}
		switch p.state {
		case waiting:
			p.mark = marking
			marks = append(marks, job{id, posOf(p.uid, p.at), p.at})
		case doubtful:
			doubts = append(doubts, job{id, posOf(p.uid, p.at), p.at})
		}
	}
	o.mu.Unlock()
	for _, d := range doubts {
		_, err := o.kv.Get(acceptKeyAt(d.pos, d.id))
		if err != nil && !errors.Is(err, domain.ErrRecordNotFound) {
			continue // read again at the next checkpoint
		}
		o.mu.Lock()
		if p := o.index[d.id]; p != nil && p.state == doubtful && p.mark == unmarked {
			if err != nil {
				delete(o.index, d.id) // not stored: nothing is pending
			} else {
				// Stored, and in no queue here: the next boot (or a retry) sends it.
				p.mark = marking
				marks = append(marks, d)
			}
		}
		o.mu.Unlock()
	}
	var ops []Op
	for _, m := range marks {
		ops = append(ops, Op{Key: pendingKey(m.id), Value: markV3(m.pos, time.UnixMilli(m.at).Add(bodyTTL))})
	}
	o.mu.Lock()
	c := max(now.Add(-checkpointSlack).UnixMilli(), o.floor)
	for _, p := range o.index {
		if p.mark == unmarked && p.at < c {
			c = p.at
		}
	}
	o.floor = max(o.floor, c)
	af, withFloor := o.acceptsFloor(ref)
	o.mu.Unlock()
	// The floor after every mark this one writes: it counts none of them unmarked (commitChunks
	// commits in order and stops at the first error).
	ops = append(ops, Op{Key: checkpointKey, Value: encodeCheckpoint(c)})
	if withFloor {
		ops = append(ops, Op{Key: floorKey, Value: binary.BigEndian.AppendUint64([]byte{floorVersion}, uint64(max(af, 1)))})
	}
	err := o.commitChunks(ops)
	o.mu.Lock()
	for _, m := range marks {
		if p := o.index[m.id]; p != nil && p.mark == marking {
			if err == nil {
				p.mark, p.expires = marked, time.UnixMilli(m.at).Add(bodyTTL).Unix()
			} else {
				p.mark = unmarked
			}
		}
	}
	o.mu.Unlock()
	return err
}

// Renew writes again the bodies of the marked messages that have less than renewBelow left
// (run daily while the gateway runs: a message may stay queued for weeks behind a disconnected
// session). It returns how many it renewed.
func (o *Outbox) Renew() (int, error) {
	now := o.now()
	type job struct{ id, pos string }
	var jobs []job
	o.mu.Lock()
	for id, p := range o.index {
		if p.mark == marked && time.Unix(p.expires, 0).Sub(now) < renewBelow {
			jobs = append(jobs, job{id, posOf(p.uid, p.at)})
		}
	}
	o.mu.Unlock()
	var ops []Op
	expires := now.Add(bodyTTL)
	for _, j := range jobs {
		data, err := o.kv.Get(acceptKeyAt(j.pos, j.id))
		if errors.Is(err, domain.ErrRecordNotFound) {
			continue // settled meanwhile (its outcome renews what it needs), or gone (boot says so)
		} else if err != nil {
			return 0, err
		}
		ops = append(ops, Op{Key: acceptKeyAt(j.pos, j.id), Value: data, TTL: bodyTTL}, Op{Key: pendingKey(j.id), Value: markV3(j.pos, expires)})
	}
	if err := o.commitChunks(ops); err != nil {
		return 0, err
	}
	o.mu.Lock()
	for _, j := range jobs {
		if p := o.index[j.id]; p != nil && p.mark == marked {
			p.expires = expires.Unix()
		}
	}
	o.mu.Unlock()
	return len(ops) / 2, nil
}

// groupScanner is a KV that walks, for each group of keys under a prefix (the keys sharing the
// part up to the first '/' after the prefix: a user's history), the group's keys at or after
// the group followed by from, seeking past the others (Badger).
type groupScanner interface {
	ScanGroupsFrom(prefix, from []byte, fn func(key, value []byte) error) error
}

// scanGroupsFrom is kv's group scan, or a scan of the whole prefix that skips the keys before
// from in each group (nil from: every key).
func scanGroupsFrom(kv KV, prefix, from []byte, fn func(key, value []byte) error) error {
	return scanGroupsFromLazy(kv, prefix, func() ([]byte, error) { return from, nil }, fn)
}

// scanGroupsFromLazy is scanGroupsFrom with from asked of from(). A store with a group scan
// (Badger, which seeks each group to it) is asked it first. Any other scans at once and asks
// it when the first key comes: persist/natskv and Memory read the whole prefix whatever from
// is and hand the keys to fn from what they read, holding no lock that from's own reads could
// wait for, so those reads run beside the scan instead of before it.
func scanGroupsFromLazy(kv KV, prefix []byte, from func() ([]byte, error), fn func(key, value []byte) error) error {
	if g, ok := kv.(groupScanner); ok {
		f, err := from()
		switch {
		case err != nil:
			return err
		case f != nil:
			return g.ScanGroupsFrom(prefix, f, fn)
		}
		return kv.Scan(prefix, fn)
	}
	return filterGroupsFrom(kv.Scan, prefix, from, fn)
}

// filterGroupsFrom is scanGroupsFromLazy's walk on a store without a group scan: scan reads
// the whole prefix (or, on a store that reads by write time, what was written since a time)
// and the keys before from in each group are skipped, from asked when the first key comes.
func filterGroupsFrom(scan func(prefix []byte, fn func(key, value []byte) error) error, prefix []byte, from func() ([]byte, error), fn func(key, value []byte) error) error {
	var (
		f     []byte
		asked bool
	)
	return scan(prefix, func(key, value []byte) error {
		if !asked {
			var err error
			if f, err = from(); err != nil {
				return err
			}
			asked = true
		}
		if f != nil {
			i := bytes.IndexByte(key[len(prefix):], '/')
			if i < 0 || bytes.Compare(key[len(prefix)+i+1:], f) < 0 {
				return nil
			}
		}
		return fn(key, value)
	})
}
