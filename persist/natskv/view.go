package natskv

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
)

// Partitions in a cluster (DESIGN.md section 13.1). Every record of a partition is a subject
// with the partition's token, <prefix>.<table>.<partition>.<id tokens>, so a node that takes a
// partition over scans that partition's records only. A View is the store seen through one
// partition: its keys are its own namespace (the same key in two partitions is two records),
// and, with a Fencer, every commit it makes carries the partition's fence check (fence.go).
//
// A fenced view is its partition's only writer while its fence holds (other nodes write into
// a partition only where a key is absent: a session moved in). So on a replicated stream it
// keeps what it wrote (the owner cache: small values, bounded) and reads it back without a
// round trip, and reads from any replica that has applied at least the partition's newest
// record when the view began and everything the view wrote since (a replica's answer carries
// its last sequence); Sync moves that floor to the leader's present, for a read that must see
// another node's write.

// View is the store through one partition (Partition) or through the records of no partition
// (Global). It is a persist.Durable whose Close ends the view only (the calls in flight finish,
// later ones get persist.ErrClosed): a node closes a partition's view when it lets the
// partition go, so nothing it left running writes there afterwards. The Store stays open.
type View struct {
	s     *Store
	tok   string
	rs    *recStream
	fence *fence
	cache *ownerCache // fenced views only

	floorMu  sync.Mutex
	floorSet bool
	floor    uint64 // replicated fenced reads: the least last sequence a replica's answer needs

	mu     sync.Mutex
	closed bool
	calls  sync.WaitGroup
}

// errPartitionLeft is what a partition's view answers once closed: the partition left this
// node (released, or fenced), so the call stored nothing and may run again on its next owner
// (domain.ErrNodeUnavailable; still persist.ErrClosed).
var errPartitionLeft = fmt.Errorf("%w: %w", persist.ErrClosed, domain.ErrNodeUnavailable)

// closedErr is a closed view's answer.
func (v *View) closedErr() error {
	if v.fence != nil {
		return errPartitionLeft
	}
	return persist.ErrClosed
}

func (v *View) enter() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return false
	}
	v.calls.Add(1)
	return true
}

// Partition is the store through partition p. With f, every commit carries p's fence (see
// Fencer); without, commits are not fenced (reads, and writes a cluster makes into a partition
// it does not own, each under a condition of its own).
func (s *Store) Partition(p int, f Fencer) *View {
	tok := strconv.Itoa(p)
	v := &View{s: s, tok: tok, rs: s.streamOfToken(tok)}
	if f != nil {
		v.fence = newFence(s.FenceSubjects(p), s.carrierSubject(tok), f)
		if v.rs.replicated() {
			// A replicated stream's reads cost a leader's or a caught-up replica's answer; one
			// server's are direct gets that cost less than keeping every write here.
			v.cache = newOwnerCache()
		}
	}
	return v
}

// globalToken is the partition token of the records that belong to no partition (a cluster's
// dev issuer key).
const globalToken = "g"

// Global is the store through the records of no partition.
func (s *Store) Global() *View {
	return &View{s: s, tok: globalToken, rs: s.streamOfToken(globalToken)}
}

// Get reads key in the view's partition.
func (v *View) Get(key []byte) ([]byte, error) {
	if !v.enter() {
		return nil, v.closedErr()
	}
	defer v.calls.Done()
	if v.fence == nil {
		return v.s.get(v.tok, key, nil)
	}
	return v.s.get(v.tok, key, v)
}

// GetMany reads keys in the view's partition in as few round trips as the server allows
// (persist.Getter): values[i] is nil for a key that is absent.
func (v *View) GetMany(keys [][]byte) ([][]byte, error) {
	if !v.enter() {
		return nil, v.closedErr()
	}
	defer v.calls.Done()
	return v.s.getMany(v.tok, keys, v)
}

// Has tells which of keys are present in the view's partition (persist.Haver), in as few round
// trips as GetMany.
func (v *View) Has(keys [][]byte) ([]bool, error) {
	if !v.enter() {
		return nil, v.closedErr()
	}
	defer v.calls.Done()
	_, present, err := v.s.lookupMany(v.tok, keys, v)
	return present, err
}

// Scan scans prefix in the view's partition.
func (v *View) Scan(prefix []byte, fn func(key, value []byte) error) error {
	if !v.enter() {
		return v.closedErr()
	}
	defer v.calls.Done()
	return v.s.scan(v.tok, prefix, fn)
}

// ScanSince scans prefix in the view's partition, the records written since since only (see
// Store.ScanSince).
func (v *View) ScanSince(prefix []byte, since time.Time, fn func(key, value []byte) error) error {
	if !v.enter() {
		return v.closedErr()
	}
	defer v.calls.Done()
	return v.s.scanSince(v.tok, prefix, since, fn)
}

