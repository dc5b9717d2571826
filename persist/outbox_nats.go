package persist

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gateway/gateway/domain"
)

// Outcome pages (issue 27): on a store whose records are each one message of a stream, found
// only by their key (NATS JetStream: pageScanner), an outcome written as a record of its own
// cost the lone gateway about a fifth of its CPU a message (bench/README.md, "the lone NATS
// gateway's second record"). There the outbox mints the ids of the messages that come without
// one (MintsIDs), each carrying its accept's 10 ms window, and the outcome writer writes the
// outcomes of those messages that one gather holds, per window, as one record:
//
//	outbox_page/<window>/<random>  the outcomes (each its id and its outbox_status record,
//	                               receipts that came with it folded in), TTL OutboxRetention
//
// A message's outcome is paged when its id's window is its accept's (pagedIn): the ids this
// outbox mints always are; an id a caller chose or an Idempotency-Key derived almost never is
// (its outcome is outbox_status/<id>, as on every other store), and when one is, by chance, the
// same rule holds for it everywhere: the writer, a read by id and the boot all decide by the id
// and the accept's time alone. A read by id finds the outcome in the pages of the id's window,
// the newest by stream sequence winning (a later outcome of the same message: a late failure,
// written in a later page); the boot (Pending) reads the pages written since the checkpoint,
// and the recount (Accounts.Recount) those written since its bound.
//
// A cluster's partition (PagesPerSecond) pages coarser: at 5,000-7,000 sends a second over 64
// partitions, a partition has about one outcome a window, so a page per window was about one
// record for every two messages on a node, against one for every nine on the lone gateway
// (bench/README.md, issue 27, page8 and page9). Its writer holds the partition's paged outcomes
// until pageHold are held or pageHoldFor has passed, and writes them a page per second of
// their ids' windows:
//
//	outbox_page/s<window/100>/<random>
//
// still the partition's own (its fence rides on it, and a takeover reads its partition's pages as
// before). An id keeps its 10 ms window; a read by id scans its second's pages beside its window's,
// the newest by stream sequence winning over both; the boot and the recount read outbox_page/ since
// their bound, which holds both. Nothing waits for a held outcome: the engine answers a read by id
// of it from what it keeps of a message whose outcome is being written, as for an outcome in
// flight; a failure, an outcome with ops beside its record (a mark's removal, a body renewed), an
// outcome or receipt that is a record of its own, Flush, a gather of bgBatchMax end the hold at
// once, and once the engine stops (EndHolds) nothing is held. A receipt is held only with its own
// outcome (one of an outcome written already is what a read by id answers from the store). A
// kill -9 loses the held outcomes, as it loses those in flight: the next owner sends those messages
// again under their ids.

// outboxPageTable holds the outcome pages.
const outboxPageTable = "outbox_page"

// pageVersion starts a page's value; then each outcome or receipt: its id's length (uvarint),
// the id, its record's length (4 bytes, big-endian), the record: an outcome's
// (appendOutcomeOf: its version, statusVersion2, first) or a receipt's (domain.StatusChange,
// version pageReceipt).
const (
	pageVersion = 1
	pageReceipt = 1
)

// pageMax bounds a page's outcomes and bytes (the records' own bound, bgBatchBytes, covers the
// ops that go with them); a page's bytes also stay within the store's MaxValue (a NATS server's
// max_payload less a message's headers), its first outcome alone excepted.
const (
	pageMax      = bgBatchMax
	pageMaxBytes = 256 << 10
)

// pageScanner is a store whose scans give each record's sequence in its stream, in that order
// (persist/natskv): the outbox pages its outcomes there.
type pageScanner interface {
	ScanSinceSeq(prefix []byte, since time.Time, fn func(key, value []byte, seq uint64) error) error
}

// idWindow is the 10 ms window of a time (ms), modulo 2^32 (it wraps every 497 days; a page
// lives OutboxRetention).
func idWindow(ms int64) uint32 { return uint32(max(ms, 0) / 10) }

// pagedID is a message id in the gateway's WhatsApp Web shape (3EB0 and 20 upper-case hex
// digits) whose first 32 bits are window w, and 48 random bits.
func pagedID(w uint32, rnd uint64) string {
	var b [10]byte
	binary.BigEndian.PutUint32(b[:4], w)
	binary.BigEndian.PutUint16(b[4:6], uint16(rnd>>32))
	binary.BigEndian.PutUint32(b[6:], uint32(rnd))
	return domain.WebMessageID(&b)
}

