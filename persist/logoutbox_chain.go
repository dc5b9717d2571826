package persist

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist/outlog"
)

// A LogOutbox's history is a backward chain per user in its log (bench/README.md, "Tenth
// pass", the design; "Thirteenth pass", what was built): no Badger record a message.
//
// Each listed accept (listedKind) is chained: its header carries the position of its user's
// previous listed accept (prev), a skip position (the user's last listed accept of an earlier
// hour), its time in ms and a hash of its user, before the body:
//
//	'A', flags (acceptChained), 4 random bytes, prev (8), skip (8), ms (8), user hash (4), body
//
// A user's accepts are chained in the order the log holds them, and their times never fall
// along it: an accept whose clock is behind its user's previous accept's time takes that time
// (as the Badger outbox moves an accept's time up to its floor), so the chain read backwards is
// the history index's order, key by key, but for accepts of the same millisecond (sorted by
// key as they are read). The heads (per user: the newest accept and what the next one links
// to) are kept in memory under 64 locks; written to Badger (outlog_head/<uid>) with each
// checkpoint, for positions the log has synced (Durable) only, with the checkpoint at or before
// that position; boot reads them and scans the log from the checkpoint (Pending). A head whose
// accepts a failed write cut (outlog rewind) goes back to the newest accept still there.
//
// ScanLog lists a user's history as MessageLog.ScanLog does, with the same keys and cursors:
// the entries Badger keeps (incoming messages; outgoing ones of an older layout) merged by key
// with the user's chain. Newest first, the chain is walked from its head back (one pread each,
// page cache); after a cursor, the skip positions lead back to the cursor's hour first (at most
// an hop a non-empty hour of the week kept) and the hour is walked from its newest accept. Oldest
// first from a time (Since), the skip positions lead back to the first hour at or after it, and
// each hour is walked from its newest accept back to the one before and listed reversed: a
// page costs the hops and at most an hour of the user's accepts beyond it. A chain ends where
// its segment was dropped (retention).

const (
	// acceptChained: the accept is on its user's chain (the chain's header follows the first 6
	// bytes).
	acceptChained = 2
	// chainHeader: a chained accept's bytes before its body.
	chainHeader = acceptHeader + 8 + 8 + 8 + 4

	chainShards = 64
	chainHour   = int64(time.Hour / time.Millisecond)

	logHeadTable = "outlog_head"
)

// chainLink is an accept on a chain: where it is, its skip position, its time.
type chainLink struct {
	pos, skip outlog.Pos
	ms        int64
	gen       int // the log's cuts when it was queued (LogOutbox.cuts)
}

// chainHead is a user's head: the newest accept known to be on disk, and those queued since,
// oldest first (the newest is the head).
type chainHead struct {
	base  chainLink
	links []chainLink
	gen   int        // the cuts its links were checked against
	saved outlog.Pos // the head as last written to Badger
}

func (h *chainHead) top() chainLink {
	if n := len(h.links); n > 0 {
		return h.links[n-1]
	}
	return h.base
}

// below is the newest link before p (the base when none of the links is).
func (h *chainHead) below(p outlog.Pos) chainLink {
	for i := len(h.links) - 1; i >= 0; i-- {
		if h.links[i].pos < p {
			return h.links[i]
		}
	}
	if h.base.pos < p {
		return h.base
	}
	return chainLink{}
}

type chainShard struct {
	mu sync.Mutex
	m  map[string]*chainHead
}

// chains are a LogOutbox's heads, and the cuts its log's rewinds made.
type chains struct {
	shards [chainShards]chainShard
	cutMu  sync.Mutex
	cuts   []outlog.Pos // each rewind's cut, in order
	ncut   atomic.Int64
}

func (c *chains) init() {
	for i := range c.shards {
		c.shards[i].m = map[string]*chainHead{}
	}
}

func (c *chains) shard(uid string) *chainShard {
	return &c.shards[userHash(uid)%chainShards]
}

// rewound records a cut (outlog.SetOnRewind: under the log's lock).
func (c *chains) rewound(p outlog.Pos) {
	c.cutMu.Lock()
	c.cuts = append(c.cuts, p)
	c.ncut.Store(int64(len(c.cuts)))
	c.cutMu.Unlock()
}

