package natskv

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/internal/jsstream"
	"github.com/gateway/gateway/persist"
)

// Options configures Open.
type Options struct {
	// URL is the NATS servers, comma-separated.
	URL string
	// Prefix starts every subject and the streams' names, so several gateways (or test runs)
	// share one NATS server ("" = "gateway"). Letters, digits, "_" and "-", at most 32.
	Prefix string
	// Replicas is the records streams' replica count; 0 = 3 when the servers are clustered
	// (fewer if fewer JetStream peers take it), else 1. Ignored for existing streams unless set.
	Replicas int
	// Streams is how many records streams hold the partitions: partition p's records live in
	// stream p mod Streams, so the streams' leaders, which serialise their stream's writes,
	// spread over the NATS servers. 0 follows the servers: as many streams as a records stream
	// gets replicas (the servers that hold it, any of which can lead one), at most
	// MaxAutoStreams and Partitions: 1 on a lone server, where more would only cut the commits
	// into more, smaller batches (each staged and synced on R1), 3 on three servers or more, 2
	// with Replicas 2 (two servers: README "Cluster").
	// More than one needs Partitions. Fixed when the streams are first made: an existing
	// layout wins over this (logged when they differ), whatever the servers are now.
	Streams int
	// Partitions is the partition count (the cluster's), which lays the subjects out over the
	// streams when Streams > 1.
	Partitions int
	// Existing opens only records streams that exist: with none on the prefix yet Open fails
	// (domain.ErrRecordNotFound) instead of making a layout (`gateway token --store nats` run
	// before any node must not fix a cluster's layout at one stream).
	Existing bool
	// MaxBytes bounds each records stream (0 = no bound of its own; the server's store limit
	// applies). A full stream refuses writes (ErrStorageUnavailable), never drops records.
	MaxBytes int64
	// Partition maps a key to its partition token (nil: every key in partition 0). It must be
	// a pure function of the key: Get finds a record by it.
	Partition func(key []byte) uint32
	// Timeout bounds one round trip (default 5 s).
	Timeout time.Duration
	// Hold bounds how long a request that found no stream leader (an election: no responders)
	// is tried again before it answers storage_unavailable (default DefaultHold, at least
	// Timeout): a NATS server's loss costs clients latency, not errors (DESIGN.md section 19).
	Hold time.Duration
	// MaxBatch is the most messages in one atomic batch (default 1000, the server's default
	// max_batch_size); a commit of more ops is refused with ErrInvalid.
	MaxBatch int
	// MaxInflight is the most commit groups in flight at once, over every records stream
	// (default 16).
	MaxInflight int
	// MaxBatches is the most of those that are multi-message batches (default 2: one in flight
	// and one filling, so the commits waiting behind them merge into large groups; the server
	// allows 50 open batches per stream by default, shared by every node). Both are the
	// store's (a node's), not each stream's: more streams do not split the node's commits
	// into more, smaller groups.
	MaxBatches int
	// Creds and TLSCA are the NATS credentials file and the CA of its TLS certificates.
	Creds, TLSCA string
	// NodeID and LeaseTTL: with LeaseTTL > 0, Open takes the prefix's single-writer lease for
	// NodeID (waiting up to LeaseTTL for a lapsed holder's lease to expire) and keeps it; see
	// lease.go.
	NodeID   string
	LeaseTTL time.Duration
	// Logger takes the connection's and the lease's events; nil discards them.
	Logger *slog.Logger
	// Conn, when set, is used instead of connecting to URL (and not closed by Close).
	Conn *nats.Conn
	// Uncached are tables (a key's first part) whose records a fenced view's owner cache
	// does not keep: records written for every message and seldom read back by their owner
	// (persist.WriteOnceTables) would only cost each commit a put and push out the records it
	// does read back. A read of one goes to a replica that has the view's writes (view.go).
	Uncached []string
}