// idWindowOf is the window an id in pagedID's shape names (ok false for any other string).
func idWindowOf(id string) (uint32, bool) {
	if len(id) != 24 || id[:4] != "3EB0" {
		return 0, false
	}
	var w uint32
	for i := 4; i < 24; i++ {
		d, ok := hexDigit(id[i])
		if !ok {
			return 0, false
		}
		if i < 12 {
			w = w<<4 | uint32(d)
		}
	}
	return w, true
}

// pagedIn tells whether the outcome of message id, accepted at ms, is paged.
func pagedIn(id string, ms int64) bool {
	w, ok := idWindowOf(id)
	return ok && w == idWindow(ms)
}

// How far back a read by id looks for a page (pageReadBack; a moment ahead, for another
// owner's clock), and how long after its accept an outcome still goes into a page
// (pageWriteBack): a page is read for OutboxRetention after it was written, so its window is
// then at most pageWriteBack + OutboxRetention old, a day within pageReadBack. A message may wait
// queued for weeks behind a disconnected session (Renew keeps its body): its outcome, written
// later than pageWriteBack after its accept, is outbox_status/<id>, which every read looks for
// first, and the boot too for an id not in the pages (settled). IdemOf looks back the key's
// lifetime only (idemReadBack).
const (
	pageReadBack  = bodyTTL + OutboxRetention + 24*time.Hour
	pageWriteBack = pageReadBack - OutboxRetention - 24*time.Hour
	pageReadAhead = time.Minute
	idemReadBack  = domain.IdempotencyTTL + time.Hour
)

// onStoreClock is t, a time on a clock whose now is now (the engine's: a test's may be hours
// off), on the store's clock (time.Now: a record's write time): moved by their difference,
// none unless the engine's clock is not time.Now.
func onStoreClock(t, now time.Time) time.Time { return time.Now().Add(t.Sub(now)) }

// recentWindow tells whether window w is within back before now (or a minute after it).
func recentWindow(w uint32, now time.Time, back time.Duration) bool {
	cur := idWindow(now.UnixMilli())
	return cur-w <= uint32(back.Milliseconds()/10) || w-cur <= uint32(pageReadAhead.Milliseconds()/10)
}

// pagePrefix is the prefix of window w's pages.
func pagePrefix(w uint32) []byte {
	return fmt.Appendf(nil, "%s/%08X/", outboxPageTable, w)
}

// secondPrefix is the prefix of the coarse pages of second s (a window's is its window / 100);
// "s" keeps it apart from every window's prefix (hex digits).
func secondPrefix(s uint32) []byte {
	return fmt.Appendf(nil, "%s/s%08X/", outboxPageTable, s)
}

// How many paged outcomes of one outbox the writer holds at most, and how long (PagesPerSecond): a
// page of about the lone gateway's size at a node's rate per partition.
const pageHold = 8

var pageHoldFor = 100 * time.Millisecond // (tests lengthen it)

// PagesPerSecond makes a read by id and the boot read a second's pages beside a window's (a
// cluster's partition: every node of a cluster, which may find them written by another), and
// with write the writer hold this outbox's paged outcomes and page them per second (the
// package comment above). A store that any node of the release before it still reads must not
// get them: that release reads a window's pages only (--nats-window-pages). The lone gateway
// neither writes nor reads them (its second would be about 900 KB of pages). Called before the
// outbox's first use.
func (o *Outbox) PagesPerSecond(write bool) { o.seconds, o.coarse = true, write }

// holdable tells whether the writer may hold run, one outbox's writes in order, and how many
// paged outcomes it holds: every outcome paged (a sent one, its mark and its body untouched)
// and every receipt folded into an outcome of the run.
func (o *Outbox) holdable(run []bgWrite) (int, bool) {
	if !o.coarse || !o.writesPages() || o.unheld() {
		return 0, false
	}
	n, now := 0, o.now()
	o.mu.Lock()
	defer o.mu.Unlock()
	for i := range run {
		w := &run[i]
		if !w.outcome() {
			// A receipt is held only with its own outcome: one of an outcome already
			// written is what a read by id answers from the store, and its event is
			// already out (recordAfterEvent), so held it would read the older status.
			if !slices.ContainsFunc(run[:i], func(x bgWrite) bool { return x.outcome() && x.id == w.id }) {
				return n, false
			}
			continue
		}
		if st := w.entry.Status; st == domain.MsgFailed || st == domain.MsgCancelled || !o.pagedNow(w, now) ||
			now.Sub(w.entry.CreatedAt.Time()) > bodyTTL-OutboxRetention-time.Hour {
			return n, false
		}
		if p := o.index[w.id]; p != nil && p.mark != unmarked {
			return n, false
		}
		n++
	}
	return n, true
}

