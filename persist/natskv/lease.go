package natskv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The single-writer lease: a lone gateway on a prefix (no --cluster) holds it, so a second one
// started by mistake on the same prefix refuses to start instead of writing beside it.
//
// The lease is one record, <prefix>.!.0.lease, holding {node, instance, since} and its
// holder's expiry (Gw-Exp, the holder's clock + TTL; clocks within 1 s, DESIGN.md section
// 13.1). Nothing expires it on the server: its sequence only grows, so every write of it is a
// compare-and-set on the sequence its writer last saw.
//   - Take: the record is absent, released or past its expiry: write it expecting that
//     sequence. A live record that is renewed while we wait (LeaseTTL at most): refused.
//   - Renew: every TTL/3, expecting our own last sequence. A holder cut off from NATS stops
//     writing at its last renewal + TTL - 1 s (monotonic clock); when NATS is back its renewal
//     succeeds if nobody took the lease meanwhile (the sequence is still ours) and writing
//     resumes, else the lease is lost for good: Health fails and Lost is closed (main stops).
//   - Release (Close): the record written with expiry 0.
//
// Commits are not fenced by the lease's sequence (each would need an expected-sequence check
// on the lease subject, which the server serialises per subject): a holder paused between its
// lease check and its publish could land one last commit after a takeover. The cluster
// (DESIGN.md section 13.1) fences per partition; a lone node only guards against a second
// process.
type lease struct {
	s        *Store
	subject  string
	node     string
	instance string
	ttl      time.Duration

	mu      sync.Mutex
	seq     uint64
	renewed time.Time // monotonic: the last take or renewal that succeeded
	lostErr error
	lost    chan struct{}
}

type leaseRecord struct {
	Node     string    `json:"node"`
	Instance string    `json:"instance"`
	Since    time.Time `json:"since"`
}

// ErrLeaseHeld: another live gateway holds the prefix's single-writer lease.
var ErrLeaseHeld = errors.New("natskv: another gateway holds this NATS prefix")

func (s *Store) takeLease(ctx context.Context, node string, ttl time.Duration) error {
	if ttl < 2*time.Second {
		return fmt.Errorf("%w: lease TTL %v (at least 2s)", domain.ErrRecordInvalid, ttl)
	}
	if node == "" {
		node, _ = os.Hostname()
	}
	l := &lease{s: s, subject: s.prefix + "." + internalTable + ".0.lease", node: node,
		instance: strconv.FormatInt(time.Now().UnixNano(), 36), ttl: ttl, lost: make(chan struct{})}
	deadline := time.Now().Add(ttl + 2*time.Second)
	var seen uint64
	for {
		cctx, cancel := context.WithTimeout(ctx, s.timeout)
		cur, err := s.last(cctx, l.subject)
		cancel()
		if err != nil {
			return fmt.Errorf("natskv: lease: %w", err)
		}
		if cur.deleted {
			switch err := l.write(ctx, cur.seq, time.Now()); {
			case err == nil:
				s.lease = l
				s.bg.Go(l.renewLoop)
				s.log.Info("took the single-writer lease", "prefix", s.prefix, "node", node)
				return nil
			case !errors.Is(err, errWrongSequence):
				return fmt.Errorf("natskv: lease: %w", err)
			}
			continue // someone wrote it meanwhile: look again
		}
		var holder leaseRecord
		_ = json.Unmarshal(cur.value, &holder)
		switch {
		case seen == 0:
			seen = cur.seq
		case cur.seq != seen || time.Now().After(deadline):
			return fmt.Errorf("%w %q: node %q (since %s); run one gateway per prefix, or --cluster", ErrLeaseHeld, s.prefix, holder.Node, holder.Since.Format(time.RFC3339))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// write writes the lease record expecting sequence seq; expiry zero releases it.
func (l *lease) write(ctx context.Context, seq uint64, now time.Time) error {
	value, _ := json.Marshal(leaseRecord{Node: l.node, Instance: l.instance, Since: now.UTC()})
	m := nats.NewMsg(l.subject)
	m.Data = value
	exp := int64(0)
	if !now.IsZero() {
		exp = now.Add(l.ttl).UnixMilli()
	}
	m.Header.Set(hdrExpires, strconv.FormatInt(exp, 10))
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(seq, 10))
	cctx, cancel := context.WithTimeout(ctx, l.s.timeout)
	defer cancel()
	var ack *jetstream.PubAck
	err := l.s.retry(cctx, func(ctx context.Context) (err error) {
		ack, err = l.s.js.PublishMsg(ctx, m, jetstream.WithRetryAttempts(0))
		return err
	})
	if err != nil {
		return l.s.streams[0].publishErr(err)
	}
	l.mu.Lock()
	l.seq, l.renewed = ack.Sequence, now
	l.mu.Unlock()
	return nil
}

func (l *lease) renewLoop() {
	t := time.NewTicker(l.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-l.s.stop:
			return
		case <-t.C:
		}
		l.mu.Lock()
		seq, lapsed := l.seq, time.Since(l.renewed) > l.ttl-time.Second
		l.mu.Unlock()
		err := l.write(context.Background(), seq, time.Now())
		switch {
		case err == nil:
			if lapsed {
				l.s.log.Warn("renewed the single-writer lease after NATS was unreachable; writing again", "prefix", l.s.prefix)
			}
		case errors.Is(err, errWrongSequence):
			l.mu.Lock()
			l.lostErr = fmt.Errorf("%w: the single-writer lease of prefix %q was taken by another gateway", domain.ErrStorageUnavailable, l.s.prefix)
			l.mu.Unlock()
			close(l.lost)
			l.s.log.Error("lost the single-writer lease: another gateway took this NATS prefix; refusing writes", "prefix", l.s.prefix)
			return
		default:
			l.s.log.Warn("could not renew the single-writer lease", "err", err)
		}
	}
}

// writable is nil while the lease (if any) allows writing.
func (l *lease) writable() error {
	if l == nil {
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lostErr != nil {
		return l.lostErr
	}
	if time.Since(l.renewed) > l.ttl-time.Second {
		return fmt.Errorf("%w: the single-writer lease was not renewed for %v (NATS unreachable)", domain.ErrStorageUnavailable, time.Since(l.renewed).Round(time.Millisecond))
	}
	return nil
}

func (l *lease) health() error { return l.writable() }

// Lost is closed when the store lost its single-writer lease to another gateway (never, for a
// store without one).
func (s *Store) Lost() <-chan struct{} {
	if s.lease == nil {
		return nil
	}
	return s.lease.lost
}

// releaseLease writes the lease record released, if it is still ours.
func (s *Store) releaseLease() {
	l := s.lease
	if l == nil || l.writable() != nil {
		return
	}
	l.mu.Lock()
	seq := l.seq
	l.mu.Unlock()
	if err := l.write(context.Background(), seq, time.Time{}); err != nil {
		s.log.Warn("could not release the single-writer lease (it lapses by itself)", "err", err)
	}
}

// LeaseHolder reads the prefix's single-writer lease: the node holding it and whether it is
// live (a cluster node refuses to start beside a lone gateway on its prefix).
func (s *Store) LeaseHolder(ctx context.Context) (node string, live bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	cur, err := s.last(cctx, s.prefix+"."+internalTable+".0.lease")
	if err != nil || cur.deleted {
		return "", false, err
	}
	var holder leaseRecord
	_ = json.Unmarshal(cur.value, &holder)
	return holder.Node, true, nil
}
