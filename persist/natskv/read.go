package natskv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
)

// Reads. A read of a record is the last message of its subject. One server answers direct gets
// of the stream it holds; in a cluster a direct get goes to any replica (they answer as a queue
// group), which may not have applied the newest commits, while the stream leader
// (STREAM.MSG.GET through the JetStream API, one at a time) has. So:
//   - reads of one stream share round trips: Gets waiting while one is in flight go out
//     together as one multi-subject direct get (multi_last, up to 1,024 subjects), as commits
//     do (the getter below);
//   - such an answer ends with the answering replica's last sequence (the end of batch's
//     Nats-UpTo-Sequence; an answer with no message has none, so a fenced view's read always
//     asks for its fence too, which exists), and a read that must see a commit (a fenced view's
//     floor, view.go) takes it only from a replica at or past it, else asks the leader;
//   - the Store's own reads (unfenced: they may follow any node's commit) on a replicated
//     stream ask the leader.

// directGetSlack: the answers a direct get can get beyond its messages (the end of batch, and
// room to spare; requestMany).
const directGetSlack = 4

// multiMaxBytes bounds one multi_last answer's records (the server stops once past it: the
// rest are asked again, multiLastSeq). Without it the bound is the server's max_pending, 64 MiB,
// which is also where it disconnects a client slow to read what it was sent; 1,023 accept
// records of 64 KiB with their media reach it.
const multiMaxBytes = 8 << 20

// multiGetMax is the most subjects one multi_last answers (nats-server stream.go,
// maxAllowedResponses).
const multiGetMax = 1024

// errStale: the replica that answered had not applied what the read must see.
var errStale = errors.New("natskv: the replica is behind")

// getReq is one read waiting for the stream's getter.
type getReq struct {
	subject string
	floor   uint64
	anchor  string // a subject that exists, asked beside (see above; "" without a floor)
	ctx     context.Context
	done    chan getResult
}

type getResult struct {
	rec record
	err error
}

// lastBatched reads subject's last message through the stream's getter (batched with the reads
// waiting beside it); errStale when the answering replica's last sequence is below floor
// (anchor: a subject that exists, so the answer carries it).
func (rs *recStream) lastBatched(ctx context.Context, subject string, floor uint64, anchor string) (record, error) {
	r := &getReq{subject: subject, floor: floor, anchor: anchor, ctx: ctx, done: make(chan getResult, 1)}
	select {
	case rs.gets <- r:
	case <-ctx.Done():
		return record{}, unavailable(ctx.Err())
	}
	select {
	case res := <-r.done:
		return res.rec, res.err
	case <-ctx.Done():
		return record{}, unavailable(ctx.Err())
	}
}

// getter sends the stream's waiting reads, at most 2 round trips in flight: one read alone goes
// at once, the reads that come while those are in flight go together next, as many as one
// multi_last answers: multiGetMax subjects, a fenced view's anchor counted (the server refuses
// a request matching more than that: 413 Too Many Results, every read of it failed). A read
// that would pass the bound starts the next batch.
func (rs *recStream) getter() {
	sem := make(chan struct{}, 2)
	var next *getReq
	for {
		r := next
		if r == nil {
			var ok bool
			if r, ok = <-rs.gets; !ok {
				break
			}
		}
		next = nil
		b := &getBatch{seen: map[string]bool{}}
		b.add(r)
	more:
		for {
			select {
			case r, ok := <-rs.gets:
				if !ok {
					break more
				}
				if !b.add(r) {
					next = r
					break more
				}
			default:
				break more
			}
		}
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			rs.answer(b)
		}()
	}
	for range cap(sem) {
		sem <- struct{}{}
	}
}

// getBatch is the reads one multi_last answers and their subjects (each once, anchors too).
type getBatch struct {
	reqs     []*getReq
	subjects []string
	seen     map[string]bool
}

// add adds r to the batch unless its subjects would take the batch past multiGetMax (a batch's
// first read always fits).
func (b *getBatch) add(r *getReq) bool {
	n := 0
	for _, subj := range []string{r.subject, r.anchor} {
		if subj != "" && !b.seen[subj] {
			n++
		}
	}
	if len(b.reqs) > 0 && len(b.subjects)+n > multiGetMax {
		return false
	}
	b.reqs = append(b.reqs, r)
	for _, subj := range []string{r.subject, r.anchor} {
		if subj != "" && !b.seen[subj] {
			b.seen[subj] = true
			b.subjects = append(b.subjects, subj)
		}
	}
	return true
}

// answer reads the batch's subjects in one multi-subject direct get and answers each read.
func (rs *recStream) answer(b *getBatch) {
	ctx, cancel := rs.s.holdCtx()
	defer cancel()
	got, lseq, err := rs.multiLastSeq(ctx, b.subjects)
	for _, r := range b.reqs {
		switch {
		case err != nil:
			r.done <- getResult{err: err}
		case r.floor > 0 && lseq < r.floor:
			r.done <- getResult{err: errStale}
		default:
			r.done <- getResult{rec: got[r.subject]}
		}
	}
}