// repair forgets h's links that a cut took (queued before it, at or after it). Its shard's
// lock held.
func (c *chains) repair(h *chainHead) {
	g := int(c.ncut.Load())
	if h.gen == g {
		return
	}
	c.cutMu.Lock()
	cuts := c.cuts[:g]
	c.cutMu.Unlock()
	n := len(h.links)
	for n > 0 {
		l, gone := h.links[n-1], false
		for k := l.gen; k < len(cuts); k++ {
			if cuts[k] <= l.pos {
				gone = true
				break
			}
		}
		if !gone {
			break
		}
		n--
	}
	h.links, h.gen = h.links[:n], g
}

// userHash is FNV-1a of a user id (the chained accept's check that a position is its user's).
func userHash(uid string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(uid); i++ {
		h ^= uint32(uid[i])
		h *= 16777619
	}
	return h
}

// chainUser takes uid's head for an accept at ms: the shard locked (the caller unlocks it once
// the accept is queued) and the time the accept must take (ms, or its previous accept's when
// later).
func (lo *LogOutbox) chainUser(uid string, ms int64) (*chainShard, *chainHead, int64) {
	sh := lo.chains.shard(uid)
	sh.mu.Lock()
	h := sh.m[uid]
	if h == nil {
		h = &chainHead{gen: int(lo.chains.ncut.Load())}
		sh.m[uid] = h
	}
	return sh, h, max(ms, h.top().ms)
}

// link fills a chained accept's header at p (dst: the record) and makes it its user's head.
// Called from the log's QueueFunc (its lock held: no cut meanwhile), the user's shard locked.
func (lo *LogOutbox) link(h *chainHead, p outlog.Pos, ms int64, durable outlog.Pos, dst []byte) {
	lo.chains.repair(h)
	if i := len(h.links); i > 0 {
		k := 0
		for k < i && h.links[k].pos < durable {
			k++
		}
		if k > 0 {
			h.base = h.links[k-1]
			h.links = h.links[:copy(h.links, h.links[k:])]
		}
	}
	top := h.top()
	skip := top.skip
	if top.pos != 0 && top.ms/chainHour != ms/chainHour {
		skip = top.pos
	}
	binary.LittleEndian.PutUint64(dst[acceptHeader:], uint64(top.pos))
	binary.LittleEndian.PutUint64(dst[acceptHeader+8:], uint64(skip))
	binary.LittleEndian.PutUint64(dst[acceptHeader+16:], uint64(ms))
	h.links = append(h.links, chainLink{pos: p, skip: skip, ms: ms, gen: int(lo.chains.ncut.Load())})
}

// chainOf reads a chained accept's header: its links and time; ok false when rec is no chained
// accept of the user whose hash is uh.
func chainOf(rec []byte, uh uint32) (prev, skip outlog.Pos, ms int64, ok bool) {
	if len(rec) < chainHeader+1 || rec[0] != recAccept || rec[1]&acceptChained == 0 ||
		binary.LittleEndian.Uint32(rec[acceptHeader+24:]) != uh {
		return 0, 0, 0, false
	}
	return outlog.Pos(binary.LittleEndian.Uint64(rec[acceptHeader:])), outlog.Pos(binary.LittleEndian.Uint64(rec[acceptHeader+8:])),
		int64(binary.LittleEndian.Uint64(rec[acceptHeader+16:])), true
}

// bodyAt is where an accept record's body starts.
func bodyAt(rec []byte) int {
	if len(rec) > 1 && rec[1]&acceptChained != 0 {
		return chainHeader
	}
	return acceptHeader
}

// headTop is uid's newest accept that readers can read (0: none), for a listing.
func (lo *LogOutbox) headTop(uid string) chainLink {
	w := lo.log.Written()
	sh := lo.chains.shard(uid)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	h := sh.m[uid]
	if h == nil {
		return chainLink{}
	}
	lo.chains.repair(h)
	return h.below(w)
}

func logHeadKey(uid string) []byte { return append([]byte(logHeadTable+"/"), uid...) }

