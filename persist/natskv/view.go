package natskv

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/persist"
)

// Partitions in a cluster (DESIGN.md section 13.1). Every record of a partition is a subject
// with the partition's token, <prefix>.<table>.<partition>.<id tokens>, so a node that takes a
// partition over scans that partition's records only. A View is the store seen through one
// partition: its keys are its own namespace (the same key in two partitions is two records),
// and, with a fence, every commit it makes carries the partition's fence check, so a former
// owner that was paused cannot write once a new owner has written its fence.

// FenceFunc is what a node knows of the partition it writes: the fence subject its owner wrote
// at acquisition and that message's sequence (cluster.Node.Lease). An error (the partition is
// not this node's to write now: domain.ErrNodeUnavailable) fails the commit before anything
// is sent.
type FenceFunc func() (subject string, seq uint64, err error)

// fence is a view's fence: its subject (the partition's, which the dispatcher keys on) and
// where its sequence comes from.
type fence struct {
	subject string
	fn      FenceFunc
}

func (f *fence) get() (string, uint64, error) { return f.fn() }

// fenceCarrier is the message that carries a partition's fence check in a batch: it expects
// the fence subject's last sequence to be the one this owner wrote.
func fenceCarrier(carrier, subject string, seq uint64) *nats.Msg {
	m := nats.NewMsg(carrier)
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(seq, 10))
	m.Header.Set(jetstream.ExpectedLastSubjSeqSubjHeader, subject)
	m.Header.Set(jetstream.MsgTTLHeader, "1")
	return m
}

// ErrFenced: a commit's partition fence moved: another node took the partition over.
var ErrFenced = fmt.Errorf("%w: the partition was taken over by another node", domain.ErrNodeUnavailable)

// checkFence reads f's subject: ErrFenced when its last message is no longer the one this
// owner's fence names.
func (s *Store) checkFence(f *fence) error {
	subject, seq, err := f.get()
	if err != nil {
		return err
	}
	ctx, cancel := s.ctx()
	defer cancel()
	cur, err := s.last(ctx, subject)
	if err != nil {
		return err
	}
	if cur.seq != seq {
		return ErrFenced
	}
	return nil
}

// View is the store through one partition (Partition) or through the records of no partition
// (Global). It is a persist.Durable whose Close ends the view only (the calls in flight finish,
// later ones get persist.ErrClosed): a node closes a partition's view when it lets the
// partition go, so nothing it left running writes there afterwards. The Store stays open.
type View struct {
	s     *Store
	tok   string
	fence *fence

	mu     sync.Mutex
	closed bool
	calls  sync.WaitGroup
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

// Partition is the store through partition p. With fn, every commit carries p's fence (see
// FenceFunc); without, commits are not fenced (reads, and writes a cluster makes into a
// partition it does not own, each under a condition of its own).
func (s *Store) Partition(p int, fn FenceFunc) *View {
	v := &View{s: s, tok: strconv.Itoa(p)}
	if fn != nil {
		v.fence = &fence{subject: s.FenceSubject(p), fn: fn}
	}
	return v
}

// globalToken is the partition token of the records that belong to no partition (a cluster's
// dev issuer key).
const globalToken = "g"

// Global is the store through the records of no partition.
func (s *Store) Global() *View { return &View{s: s, tok: globalToken} }

// FenceSubject is partition p's fence subject: one of the store's own records, which no key
// encodes to and no scan returns.
func (s *Store) FenceSubject(p int) string {
	return s.prefix + "." + internalTable + "." + strconv.Itoa(p) + ".fence"
}

// Get reads key in the view's partition.
func (v *View) Get(key []byte) ([]byte, error) {
	if !v.enter() {
		return nil, persist.ErrClosed
	}
	defer v.calls.Done()
	return v.s.get(v.tok, key)
}

// Scan scans prefix in the view's partition.
func (v *View) Scan(prefix []byte, fn func(key, value []byte) error) error {
	if !v.enter() {
		return persist.ErrClosed
	}
	defer v.calls.Done()
	return v.s.scan(v.tok, prefix, fn)
}

// Commit commits ops in the view's partition, with its fence.
func (v *View) Commit(ctx context.Context, ops ...persist.Op) error {
	if !v.enter() {
		return persist.ErrClosed
	}
	defer v.calls.Done()
	return v.s.commit(ctx, v.tok, v.fence, ops)
}

// Health is the store's; a partition's fence is checked per commit.
func (v *View) Health() error {
	v.mu.Lock()
	closed := v.closed
	v.mu.Unlock()
	if closed {
		return persist.ErrClosed
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

// Locate finds the partition that holds key: the partition token of the newest record of key
// in any partition (a record moved between partitions leaves a tombstone behind, older than
// its new record), ok false when none holds it live. One round trip, to the stream leader.
func (s *Store) Locate(key []byte) (partition string, ok bool, err error) {
	if !s.enter() {
		return "", false, persist.ErrClosed
	}
	defer s.calls.Done()
	subject, err := s.subject("*", key)
	if err != nil {
		return "", false, nil
	}
	ctx, cancel := s.ctx()
	defer cancel()
	msg, err := s.leaderLastRouted(ctx, subject)
	if err != nil {
		return "", false, fmt.Errorf("natskv: locate: %w", unavailable(err))
	}
	if msg == nil || readRecord(msg.Sequence, msg.Header, msg.Data, time.Now()).deleted {
		return "", false, nil
	}
	return s.partitionOf(msg.Subject), true, nil
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
// records present at the start were reported. It is nats.go's ordered consumer on the records
// stream (headers only), which recreates itself after a gap or a lost server. fn runs on one
// goroutine, in stream order.
func (s *Store) Watch(ctx context.Context, tables []string, fn func(WatchEntry)) (ready <-chan struct{}, err error) {
	filters := make([]string, 0, len(tables))
	for _, t := range tables {
		filters = append(filters, s.filter("*", []byte(t+"/")))
	}
	cons, err := s.js.OrderedConsumer(ctx, s.name, jetstream.OrderedConsumerConfig{
		FilterSubjects: filters, DeliverPolicy: jetstream.DeliverLastPerSubjectPolicy, HeadersOnly: true,
	})
	if err != nil {
		return nil, fmt.Errorf("natskv: watch: %w", unavailable(err))
	}
	readyC := make(chan struct{})
	var once sync.Once
	markReady := func() { once.Do(func() { close(readyC) }) }
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
		return nil, fmt.Errorf("natskv: watch: %w", unavailable(err))
	}
	go func() {
		<-ctx.Done()
		cc.Stop()
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
