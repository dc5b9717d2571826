package natskv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
)

// commitReq is one Commit call: its ops reduced to one final write per key and the conditions
// it carries, all with their subjects.
type commitReq struct {
	ctx    context.Context
	writes []write
	conds  []cond
	keys   []string // every subject it touches, for the dispatcher's exclusion
	size   int
	done   chan error // buffered: a group never blocks on a caller that left
	// view is the View that made it (nil: the Store); fence its partition's fence (a fenced
	// View's commits in a cluster; nil: none), checked on lane.
	view  *View
	fence *fence
	lane  int
	// rs is the records stream its keys are in (a batch covers one stream).
	rs *recStream
	// tok is the partition token of a Store commit's keys (a View's is its own).
	tok string
	// one and key1 back writes and keys for a commit of one op (most: an accept, an outcome):
	// two allocations a commit fewer.
	one  [1]write
	key1 [1]string
	// id marks the commit's first write (Gw-Commit), so a commit whose answer was lost can be
	// found out applied or not (resolve).
	id string
}

type write struct {
	subject string
	value   []byte
	delete  bool
	ttl     time.Duration
}

type cond struct {
	subject string
	absent  bool // IfAbsent; else IfPresent
}

// Commit applies ops atomically: one message, or one atomic batch, to a records stream.
// Commits that touch no common key are grouped into one batch while others are in flight
// (group commit); commits that touch a common key run one after the other. If ctx ends while
// waiting, Commit returns ctx.Err() and the outcome is unknown, as with Badger.
func (s *Store) Commit(ctx context.Context, ops ...persist.Op) error {
	return s.commit(ctx, "", nil, ops)
}

// commit is Commit in partition tok ("" = Options.Partition's) for view v (nil: the Store),
// carrying v's fence check when it has one.
func (s *Store) commit(ctx context.Context, tok string, v *View, ops []persist.Op) error {
	if !s.enter() {
		return persist.ErrClosed
	}
	defer s.calls.Done()
	req, err := s.submit(ctx, tok, v, ops, true)
	if err != nil || req == nil {
		return err
	}
	return s.await(ctx, req)
}

// submit prepares a commit and hands it to the dispatcher (nil: nothing to commit, or err).
// With wait, a disconnected store is waited for (awaitConnected); without, it fails at once.
func (s *Store) submit(ctx context.Context, tok string, v *View, ops []persist.Op, wait bool) (*commitReq, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	req, rs, err := s.prepare(tok, ops)
	if err != nil || req == nil {
		return nil, err
	}
	if v != nil && v.fence != nil {
		if _, err := v.fence.f.Fence(); err != nil {
			return nil, err // not this node's partition to write: nothing is queued
		}
		if len(req.writes)+len(req.conds)+1 > s.maxBatch {
			return nil, fmt.Errorf("%w: a commit of %d messages exceeds the NATS batch limit of %d", domain.ErrRecordInvalid, len(req.writes)+len(req.conds)+1, s.maxBatch)
		}
		req.fence = v.fence
	}
	req.view, req.rs = v, rs
	if wait {
		err = s.awaitConnected(ctx)
	} else {
		err = s.Health()
	}
	if err != nil && !rs.full.Load() {
		return nil, err // disconnected: fail now, never queue behind a dead connection
	}
	req.ctx = ctx
	select {
	case s.reqs <- req:
		return req, nil
	case <-ctx.Done():
		return nil, s.ctxErr(ctx)
	}
}

// await is a submitted commit's answer.
func (s *Store) await(ctx context.Context, req *commitReq) error {
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return s.ctxErr(ctx)
	}
}

// CommitParts implements persist.PartsCommitter: every part, each atomic on its own and made
// through its own View of this store (its partition, with its fence) or the Store itself, is
// handed to the dispatcher before any is waited for, so the parts of many partitions merge into
// a few groups (a node's outcome writer: persist.OutcomeWriter). A part through a KV of another
// store is committed through it, alone.
func (s *Store) CommitParts(ctx context.Context, parts []persist.Part, errs []error) {
	type sent struct {
		req  *commitReq
		view *View
	}
	subs := make([]sent, len(parts))
	leave := func(v *View) { // what enter took for a part
		s.calls.Done()
		if v != nil {
			v.calls.Done()
		}
	}
	// A disconnected store is waited for once for all the parts, not once per part.
	_ = s.awaitConnected(ctx)
	for i, p := range parts {
		tok, v := "", (*View)(nil)
		switch kv := p.KV.(type) {
		case *Store:
			if kv != s {
				errs[i] = kv.Commit(ctx, p.Ops...)
				continue
			}
		case *View:
			if kv.s != s {
				errs[i] = kv.Commit(ctx, p.Ops...)
				continue
			}
			if !kv.enter() {
				errs[i] = kv.closedErr()
				continue
			}
			tok, v = kv.tok, kv
		default:
			errs[i] = p.KV.Commit(ctx, p.Ops...)
			continue
		}
		if !s.enter() {
			errs[i] = persist.ErrClosed
			if v != nil {
				v.calls.Done()
			}
			continue
		}
		subs[i].view = v
		if subs[i].req, errs[i] = s.submit(ctx, tok, v, p.Ops, false); subs[i].req == nil {
			leave(v)
		}
	}
	for i, sub := range subs {
		if sub.req == nil {
			continue
		}
		errs[i] = s.await(ctx, sub.req)
		leave(sub.view)
	}
}