// ScanSinceSeq is ScanSince in the view's partition, in stream order, with each record's
// sequence (Store.ScanSinceSeq).
func (v *View) ScanSinceSeq(prefix []byte, since time.Time, fn func(key, value []byte, seq uint64) error) error {
	if !v.enter() {
		return v.closedErr()
	}
	defer v.calls.Done()
	return v.s.scanSeq(v.tok, prefix, since, fn)
}

// Commit commits ops in the view's partition, with its fence.
func (v *View) Commit(ctx context.Context, ops ...persist.Op) error {
	if !v.enter() {
		return v.closedErr()
	}
	defer v.calls.Done()
	return v.s.commit(ctx, v.tok, v, ops)
}

// OutcomeWriter is the store's: every partition's outbox shares it (persist.SharedWriting).
func (v *View) OutcomeWriter() *persist.OutcomeWriter { return v.s.OutcomeWriter() }

// Health is the store's; a partition's fence is checked per commit.
func (v *View) Health() error {
	v.mu.Lock()
	closed := v.closed
	v.mu.Unlock()
	if closed {
		return v.closedErr()
	}
	return v.s.Health()
}

// Close ends the view: it waits for the calls in flight; later calls get persist.ErrClosed.
func (v *View) Close() error {
	v.mu.Lock()
	v.closed = true
	v.mu.Unlock()
	v.calls.Wait()
	return nil
}

// Sync makes the view's later reads see every commit the stream's leader has acknowledged now,
// whoever made it (a fenced view otherwise reads its own writes and what was there when it
// began): one round trip to the leader. A node calls it before reading what another node wrote
// into the partition (a session moved in).
func (v *View) Sync(ctx context.Context) error {
	if v.fence == nil || !v.rs.replicated() {
		return nil
	}
	seq, err := v.leaderNewest(ctx)
	if err != nil {
		return err
	}
	v.raiseFloor(seq)
	return nil
}

func (v *View) leaderNewest(ctx context.Context) (uint64, error) {
	msg, err := v.rs.leaderLastRouted(ctx, v.s.prefix+".*."+v.tok+".>")
	if err != nil || msg == nil {
		return 0, err
	}
	return msg.Sequence, nil
}

func (v *View) raiseFloor(seq uint64) {
	v.floorMu.Lock()
	v.floor = max(v.floor, seq)
	v.floorMu.Unlock()
}

// readFloor is the least last sequence a replica must have applied to answer this view: at
// first, its fence's (the acquisition's fence write comes after every write of the partition's
// earlier owners, so a replica that has it has theirs: no round trip to the leader, which a
// stream electing one has not), then past each commit of the view's.
func (v *View) readFloor(ctx context.Context) (uint64, error) {
	v.floorMu.Lock()
	set := v.floorSet
	v.floorMu.Unlock()
	if !set {
		var seq uint64
		toks, err := v.fence.f.Fence()
		if err != nil {
			return 0, err
		}
		for _, t := range toks {
			seq = max(seq, t)
		}
		v.floorMu.Lock()
		v.floor, v.floorSet = max(v.floor, seq), true
		v.floorMu.Unlock()
	}
	v.floorMu.Lock()
	defer v.floorMu.Unlock()
	return v.floor, nil
}

// read reads subject for a fenced view: from its cache, else from any replica that has applied
// the view's floor (one server: the server), else from the leader.
func (v *View) read(ctx context.Context, subject string) (record, error) {
	if r, ok := v.cached(subject); ok {
		return r, nil
	}
	if !v.rs.replicated() {
		return v.rs.lastBatched(ctx, subject, 0, "")
	}
	floor, err := v.readFloor(ctx)
	if err != nil {
		return record{}, err
	}
	for try := 0; ; try++ {
		r, err := v.rs.lastBatched(ctx, subject, floor, v.fence.subjects[0])
		if err == errStale && try == 3 { // a replica catches up within milliseconds; else the leader
			r, err = v.s.last(ctx, subject)
		}
		if err != errStale {
			if err == nil {
				v.observed(r)
			}
			return r, err
		}
		time.Sleep(time.Duration(1<<try) * time.Millisecond)
	}
}

// observed raises the floor to a record the view has read: its later reads never come from a
// replica older than what it has seen (monotonic reads). A commit whose answer was lost may
// have been applied without raising the floor; a read of one of its records (an
// Idempotency-Key's) must not be followed by a read of another (the campaign committed with
// it) from a replica that has not applied it yet.
func (v *View) observed(r record) {
	if r.seq > 0 {
		v.raiseFloor(r.seq)
	}
}

