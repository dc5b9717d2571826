package natskv

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
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
	// Prefix starts every subject and the stream's name, so several gateways (or test runs)
	// share one NATS server ("" = "gateway"). Letters, digits, "_" and "-", at most 32.
	Prefix string
	// Replicas is the records stream's replica count; 0 = 3 when the servers are clustered
	// (fewer if fewer JetStream peers take it), else 1. Ignored for an existing stream unless set.
	Replicas int
	// MaxBytes bounds the records stream (0 = no bound of its own; the server's store limit
	// applies). A full stream refuses writes (ErrStorageUnavailable), never drops records.
	MaxBytes int64
	// Partition maps a key to its partition token (nil: every key in partition 0). It must be
	// a pure function of the key: Get finds a record by it.
	Partition func(key []byte) uint32
	// Timeout bounds one round trip (default 5 s).
	Timeout time.Duration
	// MaxBatch is the most messages in one atomic batch (default 1000, the server's default
	// max_batch_size); a commit of more ops is refused with ErrInvalid.
	MaxBatch int
	// MaxInflight is the most commit groups in flight at once (default 16; the server allows 50
	// open batches per stream by default).
	MaxInflight int
	// MaxBatches is the most of those that are multi-message batches (default 2: on R1 file
	// storage a batch stages in a file store of its own; a cluster's R3 stream stages in
	// memory, and its fenced commits are batches, so it allows more).
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
}

// Store is the KV on a JetStream stream (see the package doc).
//
// Concurrency: Get and Scan run on the caller's goroutine; Commit hands its ops to the
// dispatcher goroutine, which forms groups and runs each in its own goroutine; Close waits for
// the calls in flight, then for the dispatcher and its groups. Counted by gate like Badger's.
type Store struct {
	nc        *nats.Conn
	ownConn   bool
	js        jetstream.JetStream
	stream    jetstream.Stream
	name      string // stream name
	prefix    string
	carrier   string // the condition carriers' subject
	log       *slog.Logger
	timeout   time.Duration
	leaderGet bool // R>1: Get asks the stream leader (read-your-writes), not any replica
	maxBatch  int
	maxValue  int // largest value a message takes under the server's max_payload
	partition func(key []byte) uint32

	inflightMu sync.Mutex
	calls      sync.WaitGroup
	closed     atomic.Bool
	closeOnce  sync.Once
	closeErr   error

	reqs       chan *commitReq
	dispatched chan struct{} // closed when the dispatcher has answered every request
	maxGroups  int
	maxBatches int

	full  atomic.Bool // a commit found the stream full; cleared when space returns
	lease *lease      // nil without Options.LeaseTTL
	stop  chan struct{}
	bg    sync.WaitGroup

	groups, batches atomic.Uint64 // for tests and the bench: commit groups, multi-message batches
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

// Open connects, creates or updates the records stream and, with Options.LeaseTTL, takes the
// single-writer lease.
func Open(ctx context.Context, o Options) (*Store, error) {
	o.Prefix = cmp.Or(o.Prefix, "gateway")
	if !prefixRE.MatchString(o.Prefix) {
		return nil, fmt.Errorf("%w: NATS prefix %q (letters, digits, _ and -, at most 32)", domain.ErrRecordInvalid, o.Prefix)
	}
	o.Timeout = cmp.Or(o.Timeout, 5*time.Second)
	o.MaxBatch = cmp.Or(o.MaxBatch, 1000)
	o.MaxInflight = cmp.Or(o.MaxInflight, 16)
	o.MaxBatches = min(cmp.Or(o.MaxBatches, 2), o.MaxInflight)
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		nc: o.Conn, prefix: o.Prefix, name: o.Prefix + "_records", carrier: o.Prefix + "." + internalTable + ".0.c",
		log: log, timeout: o.Timeout, maxBatch: o.MaxBatch, maxGroups: o.MaxInflight, partition: o.Partition,
		reqs: make(chan *commitReq, 4096), dispatched: make(chan struct{}), stop: make(chan struct{}), maxBatches: o.MaxBatches,
	}
	if s.partition == nil {
		s.partition = func([]byte) uint32 { return 0 }
	}
	if s.nc == nil {
		nc, err := connect(o, log)
		if err != nil {
			return nil, err
		}
		s.nc, s.ownConn = nc, true
	}
	fail := func(err error) (*Store, error) {
		if s.ownConn {
			s.nc.Close()
		}
		return nil, err
	}
	var err error
	if s.js, err = jetstream.New(s.nc, jetstream.WithDefaultTimeout(o.Timeout)); err != nil {
		return fail(fmt.Errorf("natskv: %w", err))
	}
	if err := s.ensureStream(ctx, o); err != nil {
		return fail(err)
	}
	s.maxValue = int(s.nc.MaxPayload()) - msgOverhead
	go s.dispatch()
	if o.LeaseTTL > 0 {
		if err := s.takeLease(ctx, o.NodeID, o.LeaseTTL); err != nil {
			s.Close()
			return nil, err
		}
	}
	return s, nil
}

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