// OutcomeWriter implements persist.SharedWriting: the outboxes of every view of this store
// (a node's partitions) share one outcome writer.
func (s *Store) OutcomeWriter() *persist.OutcomeWriter {
	// On one server each outcome is a commit of its own (a pipelined publish: sendPiped); on
	// replicated streams each outbox's outcomes of a gather are one commit, as before.
	s.writerOnce.Do(func() { s.writer = persist.NewOutcomeWriter(s, s.replicas <= 1) })
	return s.writer
}

// awaitConnected is nil once the store can take a commit. A connection that lost its server
// while the NATS cluster has others is moving to one of them (a few hundred milliseconds):
// the commit waits for it, at most the store's Hold, instead of failing; with no other server
// to go to (a lone NATS server down) it fails at once, storage_unavailable.
func (s *Store) awaitConnected(ctx context.Context) error {
	err := s.Health()
	if err == nil || !errors.Is(err, domain.ErrStorageUnavailable) || s.nc.IsClosed() || len(s.nc.Servers()) < 2 || s.lease.writable() != nil {
		return err
	}
	for _, rs := range s.streams {
		if rs.full.Load() {
			return err
		}
	}
	hctx, cancel := context.WithTimeout(ctx, s.hold)
	defer cancel()
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-hctx.Done():
			return err
		case <-t.C:
		}
		if err = s.Health(); err == nil {
			return nil
		}
	}
}

// ctxErr is a commit's error when its ctx ended first: storage unavailable when the connection
// is down meanwhile (it waited behind a group the lost server never answered), else ctx's.
func (s *Store) ctxErr(ctx context.Context) error {
	if herr := s.Health(); herr != nil && errors.Is(herr, domain.ErrStorageUnavailable) {
		return fmt.Errorf("natskv: commit: %w (%w)", herr, ctx.Err())
	}
	return ctx.Err()
}

// prepare validates ops and reduces them to what goes to the server; nil for a commit that
// writes and checks nothing. Every key must be in one stream (a commit is one batch).
func (s *Store) prepare(tok string, ops []persist.Op) (*commitReq, *recStream, error) {
	if err := persist.ValidateOps(ops); err != nil {
		return nil, nil, err
	}
	if len(ops) == 0 {
		return nil, nil, nil
	}
	req := &commitReq{done: make(chan error, 1), tok: tok, id: nuid.Next()}
	if len(ops) == 1 {
		req.writes, req.keys = req.one[:0], req.key1[:0]
	} else {
		req.writes = make([]write, 0, len(ops))
	}
	var rs *recStream
	// A commit has a few ops, mostly: a linear search beats two maps per commit; a large
	// commit (a boot's chunk, up to 1,000 ops) indexes its subjects.
	var keyAt, writeAt map[string]int
	if len(ops) > 16 {
		keyAt, writeAt = make(map[string]int, len(ops)), make(map[string]int, len(ops))
	}
	for i, op := range ops {
		ktok := tok
		if ktok == "" {
			ktok = strconv.FormatUint(uint64(s.partition(op.Key)), 10)
		}
		subject, err := s.subject(ktok, op.Key)
		if err != nil {
			return nil, nil, fmt.Errorf("op %d: %w", i, err)
		}
		switch krs := s.streamOfToken(ktok); {
		case rs == nil:
			rs, req.tok = krs, ktok
		case krs != rs:
			return nil, nil, fmt.Errorf("%w: op %d: a commit's keys must be in one records stream", domain.ErrRecordInvalid, i)
		}
		if len(op.Value) > s.maxValue {
			return nil, nil, fmt.Errorf("%w: op %d: value of %d bytes exceeds the NATS server's max_payload (%d)", domain.ErrRecordInvalid, i, len(op.Value), s.maxValue)
		}
		if _, ok := indexOf(req.keys, keyAt, subject, func(k string) string { return k }); !ok {
			req.keys = append(req.keys, subject)
		}
		if op.IfAbsent || op.IfPresent {
			req.conds = append(req.conds, cond{subject: subject, absent: op.IfAbsent})
			continue
		}
		w := write{subject: subject, value: slices.Clone(op.Value), delete: op.Delete, ttl: op.TTL}
		if j, ok := indexOf(req.writes, writeAt, subject, func(w write) string { return w.subject }); ok {
			req.size += len(op.Value) - len(req.writes[j].value)
			req.writes[j] = w // a later op on one key wins
			continue
		}
		req.writes = append(req.writes, w)
		req.size += len(op.Value) + len(subject)
	}
	if n := len(req.writes) + len(req.conds); n > s.maxBatch {
		return nil, nil, fmt.Errorf("%w: a commit of %d messages exceeds the NATS batch limit of %d", domain.ErrRecordInvalid, n, s.maxBatch)
	}
	return req, rs, nil
}