// multiLast reads the last message of each subject (at most multiGetMax), from any replica;
// absent subjects are deleted records. With floor > 0, an answer from a replica whose last
// sequence is below it is errStale (anchor, a subject that exists, is asked beside each part).
func (rs *recStream) multiLast(ctx context.Context, subjects []string, floor uint64, anchor string) (map[string]record, error) {
	out := make(map[string]record, len(subjects))
	for len(subjects) > 0 {
		part := subjects[:min(len(subjects), multiGetMax-1)]
		subjects = subjects[len(part):]
		if anchor != "" {
			part = append(slices.Clone(part), anchor)
		}
		got, lseq, err := rs.multiLastSeq(ctx, part)
		if err != nil {
			return nil, err
		}
		if floor > 0 && lseq < floor {
			return nil, errStale
		}
		for k, v := range got {
			out[k] = v
		}
	}
	return out, nil
}

// multiLastSeq is one multi_last direct get: the records found (absent subjects: deleted
// records) and the answering replica's last sequence (0: unknown, the answer had no message).
// The server stops an answer past multiMaxBytes and says so by the end of batch's
// Nats-Num-Pending: the subjects not answered are asked again, the last sequence then the least
// of the parts' (each part's replica had applied at least that much). Before, they read as
// deleted records.
func (rs *recStream) multiLastSeq(ctx context.Context, subjects []string) (map[string]record, uint64, error) {
	out := make(map[string]record, len(subjects))
	var lseq uint64
	err := rs.s.retryRead(ctx, func(ctx context.Context) error {
		clear(out)
		lseq = 0
		for ask, part := subjects, 0; len(ask) > 0; part++ {
			req, _ := json.Marshal(struct {
				MultiLast []string `json:"multi_last"`
				MaxBytes  int      `json:"max_bytes"`
			}{ask, multiMaxBytes})
			msgs, err := rs.s.requestMany(ctx, "$JS.API.DIRECT.GET."+rs.name, req, len(ask)+directGetSlack)
			if err != nil {
				return err
			}
			upTo, cut, err := takeMulti(msgs, out)
			if err != nil {
				return err
			}
			if part == 0 {
				lseq = upTo
			} else {
				lseq = min(lseq, upTo)
			}
			if !cut {
				break
			}
			ask = slices.DeleteFunc(slices.Clone(ask), func(subj string) bool { _, ok := out[subj]; return ok })
		}
		return nil
	})
	if err != nil {
		return nil, 0, unavailable(err)
	}
	for _, subj := range subjects {
		if _, ok := out[subj]; !ok {
			out[subj] = record{deleted: true}
		}
	}
	return out, lseq, nil
}