// Store is the KV on JetStream streams (see the package doc).
//
// Concurrency: Get and Scan run on the caller's goroutine (Gets of one stream share round
// trips: read.go); Commit hands its ops to its stream's dispatcher goroutine, which forms
// groups and runs each in its own goroutine; Close waits for the calls in flight, then for
// the dispatchers and their groups.
type Store struct {
	nc        *nats.Conn
	ownConn   bool
	js        jetstream.JetStream
	prefix    string
	log       *slog.Logger
	timeout   time.Duration
	hold      time.Duration
	maxBatch  int
	maxValue  int // largest value a message takes under the server's max_payload
	partition func(key []byte) uint32
	streams   []*recStream
	replicas  int
	blobs     *blobs   // media bodies over BlobMin (blobs.go); nil until first used
	acks      *acker   // pipelined publishes' acks (acks.go)
	uncached  []string // Options.Uncached's table tokens

	maxGroups  int
	maxBatches int
	reqs       chan *commitReq // the commits waiting for the dispatcher (commit.go)
	dispatched chan struct{}   // closed when the dispatcher has answered every request

	inflightMu sync.Mutex
	calls      sync.WaitGroup
	closed     atomic.Bool
	closeOnce  sync.Once
	closeErr   error

	lease *lease // nil without Options.LeaseTTL
	stop  chan struct{}
	bg    sync.WaitGroup

	blobsOnce sync.Once
	blobsErr  error

	writerOnce sync.Once
	writer     *persist.OutcomeWriter // every outbox's on this store (OutcomeWriter)

	groups, batches atomic.Uint64 // for tests and the bench: commit groups, multi-message batches
	// records and recordBytes: the records (writes and deletes, each a message) of the commits
	// applied, and their subjects' and values' bytes: what a message costs the store, beside
	// Badger's WriteStats
	records, recordBytes atomic.Uint64
	peakBatches          atomic.Int64 // for tests: the most batch slots the dispatcher had in use at once
}

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,32}$`)

// Headers the store writes besides the server's own.
const (
	hdrOp      = "Gw-Op"  // "del" on a tombstone
	hdrExpires = "Gw-Exp" // the writer's expiry of a TTL'd record, Unix milliseconds
	opDelete   = "del"
	// tombstoneTTL: a delete is a message (a batch carries nothing else); it is removed this
	// long after. A reader (a watch) further behind than this misses the delete.
	tombstoneTTL = time.Minute
	// maxGroupBytes bounds one batch's payload.
	maxGroupBytes = 8 << 20
	// msgOverhead is what a message adds to its value under max_payload: subject, headers.
	msgOverhead = 4 << 10
)

// DefaultHold is how long a request is tried again while a stream has no leader (Options.Hold).
const DefaultHold = 10 * time.Second

// Open connects, creates or updates the records streams and, with Options.LeaseTTL, takes the
// single-writer lease.
func Open(ctx context.Context, o Options) (*Store, error) {
	o.Prefix = cmp.Or(o.Prefix, "gateway")
	if !prefixRE.MatchString(o.Prefix) {
		return nil, fmt.Errorf("%w: NATS prefix %q (letters, digits, _ and -, at most 32)", domain.ErrRecordInvalid, o.Prefix)
	}
	o.Timeout = cmp.Or(o.Timeout, 5*time.Second)
	o.Hold = max(cmp.Or(o.Hold, DefaultHold), o.Timeout)
	o.MaxBatch = cmp.Or(o.MaxBatch, 1000)
	o.MaxInflight = cmp.Or(o.MaxInflight, 16)
	o.MaxBatches = min(cmp.Or(o.MaxBatches, 2), o.MaxInflight)
	o.Streams = max(o.Streams, 0)
	if o.Streams > 1 && o.Partitions < o.Streams {
		return nil, fmt.Errorf("%w: %d records streams need a partition count of at least as many (have %d)", domain.ErrRecordInvalid, o.Streams, o.Partitions)
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		nc: o.Conn, prefix: o.Prefix, log: log, timeout: o.Timeout, hold: o.Hold, maxBatch: o.MaxBatch,
		maxGroups: o.MaxInflight, maxBatches: o.MaxBatches, partition: o.Partition, stop: make(chan struct{}),
		reqs: make(chan *commitReq, 4096), dispatched: make(chan struct{}),
	}
	if s.partition == nil {
		s.partition = func([]byte) uint32 { return 0 }
	}
	for _, t := range o.Uncached {
		s.uncached = append(s.uncached, string(appendPart(nil, []byte(t), false)))
	}
	if s.nc == nil {
		nc, err := connect(o, log)
		if err != nil {
			return nil, err
		}
		s.nc, s.ownConn = nc, true
	}
	fail := func(err error) (*Store, error) {
		if s.acks != nil {
			_ = s.acks.sub.Unsubscribe()
		}
		if s.ownConn {
			s.nc.Close()
		}
		return nil, err
	}
	var err error
	if s.js, err = jetstream.New(s.nc, jetstream.WithDefaultTimeout(o.Timeout)); err != nil {
		return fail(fmt.Errorf("natskv: %w", err))
	}
	if s.acks, err = newAcker(s.nc); err != nil {
		return fail(fmt.Errorf("natskv: %w", unavailable(err)))
	}
	if err := s.ensureStreams(ctx, o); err != nil {
		return fail(err)
	}
	s.maxValue = int(s.nc.MaxPayload()) - msgOverhead
	s.watchConn()
	go s.dispatch()
	for _, rs := range s.streams {
		go rs.getter()
	}
	if o.LeaseTTL > 0 {
		if err := s.takeLease(ctx, o.NodeID, o.LeaseTTL); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

// InboxPrefix is where the replies to a gateway's NATS requests go: _INBOX_<prefix>.
func InboxPrefix(prefix string) string { return "_INBOX_" + prefix }

// Connect connects to o.URL as Open does (reconnecting for ever, nothing buffered while
// disconnected), for a caller that shares the connection (Options.Conn): a cluster node's
// store and membership.
func Connect(o Options) (*nats.Conn, error) {
	o.Prefix = cmp.Or(o.Prefix, "gateway")
	o.Timeout = cmp.Or(o.Timeout, 5*time.Second)
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return connect(o, log)
}

func connect(o Options, log *slog.Logger) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name("gateway " + o.Prefix),
		// Replies come to _INBOX_<prefix>.> (not the shared _INBOX.>), so a NATS user of the
		// gateway's needs no rights on other clients' inboxes (README: Cluster, "NATS
		// permissions").
		nats.CustomInboxPrefix(InboxPrefix(o.Prefix)),
		nats.Timeout(o.Timeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		// Nothing is buffered while disconnected: a commit either reaches the server or fails
		// at once, never lands later behind the caller's back.
		nats.ReconnectBufSize(-1),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			// nil: the store's own Close (nats.go passes the close's error), not a lost server.
			if err != nil {
				log.Warn("NATS disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { log.Info("NATS reconnected", "server", nc.ConnectedUrlRedacted()) }),
	}
	opts = append(opts, jsstream.Auth(o.Creds, o.TLSCA)...)
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("natskv: connect to %s: %w: %w", o.URL, domain.ErrStorageUnavailable, err)
	}
	return nc, nil
}

func (s *Store) enter() bool {
	s.inflightMu.Lock()
	defer s.inflightMu.Unlock()
	if s.closed.Load() {
		return false
	}
	s.calls.Add(1)
	return true
}

func (s *Store) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.timeout)
}

// holdCtx bounds a request that may wait out a stream leader election (Options.Hold).
func (s *Store) holdCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), s.hold)
}

// record is a subject's last message as the store reads it.
type record struct {
	seq     uint64
	value   []byte
	deleted bool   // a tombstone, or a TTL'd record past its expiry
	commit  string // the id of the commit whose first write it is (Gw-Commit), if it is one
}

func readRecord(seq uint64, h nats.Header, data []byte, now time.Time) record {
	r := record{seq: seq, value: data, commit: h.Get(hdrCommit)}
	if h.Get(hdrOp) == opDelete {
		r.deleted = true
	} else if exp := h.Get(hdrExpires); exp != "" {
		ms, err := strconv.ParseInt(exp, 10, 64)
		r.deleted = err == nil && now.UnixMilli() >= ms
	}
	return r
}

// last reads subject's last message as the stream leader has it (a replicated stream: every
// acknowledged commit, whoever made it); a subject without one is the zero record, deleted.
func (s *Store) last(ctx context.Context, subject string) (record, error) {
	r, _, err := s.lastAt(ctx, subject)
	return r, err
}

// lastAt is last with the time the server stored that message (its leader's clock when it
// took the write; zero for none).
func (s *Store) lastAt(ctx context.Context, subject string) (record, time.Time, error) {
	rs := s.streamOfSubject(subject)
	var (
		msg *jetstream.RawStreamMsg
		err error
	)
	err = s.retryRead(ctx, func(ctx context.Context) (err error) {
		if rs.replicated() {
			msg, err = rs.leaderLast(ctx, subject)
		} else {
			msg, err = rs.stream.GetLastMsgForSubject(ctx, subject)
		}
		return err
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return record{deleted: true}, time.Time{}, nil
	}
	if err != nil {
		return record{}, time.Time{}, unavailable(err)
	}
	return readRecord(msg.Sequence, msg.Header, msg.Data, time.Now()), msg.Time, nil
}

// Get returns a copy of the value at key.
func (s *Store) Get(key []byte) ([]byte, error) { return s.get("", key, nil) }

// get is Get in partition tok ("" = Options.Partition's); a fenced view's reads (v) come from
// its cache or any replica that has applied what the view must see (read.go).
func (s *Store) get(tok string, key []byte, v *View) ([]byte, error) {
	if !s.enter() {
		return nil, persist.ErrClosed
	}
	defer s.calls.Done()
	if len(key) == 0 {
		return nil, domain.ErrRecordNotFound
	}
	subject, err := s.subject(tok, key)
	if err != nil {
		return nil, domain.ErrRecordNotFound // a key too long to encode was never written
	}
	ctx, cancel := s.holdCtx()
	defer cancel()
	var r record
	if v != nil {
		r, err = v.read(ctx, subject)
	} else if rs := s.streamOfSubject(subject); rs.replicated() {
		r, err = s.last(ctx, subject)
	} else {
		r, err = rs.lastBatched(ctx, subject, 0, "")
	}
	if err != nil {
		return nil, fmt.Errorf("natskv: get: %w", err)
	}
	if r.deleted {
		return nil, domain.ErrRecordNotFound
	}
	return r.value, nil
}

// Health is nil while commits can be accepted: connected, no stream known full, the lease (if
// any) held.
func (s *Store) Health() error {
	if s.closed.Load() {
		return persist.ErrClosed
	}
	if st := s.nc.Status(); st != nats.CONNECTED {
		return fmt.Errorf("%w: NATS %s", domain.ErrStorageUnavailable, st)
	}
	for _, rs := range s.streams {
		if rs.full.Load() {
			return fmt.Errorf("%w: the records stream %s is full (max_bytes)", domain.ErrStorageUnavailable, rs.name)
		}
	}
	return s.lease.health()
}

// Close lets the calls in flight finish (queued commits are answered), releases the lease,
// and closes the connection it opened. Later calls return ErrClosed.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.inflightMu.Lock()
		s.closed.Store(true)
		s.inflightMu.Unlock()
		s.calls.Wait()
		close(s.reqs)
		for _, rs := range s.streams {
			close(rs.gets)
		}
		<-s.dispatched
		close(s.stop)
		s.bg.Wait()
		_ = s.acks.sub.Unsubscribe()
		s.releaseLease()
		if s.ownConn {
			if err := s.nc.Drain(); err != nil {
				s.nc.Close()
			}
		}
	})
	return s.closeErr
}

// Replicas is the records streams' replica count.
func (s *Store) Replicas() int { return s.replicas }

// Streams is how many records streams hold the partitions (Options.Streams, or the existing
// layout's).
func (s *Store) Streams() int { return len(s.streams) }

// MaxValue is the largest value a commit may write: the server's max_payload less what a
// message adds to its value.
func (s *Store) MaxValue() int { return s.maxValue }

// Stats are the store's counters: commit groups sent and how many were multi-message batches.
func (s *Store) Stats() (groups, batches uint64) { return s.groups.Load(), s.batches.Load() }

// WriteStats are the records the applied commits wrote or deleted (one message each; a
// condition's carrier and a fence check are not records) and their subjects' and values'
// bytes, as persist.Badger's WriteStats counts its records.
func (s *Store) WriteStats() (records, bytes uint64) { return s.records.Load(), s.recordBytes.Load() }

// unavailable turns a NATS failure (no connection, no responders, a timeout, a server out of
// resources, a batch the server dropped) into ErrStorageUnavailable; the caller retries later.
func unavailable(err error) error {
	if err == nil || errors.Is(err, domain.ErrStorageUnavailable) {
		return err
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamNotFound:
			return fmt.Errorf("%w: the records stream is gone: %w", domain.ErrStorageUnavailable, err)
		case 10023 /* insufficient resources */, 10002 /* account resources exceeded */, 10077, /* store failed: maximum bytes */
			jetstream.JSErrCodeJetStreamNotEnabled, errIncompleteBatch, errTooManyInflight:
			return fmt.Errorf("%w: %w", domain.ErrStorageUnavailable, err)
		}
		return err
	}
	return fmt.Errorf("%w: %w", domain.ErrStorageUnavailable, err)
}

// Interface guards.
var (
	_ persist.KV = (*Store)(nil)
)