// ensureStream creates the records stream, or updates the settings the options name.
func (s *Store) ensureStream(ctx context.Context, o Options) error {
	cfg := jetstream.StreamConfig{
		Name:        s.name,
		Description: "gateway records (persist/natskv)",
		Subjects:    []string{s.prefix + ".*.*.>"},
		Storage:     jetstream.FileStorage,
		// One message per subject: a record is its subject's last message.
		MaxMsgsPerSubject: 1,
		// A full stream refuses new messages; the default (discard old) would drop records.
		Discard:            jetstream.DiscardNew,
		MaxBytes:           -1,
		MaxMsgs:            -1,
		MaxAge:             0,
		AllowDirect:        true,
		AllowAtomicPublish: true,
		AllowMsgTTL:        true,
	}
	if o.MaxBytes > 0 {
		cfg.MaxBytes = o.MaxBytes
	}
	cctx, cancel := context.WithTimeout(ctx, 4*o.Timeout)
	defer cancel()
	st, err := s.js.Stream(cctx, s.name)
	switch {
	case err == nil:
		cur := st.CachedInfo().Config
		cfg.Replicas = cur.Replicas
		if o.Replicas > 0 {
			cfg.Replicas = o.Replicas
		}
		if o.MaxBytes == 0 {
			cfg.MaxBytes = cur.MaxBytes
		}
		if cfg.Replicas != cur.Replicas || cfg.MaxBytes != cur.MaxBytes || !cur.AllowAtomicPublish || !cur.AllowMsgTTL || !cur.AllowDirect {
			cur.Replicas, cur.MaxBytes = cfg.Replicas, cfg.MaxBytes
			cur.AllowAtomicPublish, cur.AllowMsgTTL, cur.AllowDirect = true, true, true
			if st, err = s.js.UpdateStream(cctx, cur); err != nil {
				return fmt.Errorf("natskv: update stream %s: %w", s.name, err)
			}
		}
	case errors.Is(err, jetstream.ErrStreamNotFound):
		if st, err = jsstream.Create(cctx, s.nc, s.js, &cfg, o.Replicas); err != nil {
			return fmt.Errorf("natskv: create stream %s: %w", s.name, err)
		}
	default:
		return fmt.Errorf("natskv: stream %s: %w", s.name, unavailable(err))
	}
	s.stream = st
	s.leaderGet = st.CachedInfo().Config.Replicas > 1
	return nil
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

// record is a subject's last message as the store reads it.
type record struct {
	seq     uint64
	value   []byte
	deleted bool // a tombstone, or a TTL'd record past its expiry
}

func readRecord(seq uint64, h nats.Header, data []byte, now time.Time) record {
	r := record{seq: seq, value: data}
	if h.Get(hdrOp) == opDelete {
		r.deleted = true
	} else if exp := h.Get(hdrExpires); exp != "" {
		ms, err := strconv.ParseInt(exp, 10, 64)
		r.deleted = err == nil && now.UnixMilli() >= ms
	}
	return r
}

// last reads subject's last message; a subject without one is the zero record, deleted.
func (s *Store) last(ctx context.Context, subject string) (record, error) {
	var (
		msg *jetstream.RawStreamMsg
		err error
	)
	err = whileUnrouted(ctx, func() (err error) {
		if s.leaderGet {
			msg, err = s.leaderLast(ctx, subject)
		} else {
			msg, err = s.stream.GetLastMsgForSubject(ctx, subject)
		}
		return err
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return record{deleted: true}, nil
	}
	if err != nil {
		return record{}, unavailable(err)
	}
	return readRecord(msg.Sequence, msg.Header, msg.Data, time.Now()), nil
}

// Get returns a copy of the value at key.
func (s *Store) Get(key []byte) ([]byte, error) { return s.get("", key) }

// get is Get in partition tok ("" = Options.Partition's).
func (s *Store) get(tok string, key []byte) ([]byte, error) {
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
	ctx, cancel := s.ctx()
	defer cancel()
	r, err := s.last(ctx, subject)
	if err != nil {
		return nil, fmt.Errorf("natskv: get: %w", err)
	}
	if r.deleted {
		return nil, domain.ErrRecordNotFound
	}
	return r.value, nil
}

// scanPage is how many messages one direct batch get asks for.
const scanPage = 512

// Scan calls fn for every live key under prefix in key order. It reads the stream forward from
// its first message with the prefix's subject filter, in pages, keeping each key's newest
// message, then sorts: a key written during the scan is seen with its old or its new value
// (never half of a commit: a page is read under the stream's isolation, and a commit's messages
// all come after any page that read none of them); a key present throughout is always seen. It
// holds the prefix's records in memory until fn has seen them.
func (s *Store) Scan(prefix []byte, fn func(key, value []byte) error) error {
	return s.scan("*", prefix, fn)
}

// scan is Scan in partition tok ("*": every partition; a key held by several is seen with its
// newest record).
func (s *Store) scan(tok string, prefix []byte, fn func(key, value []byte) error) error {
	if !s.enter() {
		return persist.ErrClosed
	}
	defer s.calls.Done()
	type entry struct {
		key string
		rec record
	}
	found := map[string]record{}
	filter := s.filter(tok, prefix)
	now := time.Now()
	// R>1: the newest message under the filter as the stream leader had it when the scan
	// began. A direct get may be answered by a follower that has not applied the last
	// acknowledged commits (nats-server's direct get subscription is a queue group of every
	// replica): a new owner of a partition scanning right after the old owner's last commits
	// would miss them. A page is complete up to its last message (a replica applies the stream
	// in order), so only a scan that ends early can miss anything: one that ends before it saw
	// that newest message asks again, from where it got to.
	var want uint64
	if s.leaderGet {
		var err error
		if want, err = s.leaderNewest(filter); err != nil {
			return fmt.Errorf("natskv: scan: %w", unavailable(err))
		}
	}
	var seen uint64
	wait := 2 * time.Millisecond
	for seq := uint64(1); ; {
		ctx, cancel := s.ctx()
		msgs, pending, err := s.scanPage(ctx, seq, filter)
		cancel()
		if err != nil {
			return fmt.Errorf("natskv: scan: %w", unavailable(err))
		}
		for _, msg := range msgs {
			seq, seen = msg.seq+1, max(seen, msg.seq)
			key, ok := s.keyOf(msg.subject)
			if !ok || !hasPrefix(key, prefix) {
				continue
			}
			if old, ok := found[string(key)]; !ok || old.seq < msg.seq {
				found[string(key)] = readRecord(msg.seq, msg.header, msg.data, now)
			}
		}
		if len(msgs) > 0 && pending > 0 {
			continue
		}
		if seen >= want {
			break
		}
		// A follower behind answered. The newest message may also have gone meanwhile (a
		// tombstone's TTL): the leader's answer again, never later than the first.
		if time.Since(now) > s.timeout {
			return fmt.Errorf("natskv: scan: %w: the replicas did not catch up with the stream leader", domain.ErrStorageUnavailable)
		}
		time.Sleep(wait)
		wait = min(2*wait, 100*time.Millisecond)
		again, err := s.leaderNewest(filter)
		if err != nil {
			return fmt.Errorf("natskv: scan: %w", unavailable(err))
		}
		want = min(want, again)
	}
	live := make([]entry, 0, len(found))
	for k, r := range found {
		if !r.deleted {
			live = append(live, entry{k, r})
		}
	}
	slices.SortFunc(live, func(a, b entry) int { return cmp.Compare(a.key, b.key) })
	for _, e := range live {
		if err := fn([]byte(e.key), e.rec.value); err != nil {
			return err
		}
	}
	return nil
}

func hasPrefix(key, prefix []byte) bool {
	return len(key) >= len(prefix) && string(key[:len(prefix)]) == string(prefix)
}

// Health is nil while commits can be accepted: connected, the stream not known full, the lease
// (if any) held.
func (s *Store) Health() error {
	if s.closed.Load() {
		return persist.ErrClosed
	}
	if st := s.nc.Status(); st != nats.CONNECTED {
		return fmt.Errorf("%w: NATS %s", domain.ErrStorageUnavailable, st)
	}
	if s.full.Load() {
		return fmt.Errorf("%w: the records stream %s is full (max_bytes)", domain.ErrStorageUnavailable, s.name)
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
		<-s.dispatched
		close(s.stop)
		s.bg.Wait()
		s.releaseLease()
		if s.ownConn {
			if err := s.nc.Drain(); err != nil {
				s.nc.Close()
			}
		}
	})
	return s.closeErr
}

// Replicas is the records stream's replica count.
func (s *Store) Replicas() int { return s.stream.CachedInfo().Config.Replicas }

// MaxValue is the largest value a commit may write: the server's max_payload less what a
// message adds to its value.
func (s *Store) MaxValue() int { return s.maxValue }

// Stats are the store's counters: commit groups sent and how many were multi-message batches.
func (s *Store) Stats() (groups, batches uint64) { return s.groups.Load(), s.batches.Load() }

// unavailable turns a NATS failure (no connection, no responders, a timeout, a server out of
// resources) into ErrStorageUnavailable; the caller retries later.
func unavailable(err error) error {
	if err == nil || errors.Is(err, domain.ErrStorageUnavailable) {
		return err
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch apiErr.ErrorCode {
		case jetstream.JSErrCodeStreamNotFound:
			return fmt.Errorf("%w: the records stream is gone: %w", domain.ErrStorageUnavailable, err)
		case 10023 /* insufficient resources */, 10002 /* account resources exceeded */, 10077 /* store failed: maximum bytes */, jetstream.JSErrCodeJetStreamNotEnabled:
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
