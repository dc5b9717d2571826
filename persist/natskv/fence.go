package natskv

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/synadia-io/orbit.go/jetstreamext"

	"github.com/gateway/gateway/domain"
)

// Partition fences (DESIGN.md sections 13.1 and 19). A node that takes a partition writes the
// partition's fence: FenceLanes subjects of the records stream, in one atomic batch, each
// expecting the sequence it had when the lease was taken (so a fence write that was delayed and
// lands after a later owner's is refused, and cannot lock that owner out). The sequences it
// gets back are the acquisition's token: every commit of the partition carries, on one of its
// messages, an expected-last-subject-sequence check of one lane against that token, so once a
// later owner wrote its fence the server refuses the former owner's writes, paused or not.
//
// Lanes: a replicated stream refuses a check of a subject while another proposal checking it
// is in flight (error 10164), so one fence subject would let one group of a partition be in
// flight at a time; with two lanes the store keeps one batch in flight and one filling for
// every partition. Lane 0 is the subject one-lane releases checked, so a node of the previous
// release is fenced by a new owner's acquisition too (a rolling upgrade).

// FenceLanes is how many fence subjects a partition has.
const FenceLanes = 2

// Fencer is what a node knows of the partition it writes: cluster.Acquisition, one taking of
// the partition by this node.
type Fencer interface {
	// Fence returns the acquisition's token: the sequences its fence write got, one per lane.
	// An error (the partition is not this acquisition's to write now: domain.ErrNodeUnavailable)
	// fails the commit before anything is sent.
	Fence() ([]uint64, error)
	// Fenced is told when the server refused a commit because the partition's fence moved:
	// another node took the partition, and this one must give its lease up at once.
	Fenced()
}

// fence is a partition view's fence: its lane subjects (the dispatcher keys on them), the
// subject its carriers write, and where its token comes from.
type fence struct {
	subjects []string
	carrier  string
	f        Fencer
	// A check's header values, made once and shared by every check (read only: nats.Header's
	// Set replaces a value, never writes into it): each lane's subject, and its last token.
	laneVals [][]string
	tokens   []atomic.Pointer[fenceToken]
}

// fenceToken is a lane's token as a check's header value.
type fenceToken struct {
	seq uint64
	val []string
}

func newFence(subjects []string, carrier string, f Fencer) *fence {
	fc := &fence{subjects: subjects, carrier: carrier, f: f, laneVals: make([][]string, len(subjects)),
		tokens: make([]atomic.Pointer[fenceToken], len(subjects))}
	for i, subj := range subjects {
		fc.laneVals[i] = []string{subj}
	}
	return fc
}

// setCheck puts on m the check that lane's last message is still seq (the token): the server
// refuses m once another owner wrote the fence. No allocation while the token stands (a
// partition's commits all carry one).
func (f *fence) setCheck(m *nats.Msg, lane int, seq uint64) {
	t := f.tokens[lane].Load()
	if t == nil || t.seq != seq {
		t = &fenceToken{seq: seq, val: []string{strconv.FormatUint(seq, 10)}}
		f.tokens[lane].Store(t)
	}
	m.Header[jetstream.ExpectedLastSubjSeqSubjHeader] = f.laneVals[lane]
	m.Header[jetstream.ExpectedLastSubjSeqHeader] = t.val
}

// ErrFenced: a commit's partition fence moved: another node took the partition over.
var ErrFenced = fmt.Errorf("%w: the partition was taken over by another node", domain.ErrNodeUnavailable)

// ErrFenceMoved: a fence write found the fence not where the lease's taker read it: another
// acquisition wrote it meanwhile (or a late write of an earlier one landed).
var ErrFenceMoved = errors.New("natskv: the partition's fence moved since it was read")

// FenceSubjects are partition p's fence subjects, one per lane: store records of the
// partition's stream, which no key encodes to and no scan returns.
func (s *Store) FenceSubjects(p int) []string {
	base := s.prefix + "." + internalTable + "." + strconv.Itoa(p) + ".fence"
	out := []string{base}
	for l := 1; l < FenceLanes; l++ {
		out = append(out, base+strconv.Itoa(l))
	}
	return out
}

// ReadFence reads partition p's fence lanes: each lane's last sequence (0: never written), in
// one direct get any replica answers (a stream that just elected a leader answers its API
// slowly). A node reads them when it takes the partition's lease and writes the fence
// expecting them (WriteFence): a replica behind makes that write fail, never pass wrongly;
// ReadFenceLeader reads them as the leader has them.
func (s *Store) ReadFence(ctx context.Context, p int) ([]uint64, error) {
	subjects := s.FenceSubjects(p)
	got, err := s.streamOfToken(strconv.Itoa(p)).multiLast(ctx, subjects, 0, "")
	if err != nil {
		return nil, fmt.Errorf("natskv: read fence: %w", err)
	}
	out := make([]uint64, len(subjects))
	for i, subj := range subjects {
		out[i] = got[subj].seq
	}
	return out, nil
}

// ReadFenceLeader is ReadFence as the stream's leader has the lanes.
func (s *Store) ReadFenceLeader(ctx context.Context, p int) ([]uint64, error) {
	subjects := s.FenceSubjects(p)
	out := make([]uint64, len(subjects))
	for i, subj := range subjects {
		r, err := s.last(ctx, subj)
		if err != nil {
			return nil, fmt.Errorf("natskv: read fence: %w", err)
		}
		out[i] = r.seq
	}
	return out, nil
}

// WriteFence writes every lane of partition p's fence in one atomic batch, each lane expecting
// the sequence in expect (ReadFence's, when the lease was taken); value says who wrote it (logs
// and operators). It returns the lanes' new sequences, the acquisition's token. ErrFenceMoved:
// another write reached a lane first; the caller gives the lease up and tries later.
func (s *Store) WriteFence(ctx context.Context, p int, expect []uint64, value []byte) ([]uint64, error) {
	subjects := s.FenceSubjects(p)
	if len(expect) != len(subjects) {
		return nil, fmt.Errorf("natskv: write fence: %d sequences for %d lanes", len(expect), len(subjects))
	}
	msgs := make([]*nats.Msg, len(subjects))
	for i, subj := range subjects {
		m := nats.NewMsg(subj)
		m.Data = value
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(expect[i], 10))
		msgs[i] = m
	}
	var last uint64
	err := s.retry(ctx, func(ctx context.Context) error {
		ack, err := jetstreamext.PublishMsgBatch(ctx, s.js, msgs, jetstreamext.BatchFlowControl{AckFirst: false, AckTimeout: s.timeout})
		if err == nil {
			last = ack.Sequence
		}
		return err
	})
	rs := s.streamOfToken(strconv.Itoa(p))
	if err = rs.publishErr(err); err != nil {
		if errors.Is(err, errWrongSequence) {
			return nil, ErrFenceMoved
		}
		return nil, fmt.Errorf("natskv: write fence: %w", err)
	}
	rs.ackSeen(last)
	out := make([]uint64, len(subjects))
	for i := range out {
		out[i] = last - uint64(len(subjects)-1-i)
	}
	return out, nil
}

// checkFence reads f's lane: ErrFenced (and f's Fencer told) when its last message is no longer
// the one this owner's token names.
func (s *Store) checkFence(f *fence, lane int) error {
	toks, err := f.f.Fence()
	if err != nil {
		return err
	}
	ctx, cancel := s.holdCtx()
	defer cancel()
	cur, err := s.last(ctx, f.subjects[lane])
	if err != nil {
		return err
	}
	if lane >= len(toks) || cur.seq != toks[lane] {
		f.f.Fenced()
		return ErrFenced
	}
	return nil
}