// indexOf is subject's index in list and whether it is there (found by at when at is not nil;
// at then learns that a missing subject goes at the end of list).
func indexOf[T any](list []T, at map[string]int, subject string, key func(T) string) (int, bool) {
	if at == nil {
		i := slices.IndexFunc(list, func(e T) bool { return key(e) == subject })
		return i, i >= 0
	}
	i, ok := at[subject]
	if !ok {
		at[subject] = len(list)
	}
	return i, ok
}

// dispatch forms groups of waiting commits with disjoint keys and runs up to maxGroups of them
// at once, of which at most maxBatches are multi-message batches; a commit that shares a key
// with one in flight (or with an earlier waiting one) waits for it, so commits of one key
// apply in the order they came. One dispatcher serves the whole store (the node): a group
// merges the commits of every partition the node writes in one records stream (a batch covers
// one stream), and the limits are the node's, not each stream's, so a node spreading its
// partitions over several streams sends as few groups per request as one with a single stream
// (group commit per node, not per partition or per stream: DESIGN.md section 19). Each group
// is formed for the stream of the oldest waiting commit. Each stream also keeps the same
// limits of its own, and a group in flight for longer than stallAfter leaves the node's
// budget: a stream electing a leader holds its own partitions' commits, not the others'.
//
// Why two limits: on one server (R1) a one-message commit is a plain publish, cheap on the
// server and pipelined on the connection, while an atomic batch costs the server far more (it
// stages in a temporary file store of its own), so the one-message commits go as a group of
// pipelined publishes (pickPiped, sendPiped) without a batch slot, and only the commits of
// several messages gather into batches.
// On a replicated stream a plain publish costs a raft proposal as a batch does, and each
// group costs this process a round trip: every group there takes a batch slot. Measured on
// three in-process servers, 64 writers over 12 partitions in 3 streams: 0.46 groups per
// commit with one-message commits going alone, 0.055 without, about twice the commits per
// second at 0.6 of the CPU per commit (bench/README.md, "A cluster").
//
// Fences: a replicated stream refuses a check of a subject while another proposal checking it
// is in flight, so each partition has FenceLanes fence subjects, written together at each
// acquisition; a group checks one lane per partition it carries, and no two groups in flight
// check one lane. One server (R1) checks at once and allows any number: no exclusion.
func (s *Store) dispatch() {
	defer close(s.dispatched)
	var pending []*commitReq
	inflight := map[string]bool{}
	// running and batches count the groups in flight that are not stalled (the node's budget);
	// perStream counts every group in flight by stream, stalled or not (each stream's own
	// budget, the same limits).
	running, batches := 0, 0
	type streamCount struct{ groups, slots int }
	perStream := map[*recStream]*streamCount{}
	for _, rs := range s.streams {
		perStream[rs] = &streamCount{}
	}
	flights := map[*flight]bool{}
	finished := make(chan *flight, s.maxGroups)
	// One ticker finds the groups in flight for longer than stallAfter (a timer a group
	// before: one made, armed and stopped for every group). It runs while groups are in
	// flight and stops at the first tick that finds none.
	var stallTicker *time.Ticker
	var stalled <-chan time.Time
	defer func() {
		if stallTicker != nil {
			stallTicker.Stop()
		}
	}()
	open := true
	for open || len(pending) > 0 || len(flights) > 0 {
		var in chan *commitReq
		if open {
			in = s.reqs
		}
		select {
		case r, ok := <-in:
			if !ok {
				open = false
				break
			}
			pending = append(pending, r)
		more:
			for {
				select {
				case r, ok := <-s.reqs:
					if !ok {
						open = false
						break more
					}
					pending = append(pending, r)
				default:
					break more
				}
			}
		case fl := <-finished:
			delete(flights, fl)
			if !fl.released {
				running--
				if fl.slot {
					batches--
				}
			}
			c := perStream[fl.rs]
			c.groups--
			if fl.slot {
				c.slots--
			}
			for _, r := range fl.group {
				for _, k := range r.keys {
					delete(inflight, k)
				}
				if r.fence != nil {
					delete(inflight, laneKey(r.fence, r.lane))
				}
			}
		case now := <-stalled:
			// A group in flight for longer than stallAfter (a stream electing a leader, a lost
			// server) leaves the node's budget: one stream's trouble holds its own partitions'
			// commits, not every stream's. Its stream's own budget still counts it.
			if len(flights) == 0 {
				stallTicker.Stop()
				stallTicker, stalled = nil, nil
			}
			for fl := range flights {
				if !fl.released && now.Sub(fl.started) >= stallAfter {
					fl.released = true
					running--
					if fl.slot {
						batches--
					}
				}
			}
		}
		// Streams a group was tried for in this turn: a stream whose waiting commits all wait
		// for keys in flight, or whose own budget is spent, leaves the turn to the next stream.
		var tried []*recStream
		for running < s.maxGroups && len(pending) > 0 {
			rs := nextStream(pending, tried)
			if rs == nil {
				break
			}
			c := perStream[rs]
			slot := batches < s.maxBatches && c.slots < s.maxBatches
			if c.groups >= s.maxGroups || (!slot && rs.replicated()) {
				// A replicated stream's one-message commit costs the servers a raft proposal
				// as a batch does: it waits for a batch slot and joins the next group.
				tried = append(tried, rs)
				continue
			}
			var group []*commitReq
			piped := false
			if !rs.replicated() {
				// One server: the one-message commits go as pipelined publishes, without a
				// batch slot; the others wait for a slot and go as one atomic batch.
				group, pending = rs.pick(pending, inflight, pickPiped)
				piped = len(group) > 0
			}
			if !piped && slot {
				group, pending = rs.pick(pending, inflight, pickBatch)
			}
			if len(group) == 0 {
				tried = append(tried, rs)
				continue
			}
			fl := &flight{group: group, rs: rs, piped: piped, slot: !piped, started: time.Now()}
			flights[fl] = true
			running++
			c.groups++
			if fl.slot {
				c.slots++
				if batches++; int64(batches) > s.peakBatches.Load() {
					s.peakBatches.Store(int64(batches))
				}
			}
			if stallTicker == nil {
				stallTicker = time.NewTicker(stallTick)
				stalled = stallTicker.C
			}
			go func() {
				if hook := groupHook.Load(); hook != nil {
					(*hook)(rs.idx)
				}
				rs.runGroup(group, piped)
				finished <- fl
			}()
		}
	}
}

