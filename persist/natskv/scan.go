package natskv

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
)

// scanPage is how many messages one direct batch get asks for, and scanMaxBytes the records'
// bytes (nats-server counts subject, headers and data): the server stops a page once past it,
// and the scan reads on from the page's last message. Without it the bound is the server's
// max_pending, 64 MiB, where it disconnects a client slow to read what it was sent: a page of
// 512 records near max_payload (1 MiB) reaches it.
const (
	scanPage     = 512
	scanMaxBytes = multiMaxBytes
)

// pageMsg is one message of a scan's page.
type pageMsg struct {
	subject string
	seq     uint64
	time    time.Time
	header  nats.Header
	data    []byte
}

// Scan calls fn for every live key under prefix in key order. It reads each stream forward from
// its first message with the prefix's subject filter, in pages, keeping each key's newest
// message, then sorts: a key written during the scan is seen with its old or its new value
// (never half of a commit: a page is read under the stream's isolation, and a commit's messages
// all come after any page that read none of them); a key present throughout is always seen. It
// holds the prefix's records in memory until fn has seen them (NATS keeps no subject order: a
// record's place in a stream is where it was last written).
func (s *Store) Scan(prefix []byte, fn func(key, value []byte) error) error {
	return s.scan("*", prefix, fn)
}

// ScanSince is Scan of the records under prefix last written at or after since (by the NATS
// server's clock), and only those, read from the first message at that time on (the stream's
// time index): a history page reads the last hours of a user's messages, not the week
// (persist.MessageLog). Records written before since may be left out.
func (s *Store) ScanSince(prefix []byte, since time.Time, fn func(key, value []byte) error) error {
	return s.scanSince("*", prefix, since, fn)
}

// scan is Scan in partition tok ("*": every partition; a key held by several is seen with the
// newest of its live records: a session moved to another partition was written there before
// its old partition's record was deleted, and that newer delete says nothing of the new one).
func (s *Store) scan(tok string, prefix []byte, fn func(key, value []byte) error) error {
	return s.scanSince(tok, prefix, time.Time{}, fn)
}

// ScanSinceSeq is ScanSince with each record's sequence in its stream, the records given in
// that order (a partition's records are one stream's: persist's outcome pages, read newest
// last).
func (s *Store) ScanSinceSeq(prefix []byte, since time.Time, fn func(key, value []byte, seq uint64) error) error {
	return s.scanSeq("*", prefix, since, fn)
}

// found is a key's newest record seen by a scan, and when it was written.
type found struct {
	key  string
	rec  record
	time time.Time
}

func (s *Store) scanSince(tok string, prefix []byte, since time.Time, fn func(key, value []byte) error) error {
	live, err := s.live(tok, prefix, since)
	if err != nil {
		return err
	}
	slices.SortFunc(live, func(a, b found) int { return cmp.Compare(a.key, b.key) })
	for _, f := range live {
		if err := fn([]byte(f.key), f.rec.value); err != nil {
			return err
		}
	}
	return nil
}

// scanSeq is scanSince in the records' stream order (by sequence) with their sequences.
func (s *Store) scanSeq(tok string, prefix []byte, since time.Time, fn func(key, value []byte, seq uint64) error) error {
	live, err := s.live(tok, prefix, since)
	if err != nil {
		return err
	}
	slices.SortFunc(live, func(a, b found) int { return cmp.Compare(a.rec.seq, b.rec.seq) })
	for _, f := range live {
		if err := fn([]byte(f.key), f.rec.value, f.rec.seq); err != nil {
			return err
		}
	}
	return nil
}

// live is each live key's newest record under prefix in partition tok (every partition: "*"),
// written at or after since (zero: all), in no order.
func (s *Store) live(tok string, prefix []byte, since time.Time) ([]found, error) {
	if !s.enter() {
		return nil, persist.ErrClosed
	}
	defer s.calls.Done()
	// older: a was written before the message at t with sequence seq.
	older := func(a found, t time.Time, seq uint64) bool {
		return a.time.Before(t) || (a.time.Equal(t) && a.rec.seq < seq)
	}
	// Each key's newest record in each partition (the map's key: partition token, key).
	keys := map[string]found{}
	filter := s.filter(tok, prefix)
	now := time.Now()
	streams := s.streams
	if tok != "*" {
		streams = []*recStream{s.streamOfToken(tok)}
	}
	for _, rs := range streams {
		err := rs.pages(filter, since, func(msg pageMsg) {
			key, ok := s.keyOf(msg.subject)
			if !ok || !hasPrefix(key, prefix) {
				return
			}
			at := s.partitionOf(msg.subject) + "." + string(key)
			if old, ok := keys[at]; !ok || older(old, msg.time, msg.seq) {
				keys[at] = found{string(key), readRecord(msg.seq, msg.header, msg.data, now), msg.time}
			}
		})
		if err != nil {
			return nil, err
		}
	}
	// Then each key's newest live record over the partitions.
	byKey := make(map[string]found, len(keys))
	for _, f := range keys {
		if f.rec.deleted {
			continue
		}
		if old, ok := byKey[f.key]; !ok || older(old, f.time, f.rec.seq) {
			byKey[f.key] = f
		}
	}
	live := make([]found, 0, len(byKey))
	for _, f := range byKey {
		live = append(live, f)
	}
	return live, nil
}

func hasPrefix(key, prefix []byte) bool {
	return len(key) >= len(prefix) && string(key[:len(prefix)]) == string(prefix)
}

