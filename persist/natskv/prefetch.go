package natskv

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gateway/gateway/persist"
)

// A partition's boot scans most of its records (users, keys, sessions, the outbox's marks and
// accept log, campaigns, stores...), each read forward from its stream's first message. A node
// that expects to take a partition soon (its owner stopped renewing: the cluster calls
// Prefetch a lease TTL's half before the take) reads all of the partition's records at once,
// while the lease still waits out its TTL; the boot's scans then read only what was written
// after that read (the old owner's last commits, a session moved in) and take the rest from it.
//
// Why that is the scan it replaces: a forward scan keeps each key's newest message. The
// prefetch holds, for every subject of the partition, its newest message up to sequence upTo,
// complete to there (a page is complete up to its last message; the read went on to the
// leader's newest message under the partition's filter). A scan at boot reads the messages
// after upTo under its own filter, as a scan does (on to the leader's newest), and for each
// key keeps the newest of the two. A message of the prefetch that is gone from the stream by
// the boot was either replaced by a newer one of its subject (one message kept per subject:
// the newer one is after upTo, read by the boot's scan, and wins), or removed by its TTL: a
// tombstone (a delete either way) or a record with an expiry (Gw-Exp, judged when the scan
// runs, not when the prefetch read it). The records stream is never purged, nor rolled up.

// prefetchKeep is how long a prefetch serves scans after it was read: a take comes within a
// lease TTL or two; one that does not (the owner renewed after all) is dropped unused.
const prefetchKeep = 10 * time.Second

// prefetch is a partition's records read ahead of its boot.
type prefetch struct {
	done chan struct{} // closed when the read has ended
	err  error
	upTo uint64             // the read is complete up to this sequence
	msgs map[string]pageMsg // by subject: its newest message up to upTo
	at   time.Time          // when the read began
}

// prefetches are a store's prefetched partitions, by partition token.
type prefetches struct {
	mu    sync.Mutex
	m     map[string]*prefetch
	reads atomic.Int64 // the messages the store's scans and prefetches read from NATS (tests)
}

// Prefetch reads partition p's records now, for the scans of its boot (the node expects to
// take it soon). It returns once they are read; a second call for p while one runs waits for
// that one. The read is dropped after prefetchKeep, or by DropPrefetch.
func (s *Store) Prefetch(ctx context.Context, p int) error {
	if !s.enter() {
		return persist.ErrClosed
	}
	defer s.calls.Done()
	tok := strconv.Itoa(p)
	now := time.Now()
	s.pre.mu.Lock()
	if s.pre.m == nil {
		s.pre.m = map[string]*prefetch{}
	}
	for t, f := range s.pre.m { // forget the reads no take used
		if now.Sub(f.at) > prefetchKeep {
			delete(s.pre.m, t)
		}
	}
	if f := s.pre.m[tok]; f != nil {
		s.pre.mu.Unlock()
		select {
		case <-f.done:
			return f.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f := &prefetch{done: make(chan struct{}), msgs: map[string]pageMsg{}, at: now}
	s.pre.m[tok] = f
	s.pre.mu.Unlock()
	defer close(f.done)
	err := s.streamOfToken(tok).pagesFrom(s.filter(tok, nil), time.Time{}, 0, func(msg pageMsg) {
		f.upTo = max(f.upTo, msg.seq)
		if old, ok := f.msgs[msg.subject]; !ok || old.seq < msg.seq {
			f.msgs[msg.subject] = msg
		}
	})
	if err != nil {
		f.err = err
		s.DropPrefetch(p)
	}
	return err
}

// DropPrefetch forgets partition p's prefetched records (its boot is over).
func (s *Store) DropPrefetch(p int) {
	tok := strconv.Itoa(p)
	s.pre.mu.Lock()
	delete(s.pre.m, tok)
	s.pre.mu.Unlock()
}

// prefetched returns partition tok's prefetch once its read has ended, if it succeeded and is
// recent (nil: scan the stream).
func (s *Store) prefetched(tok string) *prefetch {
	s.pre.mu.Lock()
	f := s.pre.m[tok]
	s.pre.mu.Unlock()
	if f == nil || time.Since(f.at) > prefetchKeep {
		return nil
	}
	ctx, cancel := s.holdCtx()
	defer cancel()
	select {
	case <-f.done:
	case <-ctx.Done():
		return nil
	}
	if f.err != nil {
		return nil
	}
	return f
}

// pagesPrefetched is rs.pages of partition tok (no since), its messages up to a prefetch's
// upTo taken from it: visit gets the prefetch's messages under prefix (in no order; a scan
// sorts), then the stream's after upTo under filter.
func (s *Store) pagesPrefetched(rs *recStream, tok, filter string, prefix []byte, visit func(pageMsg)) error {
	f := s.prefetched(tok)
	if f == nil {
		return rs.pages(filter, time.Time{}, visit)
	}
	for _, msg := range f.msgs {
		if key, ok := s.keyOf(msg.subject); ok && hasPrefix(key, prefix) {
			visit(msg)
		}
	}
	return rs.pagesFrom(filter, time.Time{}, f.upTo, visit)
}