// flight is a group in flight: its commits, its stream, whether it takes a batch slot, and
// whether it stalled (in flight for longer than stallAfter; released: no longer counted in the
// node's budget).
type flight struct {
	group    []*commitReq
	rs       *recStream
	slot     bool
	piped    bool // one-message commits sent as pipelined publishes (one server)
	started  time.Time
	released bool
}

// groupHook, when set (tests only), runs before each group is sent, with its stream's index.
var groupHook atomic.Pointer[func(stream int)]

// readHook, when set (tests only), runs between the reading of a group's conditions and its
// publish: another writer's change there overtakes them.
var readHook atomic.Pointer[func()]

// stallAfter is how long a group may be in flight before it no longer holds the node's budget
// (a healthy round trip takes milliseconds; a stream without a leader holds its groups for up
// to Options.Hold).
const stallAfter = 250 * time.Millisecond

// stallTick is how often the dispatcher looks for stalled groups: a group leaves the node's
// budget between stallAfter and stallAfter+stallTick after it was sent.
const stallTick = stallAfter / 5

// nextStream is the stream of the oldest waiting commit whose stream is not in tried (nil:
// none).
func nextStream(pending []*commitReq, tried []*recStream) *recStream {
	for _, r := range pending {
		if !slices.Contains(tried, r.rs) {
			return r.rs
		}
	}
	return nil
}

// messageCount is how many messages r is when it goes alone: its writes and conditions, and
// the carrier of its fence unless the fence rides on one of its unconditioned writes.
func messageCount(r *commitReq) int {
	n := len(r.writes) + len(r.conds)
	if r.fence != nil && !hasFreeWrite(r) {
		n++
	}
	return n
}

// hasFreeWrite: r writes a key it puts no condition on, whose message can carry the fence check.
func hasFreeWrite(r *commitReq) bool {
	for _, w := range r.writes {
		if !r.conditions(w.subject) {
			return true
		}
	}
	return false
}

func (r *commitReq) conditions(subject string) bool {
	for _, c := range r.conds {
		if c.subject == subject {
			return true
		}
	}
	return false
}

// laneKey is a fence lane's entry among the dispatcher's keys in flight (replicated streams).
func laneKey(f *fence, lane int) string { return "\x00fence " + f.subjects[lane] }

// pickMode is what kind of group pick forms.
type pickMode uint8

const (
	// pickBatch: commits sent as one atomic batch (or one message, when that is all).
	pickBatch pickMode = iota
	// pickPiped (one server): commits of one message each, its fence check included, sent as
	// pipelined publishes, each its own (rs.sendPiped).
	pickPiped
)

