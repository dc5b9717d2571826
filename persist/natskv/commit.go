package natskv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
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

// Commit applies ops atomically: one message, or one atomic batch, to the records stream.
// Commits that touch no common key are grouped into one batch while others are in flight
// (group commit); commits that touch a common key run one after the other. If ctx ends while
// waiting, Commit returns ctx.Err() and the outcome is unknown, as with Badger.
func (s *Store) Commit(ctx context.Context, ops ...persist.Op) error {
	if !s.enter() {
		return persist.ErrClosed
	}
	defer s.calls.Done()
	if err := ctx.Err(); err != nil {
		return err
	}
	req, err := s.prepare(ops)
	if err != nil || req == nil {
		return err
	}
	if err := s.Health(); err != nil && !s.full.Load() {
		return err // disconnected: fail now, never queue behind a dead connection
	}
	req.ctx = ctx
	select {
	case s.reqs <- req:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// prepare validates ops and reduces them to what goes to the server; nil for a commit that
// writes and checks nothing.
func (s *Store) prepare(ops []persist.Op) (*commitReq, error) {
	if err := persist.ValidateOps(ops); err != nil {
		return nil, err
	}
	if len(ops) == 0 {
		return nil, nil
	}
	req := &commitReq{done: make(chan error, 1)}
	last := map[string]int{} // subject → index in writes
	seen := map[string]bool{}
	for i, op := range ops {
		subject, err := s.subject(op.Key)
		if err != nil {
			return nil, fmt.Errorf("op %d: %w", i, err)
		}
		if len(op.Value) > s.maxValue {
			return nil, fmt.Errorf("%w: op %d: value of %d bytes exceeds the NATS server's max_payload (%d)", domain.ErrRecordInvalid, i, len(op.Value), s.maxValue)
		}
		if !seen[subject] {
			seen[subject] = true
			req.keys = append(req.keys, subject)
		}
		switch {
		case op.IfAbsent || op.IfPresent:
			req.conds = append(req.conds, cond{subject: subject, absent: op.IfAbsent})
			continue
		}
		w := write{subject: subject, value: slices.Clone(op.Value), delete: op.Delete, ttl: op.TTL}
		if j, ok := last[subject]; ok {
			req.writes[j] = w // a later op on one key wins
			continue
		}
		last[subject] = len(req.writes)
		req.writes = append(req.writes, w)
		req.size += len(op.Value) + len(subject)
	}
	if n := len(req.writes) + len(req.conds); n > s.maxBatch {
		return nil, fmt.Errorf("%w: a commit of %d messages exceeds the NATS batch limit of %d", domain.ErrRecordInvalid, n, s.maxBatch)
	}
	return req, nil
}

// dispatch forms groups of waiting commits with disjoint keys and runs up to maxGroups of them
// at once, of which at most maxBatchesInflight are multi-message batches; a commit that shares
// a key with one in flight (or with an earlier waiting one) waits for it, so commits of one key
// apply in the order they came.
//
// Why two limits: a one-message commit is a plain publish, cheap on the server and pipelined
// on the connection; an atomic batch costs the server more (on R1 file storage it stages in a
// temporary file store of its own, about 10 ms here), so while a few batches are in flight the
// commits waiting behind them gather into the next one (group commit).
func (s *Store) dispatch() {
	defer close(s.dispatched)
	var pending []*commitReq
	inflight := map[string]bool{}
	running, batches := 0, 0
	type result struct {
		group []*commitReq
		batch bool
	}
	finished := make(chan result, s.maxGroups)
	open := true
	for open || len(pending) > 0 || running > 0 {
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
		case res := <-finished:
			running--
			if res.batch {
				batches--
			}
			for _, r := range res.group {
				for _, k := range r.keys {
					delete(inflight, k)
				}
			}
		}
		for running < s.maxGroups && len(pending) > 0 {
			var group []*commitReq
			group, pending = s.pick(pending, inflight, batches < maxBatchesInflight)
			if len(group) == 0 {
				break
			}
			batch := len(group) > 1 || messageCount(group[0]) > 1
			running++
			if batch {
				batches++
			}
			go func() {
				s.runGroup(group)
				finished <- result{group, batch}
			}()
		}
	}
}

// maxBatchesInflight bounds the atomic batches in flight (see dispatch).
const maxBatchesInflight = 2

func messageCount(r *commitReq) int { return len(r.writes) + len(r.conds) }

// pick takes from pending, in order, the commits that fit one group: none touches a key in
// flight, in the group, or of an earlier commit left waiting. Without batch, it takes one
// commit of one message. It returns the group and what is left waiting.
func (s *Store) pick(pending []*commitReq, inflight map[string]bool, batch bool) (group, rest []*commitReq) {
	blocked := map[string]bool{}
	msgs, size := 0, 0
	for i, r := range pending {
		if r.ctx.Err() != nil {
			r.done <- r.ctx.Err() // its caller has left; nothing was sent
			continue
		}
		n := messageCount(r)
		free := msgs+n <= s.maxBatch && (len(group) == 0 || size+r.size <= maxGroupBytes) && (batch || (n == 1 && len(group) == 0))
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
		group = append(group, r)
		msgs += n
		size += r.size
	}
	return group, rest
}

// runGroup sends one group as one message or one atomic batch and answers its commits. A
// group that fails on a condition another writer broke between our read and the server's
// check (a wrong last sequence) is retried commit by commit.
func (s *Store) runGroup(group []*commitReq) {
	s.groups.Add(1)
	failed, err := s.send(group)
	for _, r := range group {
		switch f, ok := failed[r]; {
		case ok:
			r.done <- f
		case errors.Is(err, errWrongSequence):
			r.done <- s.sendAlone(r)
		default:
			r.done <- err
		}
	}
}

// sendAlone retries one commit whose conditions were overtaken, reading them again each time.
func (s *Store) sendAlone(r *commitReq) error {
	for attempt := 1; ; attempt++ {
		failed, err := s.send([]*commitReq{r})
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

// send resolves the group's conditions and publishes the commits whose conditions hold. It
// returns the commits whose conditions failed, with their errors, and the publish's error for
// the others.
func (s *Store) send(group []*commitReq) (map[*commitReq]error, error) {
	if err := s.lease.writable(); err != nil {
		return nil, err
	}
	ctx, cancel := s.ctx()
	defer cancel()
	seqs, err := s.conditionSeqs(ctx, group)
	if err != nil {
		return nil, err
	}
	var (
		msgs   []*nats.Msg
		failed map[*commitReq]error
	)
	now := time.Now()
	for _, r := range group {
		m, err := s.messages(r, seqs, now)
		if err != nil {
			if failed == nil {
				failed = map[*commitReq]error{}
			}
			failed[r] = err
			continue
		}
		msgs = append(msgs, m...)
	}
	if len(msgs) == 0 {
		return failed, nil
	}
	if len(msgs) > 1 {
		s.batches.Add(1)
	}
	// Tried again while no server has the stream's subjects (whileUnrouted: nothing was stored).
	err = whileUnrouted(ctx, func() error {
		if len(msgs) == 1 {
			_, err := s.js.PublishMsg(ctx, msgs[0], jetstream.WithRetryAttempts(0))
			return err
		}
		_, err := jetstreamext.PublishMsgBatch(ctx, s.js, msgs, jetstreamext.BatchFlowControl{AckFirst: false, AckTimeout: s.timeout})
		return err
	})
	return failed, s.publishErr(err)
}

// conditionSeqs reads the last message of every subject the group's conditions name, in one
// multi-subject direct get.
func (s *Store) conditionSeqs(ctx context.Context, group []*commitReq) (map[string]record, error) {
	var subjects []string
	for _, r := range group {
		for _, c := range r.conds {
			subjects = append(subjects, c.subject)
		}
	}
	out := make(map[string]record, len(subjects))
	if len(subjects) == 0 {
		return out, nil
	}
	for _, subj := range subjects {
		out[subj] = record{deleted: true}
	}
	if len(subjects) == 1 || s.leaderGet {
		for _, subj := range subjects {
			r, err := s.last(ctx, subj)
			if err != nil {
				return nil, err
			}
			out[subj] = r
		}
		return out, nil
	}
	err := whileUnrouted(ctx, func() error {
		it, err := jetstreamext.GetLastMsgsFor(ctx, s.js, s.name, subjects)
		if err != nil {
			return err
		}
		now := time.Now()
		for msg, err := range it {
			if errors.Is(err, jetstreamext.ErrNoMessages) {
				break
			}
			if err != nil {
				return err
			}
			out[msg.Subject] = readRecord(msg.Sequence, msg.Header, msg.Data, now)
		}
		return nil
	})
	if err != nil {
		return nil, unavailable(err)
	}
	return out, nil
}

// messages builds r's messages: each write with the expected-sequence check of its key's
// condition, and a carrier message for each condition on a key r does not write. It fails
// with ErrExists or ErrNotFound when a condition does not hold now.
func (s *Store) messages(r *commitReq, seqs map[string]record, now time.Time) ([]*nats.Msg, error) {
	expect := map[string]uint64{}
	for _, c := range r.conds {
		cur := seqs[c.subject]
		switch {
		case c.absent && !cur.deleted:
			return nil, domain.ErrRecordExists
		case !c.absent && cur.deleted:
			return nil, domain.ErrRecordNotFound
		}
		expect[c.subject] = cur.seq
	}
	msgs := make([]*nats.Msg, 0, len(r.writes)+len(r.conds))
	for _, w := range r.writes {
		m := nats.NewMsg(w.subject)
		m.Data = w.value
		ttl := w.ttl
		if w.delete {
			m.Data = nil
			m.Header.Set(hdrOp, opDelete)
			ttl = tombstoneTTL
		}
		if ttl > 0 {
			// Whole seconds, rounded up: the server never removes a record before its TTL.
			m.Header.Set(jetstream.MsgTTLHeader, strconv.FormatInt(int64((ttl+time.Second-1)/time.Second), 10))
			if !w.delete {
				m.Header.Set(hdrExpires, strconv.FormatInt(now.Add(ttl).UnixMilli(), 10))
			}
		}
		if seq, ok := expect[w.subject]; ok {
			m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(seq, 10))
			delete(expect, w.subject)
		}
		msgs = append(msgs, m)
	}
	// Conditions on keys the commit does not write ride on carrier messages, first in the
	// batch (a check on a subject the batch already wrote would fail).
	var carriers []*nats.Msg
	for _, c := range r.conds {
		seq, ok := expect[c.subject]
		if !ok {
			continue
		}
		delete(expect, c.subject)
		m := nats.NewMsg(s.carrier)
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(seq, 10))
		m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, c.subject)
		m.Header.Set(jetstream.MsgTTLHeader, "1")
		carriers = append(carriers, m)
	}
	return append(carriers, msgs...), nil
}