func headValue(l chainLink) []byte {
	v := binary.LittleEndian.AppendUint64(make([]byte, 0, 24), uint64(l.pos))
	v = binary.LittleEndian.AppendUint64(v, uint64(l.skip))
	return binary.LittleEndian.AppendUint64(v, uint64(l.ms))
}

// headsOps are the writes of the heads changed since they were last written, as they stood
// before position d (on disk: Durable); saved, once they are written, marks them so.
func (lo *LogOutbox) headsOps(d outlog.Pos) (ops []Op, saved func()) {
	type mark struct {
		h   *chainHead
		pos outlog.Pos
	}
	var marks []mark
	for i := range lo.chains.shards {
		sh := &lo.chains.shards[i]
		sh.mu.Lock()
		for uid, h := range sh.m {
			lo.chains.repair(h)
			l := h.below(d)
			if l.pos == 0 || l.pos == h.saved {
				continue
			}
			ops = append(ops, Op{Key: logHeadKey(uid), Value: headValue(l), TTL: OutboxRetention + 24*time.Hour})
			marks = append(marks, mark{h, l.pos})
		}
		sh.mu.Unlock()
	}
	return ops, func() {
		for i := range lo.chains.shards {
			lo.chains.shards[i].mu.Lock()
		}
		for _, m := range marks {
			m.h.saved = max(m.h.saved, m.pos)
		}
		for i := range lo.chains.shards {
			lo.chains.shards[i].mu.Unlock()
		}
	}
}

// loadHeads reads the heads the last checkpoint wrote (boot).
func (lo *LogOutbox) loadHeads() error {
	prefix := []byte(logHeadTable + "/")
	return lo.kv.Scan(prefix, func(key, v []byte) error {
		if len(v) != 24 {
			return fmt.Errorf("%w: %s: %d bytes", domain.ErrRecordInvalid, key, len(v))
		}
		l := chainLink{pos: outlog.Pos(binary.LittleEndian.Uint64(v)), skip: outlog.Pos(binary.LittleEndian.Uint64(v[8:])),
			ms: int64(binary.LittleEndian.Uint64(v[16:]))}
		lo.bootHead(string(key[len(prefix):]), l, true)
		return nil
	})
}

// bootHead makes l uid's head when it is newer than the one known (boot: on disk).
func (lo *LogOutbox) bootHead(uid string, l chainLink, saved bool) {
	sh := lo.chains.shard(uid)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	h := sh.m[uid]
	if h == nil {
		h = &chainHead{}
		sh.m[uid] = h
	}
	if l.pos > h.base.pos {
		h.base = l
		if saved {
			h.saved = l.pos
		}
	}
}

// dropHeads forgets the heads whose accepts are in segments through seg (dropped): a chain
// starts anew.
func (lo *LogOutbox) dropHeads(seg uint32) {
	for i := range lo.chains.shards {
		sh := &lo.chains.shards[i]
		sh.mu.Lock()
		for uid, h := range sh.m {
			if len(h.links) == 0 && h.base.pos.Seg() <= seg {
				delete(sh.m, uid)
			}
		}
		sh.mu.Unlock()
	}
}

// historyOp is the Badger history entry of an accept of the layout before the chain (boot
// writes it for such accepts since the checkpoint, as that layout did; ok false: a kind the
// history does not list).
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

// chainEnt is a chained accept as a listing reads it.
type chainEnt struct {
	key       string // its place in the history (logPos)
	pos, prev outlog.Pos
	skip      outlog.Pos
	ms        int64
	e         domain.LogEntry
	voided    bool
}

// chainReader reads one user's chained accepts.
type chainReader struct {
	lo  *LogOutbox
	uid string
	uh  uint32
}

// link reads the chain's header at p: ok false when p holds no chained accept of the user
// (a dropped segment: the chain ends).
func (r *chainReader) link(p outlog.Pos) (chainLink, bool, error) {
	if p == 0 {
		return chainLink{}, false, nil
	}
	r.lo.chainReads.Add(1)
	rec, err := r.lo.log.Read(p)
	if errors.Is(err, outlog.ErrNotFound) || errors.Is(err, outlog.ErrCorrupt) {
		return chainLink{}, false, nil
	}
	if err != nil {
		return chainLink{}, false, err
	}
	_, skip, ms, ok := chainOf(rec, r.uh)
	return chainLink{pos: p, skip: skip, ms: ms}, ok, nil
}