// pick takes from pending, in order, the commits of rs that fit one group: none touches a key
// in flight, in the group, or of an earlier commit left waiting, and on a replicated stream
// each partition it carries has a fence lane no group in flight checks. With pickPiped, it
// takes only commits of one message each. It returns the group and what is left waiting (the
// other streams' commits among it, in their order).
func (rs *recStream) pick(pending []*commitReq, inflight map[string]bool, mode pickMode) (group, rest []*commitReq) {
	s := rs.s
	blocked := map[string]bool{}
	lanes := map[*fence]int{} // the lane each fence of this group checks
	msgs, size := 0, 0
	for i, r := range pending {
		if r.ctx.Err() != nil {
			r.done <- r.ctx.Err() // its caller has left; nothing was sent
			continue
		}
		if r.rs != rs {
			rest = append(rest, r) // another stream's (its keys are other subjects)
			continue
		}
		n := len(r.writes) + len(r.conds)
		lane, carried := 0, false
		if mode == pickPiped {
			n = messageCount(r) // each carries its own fence check
		} else if r.fence != nil {
			lane, carried = lanes[r.fence]
			if !carried {
				if !hasFreeWrite(r) {
					n++ // its carrier, unless a later commit of the partition brings a free write
				}
				lane = -1
				for l := range r.fence.subjects {
					if !rs.replicated() || !inflight[laneKey(r.fence, l)] {
						lane = l
						break
					}
				}
			}
		}
		free := lane >= 0 && msgs+n <= s.maxBatch && (len(group) == 0 || size+r.size <= maxGroupBytes) &&
			(mode == pickBatch || n == 1)
		for _, k := range r.keys {
			if inflight[k] || blocked[k] {
				free = false
			}
		}
		if !free {
			for _, k := range r.keys {
				blocked[k] = true
			}
			rest = append(rest, r)
			if len(blocked) > 4*s.maxBatch {
				return group, append(rest, pending[i+1:]...)
			}
			continue
		}
		for _, k := range r.keys {
			inflight[k], blocked[k] = true, true
		}
		if r.fence != nil {
			r.lane = lane
			if !carried && mode == pickBatch {
				lanes[r.fence] = lane
				if rs.replicated() {
					inflight[laneKey(r.fence, lane)] = true
				}
			}
		}
		group = append(group, r)
		msgs += n
		size += r.size
	}
	return group, rest
}

// runGroup sends one group as one message or one atomic batch and answers its commits. A
// group that fails on a condition another writer broke between our read and the server's
// check (a wrong last sequence) is read again and sent again once, without the commits whose
// conditions now fail; what still fails is retried commit by commit. On a replicated stream a
// commit whose condition failed on the first read (any replica's answer, which may not have
// applied the newest commits: read.go) is decided again on the leader's (sendAlone): a
// replica behind passes a condition only for the server's own check to refuse it, but it can
// fail one that holds (an IfPresent of a record another connection just created).
func (rs *recStream) runGroup(group []*commitReq, piped bool) {
	rs.s.groups.Add(1)
	send := rs.send
	if piped {
		send = rs.sendPiped
	}
	failed, err := send(group, false)
	var freshly map[*commitReq]bool // answered on conditions read from the leader
	if errors.Is(err, errWrongSequence) && len(group) > 1 {
		var again []*commitReq
		for _, r := range group {
			if _, ok := failed[r]; !ok {
				again = append(again, r)
			}
		}
		var f2 map[*commitReq]error
		f2, err = rs.send(again, true)
		freshly = make(map[*commitReq]bool, len(f2))
		for r, e := range f2 {
			if failed == nil {
				failed = map[*commitReq]error{}
			}
			failed[r], freshly[r] = e, true
		}
	}
	for _, r := range group {
		var e error
		switch f, ok := failed[r]; {
		case ok && f == errAnsweredEarly: // a marker, never wrapped
			continue // answered by its ack's callback (sendPiped: earlyAnswers)
		case ok && !freshly[r] && rs.replicated() && conditionFailed(f):
			e = rs.sendAlone(r)
		case ok:
			e = f
		case errors.Is(err, errWrongSequence):
			e = rs.sendAlone(r)
		default:
			e = err
		}
		if e == nil {
			rs.s.wrote(r)
		}
		r.done <- e
	}
}

// wrote counts an applied commit's records and their bytes (Stats).
func (s *Store) wrote(r *commitReq) {
	n := 0
	for _, w := range r.writes {
		n += len(w.subject) + len(w.value)
	}
	s.records.Add(uint64(len(r.writes)))
	s.recordBytes.Add(uint64(n))
}

// sendAlone retries one commit whose conditions were overtaken, reading them again each time.
// A fenced commit refused because its partition's fence moved is not retried: another node
// owns the partition now (and the view's Fencer is told, so the node gives the lease up).
func (rs *recStream) sendAlone(r *commitReq) error {
	for attempt := 1; ; attempt++ {
		if r.fence != nil {
			if err := rs.s.checkFence(r.fence, r.lane); err != nil {
				return err
			}
		}
		failed, err := rs.send([]*commitReq{r}, true)
		if f, ok := failed[r]; ok {
			return f
		}
		if !errors.Is(err, errWrongSequence) {
			return err
		}
		if attempt == 20 {
			return fmt.Errorf("natskv: commit: %w: a condition stayed contended", domain.ErrStorageUnavailable)
		}
		time.Sleep(time.Duration(attempt) * time.Millisecond)
	}
}

var errWrongSequence = errors.New("natskv: wrong last sequence")

// conditionFailed: err is a commit's IfAbsent or IfPresent found not to hold.
func conditionFailed(err error) bool {
	return errors.Is(err, domain.ErrRecordExists) || errors.Is(err, domain.ErrRecordNotFound)
}