// publishErr maps a publish failure: a broken condition, a full stream, an unreachable server.
func (s *Store) publishErr(err error) error {
	if err == nil {
		if s.full.Load() {
			s.full.Store(false)
		}
		return nil
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamWrongLastSequence, jetstream.JSErrCodeStreamWrongLastSequenceConstant:
			return errWrongSequence
		case 10077 /* store failed: maximum bytes/messages exceeded */ :
			s.markFull()
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
func (s *Store) markFull() {
	if s.full.Swap(true) {
		return
	}
	s.log.Warn("the records stream is full: writes answer 503 until space returns (raise max_bytes, README: NATS)", "stream", s.name)
	s.bg.Go(func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for s.full.Load() {
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
			ctx, cancel := s.ctx()
			info, err := s.stream.Info(ctx)
			cancel()
			if err == nil && (info.Config.MaxBytes <= 0 || info.State.Bytes+64<<10 < uint64(info.Config.MaxBytes)) {
				s.full.Store(false)
			}
		}
	})
}

// leaderLast reads subject's last message from the stream leader (STREAM.MSG.GET), which has
// applied every acknowledged commit; a replica answering a direct get may not have yet.
func (s *Store) leaderLast(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	req, _ := json.Marshal(map[string]string{"last_by_subj": subject})
	resp, err := s.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+s.name, req)
	if err != nil {
		return nil, err
	}
	var r struct {
		Error   *jetstream.APIError `json:"error"`
		Message *struct {
			Subject string    `json:"subject"`
			Seq     uint64    `json:"seq"`
			Header  []byte    `json:"hdrs"`
			Data    []byte    `json:"data"`
			Time    time.Time `json:"time"`
		} `json:"message"`
	}
	if err := json.Unmarshal(resp.Data, &r); err != nil {
		return nil, err
	}
	if r.Error != nil {
		if r.Error.ErrorCode == jetstream.JSErrCodeMessageNotFound {
			return nil, jetstream.ErrMsgNotFound
		}
		return nil, r.Error
	}
	if r.Message == nil {
		return nil, jetstream.ErrMsgNotFound
	}
	msg := &jetstream.RawStreamMsg{Subject: r.Message.Subject, Sequence: r.Message.Seq, Data: r.Message.Data, Time: r.Message.Time}
	if len(r.Message.Header) > 0 {
		if msg.Header, err = nats.DecodeHeadersMsg(r.Message.Header); err != nil {
			return nil, err
		}
	}
	return msg, nil
}