// requestMany sends a direct get and collects its answers up to the end of the batch (a 204
// "EOB") or a lone status (404: nothing matched; 503: no responders); an answer with one
// missing is errAnswerLost (answers.go). most bounds the answers the request can get (its
// batch or its subjects, and the end of batch): their channel is made that size. nats.go's
// SubscribeSync makes every subscription a channel of 65,536 (8 bytes each, zeroed): 512 KiB
// a read, 32 MB of the 71 MB a partition's boot allocated with 1,000 messages queued
// (bench/README.md, branch boot9). A channel that is full drops an answer (nats.go's slow
// consumer), so most must be a true bound (the server sends at most one message a subject or
// the batch asks, then its end of batch: TestDirectGetAnswersFitTheirChannel); were it not,
// the gap is seen and the read asked again, never taken short.
func (s *Store) requestMany(ctx context.Context, subject string, data []byte, most int) ([]*nats.Msg, error) {
	inbox := s.nc.NewInbox()
	ch := make(chan *nats.Msg, most)
	sub, err := s.nc.ChanSubscribe(inbox, ch)
	if err != nil {
		return nil, err
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := s.nc.PublishRequest(subject, inbox, data); err != nil {
		return nil, err
	}
	if hook := answersHook.Load(); hook != nil {
		(*hook)(sub)
	}
	out := make([]*nats.Msg, 0, most)
	var last uint64 // the sequence of the last record answered (answers.go)
	for {
		// The bound is strict: an answer already received once ctx is done is not taken, so a
		// late page does not count as in time.
		if ctx.Err() != nil {
			return nil, nats.ErrTimeout
		}
		var m *nats.Msg
		select {
		case m = <-ch:
		case <-ctx.Done():
			return nil, nats.ErrTimeout
		}
		if hook := answerHook.Load(); hook != nil && !(*hook)(m) {
			continue
		}
		st := m.Header.Get("Status")
		if len(m.Data) == 0 && st == "503" {
			return nil, nats.ErrNoResponders
		}
		if last, err = follows(m, last); err != nil {
			return nil, err
		}
		out = append(out, m)
		if len(m.Data) == 0 && (st == "204" || st == "404" || (st != "" && st != "100")) {
			return out, nil
		}
	}
}

// GetMany reads keys in as few round trips as the server allows (persist.Getter): values[i] is
// nil for a key that is absent.
func (s *Store) GetMany(keys [][]byte) ([][]byte, error) { return s.getMany("", keys, nil) }

// getMany reads keys in partition tok ("": Options.Partition's): values[i] nil for an absent
// key. A fenced view's own writes come from its cache.
func (s *Store) getMany(tok string, keys [][]byte, v *View) ([][]byte, error) {
	out, _, err := s.lookupMany(tok, keys, v)
	return out, err
}

// Has tells which of keys are present (persist.Haver) in as few round trips as GetMany: an
// outbox boot asks it of every pending message's outcome at once.
func (s *Store) Has(keys [][]byte) ([]bool, error) {
	_, present, err := s.lookupMany("", keys, nil)
	return present, err
}

// lookupMany is getMany with each key's presence (a present key's value may be empty).
func (s *Store) lookupMany(tok string, keys [][]byte, v *View) (out [][]byte, present []bool, err error) {
	if !s.enter() {
		return nil, nil, persist.ErrClosed
	}
	defer s.calls.Done()
	out, present = make([][]byte, len(keys)), make([]bool, len(keys))
	subjects := make([]string, len(keys))
	ask := map[*recStream][]string{}
	for i, k := range keys {
		subj, err := s.subject(tok, k)
		if err != nil {
			continue
		}
		if v != nil {
			if r, ok := v.cached(subj); ok {
				out[i], present[i] = r.value, true
				continue
			}
		}
		subjects[i] = subj
		rs := s.streamOfSubject(subj)
		ask[rs] = append(ask[rs], subj)
	}
	ctx, cancel := s.holdCtx()
	defer cancel()
	for rs, subs := range ask {
		var floor uint64
		anchor := ""
		switch {
		case !rs.replicated():
		case v != nil && v.fence != nil:
			var err error
			if floor, err = v.readFloor(ctx); err != nil {
				return nil, nil, fmt.Errorf("natskv: get: %w", err)
			}
			anchor = v.fence.subjects[0]
		default: // another node's writes: the leader's answers
			got := map[string]record{}
			for _, subj := range subs {
				r, err := s.last(ctx, subj)
				if err != nil {
					return nil, nil, fmt.Errorf("natskv: get: %w", err)
				}
				got[subj] = r
			}
			fill(out, present, subjects, got)
			continue
		}
		got, err := s.multiLastFresh(ctx, rs, subs, floor, anchor)
		if err != nil {
			return nil, nil, err
		}
		if v != nil && v.fence != nil {
			for _, r := range got {
				v.observed(r)
			}
		}
		fill(out, present, subjects, got)
	}
	return out, present, nil
}

// fill sets out[i] to the value got holds for subjects[i], if live.
func fill(out [][]byte, present []bool, subjects []string, got map[string]record) {
	for i, subj := range subjects {
		if subj == "" {
			continue
		}
		if r, ok := got[subj]; ok && !r.deleted {
			out[i], present[i] = r.value, true
		}
	}
}

// multiLastFresh is multiLast that waits for a replica at or past floor (a follower catches up
// within milliseconds), asking again for at most the store's Timeout.
func (s *Store) multiLastFresh(ctx context.Context, rs *recStream, subjects []string, floor uint64, anchor string) (map[string]record, error) {
	deadline := time.Now().Add(s.timeout)
	wait := 2 * time.Millisecond
	for {
		got, err := rs.multiLast(ctx, subjects, floor, anchor)
		if err != errStale {
			if err != nil {
				return nil, fmt.Errorf("natskv: get: %w", err)
			}
			return got, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("natskv: get: %w: the replicas did not catch up with the stream leader", domain.ErrStorageUnavailable)
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
	}
}

// leaderLast reads subject's last message from the stream leader (STREAM.MSG.GET), which has
// applied every acknowledged commit; a replica answering a direct get may not have yet.
func (rs *recStream) leaderLast(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	req, _ := json.Marshal(map[string]string{"last_by_subj": subject})
	resp, err := rs.s.nc.RequestWithContext(ctx, "$JS.API.STREAM.MSG.GET."+rs.name, req)
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

// leaderLastRouted is leaderLast, asked again while unrouted; nil (and no error) when no
// message is under subject.
func (rs *recStream) leaderLastRouted(ctx context.Context, subject string) (*jetstream.RawStreamMsg, error) {
	var msg *jetstream.RawStreamMsg
	err := rs.s.retryRead(ctx, func(ctx context.Context) (err error) {
		msg, err = rs.leaderLast(ctx, subject)
		return err
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	return msg, err
}