// sendStart checks the store may write and reads the conditions of a group about to be sent,
// within the store's Hold (ctx; cancel ends it).
func (rs *recStream) sendStart(group []*commitReq, fresh bool) (context.Context, context.CancelFunc, map[string]record, error) {
	if err := rs.s.lease.writable(); err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := rs.s.holdCtx()
	seqs, err := rs.conditionSeqs(ctx, group, fresh)
	if err != nil {
		cancel()
		return nil, nil, nil, err
	}
	return ctx, cancel, seqs, nil
}

// send resolves the group's conditions and publishes the commits whose conditions hold. It
// returns the commits whose conditions failed, with their errors, and the publish's error for
// the others. fresh: read the conditions from the stream leader (a retry after a stale read),
// never from the views' caches.
func (rs *recStream) send(group []*commitReq, fresh bool) (map[*commitReq]error, error) {
	s := rs.s
	ctx, cancel, seqs, err := rs.sendStart(group, fresh)
	if err != nil {
		return nil, err
	}
	defer cancel()
	if hook := readHook.Load(); hook != nil {
		(*hook)()
	}
	var (
		msgs   []*nats.Msg
		failed map[*commitReq]error
		sent   []*commitReq
		firsts []int // sent[i]'s first message in msgs (after the carriers go in front)
	)
	fail := func(r *commitReq, err error) {
		if failed == nil {
			failed = map[*commitReq]error{}
		}
		failed[r] = err
	}
	type fenceUse struct {
		seq     uint64
		carried bool
	}
	fences := map[*fence]*fenceUse{}
	var carriers []*nats.Msg
	now := time.Now()
	for _, r := range group {
		f := r.fence
		if f != nil {
			if _, ok := fences[f]; !ok {
				toks, err := f.f.Fence()
				if err == nil && len(toks) != len(f.subjects) {
					err = fmt.Errorf("%w: the partition's fence has %d lanes, not %d", domain.ErrNodeUnavailable, len(toks), len(f.subjects))
				}
				if err != nil {
					fail(r, err)
					continue
				}
				fences[f] = &fenceUse{seq: toks[r.lane]}
			}
		}
		m, cs, err := s.messages(r, seqs, now)
		if err != nil {
			fail(r, err)
			continue
		}
		if f != nil && !fences[f].carried {
			// The fence check rides on one of the partition's unconditioned writes.
			for i, w := range r.writes {
				if !r.conditions(w.subject) && m[i].Header.Get(jetstream.ExpectedLastSubjSeqHeader) == "" {
					f.setCheck(m[i], r.lane, fences[f].seq)
					fences[f].carried = true
					break
				}
			}
		}
		carriers = append(carriers, cs...)
		firsts = append(firsts, len(msgs))
		msgs = append(msgs, m...)
		sent = append(sent, r)
	}
	for f, u := range fences {
		if !u.carried {
			for _, r := range sent {
				if r.fence == f {
					c := nats.NewMsg(f.carrier)
					f.setCheck(c, r.lane, u.seq)
					c.Header.Set(jetstream.MsgTTLHeader, ttlOneSecond)
					carriers = append(carriers, c)
					break
				}
			}
		}
	}
	// Carriers first: a check on a subject the batch wrote earlier would fail.
	if len(carriers) > 0 {
		msgs = append(carriers, msgs...)
	}
	if len(msgs) == 0 {
		return failed, nil
	}
	if len(msgs) > 1 {
		s.batches.Add(1)
	}
	var last uint64
	tries := 0
	// Tried again while no server has the stream's subjects (nothing was stored), as long as
	// every partition of the group is still this node's to write (else the callers hear so at
	// once, and run again on the partition's next owner).
	err = s.retry(ctx, func(ctx context.Context) error {
		if tries++; tries > 1 {
			for f := range fences {
				if _, err := f.f.Fence(); err != nil {
					return err
				}
			}
		}
		if len(msgs) == 1 {
			ack, err := s.js.PublishMsg(ctx, msgs[0], jetstream.WithRetryAttempts(0))
			if err == nil {
				last = ack.Sequence
			}
			return err
		}
		ack, err := jetstreamext.PublishMsgBatch(ctx, s.js, msgs, jetstreamext.BatchFlowControl{AckFirst: false, AckTimeout: s.timeout})
		if err == nil {
			last = ack.Sequence
		}
		return err
	})
	if errors.Is(err, domain.ErrNodeUnavailable) {
		return failed, err // a partition left this node while the stream had no leader: not sent
	}
	if timedOut(err) {
		// The answer was lost (a server died with it, a leader changed): find out.
		return rs.resolve(sent, failed, err)
	}
	err = rs.publishErr(err)
	if err == nil && last > 0 {
		rs.ackSeen(last)
		// A batch is stored in order under consecutive sequences.
		first := last - uint64(len(msgs)) + 1 + uint64(len(carriers))
		for i, r := range sent {
			if r.view != nil {
				r.view.committed(r, first+uint64(firsts[i]), now)
			}
		}
	}
	if errors.Is(err, errWrongSequence) {
		for _, r := range sent {
			if r.view != nil {
				r.view.forget(r)
			}
		}
	}
	return failed, err
}

// hdrCommit marks a commit's first message with the commit's id.
const hdrCommit = "Gw-Commit"

