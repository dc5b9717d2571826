package natskv

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gateway/gateway/domain"
)

// sendPiped sends a group of one-message commits on one server (pick's pickPiped) as pipelined
// publishes, each its own: no atomic batch. Each commit's message carries its commit id and,
// for a fenced view's commit, its own fence check, and each commit is answered by its own ack,
// so a commit refused (its fence moved, its condition overtaken, its stream full) fails alone.
//
// Why (profiled in process, bench/README.md issue 27): on one server an atomic batch stages
// in a file store of its own, made for each batch (a directory, its metadata written and
// synced): 35 % of the NATS server's CPU in a run of outcome writes, about 3 ms of CPU per
// batch, while the commits of a group need no atomicity between them (each commit's own
// messages do, and a commit of several messages still goes as a batch).
//
// It returns what send returns: the commits answered, with their errors (nil: applied), and
// errWrongSequence when some commits were refused on a condition overtaken by another writer
// (those are left out of the answers: runGroup reads them again and sends them again).
func (rs *recStream) sendPiped(group []*commitReq, fresh bool) (map[*commitReq]error, error) {
	s := rs.s
	now := time.Now()
	// The group's Hold: a context only when one is needed (conditions to read, a publish to
	// send again); the usual group, one-message commits without conditions answered at the
	// first try, needs none: no context, no timer of its own.
	hold := pipedHold{deadline: now.Add(s.hold)}
	var seqs map[string]record
	if hasConds(group) {
		ctx, cancel, sq, err := rs.sendStart(group, fresh)
		if err != nil {
			return nil, err
		}
		hold.ctx, hold.cancel, seqs = ctx, cancel, sq
		now = time.Now() // after the read, as the records' expiry was
	} else if err := s.lease.writable(); err != nil {
		return nil, err
	}
	defer hold.end()
	answers := make(map[*commitReq]error, len(group))
	todo := make([]*commitReq, 0, len(group))
	msgs := make([]*nats.Msg, 0, len(group))
	for _, r := range group {
		m, err := s.pipedMessage(r, seqs, now)
		if err != nil {
			answers[r] = err
			continue
		}
		todo, msgs = append(todo, r), append(msgs, m)
	}
	wrong := false
	wait := unroutedFirstWait
	for len(todo) > 0 {
		var again, lost []*commitReq
		var againMsgs []*nats.Msg
		// Each commit acked successfully is answered to its caller by the ack callback at
		// once (earlyAnswers.answer), not after the group's slowest ack: the group's goroutine
		// settles the others, and the group still ends (its keys free) after its last ack.
		acks := rs.publishAll(msgs, earlyAnswers{rs: rs, reqs: todo, now: now})
		for i, r := range todo {
			a := acks[i]
			switch {
			case a.err == nil:
				// Answered by the ack callback (earlyAnswers: every success here has its
				// commit): runGroup answers it no more.
				answers[r] = errAnsweredEarly
			case notSent(a.err) && !hold.over():
				again, againMsgs = append(again, r), append(againMsgs, msgs[i]) // nothing stored
			case timedOut(a.err) || errors.Is(a.err, nats.ErrDisconnected):
				// Its answer was lost (a timeout; or the connection cut: the store's acker
				// fails every publish in flight with ErrDisconnected, sent or not): applied or
				// not, found out below by its commit id, as the package doc says.
				lost = append(lost, r)
			default:
				if err := rs.publishErr(a.err); errors.Is(err, errWrongSequence) {
					wrong = true // read again and sent again by runGroup
					if r.view != nil {
						r.view.forget(r)
					}
				} else {
					answers[r] = err
				}
			}
		}
		if len(lost) > 0 {
			rs.resolve(lost, answers, nats.ErrTimeout) // answers every commit of lost
		}
		todo, msgs = again[:0], againMsgs[:0]
		if len(again) == 0 {
			break
		}
		// Nothing was stored (the stream has no leader, the connection is moving): again after
		// a pause, while every partition is still this node's to write.
		t := time.NewTimer(wait)
		select {
		case <-hold.done():
		case <-t.C:
		}
		t.Stop()
		wait = min(2*wait, unroutedMaxWait)
		for i, r := range again {
			if r.fence != nil {
				if _, err := r.fence.f.Fence(); err != nil {
					answers[r] = err
					continue
				}
			}
			todo, msgs = append(todo, r), append(msgs, againMsgs[i])
		}
	}
	if wrong {
		return answers, errWrongSequence
	}
	return answers, nil
}