// MintsIDs tells the engine to leave a new message's id to Accept when the outbox pages its
// outcomes (the id names its accept's window).
func (o *Outbox) MintsIDs() bool { return o.writesPages() }

// writesPages: the outbox mints ids and writes outcomes in pages (a store that pages, not
// told to write outcome records); one that does not still reads pages others wrote.
func (o *Outbox) writesPages() bool { return o.pages != nil && !o.recordsOnly }

// WriteOutcomeRecords makes the outbox write an outcome record per message
// (`outbox_status/<id>`) and leave ids to the engine, as the release before pages did, on a
// store that could page: a cluster in a rolling upgrade from that release (whose nodes find a
// settled message only by that record) until every node runs this one
// (--nats-outcome-records). Called before the outbox's first use; it still reads the pages a
// node of this release wrote.
func (o *Outbox) WriteOutcomeRecords() { o.recordsOnly = true }

// mintRand draws a minted id's random bits (tests repeat a draw).
var mintRand = rand.Uint64

// mint gives e a new id naming window w (under o.mu): one no message pending here has, nor any
// minted in about the last second (only ids of one window can be taken for each other: the
// check, not the odds of 48 random bits, keeps them apart).
func (o *Outbox) mint(e *domain.OutboxEntry, w uint32) {
	if o.mintedAt == nil || w-o.mintedFrom >= 100 && w-o.mintedFrom < 1<<31 {
		o.mintedPrev, o.mintedAt, o.mintedFrom = o.mintedAt, make(map[uint64]struct{}, len(o.mintedAt)), w
	}
	for {
		rnd := mintRand() & (1<<48 - 1)
		if _, ok := o.mintedAt[rnd]; ok {
			continue
		}
		if _, ok := o.mintedPrev[rnd]; ok {
			continue
		}
		id := pagedID(w, rnd)
		if o.index[id] != nil {
			continue
		}
		o.mintedAt[rnd] = struct{}{}
		e.ID, e.Message.ID = id, id
		return
	}
}

// pagedNow tells whether a write goes into a page at now (under o.mu): an outcome whose id
// names its accept's window (pagedIn), written within pageWriteBack of its accept or of an
// earlier outcome of it paged here lately (a late failure goes where its sent outcome went), or
// a receipt of a message this outbox paged the outcome of lately (an older one's receipt is a
// record of its own, read by id all the same).
func (o *Outbox) pagedNow(w *bgWrite, now time.Time) bool {
	if w.outcome() && !pagedIn(w.id, int64(w.entry.CreatedAt)) {
		return false
	}
	if w.outcome() && now.Sub(w.entry.CreatedAt.Time()) <= pageWriteBack {
		return true
	}
	if _, ok := o.pagedAt[w.id]; ok {
		return true
	}
	_, ok := o.pagedPrev[w.id]
	return ok
}

// pagedRecently notes that message id's outcome is durable in a page (under o.mu).
func (o *Outbox) pagedRecently(id string) {
	if now := o.now(); o.pagedAt == nil || now.Sub(o.pagedFrom) >= 10*time.Second {
		o.pagedPrev, o.pagedAt, o.pagedFrom = o.pagedAt, make(map[string]struct{}, len(o.pagedAt)), now
	}
	o.pagedAt[id] = struct{}{}
}