// timedOut: a request's answer did not come; what it sent may or may not have been applied.
func timedOut(err error) bool {
	return errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, jetstream.ErrAsyncPublishTimeout)
}

// resolve settles the commits of a group whose publish timed out: each commit whose first write
// is its subject's last message (its Gw-Commit), as the stream's leader has it once it answers
// again, was applied; the others were not (a batch is applied whole or not at all; this store
// writes none of their keys meanwhile: they stay in flight) and are sent again, their
// conditions read afresh. A commit found applied is answered nil, as is one sent again and
// applied (every commit of sent is answered); the owner cache forgets what it touched.
// Without an answer within the store's Hold, the timeout stands.
func (rs *recStream) resolve(sent []*commitReq, failed map[*commitReq]error, cause error) (map[*commitReq]error, error) {
	s := rs.s
	ctx, cancel := s.holdCtx()
	defer cancel()
	if failed == nil {
		failed = map[*commitReq]error{}
	}
	var again []*commitReq
	for _, r := range sent {
		if r.view != nil {
			r.view.forget(r)
		}
		if len(r.writes) == 0 {
			again = append(again, r) // a check alone: nothing to find, safe to send again
			continue
		}
		cur, err := s.last(ctx, r.writes[0].subject)
		if err != nil {
			failed[r] = fmt.Errorf("natskv: commit: %w (the outcome of a publish whose answer was lost is unknown: %v)", domain.ErrStorageUnavailable, cause)
			continue
		}
		if cur.commit == r.id {
			failed[r] = nil // applied
			continue
		}
		again = append(again, r)
	}
	if len(again) == 0 {
		return failed, nil
	}
	f2, err := rs.send(again, true)
	for r, e := range f2 {
		failed[r] = e
	}
	for _, r := range again {
		if _, ok := failed[r]; ok {
			continue
		}
		if errors.Is(err, errWrongSequence) {
			// Refused again, on a condition another writer changed since it was read (the
			// store's own error, never the caller's): decided as a group's refusal is
			// (runGroup), commit by commit on conditions read afresh.
			failed[r] = rs.sendAlone(r)
			continue
		}
		// err, or nil: sent again and applied. Every commit is answered: sendPiped's caller
		// sends again the commits it left unanswered.
		failed[r] = err
	}
	return failed, nil
}

// conditionSeqs reads the last message of every subject the group's conditions name: from the
// views' caches (the owner of a partition is its only writer), then in one multi-subject direct
// get for the rest (any replica: a stale answer fails the commit on the server's own check,
// and the retry reads fresh, from the leader).
func (rs *recStream) conditionSeqs(ctx context.Context, group []*commitReq, fresh bool) (map[string]record, error) {
	var subjects []string
	out := map[string]record{}
	for _, r := range group {
		for _, c := range r.conds {
			if !fresh && r.view != nil {
				if rec, ok := r.view.cached(c.subject); ok {
					out[c.subject] = rec
					continue
				}
			}
			subjects = append(subjects, c.subject)
		}
	}
	if len(subjects) == 0 {
		return out, nil
	}
	if fresh && rs.replicated() {
		for _, subj := range subjects {
			r, err := rs.s.last(ctx, subj)
			if err != nil {
				return nil, err
			}
			out[subj] = r
		}
		return out, nil
	}
	got, err := rs.multiLast(ctx, subjects, 0, "")
	if err != nil {
		return nil, err
	}
	for _, subj := range subjects {
		out[subj] = got[subj]
	}
	return out, nil
}

// messages builds r's messages, in the order of r.writes, each write with the expected-sequence
// check of its key's condition, and the carrier messages of the conditions on keys r does not
// write (they go first in the batch). It fails with ErrExists or ErrNotFound when a condition
// does not hold now.
func (s *Store) messages(r *commitReq, seqs map[string]record, now time.Time) (msgs, carriers []*nats.Msg, err error) {
	var expect map[string]uint64
	if len(r.conds) > 0 {
		expect = make(map[string]uint64, len(r.conds))
	}
	for _, c := range r.conds {
		cur, ok := seqs[c.subject]
		if !ok {
			cur.deleted = true
		}
		switch {
		case c.absent && !cur.deleted:
			return nil, nil, domain.ErrRecordExists
		case !c.absent && cur.deleted:
			return nil, nil, domain.ErrRecordNotFound
		}
		expect[c.subject] = cur.seq
	}
	if len(r.writes) != 1 {
		msgs = make([]*nats.Msg, 0, len(r.writes))
	}
	for i, w := range r.writes {
		// Room for every header a record gets here and a fence check (fence.setCheck): one
		// map of its final size and one array for the values, not a slice per value. The
		// message, its values' array and (a one-write commit's) msgs are one allocation.
		rm := &recMsg{}
		if msgs == nil {
			msgs = rm.one[:0]
		}
		h := header{h: make(nats.Header, 6), vals: rm.vals[:0]}
		m := &rm.m
		m.Subject, m.Header, m.Data = w.subject, h.h, w.value
		ttl := w.ttl
		if w.delete {
			m.Data = nil
			h.set(hdrOp, opDelete)
			ttl = tombstoneTTL
		}
		if ttl > 0 {
			h.set(jetstream.MsgTTLHeader, ttlValue(ttl))
			if !w.delete {
				h.set(hdrExpires, strconv.FormatInt(now.Add(ttl).UnixMilli(), 10))
			}
		}
		if seq, ok := expect[w.subject]; ok {
			h.set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(seq, 10))
			delete(expect, w.subject)
		}
		if i == 0 {
			h.set(hdrCommit, r.id)
		}
		msgs = append(msgs, m)
	}
	// Conditions on keys the commit does not write ride on carrier messages of the partition.
	for _, c := range r.conds {
		seq, ok := expect[c.subject]
		if !ok {
			continue
		}
		delete(expect, c.subject)
		m := nats.NewMsg(s.carrierSubject(r.tok))
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(seq, 10))
		m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, c.subject)
		m.Header.Set(jetstream.MsgTTLHeader, ttlOneSecond)
		carriers = append(carriers, m)
	}
	return msgs, carriers, nil
}

