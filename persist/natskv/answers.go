package natskv

import (
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// A direct get's answers are messages of their own, one a record and then the end of batch,
// and one can be lost on the way without the reader being told: nats.go drops a message its
// subscription has no room for (a slow consumer: SubscribeSync's 65,536 messages or 64 MiB
// waiting) and reports it only to the connection's error callback. Taken as whole, such an
// answer is a scan's page without that record (the scan then reads on after it: the record is
// skipped, and an outbox boot would miss a queued message) or a multi-subject read that takes a
// present record for a deleted one. The server chains a batch's answers, though: each
// message's Nats-Last-Sequence is the sequence of the message it sent before it (0 for the
// first), and the end of batch's is the last message's (nats-server stream.go,
// getDirectRequest and getDirectMulti). requestMany checks the chain, so an answer with a gap
// is read again (retryRead), never taken.

// errAnswerLost: an answer of a direct get was lost (the answers' chain of sequences has a
// gap), or the server stopped the answer early (a 404 after records: a multi-subject read
// that could not load a record it had found). The read is tried again.
var errAnswerLost = errors.New("natskv: a direct get's answers came with one missing")

// answerHook, when set (tests only), sees each answer of a direct get as it arrives; false
// drops it, as nats.go drops one its subscription has no room for. answersHook, when set
// (tests only), runs once a direct get is sent, before its answers are read.
var (
	answerHook  atomic.Pointer[func(*nats.Msg) bool]
	answersHook atomic.Pointer[func(*nats.Subscription)]
)

// follows tells whether answer m comes right after the record answer whose sequence is last (0:
// m is the first answer) and returns the sequence the next answer must follow. A server that
// does not chain its answers (no Nats-Last-Sequence) is not checked.
func follows(m *nats.Msg, last uint64) (uint64, error) {
	st := ""
	if len(m.Data) == 0 {
		st = m.Header.Get("Status")
	}
	switch {
	case st == "404" && last > 0:
		return 0, errAnswerLost
	case st != "" && st != "204":
		return last, nil // the answer's lone status: the caller reads it
	}
	if prev := m.Header.Get("Nats-Last-Sequence"); prev != "" {
		if p, err := strconv.ParseUint(prev, 10, 64); err != nil || p != last {
			return 0, errAnswerLost
		}
	}
	if st == "204" {
		return last, nil
	}
	seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
	if err != nil {
		return 0, errors.New("direct get: an answer without its sequence")
	}
	return seq, nil
}

// takeMulti puts the records of a multi_last direct get's answers in out and returns the
// answering replica's last sequence (0: unknown, the answer had no message) and whether the
// server cut the answer short (its max_pending bytes reached: the end of batch counts records
// still pending).
func takeMulti(msgs []*nats.Msg, out map[string]record) (upTo uint64, cut bool, err error) {
	now := time.Now()
	for _, m := range msgs {
		if l, err := strconv.ParseUint(m.Header.Get("Nats-UpTo-Sequence"), 10, 64); err == nil {
			upTo = max(upTo, l)
		}
		if len(m.Data) == 0 && m.Header.Get("Status") != "" {
			switch m.Header.Get("Status") {
			case "204": // end of batch
				np, _ := strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
				cut = np > 0
				continue
			case "404": // no results
				continue
			default:
				return 0, false, fmt.Errorf("direct get: %s %s", m.Header.Get("Status"), m.Header.Get("Description"))
			}
		}
		subj := m.Header.Get(jetstream.SubjectHeader)
		seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		if subj == "" || err != nil {
			return 0, false, errors.New("direct get: an answer without its subject or sequence")
		}
		out[subj] = readRecord(seq, m.Header, m.Data, now)
	}
	return upTo, cut, nil
}