// pageParts appends to parts the pages of the paged outcomes among kept (their indexes in
// paged, in the batch's order): per window, as few pages as pageMax allows, each one commit
// with the ops its outcomes need beside their records (a failure's kept status removed, a mark
// removed, a body renewed), atomic with it. A message's earlier outcome in the batch is
// answered with its later one, which alone is written (it holds all the earlier said).
func (o *Outbox) pageParts(parts []bgPart, kept []bgWrite, paged []int, marks []bool, now time.Time, buf *[]byte) []bgPart {
	last := make(map[string]int, len(paged))
	for _, i := range paged {
		if !kept[i].outcome() {
			continue
		}
		if j, ok := last[kept[i].id]; ok {
			kept[i].folded = append(append(kept[i].folded, kept[j].done), kept[j].folded...)
			kept[j].done, kept[j].folded = nil, nil
		}
		last[kept[i].id] = i
	}
	// Per window, or per second (coarse).
	byWindow := map[uint32][]int{}
	var windows []uint32
	for _, i := range paged {
		var w uint32
		if kept[i].outcome() {
			if last[kept[i].id] != i {
				continue
			}
			w = idWindow(int64(kept[i].entry.CreatedAt))
		} else {
			w, _ = idWindowOf(kept[i].id) // its outcome's window (pagedNow)
		}
		if o.coarse {
			w /= 100
		}
		if _, ok := byWindow[w]; !ok {
			windows = append(windows, w)
		}
		byWindow[w] = append(byWindow[w], i)
	}
	// A page is one message: within the store's largest value (a server's max_payload may be
	// under pageMaxBytes: nats-server takes any).
	limit := pageMaxBytes
	if mv, ok := o.kv.(interface{ MaxValue() int }); ok && mv.MaxValue() > 0 {
		limit = min(limit, mv.MaxValue())
	}
	var extra []Op
	for _, w := range windows {
		members := byWindow[w]
		prefix := pagePrefix(w)
		if o.coarse {
			prefix = secondPrefix(w)
		}
		for len(members) > 0 {
			start := len(*buf)
			*buf = append(append(*buf, prefix...), fmt.Sprintf("%016X", rand.Uint64())...)
			k := len(*buf)
			*buf = append(*buf, pageVersion)
			var ops []Op
			var group []int
			n := 0
			for n < len(members) && n < pageMax && len(*buf)-k < limit {
				i := members[n]
				var rec []byte
				if !kept[i].outcome() {
					var err error
					if rec, err = Encode(pageReceipt, kept[i].receipt); err != nil {
						n++
						o.answer(kept[i], err)
						continue
					}
				}
				from := len(*buf)
				*buf = binary.AppendUvarint(*buf, uint64(len(kept[i].id)))
				*buf = append(*buf, kept[i].id...)
				at := len(*buf)
				if rec != nil {
					*buf = append(append(*buf, 0, 0, 0, 0), rec...)
				} else {
					*buf = appendOutcomeOf(append(*buf, 0, 0, 0, 0), kept[i].entry)
				}
				binary.BigEndian.PutUint32((*buf)[at:], uint32(len(*buf)-at-4))
				if len(group) > 0 && len(*buf)-k > limit {
					*buf = (*buf)[:from] // the next page's first
					break
				}
				n++
				extra = extra[:0]
				if kept[i].outcome() {
					var err error
					if extra, err = o.extraOps(extra, kept[i], now, marks[i]); err != nil {
						*buf = (*buf)[:from]
						o.answer(kept[i], err)
						continue
					}
				}
				ops = append(ops, extra...)
				group = append(group, i)
			}
			members = members[n:]
			if len(group) == 0 {
				*buf = (*buf)[:start]
				continue
			}
			page := Op{Key: (*buf)[start:k:k], Value: (*buf)[k:len(*buf):len(*buf)], TTL: OutboxRetention}
			parts = append(parts, bgPart{ops: append([]Op{page}, ops...), group: group})
		}
	}
	return parts
}

// eachPaged calls fn with each outcome a page holds, in the order written (a later one of the
// same message is newer).
func eachPaged(page []byte, fn func(id, rec []byte) error) error {
	if len(page) == 0 || page[0] != pageVersion {
		return fmt.Errorf("%w: %s: a page of version %v", domain.ErrRecordInvalid, outboxPageTable, page[:min(len(page), 1)])
	}
	for b := page[1:]; len(b) > 0; {
		n, k := binary.Uvarint(b)
		if k <= 0 || len(b)-k < 4 || n > uint64(len(b)-k-4) { // n+4 would wrap for a damaged n
			return fmt.Errorf("%w: %s: a page cut short", domain.ErrRecordInvalid, outboxPageTable)
		}
		id := b[k : k+int(n)]
		b = b[k+int(n):]
		m := int(binary.BigEndian.Uint32(b))
		if m == 0 || len(b)-4 < m {
			return fmt.Errorf("%w: %s: a page cut short", domain.ErrRecordInvalid, outboxPageTable)
		}
		if err := fn(id, b[4:4+m]); err != nil {
			return err
		}
		b = b[4+m:]
	}
	return nil
}