// recMsg is a record's message with its header values' array and, for a one-write commit,
// the commit's slice of messages: allocated as one.
type recMsg struct {
	m    nats.Msg
	vals [4]string
	one  [1]*nats.Msg
}

// header is a message's header being built, its values in one array (nats.Header.Set makes
// a slice per value: three to four allocations a record on the send path).
type header struct {
	h    nats.Header
	vals []string
}

// set sets k to v, sharing vals' array while it has room (each value's slice is capped at its
// one element: an Add to it reallocates, never writes over the next value).
func (h *header) set(k, v string) {
	if len(h.vals) == cap(h.vals) {
		h.h.Set(k, v)
		return
	}
	h.vals = append(h.vals, v)
	n := len(h.vals)
	h.h[k] = h.vals[n-1 : n : n]
}

// ttlOneSecond is a carrier's Nats-TTL.
const ttlOneSecond = "1s"

// ttlValue is a record's Nats-TTL: whole seconds, rounded up (the server never removes a
// record before its TTL), with their unit. The server parses the value as a Go duration first
// and as a bare number of seconds only after that fails: a bare number cost it a formatted
// error, two allocations a record, on every record (nats-server stream.go parseMessageTTL).
// The few TTLs the gateway uses are formatted once.
func ttlValue(ttl time.Duration) string {
	secs := int64((ttl + time.Second - 1) / time.Second)
	if v, ok := ttlValues.Load(secs); ok {
		return v.(string)
	}
	v := strconv.FormatInt(secs, 10) + "s"
	if ttlCached.Load() < 64 { // a bound: racing callers may pass it by a few
		ttlCached.Add(1)
		ttlValues.Store(secs, v)
	}
	return v
}

var (
	ttlValues sync.Map // int64 seconds -> string
	ttlCached atomic.Int32
)

// carrierSubject is the subject of the messages that carry a check for partition tok: one of
// the store's own records in the partition's stream, which no key encodes to.
func (s *Store) carrierSubject(tok string) string {
	return s.prefix + "." + internalTable + "." + tok + ".c"
}

// Error codes of atomic batches the server dropped without storing anything (nats-server
// jetstream_errors_generated.go): another leader took over mid-batch, or the stream has too
// many batches open (a budget all the cluster's nodes share).
const (
	errIncompleteBatch = 10176
	errTooManyInflight = 10210
)

// publishErr maps a publish failure: a broken condition, a full stream, an unreachable server.
func (rs *recStream) publishErr(err error) error {
	if err == nil {
		if rs.full.Load() {
			rs.full.Store(false)
		}
		return nil
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant:
			return errWrongSequence
		case 10077 /* store failed: maximum bytes/messages exceeded */ :
			rs.markFull()
			return fmt.Errorf("natskv: commit: %w: the records stream is full: %w", domain.ErrStorageUnavailable, err)
		case 10199 /* batch too large */ :
			return fmt.Errorf("natskv: commit: %w: %w", domain.ErrRecordInvalid, err)
		}
	}
	if errors.Is(err, nats.ErrMaxPayload) {
		return fmt.Errorf("natskv: commit: %w: %w", domain.ErrRecordInvalid, err)
	}
	return fmt.Errorf("natskv: commit: %w", unavailable(err))
}

// markFull reports the stream full until a commit succeeds or its stream info shows room.
func (rs *recStream) markFull() {
	if rs.full.Swap(true) {
		return
	}
	s := rs.s
	s.log.Warn("the records stream is full: writes answer 503 until space returns (raise max_bytes, README: NATS)", "stream", rs.name)
	s.bg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for rs.full.Load() {
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
			ctx, cancel := s.ctx()
			info, err := rs.stream.Info(ctx)
			cancel()
			if err == nil && (info.Config.MaxBytes <= 0 || info.State.Bytes+64<<10 < uint64(info.Config.MaxBytes)) {
				rs.full.Store(false)
			}
		}
	})
}