// entry reads the chained accept at p as the listing shows it.
func (r *chainReader) entry(p outlog.Pos) (chainEnt, bool, error) {
	if p == 0 {
		return chainEnt{}, false, nil
	}
	r.lo.chainReads.Add(1)
	rec, slots, err := r.lo.log.ReadSlots(p)
	if errors.Is(err, outlog.ErrNotFound) || errors.Is(err, outlog.ErrCorrupt) {
		return chainEnt{}, false, nil
	}
	if err != nil {
		return chainEnt{}, false, err
	}
	prev, skip, ms, ok := chainOf(rec, r.uh)
	if !ok || len(slots) != acceptSlots || prev >= p || skip >= p {
		return chainEnt{}, false, nil
	}
	var b struct {
		ID      string `json:"id"`
		Session string `json:"session"`
		User    string `json:"user"`
		Message struct {
			To string `json:"to"`
		} `json:"message"`
	}
	data := rec[chainHeader:]
	if _, err := Decode(data, bodyVersion3, &b); err != nil {
		return chainEnt{}, false, fmt.Errorf("%s at %v: %w", outboxTable, p, err)
	}
	if b.User != r.uid {
		return chainEnt{}, false, nil
	}
	c := chainEnt{pos: p, prev: prev, skip: skip, ms: ms, voided: slots[slotOutcome] != nil && slots[slotOutcome][0] == recVoid}
	if s := slots[slotRequeue]; s != nil && !c.voided {
		// Requeued to another session: the listing names the session it goes by now.
		q, err := r.lo.readLinked(s, recRequeue, p)
		if err != nil {
			return chainEnt{}, false, err
		}
		if q != nil {
			var qb struct {
				Session string `json:"session"`
				Message struct {
					To string `json:"to"`
				} `json:"message"`
			}
			if _, err := Decode(q, bodyVersion3, &qb); err != nil {
				return chainEnt{}, false, fmt.Errorf("%s at %v: requeue: %w", outboxTable, p, err)
			}
			b.Session, b.Message.To = qb.Session, qb.Message.To
		}
	}
	c.key = string(appendLogPos(nil, ms, domain.DirOut, b.ID))
	c.e = domain.LogEntry{Dir: domain.DirOut, ID: b.ID, SessionID: b.Session, Peer: b.Message.To, At: time.UnixMilli(ms).UTC()}
	return c, true, nil
}

// hourOf is a time's hour (the skip positions' unit).
func hourOf(ms int64) int64 { return ms / chainHour }

// keyMs is the time a history key (logPos) starts with.
func keyMs(key string) int64 {
	var ms int64
	for i := 0; i < 13 && i < len(key); i++ {
		ms = ms*10 + int64(key[i]-'0')
	}
	return ms
}