// pageOutcome reads message id's newest outcome in its window's pages, and the receipts they
// hold of it (found false: no outcome, or its id names no window within back of now).
func (o *Outbox) pageOutcome(id string, back time.Duration) (c outcome, rs []domain.StatusChange, found bool, err error) {
	if o.pages == nil {
		return c, nil, false, nil
	}
	w, ok := idWindowOf(id)
	if !ok || !recentWindow(w, o.now(), back) {
		return c, nil, false, nil
	}
	// The window's pages and its second's (PagesPerSecond), read together; both are the
	// partition's, in one stream, so their sequences order them.
	var sec, win pagedOf
	done := make(chan error, 1)
	if o.seconds {
		go func() { done <- o.scanPagedOf(secondPrefix(w/100), id, &sec) }()
	} else {
		done <- nil
	}
	err = o.scanPagedOf(pagePrefix(w), id, &win)
	if serr := <-done; err == nil {
		err = serr
	}
	if sec.found && (!win.found || sec.seq > win.seq) {
		win.c, win.found = sec.c, true
	}
	return win.c, append(win.rs, sec.rs...), win.found, err
}

// pagedOf is what the pages under one prefix hold of one message: its newest outcome (and that
// page's sequence) and its receipts.
type pagedOf struct {
	c     outcome
	seq   uint64
	found bool
	rs    []domain.StatusChange
}

// scanPagedOf reads into p what the pages under prefix hold of message id.
func (o *Outbox) scanPagedOf(prefix []byte, id string, p *pagedOf) error {
	return o.pages.ScanSinceSeq(prefix, time.Time{}, func(_, page []byte, seq uint64) error {
		return eachPaged(page, func(pid, rec []byte) error {
			if string(pid) != id {
				return nil
			}
			if rec[0] == pageReceipt {
				var r domain.StatusChange
				if _, err := Decode(rec, pageReceipt, &r); err != nil {
					return fmt.Errorf("%s %q: %w", outboxPageTable, id, err)
				}
				p.rs = append(p.rs, r)
				return nil
			}
			var x outcome
			if _, err := Decode(rec, statusVersion2, &x); err != nil {
				return fmt.Errorf("%s %q: %w", outboxPageTable, id, err)
			}
			p.c, p.seq, p.found = x, seq, true
			return nil
		})
	})
}

// outcomeByID reads message id's outcome: outbox_status/<id>, or its pages (within back of
// now), with the receipts they hold. domain.ErrRecordNotFound when neither holds one. An id
// its outbox minted with a record too (a rolling upgrade: a node with --nats-outcome-records
// wrote one outcome, a node without it paged a later one) reads the newer of the two.
func (o *Outbox) outcomeByID(id string, back time.Duration) (outcome, []domain.StatusChange, error) {
	c, err := o.status.Get(id)
	if err != nil && !errors.Is(err, domain.ErrRecordNotFound) {
		return c, nil, err
	}
	if err == nil {
		if _, minted := idWindowOf(id); !minted || o.pages == nil {
			return c, nil, nil
		}
	}
	pc, rs, found, perr := o.pageOutcome(id, back)
	switch {
	case perr != nil:
		return c, nil, perr
	case !found:
		return c, nil, err
	case err == nil && c.UpdatedAt > pc.UpdatedAt:
		return c, nil, nil // the record is the newer
	}
	return pc, rs, nil
}

// pagedSince calls fn with the newest outcome of each message in the pages of kv (if it keeps
// any) written since since (by the store's clock), in no order.
func pagedSince(kv KV, since time.Time, fn func(id string, c outcome) error) error {
	ps, ok := kv.(pageScanner)
	if !ok {
		return nil
	}
	newest := map[string]outcome{}
	err := ps.ScanSinceSeq([]byte(outboxPageTable+"/"), since, func(_, page []byte, _ uint64) error {
		return eachPaged(page, func(id, rec []byte) error {
			if rec[0] == pageReceipt {
				return nil
			}
			var c outcome
			if _, err := Decode(rec, statusVersion2, &c); err != nil {
				return fmt.Errorf("%s %q: %w", outboxPageTable, id, err)
			}
			newest[string(id)] = c // in stream order: a later one is newer
			return nil
		})
	})
	if err != nil {
		return err
	}
	for id, c := range newest {
		if err := fn(id, c); err != nil {
			return err
		}
	}
	return nil
}