// pages reads rs's messages under filter (from the first at or after since; zero: from the
// first) in pages and gives each to visit, in stream order.
//
// Replicated: a direct get may be answered by a follower that has not applied the last
// acknowledged commits (nats-server's direct get subscription is a queue group of every
// replica), so a new owner of a partition scanning right after the old owner's last commits
// could miss them. The scan asks the leader for the newest message under the filter (while
// it reads the first pages: a partition's boot makes a dozen scans); a page is complete up to
// its last message (a replica applies the stream in order), so a scan that ends before it saw
// that newest message asks again from where it got to.
func (rs *recStream) pages(filter string, since time.Time, visit func(pageMsg)) error {
	s := rs.s
	var leader chan error
	var want uint64
	if rs.replicated() {
		leader = make(chan error, 1)
		go func() {
			ctx, cancel := s.holdCtx()
			defer cancel()
			msg, err := rs.leaderLastRouted(ctx, filter)
			if err == nil {
				// No message under the filter, or the newest one written before since (a
				// scan from since never reads it): nothing to wait for.
				want = math.MaxUint64
				if msg != nil && !msg.Time.Before(since) {
					want = msg.Sequence
				}
			}
			leader <- err
		}()
	}
	awaitLeader := func() error {
		if leader == nil {
			return nil
		}
		err := <-leader
		leader = nil
		if err != nil {
			return fmt.Errorf("natskv: scan: %w", unavailable(err))
		}
		return nil
	}
	defer func() {
		if leader != nil {
			<-leader
		}
	}()
	began := time.Now()
	var seen uint64
	wait := 2 * time.Millisecond
	seq := uint64(1)
	from := since
	for {
		ctx, cancel := s.holdCtx()
		msgs, pending, err := rs.scanPage(ctx, seq, from, filter)
		cancel()
		if err != nil {
			return fmt.Errorf("natskv: scan: %w", unavailable(err))
		}
		from = time.Time{}
		for _, msg := range msgs {
			seq, seen = msg.seq+1, max(seen, msg.seq)
			visit(msg)
		}
		if len(msgs) > 0 && pending > 0 {
			continue
		}
		if err := awaitLeader(); err != nil {
			return err
		}
		if want == math.MaxUint64 || seen >= want {
			return nil
		}
		// A follower behind answered. The newest message may also have gone meanwhile (a
		// tombstone's TTL): the leader's answer again, never later than the first.
		if time.Since(began) > s.timeout {
			return fmt.Errorf("natskv: scan: %w: the replicas did not catch up with the stream leader", domain.ErrStorageUnavailable)
		}
		if seen == 0 && !since.IsZero() {
			from = since
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
		if wait < 32*time.Millisecond {
			continue // a replica a few milliseconds behind: read on
		}
		ctx, cancel = s.holdCtx()
		msg, err := rs.leaderLastRouted(ctx, filter)
		cancel()
		if err != nil {
			return fmt.Errorf("natskv: scan: %w", unavailable(err))
		}
		if msg == nil || msg.Time.Before(since) {
			return nil
		}
		want = min(want, msg.Sequence)
	}
}

// scanPage reads one page of a scan with a direct batch get, from sequence seq, or from the
// first message at or after from when it is not zero. pending is what the server counted after
// the page's last message. A page is complete only with the server's end of batch (or its "no
// message"): an answer that does not come within the store's Timeout is tried again, and fails
// the scan after Hold, never ends it early (orbit.go's GetBatch ends its iteration without an
// error when its context expires, which read as "no more messages": a scan under load missed
// records, the kvtest AtomicMultiOp and LargeValues flakes).
func (rs *recStream) scanPage(ctx context.Context, seq uint64, from time.Time, filter string) (msgs []pageMsg, pending uint64, err error) {
	req := struct {
		Seq       uint64     `json:"seq,omitempty"`
		NextFor   string     `json:"next_by_subj"`
		Batch     int        `json:"batch"`
		MaxBytes  int        `json:"max_bytes"`
		StartTime *time.Time `json:"start_time,omitempty"`
	}{NextFor: filter, Batch: scanPage, MaxBytes: scanMaxBytes}
	if from.IsZero() {
		req.Seq = seq
	} else {
		req.StartTime = &from
	}
	data, err := json.Marshal(req)
	if err != nil {
		return nil, 0, err
	}
	err = rs.s.retryRead(ctx, func(ctx context.Context) error {
		msgs, pending = msgs[:0], 0
		answers, err := rs.s.requestMany(ctx, "$JS.API.DIRECT.GET."+rs.name, data, scanPage+directGetSlack)
		if err != nil {
			return err
		}
		for _, m := range answers {
			if len(m.Data) == 0 && m.Header.Get("Status") != "" {
				switch m.Header.Get("Status") {
				case "204", "404": // the end of the page; nothing (more) under the filter
					continue
				default:
					return fmt.Errorf("direct get: %s %s", m.Header.Get("Status"), m.Header.Get("Description"))
				}
			}
			msg := pageMsg{subject: m.Header.Get(jetstream.SubjectHeader), header: m.Header, data: m.Data}
			var err error
			if msg.seq, err = strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64); err != nil || msg.subject == "" {
				return errors.New("direct get: an answer without its subject or sequence")
			}
			if msg.time, err = time.Parse(time.RFC3339Nano, m.Header.Get(jetstream.TimeStampHeaer)); err != nil {
				return fmt.Errorf("direct get: %w", err)
			}
			pending, _ = strconv.ParseUint(m.Header.Get("Nats-Num-Pending"), 10, 64)
			msgs = append(msgs, msg)
		}
		return nil
	})
	return msgs, pending, err
}