// ScanLog is MessageLog.ScanLog on the outbox's records' store, with this outbox's chains merged
// in by key: the history routes list through it (engine.Messages.History) as they list the
// index alone with the Badger outbox, with the same cursors.
func (lo *LogOutbox) ScanLog(uid string, s domain.LogScan, fn func(next string, e domain.LogEntry) (bool, error)) error {
	if uid == "" {
		return nil
	}
	var bound string
	resume, hinted := outlog.Pos(0), false
	if s.Cursor != "" {
		key, p, ok, err := parseChainCursor(s.Cursor)
		if err != nil {
			return err
		}
		bound, resume, hinted = key, p, ok
		s.Cursor = cursor(key) // the index's own
	}
	r := &chainReader{lo: lo, uid: uid, uh: userHash(uid)}
	var it chainIter
	var err error
	var desc *descIter
	if s.Since.IsZero() {
		desc, err = r.newest(bound, resume, hinted)
		it = desc
	} else {
		it, err = r.oldest(fmt.Sprintf("%013d", max(s.Since.UnixMilli(), 0)), bound)
	}
	if err != nil {
		return err
	}
	asc := !s.Since.IsZero()
	before := func(a, b string) bool { // a comes before b in the listing's order
		if asc {
			return a < b
		}
		return a > b
	}
	stopped := false
	// A cursor newest first also says where the chain goes on after it (chainCursor).
	after := func(key string) string {
		if desc == nil {
			return cursor(key)
		}
		return chainCursor(key, desc.resume())
	}
	emit := func(c *chainEnt) (bool, error) {
		more, err := fn(after(c.key), c.e)
		if err != nil || !more {
			stopped = true
		}
		return more, err
	}
	err = NewMessageLog(lo.kv).ScanLog(uid, s, func(next string, e domain.LogEntry) (bool, error) {
		k, err := parseCursor(next)
		if err != nil {
			return false, err
		}
		for {
			c, err := it.peek()
			if err != nil || c == nil || !before(c.key, k) && c.key != k {
				if err != nil {
					return false, err
				}
				break
			}
			it.pop()
			if c.key == k {
				continue // listed from Badger too (an accept of the layout before): once
			}
			if more, err := emit(c); !more || err != nil {
				return more, err
			}
		}
		more, err := fn(after(k), e)
		if err != nil || !more {
			stopped = true
		}
		return more, err
	})
	if err != nil || stopped {
		return err
	}
	for {
		c, err := it.peek()
		if err != nil || c == nil {
			return err
		}
		it.pop()
		if more, err := emit(c); !more || err != nil {
			return err
		}
	}
}

// chainCursor is the cursor after the history entry at key, newest first, the chain going on
// at p (0: ended): the index's cursor (the key, url-safe base64) of the key and a NUL and p's 8
// bytes, so a page after it starts where the last one stopped, not from its hour's newest
// accept. Keys are printable: the NUL ends one.
func chainCursor(key string, p outlog.Pos) string {
	b := binary.BigEndian.AppendUint64(append(append(make([]byte, 0, len(key)+9), key...), 0), uint64(p))
	return base64.RawURLEncoding.EncodeToString(b)
}

// parseChainCursor reads a cursor chainCursor or MessageLog handed out: its key and, from
// chainCursor's, where the chain goes on (ok).
func parseChainCursor(c string) (key string, p outlog.Pos, ok bool, err error) {
	b, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil && len(b) > 9 && b[len(b)-9] == 0 {
		p, ok = outlog.Pos(binary.BigEndian.Uint64(b[len(b)-8:])), true
		c = base64.RawURLEncoding.EncodeToString(b[:len(b)-9])
	}
	key, err = parseCursor(c)
	return key, p, ok, err
}

// chainIter gives a chain's entries in a listing's order.
type chainIter interface {
	peek() (*chainEnt, error) // nil at the end
	pop()
}

// descIter walks a chain newest first: the accepts of one millisecond at a time, sorted.
type descIter struct {
	r      *chainReader
	next   outlog.Pos // the next to read
	last   outlog.Pos // the last read (positions fall along a chain)
	bound  string     // only keys before it ("": all)
	run    []chainEnt
	runAt  outlog.Pos // where the run's first was read
	peeked *chainEnt
}

// resume is where a walk after the entries given so far goes on: the run being given (read
// again: keys at or after the cursor's are left out), else the next.
func (it *descIter) resume() outlog.Pos {
	switch {
	case len(it.run) > 0:
		return it.runAt
	case it.peeked != nil:
		return it.peeked.pos
	}
	return it.next
}

// newest starts a newest-first walk of r's chain after the key bound ("": from the head): at
// resume when hinted (a cursor of chainCursor's), else the skip positions lead to the newest
// accept of bound's hour or earlier first.
func (r *chainReader) newest(bound string, resume outlog.Pos, hinted bool) (*descIter, error) {
	if hinted {
		if top := r.lo.headTop(r.uid); resume > top.pos {
			resume = 0 // never past the head (a cursor not handed out here)
		}
		return &descIter{r: r, next: resume, bound: bound}, nil
	}
	top := r.lo.headTop(r.uid)
	it := &descIter{r: r, next: top.pos, bound: bound}
	if bound != "" && top.pos != 0 {
		h := hourOf(keyMs(bound))
		cur := top
		for cur.pos != 0 && hourOf(cur.ms) > h {
			l, ok, err := r.link(cur.skip)
			if err != nil {
				return nil, err
			}
			if !ok || l.pos >= cur.pos {
				l = chainLink{}
			}
			cur = l
		}
		it.next = cur.pos
	}
	return it, nil
}