// hasConds: some commit of group has a condition (a read before the publish).
func hasConds(group []*commitReq) bool {
	for _, r := range group {
		if len(r.conds) > 0 {
			return true
		}
	}
	return false
}

// pipedHold is a piped group's Hold: its deadline, and its context once one was made (by
// sendStart for a group with conditions, or by done for a pause before a publish sent again).
type pipedHold struct {
	deadline time.Time
	ctx      context.Context
	cancel   context.CancelFunc
}

// over: the Hold has ended.
func (h *pipedHold) over() bool {
	if h.ctx != nil {
		return h.ctx.Err() != nil
	}
	return !time.Now().Before(h.deadline)
}

// done is closed when the Hold ends.
func (h *pipedHold) done() <-chan struct{} {
	if h.ctx == nil {
		h.ctx, h.cancel = context.WithDeadline(context.Background(), h.deadline)
	}
	return h.ctx.Done()
}

// end releases the Hold's context, if one was made.
func (h *pipedHold) end() {
	if h.cancel != nil {
		h.cancel()
	}
}

// pipedMessage is a one-message commit's message, with its commit id and its fence check.
func (s *Store) pipedMessage(r *commitReq, seqs map[string]record, now time.Time) (*nats.Msg, error) {
	var fseq uint64
	if r.fence != nil {
		toks, err := r.fence.f.Fence()
		if err == nil && len(toks) != len(r.fence.subjects) {
			err = fmt.Errorf("%w: the partition's fence has %d lanes, not %d", domain.ErrNodeUnavailable, len(toks), len(r.fence.subjects))
		}
		if err != nil {
			return nil, err
		}
		fseq = toks[r.lane]
	}
	ms, cs, err := s.messages(r, seqs, now)
	if err != nil {
		return nil, err
	}
	if len(ms)+len(cs) != 1 {
		return nil, fmt.Errorf("natskv: a pipelined commit of %d messages", len(ms)+len(cs)) // pick takes none
	}
	if len(ms) == 0 {
		return cs[0], nil // a condition alone, on its carrier (never fenced here: that is two)
	}
	m := ms[0] // with its commit id (messages)
	if r.fence != nil {
		if m.Header.Get(jetstream.ExpectedLastSubjSeqHeader) != "" {
			return nil, errors.New("natskv: a pipelined fenced commit with a condition on its write") // pick takes none
		}
		r.fence.setCheck(m, r.lane, fseq)
	}
	return m, nil
}

// pubResult is one pipelined publish's answer.
type pubResult struct {
	seq uint64
	err error
	got bool // answered (acker: each publish once)
}

// earlyAnswers are the commits of one round of sendPiped's publishes (reqs[i] is publish i's),
// each answered to its caller by the ack callback as soon as its ack is a success, in the
// order the group's goroutine answered a success before (sendPiped, then runGroup): the
// stream's acked sequence, the view's owner cache and floor, the write counts, and the answer.
// Each step is safe beside the group goroutines: ackSeen is a compare-and-swap, committed
// takes the owner cache's and the floor's own locks (leaves: nothing is taken under them),
// wrote adds to atomic counters. A group's commits touch disjoint keys, and a key's next
// commit is sent only after its group ended, which is after every early answer of the group
// (acker.answer makes them before closing the group's done): the owner cache gets a key's
// writes in their order, as before. r.done is buffered (one answer) and this is the only
// answer of a commit answered early (runGroup skips it: errAnsweredEarly): the send never
// blocks the callback.
type earlyAnswers struct {
	rs   *recStream
	reqs []*commitReq
	now  time.Time
}

// answer answers publish i's commit, applied at sequence seq.
func (e *earlyAnswers) answer(i int, seq uint64) {
	r := e.reqs[i]
	e.rs.ackSeen(seq)
	if r.view != nil {
		r.view.committed(r, seq, e.now)
	}
	e.rs.s.wrote(r)
	r.done <- nil
}

// errAnsweredEarly marks, among sendPiped's answers, a commit the ack callback answered
// already (earlyAnswers): runGroup answers it no more. Never a caller's error.
var errAnsweredEarly = errors.New("natskv: answered by its ack")