// cached is subject's record in the owner cache, if it is there and live.
func (v *View) cached(subject string) (record, bool) {
	if v.cache == nil {
		return record{}, false
	}
	return v.cache.get(subject, time.Now())
}

// committed updates the owner cache with what r wrote, its first write stored at sequence base.
func (v *View) committed(r *commitReq, base uint64, now time.Time) {
	if v.cache == nil {
		return
	}
	for j, w := range r.writes {
		if !v.s.cachedTable(w.subject) {
			continue // never cached: nothing to drop either
		}
		if w.delete {
			v.cache.del(w.subject)
			continue
		}
		var exp int64
		if w.ttl > 0 {
			exp = now.Add(w.ttl).UnixMilli()
		}
		v.cache.put(w.subject, base+uint64(j), w.value, exp)
	}
	v.raiseFloor(base + uint64(len(r.writes)) - 1)
}

// cachedTable tells whether the owner cache keeps records of subject's table (not one of
// Options.Uncached): a table's records are always or never cached, so one never cached has
// no entry to go stale.
func (s *Store) cachedTable(subject string) bool {
	if len(s.uncached) == 0 || len(subject) <= len(s.prefix) {
		return true
	}
	t := subject[len(s.prefix)+1:]
	if i := strings.IndexByte(t, '.'); i >= 0 {
		t = t[:i]
	}
	return !slices.Contains(s.uncached, t)
}

// forget drops what r touches from the owner cache (the server refused one of its conditions:
// what the cache holds may not be the record's last message).
func (v *View) forget(r *commitReq) {
	if v.cache == nil {
		return
	}
	for _, k := range r.keys {
		v.cache.del(k)
	}
}

// ownerCache keeps, per subject, the last message a fenced view wrote: small values only, a
// bounded number of bytes, the oldest written evicted first. A put is one map lookup and one
// assignment, and an eviction pops the queue's front (a subject written again since is
// skipped there: its entry's turn comes with its newer write): a node puts every record of
// every message it sends, so what a put costs is paid per record.
type ownerCache struct {
	mu    sync.Mutex
	m     map[string]cacheEntry
	bytes int
	// order is every put's subject and turn, oldest first, from head on; an item whose entry
	// has a later turn (written again) or is gone is skipped when it comes up.
	order []cacheTurn
	head  int
	turn  uint64
}

type cacheEntry struct {
	seq   uint64
	value []byte
	exp   int64 // Unix ms; 0: none
	turn  uint64
}

type cacheTurn struct {
	subject string
	turn    uint64
}

const (
	cacheValueMax = 4 << 10
	cacheBytesMax = 512 << 10
)

func newOwnerCache() *ownerCache { return &ownerCache{m: map[string]cacheEntry{}} }

func (c *ownerCache) get(subject string, now time.Time) (record, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[subject]
	if !ok || (e.exp != 0 && now.UnixMilli() >= e.exp) {
		return record{}, false
	}
	return record{seq: e.seq, value: slices.Clone(e.value)}, true
}

func (c *ownerCache) put(subject string, seq uint64, value []byte, exp int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old, had := c.m[subject]
	if len(value) > cacheValueMax {
		if had {
			c.bytes -= len(subject) + len(old.value)
			delete(c.m, subject)
		}
		return
	}
	if had {
		c.bytes -= len(subject) + len(old.value)
	}
	c.turn++
	c.m[subject] = cacheEntry{seq: seq, value: value, exp: exp, turn: c.turn}
	c.bytes += len(subject) + len(value)
	c.order = append(c.order, cacheTurn{subject: subject, turn: c.turn})
	for c.bytes > cacheBytesMax && c.head < len(c.order) {
		t := c.order[c.head]
		c.order[c.head] = cacheTurn{}
		c.head++
		if e, ok := c.m[t.subject]; ok && e.turn == t.turn {
			c.bytes -= len(t.subject) + len(e.value)
			delete(c.m, t.subject)
		}
	}
	// The queue's stale items (subjects written again, or deleted) and its spent front are
	// dropped once they outnumber the entries: amortized, each put moves at most a few items.
	if c.head > len(c.order)/2 || len(c.order) > 2*len(c.m)+64 {
		c.compact()
	}
}

// compact keeps the queue's live items only, in their order.
func (c *ownerCache) compact() {
	live := c.order[:0]
	for _, t := range c.order[c.head:] {
		if e, ok := c.m[t.subject]; ok && e.turn == t.turn {
			live = append(live, t)
		}
	}
	clear(c.order[len(live):])
	c.order, c.head = live, 0
}