func (it *descIter) read() (chainEnt, bool, error) {
	if it.next == 0 || it.last != 0 && it.next >= it.last {
		return chainEnt{}, false, nil
	}
	c, ok, err := it.r.entry(it.next)
	if err != nil || !ok {
		it.next = 0
		return chainEnt{}, false, err
	}
	it.last, it.next = c.pos, c.prev
	return c, true, nil
}

func (it *descIter) peek() (*chainEnt, error) {
	for len(it.run) == 0 {
		var first chainEnt
		if it.peeked != nil {
			first, it.peeked = *it.peeked, nil
		} else {
			c, ok, err := it.read()
			if err != nil || !ok {
				return nil, err
			}
			first = c
		}
		run, at := []chainEnt{first}, first.pos
		for {
			c, ok, err := it.read()
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			if c.ms != first.ms {
				it.peeked = &c
				break
			}
			run = append(run, c)
		}
		sortEnts(run, false)
		out := run[:0]
		for _, c := range run {
			if !c.voided && (it.bound == "" || c.key < it.bound) {
				out = append(out, c)
			}
		}
		it.run, it.runAt = out, at
	}
	return &it.run[0], nil
}

func (it *descIter) pop() { it.run = it.run[1:] }

// sortEnts sorts by key, ascending or not (a run of one millisecond, or an hour: insertion
// sort, as a chain's order is the keys' but for ties of a millisecond).
func sortEnts(es []chainEnt, asc bool) {
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && (es[j].key < es[j-1].key) == asc && es[j].key != es[j-1].key; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}

// ascIter walks a chain oldest first from a key: an hour at a time, each read from its newest
// accept back to the hour before and listed reversed.
type ascIter struct {
	r     *chainReader
	hops  []chainLink // the newest accept of each hour from the head back, the last one below the start
	i     int         // the hour being listed is (hops[i+1], hops[i]]
	lower string      // keys at or after it
	bound string      // keys after it ("": all)
	seg   []chainEnt
}

// oldest starts an oldest-first walk of r's chain from key lower, after key bound.
func (r *chainReader) oldest(lower, bound string) (chainIter, error) {
	from := keyMs(lower)
	if bound != "" {
		from = max(from, keyMs(bound))
	}
	top := r.lo.headTop(r.uid)
	hops := []chainLink{top}
	for cur := top; cur.pos != 0 && hourOf(cur.ms) >= hourOf(from); {
		l, ok, err := r.link(cur.skip)
		if err != nil {
			return nil, err
		}
		if !ok || l.pos >= cur.pos {
			l = chainLink{}
		}
		hops = append(hops, l)
		cur = l
	}
	return &ascIter{r: r, hops: hops, i: len(hops) - 1, lower: lower, bound: bound}, nil
}

func (it *ascIter) peek() (*chainEnt, error) {
	for len(it.seg) == 0 {
		if it.i == 0 {
			return nil, nil
		}
		it.i--
		stop, p := it.hops[it.i+1].pos, it.hops[it.i].pos
		var seg []chainEnt
		for last := outlog.Pos(0); p != 0 && p > stop && (last == 0 || p < last); {
			c, ok, err := it.r.entry(p)
			if err != nil {
				return nil, err
			}
			if !ok {
				break
			}
			if !c.voided && c.key >= it.lower && (it.bound == "" || c.key > it.bound) {
				seg = append(seg, c)
			}
			last, p = c.pos, c.prev
		}
		for i, j := 0, len(seg)-1; i < j; i, j = i+1, j-1 {
			seg[i], seg[j] = seg[j], seg[i]
		}
		sortEnts(seg, true)
		it.seg = seg
	}
	return &it.seg[0], nil
}

func (it *ascIter) pop() { it.seg = it.seg[1:] }