// pagedIDs adds to into the ids of the messages with an outcome in the pages under prefix
// written since since (zero: all).
func (o *Outbox) pagedIDs(prefix []byte, since time.Time, into map[string]bool) error {
	return o.pages.ScanSinceSeq(prefix, since, func(_, page []byte, _ uint64) error {
		return eachPaged(page, func(id, rec []byte) error {
			if rec[0] != pageReceipt {
				into[string(id)] = true
			}
			return nil
		})
	})
}

// settled tells which of the boot's candidates have an outcome (Pending): outbox_status/<id>,
// or, paged, one in the pages written since the checkpoint (less RecountSkew: the store's
// clock; every accept since the checkpoint was settled after it), and, for a message accepted
// before the checkpoint or marked, in its window's pages, read apart. With the accepts' floor
// (outbox_boot.go; 0: none), from it if earlier: every candidate not marked was stored at or
// after it and its outcome later, whatever clock keyed it (a checkpoint keyed by a clock ahead
// of the server's asked for pages not yet written).
func (o *Outbox) settled(cands []*candidate, ckpt int64, found bool, floor int64) ([]bool, error) {
	out := make([]bool, len(cands))
	var (
		keys           [][]byte
		unpaged, paged []int
	)
	for i, c := range cands {
		if o.pages != nil && pagedIn(c.id, posMillis(c.pos)) {
			paged = append(paged, i)
			continue
		}
		keys, unpaged = append(keys, o.status.key(c.id)), append(unpaged, i)
	}
	has, err := Has(o.kv, keys)
	if err != nil {
		return nil, err
	}
	for j, i := range unpaged {
		out[i] = has[j]
	}
	if len(paged) == 0 {
		return out, nil
	}
	ids := map[string]bool{}
	var since time.Time
	if found {
		// The checkpoint is on the outbox's clock, the pages' times on the store's.
		since = onStoreClock(time.UnixMilli(ckpt), o.now()).Add(-RecountSkew)
		if floor > 0 && time.UnixMilli(floor).Before(since) {
			since = time.UnixMilli(floor)
		}
	}
	if err := o.pagedIDs([]byte(outboxPageTable+"/"), since, ids); err != nil {
		return nil, err
	}
	// A marked message's pages: its window's and its second's (PagesPerSecond), each read once.
	var prefixes [][]byte
	read := map[string]bool{}
	for _, i := range paged {
		if ms := posMillis(cands[i].pos); (found && ms < ckpt || cands[i].marked) && !ids[cands[i].id] {
			w := idWindow(ms)
			ps := [][]byte{pagePrefix(w)}
			if o.seconds {
				ps = append(ps, secondPrefix(w/100))
			}
			for _, p := range ps {
				if !read[string(p)] {
					read[string(p)] = true
					prefixes = append(prefixes, p)
				}
			}
		}
	}
	if err := o.pagedPrefixes(prefixes, ids); err != nil {
		return nil, err
	}
	// A paged id not in the pages may still have its own record: written by a node of the
	// release before pages, or one started with --nats-outcome-records (a rolling upgrade
	// either way): asked for the few left, at once.
	keys, unpaged = keys[:0], unpaged[:0]
	for _, i := range paged {
		if out[i] = ids[cands[i].id]; !out[i] {
			keys, unpaged = append(keys, o.status.key(cands[i].id)), append(unpaged, i)
		}
	}
	if has, err = Has(o.kv, keys); err != nil {
		return nil, err
	}
	for j, i := range unpaged {
		out[i] = has[j]
	}
	return out, nil
}

// windowReaders: how many prefixes of pages the boot reads at once (each a round trip).
const windowReaders = 16

// pagedPrefixes adds to into the ids with an outcome in the pages under prefixes, read
// windowReaders at a time.
func (o *Outbox) pagedPrefixes(prefixes [][]byte, into map[string]bool) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
		next  = make(chan []byte)
	)
	for range min(windowReaders, len(prefixes)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for p := range next {
				got := map[string]bool{}
				err := o.pagedIDs(p, time.Time{}, got)
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				for id := range got {
					into[id] = true
				}
				mu.Unlock()
			}
		}()
	}
	for _, p := range prefixes {
		next <- p
	}
	close(next)
	wg.Wait()
	return first
}

// posMillis is the time (ms) of a body's pos (posOf); -1 when it has none.
func posMillis(pos string) int64 {
	if len(pos) < 14 || pos[len(pos)-14] != '/' {
		return -1
	}
	ms, err := strconv.ParseInt(pos[len(pos)-13:], 10, 64)
	if err != nil {
		return -1
	}
	return ms
}