func (c *ownerCache) del(subject string) {
	c.mu.Lock()
	if e, ok := c.m[subject]; ok {
		c.bytes -= len(subject) + len(e.value)
		delete(c.m, subject) // its item in the queue is skipped when it comes up
	}
	c.mu.Unlock()
}

// Locate finds the partition that holds key: the partition token of its newest live record in
// any partition, ok false when none holds it live. One round trip to each stream's leader; when
// the newest record is a delete, every partition's record of key is read (a session moved
// between partitions is written in its new one before it is deleted from its old one: the
// newer delete says nothing of the new record).
func (s *Store) Locate(key []byte) (partition string, ok bool, err error) {
	if !s.enter() {
		return "", false, persist.ErrClosed
	}
	defer s.calls.Done()
	subject, err := s.subject("*", key)
	if err != nil {
		return "", false, nil
	}
	ctx, cancel := s.holdCtx()
	defer cancel()
	var newest *jetstream.RawStreamMsg
	for _, rs := range s.streams {
		msg, err := rs.leaderLastRouted(ctx, subject)
		if err != nil {
			return "", false, fmt.Errorf("natskv: locate: %w", unavailable(err))
		}
		if msg != nil && (newest == nil || msg.Time.After(newest.Time)) {
			newest = msg
		}
	}
	if newest == nil {
		return "", false, nil
	}
	now := time.Now()
	if !readRecord(newest.Sequence, newest.Header, newest.Data, now).deleted {
		return s.partitionOf(newest.Subject), true, nil
	}
	var live *pageMsg
	for _, rs := range s.streams {
		err := rs.pages(subject, time.Time{}, func(msg pageMsg) {
			if !readRecord(msg.seq, msg.header, msg.data, now).deleted && (live == nil || msg.time.After(live.time)) {
				live = &msg
			}
		})
		if err != nil {
			return "", false, fmt.Errorf("natskv: locate: %w", err)
		}
	}
	if live == nil {
		return "", false, nil
	}
	return s.partitionOf(live.subject), true, nil
}

// WatchEntry is one record change a Watch reports: its key, partition token and whether it
// was deleted (or expired).
type WatchEntry struct {
	Key       []byte
	Partition string
	Deleted   bool
}

// Watch reports the records of tables (their keys and partitions, never their values): first
// the current record of every key, then every change, until ctx ends. ready is closed once the
// records present at the start were reported. It is nats.go's ordered consumer on each records
// stream (headers only), which recreates itself after a gap or a lost server. fn runs on one
// goroutine per stream, in that stream's order.
func (s *Store) Watch(ctx context.Context, tables []string, fn func(WatchEntry)) (ready <-chan struct{}, err error) {
	readyC := make(chan struct{})
	var wg sync.WaitGroup
	var ccs []jetstream.ConsumeContext
	stop := func() {
		for _, cc := range ccs {
			cc.Stop()
		}
	}
	for _, rs := range s.streams {
		filters := make([]string, 0, len(tables))
		for _, t := range tables {
			filters = append(filters, s.filter("*", []byte(t+"/")))
		}
		cons, err := s.js.OrderedConsumer(ctx, rs.name, jetstream.OrderedConsumerConfig{
			FilterSubjects: filters, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy, HeadersOnly: true,
		})
		if err != nil {
			stop()
			return nil, fmt.Errorf("natskv: watch: %w", unavailable(err))
		}
		var once sync.Once
		wg.Add(1)
		markReady := func() { once.Do(wg.Done) }
		if info := cons.CachedInfo(); info == nil || info.NumPending == 0 {
			markReady()
		}
		cc, err := cons.Consume(func(m jetstream.Msg) {
			meta, _ := m.Metadata()
			key, ok := s.keyOf(m.Subject())
			if ok {
				fn(WatchEntry{Key: key, Partition: s.partitionOf(m.Subject()), Deleted: readRecord(0, m.Headers(), nil, time.Now()).deleted})
			}
			if meta == nil || meta.NumPending == 0 {
				markReady()
			}
		})
		if err != nil {
			stop()
			return nil, fmt.Errorf("natskv: watch: %w", unavailable(err))
		}
		ccs = append(ccs, cc)
	}
	go func() { wg.Wait(); close(readyC) }()
	go func() {
		<-ctx.Done()
		stop()
	}()
	return readyC, nil
}

// PartitionToken parses a partition token back to its number (false for the global token).
func PartitionToken(tok string) (int, bool) {
	if tok == globalToken || strings.ContainsAny(tok, "*>") {
		return 0, false
	}
	p, err := strconv.Atoi(tok)
	return p, err == nil
}

// Interface guards.
var _ persist.Durable = (*View)(nil)
