package persist

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/internal/jsonenc"
	"github.com/gateway/gateway/persist/outlog"
)

// LogOutbox is the outbox on a log of its own (persist/outlog) beside the Badger the gateway
// already has (bench/README.md, "Eleventh pass"): `--outbox log`. A message's accept, outcome
// and receipts are records in the log; what became of an accept is found from it through its
// status slots, so a read by id is one pread (and one more per outcome or receipt laid over
// it), with no index:
//
//	accept   'A', flags, 4 random bytes, [a listed kind's chain: logoutbox_chain.go], the
//	         body (version 3, as Outbox's msg_log record);
//	         5 slots: 0 the outcome, 1 delivered, 2 read, 3 a failed receipt, 4 a requeue
//	outcome  'O', the accept's position (8 bytes), the outcome (as Outbox's outbox_status)
//	receipt  'R', the accept's position, the domain.StatusChange (version 1)
//	requeue  'Q', the accept's position, the body as requeued
//	void     'V', the accept's position: an accept answered as refused, which never was; its
//	         outcome slot names the void record (written by versions that committed
//	         outlog_pos on the accept's path when that commit failed; read still)
//
// A slot is written (outlog.WriteSlot) once the record it names is written; a reader takes the
// body from the accept (or the requeue its slot names), the outcome from slot 0 and the
// receipts from the others. The id minted by Accept (an entry with none) says where its accept
// is (logID); an id chosen by the caller or derived from an Idempotency-Key is found through
// outlog_pos/<id> in Badger, written by the next checkpoint (held in memory until then, so
// that an accept commits nothing to Badger; the accept carries the flag that says so, and boot
// writes those of the accepts since the checkpoint, which a crash kept from being written).
// Badger also keeps the checkpoint (outlog_ckpt: the position from which boot scans the log)
// and the marks (outlog_mark/<id>: a message pending longer than markAfter, so the checkpoint
// can move past it), as Outbox does, the users' chains' heads as of the checkpoint
// (outlog_head/<uid>), and the campaigns' own idempotency records (idem/).
//
// The history of what the log holds is a backward chain per user (logoutbox_chain.go): no
// Badger record a message. A message's media over BlobMin is a file of its own beside the log,
// the accept naming it (logoutbox_media.go).
type LogOutbox struct {
	log    *outlog.Log
	kv     KV
	media  logMedia
	older  OutboxReader // the outbox a switch of --outbox left behind (outbox_older.go), or nil
	idem   *Table[domain.IdemRecord]
	logger atomic.Pointer[slog.Logger]
	queued inflight // outcomes and receipts queued and not yet answered

	// mu guards pending, unindexed, unmark and booted, and is held across each accept's Queue,
	// so that the checkpoint never passes an accept not yet in pending.
	mu      sync.Mutex
	pending map[string]*logPending
	// settled are the accepts of messages with minted ids settled lately: a receipt for one
	// writes its record and slot with no read of the accept. A slot each by the id's position
	// bits (settledSlot; direct-mapped, a newer accept taking its slot), with the id's random
	// bits: with the position they are the whole id, so none is kept as a string, hashed or
	// compared (the map insert of each settled id was about a tenth of the outbox's CPU on
	// the send path: issue 32). A receipt for an older message reads its accept back
	// (resolve), as one for a message this process never knew.
	settled []settledAccept
	// recent are the accepts' positions of the other messages settled lately (a caller's id,
	// an Idempotency-Key's), newest generation first. A generation is put aside when it holds
	// recentMax ids.
	recent [2]map[string]outlog.Pos
	// unindexed are the accepts with ids of their own whose outlog_pos records are not yet
	// written (finishAccept; the next Checkpoint writes them).
	unindexed map[string]outlog.Pos
	unmark    []string // marks to delete: their messages settled
	// unmedia are the media files to remove: their messages settled (once the log is durable
	// past their outcomes) or their accepts never were.
	unmedia []mediaDrop
	booted  bool
	// Records kept for reuse (a message's pending record and its outcome's write in flight):
	// an allocation each a message otherwise. At most freeMax of each.
	freePending []*logPending
	freeSettle  []*settleCall
	ckptMu      sync.Mutex
	now         func() time.Time

	// The users' heads of their chains (logoutbox_chain.go), and the records listings read
	// (tests: a listing's cost).
	chains     chains
	chainReads atomic.Int64
}

// logPending is a message this process knows to be pending.
type logPending struct {
	pos   outlog.Pos
	since time.Time
	state pendingState
	mark  markState
	acc   outlog.Ticket // its accept's write (accepting, a caller's id)
	// An accept with a minted id (queueAccept's answered): its id, and the answer of its write
	// on the log's writer, bound to this record once (LogOutbox.accepted).
	id       string
	accepted func(outlog.Pos, error)
	// media: the file holding its media ("": none, or in its record).
	media string
}

// Record kinds, slots and Badger keys.
const (
	recAccept  = 'A'
	recOutcome = 'O'
	recReceipt = 'R'
	recRequeue = 'Q'
	recVoid    = 'V' // an accept answered as refused: it never was

	acceptHeader = 6 // kind, flags, 4 random bytes
	// acceptCallerID: the accept's id is not logID's (the caller's, or an Idempotency-Key's).
	acceptCallerID = 1

	slotOutcome   = 0
	slotDelivered = 1
	slotRead      = 2
	slotFailed    = 3
	slotRequeue   = 4
	acceptSlots   = 5

	// recentMax is the ids a generation of LogOutbox.recent holds (two are kept).
	recentMax = 1 << 16
	// settledBits: LogOutbox.settled has 2^settledBits slots (2 MiB), about as many
	// messages as the two generations of recent held.
	settledBits = 17
	// freeMax is the most records of a kind LogOutbox keeps for reuse.
	freeMax = 1024

	logPosTable  = "outlog_pos"
	logPosTTL    = OutboxRetention + 24*time.Hour
	logMarkTable = "outlog_mark"
)

var logCheckpointKey = []byte("outlog_ckpt")

// LogOutboxOptions configure OpenLogOutbox.
type LogOutboxOptions struct {
	Sync outlog.Sync // SyncBatch (--fsync batch) or SyncInterval

	segmentSize int64 // tests: smaller segments (0: logSegmentSize)
}

// OpenLogOutbox opens the log in dir and the outbox on it and kv.
func OpenLogOutbox(dir string, kv KV, o LogOutboxOptions) (*LogOutbox, error) {
	if o.segmentSize == 0 {
		o.segmentSize = logSegmentSize
	}
	l, _, err := outlog.Open(dir, outlog.Options{Sync: o.Sync, SegmentSize: o.segmentSize})
	if err != nil {
		return nil, err
	}
	lo := &LogOutbox{log: l, kv: kv, media: logMedia{dir: filepath.Join(dir, logMediaDir)}, idem: NewTable[domain.IdemRecord](kv, idemTable, 1),
		pending: map[string]*logPending{}, unindexed: map[string]outlog.Pos{}, now: time.Now,
		recent:  [2]map[string]outlog.Pos{make(map[string]outlog.Pos), make(map[string]outlog.Pos)},
		settled: make([]settledAccept, 1<<settledBits)}
	lo.chains.init()
	l.SetOnRewind(lo.chains.rewound)
	lo.logger.Store(slog.New(slog.DiscardHandler))
	return lo, nil
}

// SetLogger sets where the outbox reports what it cannot fix.
func (lo *LogOutbox) SetLogger(l *slog.Logger) {
	if l != nil {
		lo.logger.Store(l)
	}
}

// Close waits for the background writes (outcomes, receipts), removes the media files of the
// messages settled, and closes the log.
func (lo *LogOutbox) Close() error {
	lo.Flush()
	if lo.log.Sync() == nil {
		lo.removeMedia(lo.log.Durable())
	}
	return lo.log.Close()
}

// LogStats is what the log's writer did since Open (benchmarks report it: outlog.Stats).
func (lo *LogOutbox) LogStats() outlog.Stats { return lo.log.Stats() }

// MintsIDs tells the engine to leave a new message's id to Accept (the id says where its
// accept lies).
func (lo *LogOutbox) MintsIDs() bool { return true }

func logPosKey(id string) []byte  { return append([]byte(logPosTable+"/"), id...) }
func logMarkKey(id string) []byte { return append([]byte(logMarkTable+"/"), id...) }

func posBytes(p outlog.Pos) []byte { return binary.LittleEndian.AppendUint64(nil, uint64(p)) }

// Accept writes an accepted entry's record and returns once it is written (SyncBatch: and
// synced). An entry without an id gets one that says where its record lies (e.ID and
// e.Message.ID are set); one with an id gets its outlog_pos record too.
func (lo *LogOutbox) Accept(ctx context.Context, e *domain.OutboxEntry, idemHash string) error {
	if err := lo.writable(); err != nil {
		return err
	}
	ref, err := lo.putMedia(e)
	if err != nil {
		return err
	}
	t, dup, answered, err := lo.queueAccept(e, idemHash, ref, true)
	if err != nil || dup {
		lo.unused(ref) // no record names it (a duplicate's names its own)
		return err
	}
	if acceptQueued != nil {
		acceptQueued(lo)
	}
	if answered {
		// A minted id, so no outlog_pos record: its pending state is set by the log's
		// writer (accepted), and the caller woken by its write takes no lock.
		return t.Wait()
	}
	return lo.finishAccept([]*domain.OutboxEntry{e}, []outlog.Ticket{t})
}

// acceptQueued is a test's hook: called by Accept once its record is queued, before its wait.
var acceptQueued func(*LogOutbox)

// writable refuses an accept, before anything is written, while the records' store refuses
// writes (persist.Badger's disk under --min-free-disk: the log shares its disk), as the
// outbox on Badger refuses it.
func (lo *LogOutbox) writable() error {
	if h, ok := lo.kv.(interface{ Health() error }); ok {
		return h.Health()
	}
	return nil
}

// minted tells whether e's id is the one its accept at p was given (it says where it is).
func minted(id string, p outlog.Pos) bool {
	q, _, ok := parseLogID(id, p.Seg())
	return ok && q == p
}

// AcceptMany writes several accepted entries (their ids minted when empty) and returns once
// all are written.
func (lo *LogOutbox) AcceptMany(ctx context.Context, es []domain.OutboxEntry) error {
	if err := lo.writable(); err != nil {
		return err
	}
	var (
		ents []*domain.OutboxEntry
		ts   []outlog.Ticket
	)
	for i := range es {
		ref, err := lo.putMedia(&es[i])
		var (
			t   outlog.Ticket
			dup bool
		)
		if err == nil {
			t, dup, _, err = lo.queueAccept(&es[i], "", ref, false)
		}
		if err != nil || dup {
			lo.unused(ref)
		}
		if err != nil {
			if len(ts) > 0 {
				_ = lo.finishAccept(ents, ts)
			}
			return err
		}
		if !dup {
			ents, ts = append(ents, &es[i]), append(ts, t)
		}
	}
	return lo.finishAccept(ents, ts)
}

// queueAccept queues an entry's accept record and indexes it as pending; dup: an accept of an
// id pending here already (written once; its write was waited for). ref names the file holding
// its media (putMedia; "": the record holds it).
//
// With onWriter, an accept whose id it mints (answered) has its pending state set on the log's
// writer goroutine once written (accepted), not by its caller after its wait (finishAccept):
// the callers of a round, woken together, each took mu at once (issue 32: about a fifth of a
// contended lock a message at 100 sessions in process, each a park and a wake-up).
func (lo *LogOutbox) queueAccept(e *domain.OutboxEntry, idemHash, ref string, onWriter bool) (t outlog.Ticket, dup, answered bool, err error) {
	caller := e.ID != ""
	answered = onWriter && !caller
	ph := e.ID
	if !caller {
		ph = idPlaceholder // replaced in place
	}
	hdr := acceptHeader
	var h *chainHead
	unlock := func() {}
	if listedKind(e.Message.Kind) {
		// On its user's chain: the user's head locked until the accept is queued, its time
		// not before the head's (the chain's order is the history's).
		var sh *chainShard
		var ms int64
		sh, h, ms = lo.chainUser(e.UserID, int64(e.CreatedAt))
		unlock = sh.mu.Unlock
		if ms != int64(e.CreatedAt) {
			e.CreatedAt = domain.Millis(ms)
			for i := range e.History {
				if e.History[i].Status == domain.MsgQueued || e.History[i].Status == domain.MsgScheduled {
					e.History[i].At = e.CreatedAt
				}
			}
		}
		hdr = chainHeader
	}
	b, size := bodyOf(*e, idemHash, ref)
	b.ID = ph
	// The record on the stack as a rule (QueueFunc copies it into the log's group).
	var stack [1024]byte
	rec := stack[:hdr]
	if hdr+size > len(stack) {
		rec = make([]byte, hdr, hdr+size)
	}
	rec[0] = recAccept
	if caller {
		rec[1] = acceptCallerID
	}
	rnd := rand.Uint32()
	binary.BigEndian.PutUint32(rec[2:6], rnd)
	if h != nil {
		rec[1] |= acceptChained
		binary.LittleEndian.PutUint32(rec[acceptHeader+24:], userHash(e.UserID))
	}
	rec, err = appendBody(append(rec, bodyVersion3), &b)
	if err != nil {
		unlock()
		return outlog.Ticket{}, false, false, fmt.Errorf("%s %q: %w", outboxTable, e.ID, err)
	}
	if len(rec) > outlog.MaxRecord {
		// The log would refuse it (outlog.ErrTooLarge), and the same message again each time:
		// the caller's to make smaller, not a storage's failure to retry (503).
		unlock()
		return outlog.Ticket{}, false, false, recordTooLarge(len(rec))
	}
	idAt := hdr + 1 + len(`{"id":"`) // where the placeholder id lies
	ms, durable := int64(e.CreatedAt), lo.log.Durable()
	since := lo.now() // read before the lock: mu is the outbox's most contended
	lo.mu.Lock()
	if caller {
		if p := lo.pending[e.ID]; p != nil && p.state == doubtful {
			// Its earlier write failed with the log stopped (a cut one leaves no record: see
			// accepted): written again, which the stopped log refuses. Never answered as a
			// duplicate: nothing says it lies anywhere (review25 H1).
			lo.dropPending(e.ID, p)
		} else if p != nil {
			t := p.acc
			lo.mu.Unlock()
			unlock()
			if t != (outlog.Ticket{}) {
				return t, true, false, t.Wait()
			}
			return t, true, false, nil
		}
	}
	var (
		idb  [24]byte // the minted id, made a string once the log's lock is let go
		pr   *logPending
		then func(outlog.Pos, error)
	)
	if answered {
		pr = lo.newPending(logPending{since: since, state: accepting})
		if pr.accepted == nil { // bound once a record: kept records keep it
			r := pr
			r.accepted = func(pos outlog.Pos, err error) { lo.accepted(r, pos, err) }
		}
		then = pr.accepted
	}
	t, err = lo.log.QueueFuncThen(len(rec), acceptSlots, func(p outlog.Pos, dst []byte) {
		copy(dst, rec)
		if !caller {
			idb = logIDBytes(p, rnd)
			copy(dst[idAt:], idb[:])
		}
		if h != nil {
			lo.link(h, p, ms, durable, dst)
		}
	}, then)
	if err != nil {
		if pr != nil {
			lo.dropPending("", pr) // never indexed
		}
		lo.mu.Unlock()
		unlock()
		return t, false, false, err
	}
	if !caller {
		id := string(idb[:])
		e.ID = id
		if e.Message.ID == "" {
			e.Message.ID = id
		}
	}
	if pr != nil {
		pr.pos, pr.id = t.Pos, e.ID
	} else {
		pr = lo.newPending(logPending{pos: t.Pos, since: since, state: accepting, acc: t})
	}
	pr.media = ref
	lo.pending[e.ID] = pr
	lo.mu.Unlock()
	unlock()
	return t, false, answered, nil
}

// accepted answers an answered accept's write (queueAccept), on the log's writer goroutine,
// as finishAccept answers the others': its record p, at pos, waits for its outcome once
// written, and is in doubt if its write failed. Unless p is no longer that accept's (its
// outcome came first: the caller's Wait returns before this runs).
func (lo *LogOutbox) accepted(p *logPending, pos outlog.Pos, err error) {
	lo.mu.Lock()
	if p.pos == pos && p.state == accepting && lo.pending[p.id] == p {
		lo.answerAccept(p.id, p, err)
	}
	lo.mu.Unlock()
}

// answerAccept records the answer of accept id's write in its pending record p (mu held): it
// waits for its outcome once written; a write the log cut off (outlog.ErrCut: a full disk) is
// stored nowhere, and its position is the next record's, so the record goes (kept, it held the
// checkpoint and every segment from its own until a restart, and a retry of a caller's id was
// answered a duplicate: review25); any other failure stopped the log, and leaves it in doubt.
func (lo *LogOutbox) answerAccept(id string, p *logPending, err error) {
	switch {
	case err == nil:
		p.state = waiting
	case errors.Is(err, outlog.ErrCut):
		lo.dropMedia(0, p.media)
		lo.dropPending(id, p)
	default:
		p.state, p.since = doubtful, lo.now()
	}
}

// finishAccept waits for the accepts' writes and records their outcome in pending. An entry
// with an id of its own (a caller's or an Idempotency-Key's: it does not say where its record
// lies) goes into unindexed, and its outlog_pos record is written by the next Checkpoint, not
// here: an accept commits nothing to the records' store before it is answered (issue 32: with
// an Idempotency-Key, that commit, one Badger transaction a message, was most of a send's
// storage CPU, and under --fsync batch a second sync on its path). Boot writes the outlog_pos
// records of the accepts since the checkpoint again, and the checkpoint never passes one still
// in unindexed.
func (lo *LogOutbox) finishAccept(es []*domain.OutboxEntry, ts []outlog.Ticket) error {
	var err error
	werrs := make([]error, len(ts)) // nil: written
	for i, t := range ts {
		werrs[i] = t.Wait()
		if err == nil {
			err = werrs[i]
		}
	}
	lo.mu.Lock()
	for i, e := range es {
		if werrs[i] == nil && !minted(e.ID, ts[i].Pos) {
			lo.unindexed[e.ID] = ts[i].Pos
		}
		if p := lo.pending[e.ID]; p != nil && p.state == accepting {
			p.acc = outlog.Ticket{}
			switch {
			case werrs[i] != nil:
				lo.answerAccept(e.ID, p, werrs[i])
			case err != nil:
				p.state, p.since = doubtful, lo.now()
			default:
				p.state = waiting
			}
		}
	}
	lo.mu.Unlock()
	return err
}

// writePositions writes the outlog_pos records of the accepts in unindexed that are durable
// before d, and forgets each written (unless its id was accepted again meanwhile).
func (lo *LogOutbox) writePositions(d outlog.Pos) error {
	type indexed struct {
		id  string
		pos outlog.Pos
	}
	lo.mu.Lock()
	due := make([]indexed, 0, len(lo.unindexed))
	for id, pos := range lo.unindexed {
		if pos < d {
			due = append(due, indexed{id, pos})
		}
	}
	lo.mu.Unlock()
	for len(due) > 0 {
		n := min(len(due), histBatch)
		ops := make([]Op, n)
		for i, x := range due[:n] {
			ops[i] = Op{Key: logPosKey(x.id), Value: posBytes(x.pos), TTL: logPosTTL}
		}
		if err := lo.kv.Commit(context.Background(), ops...); err != nil {
			return err
		}
		lo.mu.Lock()
		for _, x := range due[:n] {
			if lo.unindexed[x.id] == x.pos {
				delete(lo.unindexed, x.id)
			}
		}
		lo.mu.Unlock()
		due = due[n:]
	}
	return nil
}

// found is a message's accept as read back: where it lies, its record and its slots.
type found struct {
	pos   outlog.Pos
	rec   []byte
	slots [][]byte
}

// resolve finds message id's accept: pending here, by the position its id names, or by its
// outlog_pos record. domain.ErrRecordNotFound when none is an accept of that id.
func (lo *LogOutbox) resolve(id string) (found, error) {
	return lo.resolveFrom(id, func() ([]byte, error) { return lo.kv.Get(logPosKey(id)) })
}

// resolveFrom is resolve with its outlog_pos record read by stored (only when needed).
func (lo *LogOutbox) resolveFrom(id string, stored func() ([]byte, error)) (found, error) {
	if id == "" {
		return found{}, domain.ErrRecordNotFound
	}
	lo.mu.Lock()
	var cands []outlog.Pos
	if p := lo.pending[id]; p != nil {
		cands = append(cands, p.pos)
	}
	if pos, ok := lo.unindexed[id]; ok {
		cands = append(cands, pos)
	}
	lo.mu.Unlock()
	if p, _, ok := parseLogID(id, lo.log.End().Seg()); ok {
		cands = append(cands, p)
	}
	tried := false
	for {
		for _, p := range cands {
			f, err := lo.readAccept(p, id)
			if err == nil {
				return f, nil
			}
			if !errors.Is(err, domain.ErrRecordNotFound) {
				return found{}, err
			}
		}
		if tried {
			return found{}, domain.ErrRecordNotFound
		}
		tried = true
		v, err := stored()
		if errors.Is(err, domain.ErrRecordNotFound) {
			return found{}, err
		}
		if err != nil {
			return found{}, err
		}
		if len(v) != 8 {
			return found{}, fmt.Errorf("%w: %s/%s: %d bytes", domain.ErrRecordInvalid, logPosTable, id, len(v))
		}
		cands = []outlog.Pos{outlog.Pos(binary.LittleEndian.Uint64(v))}
	}
}

// readAccept reads the record at p with its slots: ErrRecordNotFound unless it is the accept
// of message id.
func (lo *LogOutbox) readAccept(p outlog.Pos, id string) (found, error) {
	rec, slots, err := lo.log.ReadSlots(p)
	switch {
	case errors.Is(err, outlog.ErrNotFound), errors.Is(err, outlog.ErrCorrupt):
		return found{}, domain.ErrRecordNotFound
	case err != nil:
		return found{}, err
	}
	if !acceptOf(rec, id) || len(slots) != acceptSlots {
		return found{}, domain.ErrRecordNotFound
	}
	if s := slots[slotOutcome]; s != nil && s[0] == recVoid {
		return found{}, domain.ErrRecordNotFound
	}
	return found{p, rec, slots}, nil
}

// acceptOf tells whether rec is the accept record of message id.
func acceptOf(rec []byte, id string) bool {
	if len(rec) < acceptHeader+1 || rec[0] != recAccept || len(rec) < bodyAt(rec)+1 || rec[bodyAt(rec)] != bodyVersion3 {
		return false
	}
	want := jsonenc.AppendString(append(make([]byte, 0, 40), `{"id":`...), id)
	b := rec[bodyAt(rec)+1:]
	return len(b) > len(want) && string(b[:len(want)]) == string(want) && b[len(want)] == ','
}

// slotPayload is a slot naming the record at p, of kind k, status st at ms.
func slotPayload(k byte, st domain.MessageStatus, ms domain.Millis, p outlog.Pos) []byte {
	b := make([]byte, outlog.SlotPayload)
	fillSlot(b, k, st, ms, p)
	return b
}

// fillSlot writes slotPayload's bytes into b (outlog.SlotPayload bytes, zeros): in place, for
// AppendSlotted. A slot is its record's kind, its status's rank (+2), a flag telling a
// cancellation from a failure (they share a rank; a slot written before the flag reads as
// failed), the status's time and the record's position.
func fillSlot(b []byte, k byte, st domain.MessageStatus, ms domain.Millis, p outlog.Pos) {
	b[0], b[1] = k, byte(domain.StatusRank(st)+2)
	if st == domain.MsgCancelled {
		b[2] = slotCancelled
	}
	binary.LittleEndian.PutUint64(b[4:12], uint64(ms))
	binary.LittleEndian.PutUint64(b[12:20], uint64(p))
}

// slotCancelled: the slot's status is a cancellation (a failure's rank).
const slotCancelled = 1

// slotStatus is the status and time a slot carries (fillSlot).
func slotStatus(s []byte) (domain.MessageStatus, domain.Millis) {
	at := domain.Millis(binary.LittleEndian.Uint64(s[4:12]))
	switch int(s[1]) - 2 {
	case -1:
		return domain.MsgScheduled, at
	case 0:
		return domain.MsgQueued, at
	case 1:
		return domain.MsgSent, at
	case 2:
		return domain.MsgDelivered, at
	case 3:
		return domain.MsgRead, at
	}
	if s[2] == slotCancelled {
		return domain.MsgCancelled, at
	}
	return domain.MsgFailed, at
}

// slotPos is the position of the record a slot names (0: the slot is empty).
func slotPos(s []byte) outlog.Pos {
	if len(s) != outlog.SlotPayload {
		return 0
	}
	return outlog.Pos(binary.LittleEndian.Uint64(s[12:20]))
}

// readLinked reads the record of kind k a slot names, with its accept's position apos: its
// bytes after the kind and the position; nil (no error) when that record is not readable or
// is not the slot's own (the slot then counts as empty).
func (lo *LogOutbox) readLinked(s []byte, k byte, apos outlog.Pos) ([]byte, error) {
	rec, err := lo.log.Read(slotPos(s))
	if errors.Is(err, outlog.ErrNotFound) {
		// Not readable yet: the writer writes a record and the slot naming it in one round
		// (AppendSlotted) and lets readers past the record at the round's end, so a reader
		// may see the slot first. (Or lost: an interval-mode power cut kept the slot and not
		// the record.) The slot reads as empty until then.
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s: the record a slot names at %v: %w", outboxTable, slotPos(s), err)
	}
	if len(rec) < 9 || rec[0] != k || outlog.Pos(binary.LittleEndian.Uint64(rec[1:9])) != apos {
		// Lost, and its position taken by a record written after the cut: an interval-mode
		// power cut kept the slot (an older page) and not the record (a newer page). The slot
		// reads as empty, as above; a boot or a read failing on it would hold every message.
		lo.logger.Load().Warn("a slot names a record that is not its own (lost in a power cut): read as empty",
			"pos", apos.String(), "names", slotPos(s).String())
		return nil, nil
	}
	return rec[9:], nil
}

// body decodes a found accept's body: the requeued one when its slot names one. It returns the
// Idempotency-Key's body hash, and the file holding its media ("": none; not read).
func (lo *LogOutbox) body(f found) (domain.OutboxEntry, string, string, error) {
	data := f.rec[bodyAt(f.rec):]
	if s := f.slots[slotRequeue]; s != nil {
		q, err := lo.readLinked(s, recRequeue, f.pos)
		if err != nil {
			return domain.OutboxEntry{}, "", "", err
		}
		if q != nil {
			data = q
		}
	}
	e, hash, ref, err := decodeRef(data)
	if err != nil {
		return e, "", "", fmt.Errorf("%s at %v: %w", outboxTable, f.pos, err)
	}
	return e, hash, ref, nil
}

// Get returns a message as it stands: its body with its outcome and receipts laid over it, or
// the body alone while it is pending. domain.ErrRecordNotFound when there is none.
func (lo *LogOutbox) Get(id string) (domain.OutboxEntry, error) {
	f, err := lo.resolve(id)
	if err != nil {
		return orOlder(domain.OutboxEntry{}, err, lo.older, func(r OutboxReader) (domain.OutboxEntry, error) { return r.Get(id) })
	}
	e, _, ref, err := lo.body(f)
	if err != nil {
		return e, err
	}
	s := f.slots[slotOutcome]
	if s == nil {
		// Pending: its media is read, to be sent. A settled message's is not (its file is
		// removed once its outcome is durable; a status read needs none of it).
		return e, lo.loadMedia(&e, ref)
	}
	data, err := lo.readLinked(s, recOutcome, f.pos)
	if err != nil {
		return e, err
	}
	if data == nil {
		// The outcome's record is not readable: being written (its slot seen first), or lost
		// in a power cut that kept its slot. Being written, the message stands as its body
		// says until the record is (under --fsync batch, synced: a failure or a cancellation
		// is told only once durable; review17 L2). Lost, the slot was written only once Settle
		// had the outcome, after its record: its status stands (the boot takes it as settled
		// too), without what the record alone held (the network's id, a failure's reason).
		if p := slotPos(s); p >= lo.log.Written() && p < lo.log.End() {
			return e, nil
		}
		st, at := slotStatus(s)
		e.SetStatus(st, at.Time())
	} else {
		var c outcome
		if _, err := Decode(data, statusVersion2, &c); err != nil {
			return e, fmt.Errorf("%s %q: outcome: %w", outboxTable, id, err)
		}
		c.apply(&e)
	}
	rs, err := lo.receipts(f)
	if err != nil {
		return e, err
	}
	for _, c := range rs {
		if e.SetStatus(c.Status, c.At.Time()) && c.Status == domain.MsgFailed {
			e.Code, e.Error = c.Code, c.Error
		}
		if c.Category != "" {
			e.Pricing = c.Category
		}
	}
	return e, nil
}

// Receipts returns the receipts recorded of message id on their own, furthest last.
func (lo *LogOutbox) Receipts(id string) ([]domain.StatusChange, error) {
	f, err := lo.resolve(id)
	if errors.Is(err, domain.ErrRecordNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return lo.receipts(f)
}

func (lo *LogOutbox) receipts(f found) ([]domain.StatusChange, error) {
	var rs []domain.StatusChange
	for _, i := range []int{slotDelivered, slotRead, slotFailed} {
		s := f.slots[i]
		if s == nil {
			continue
		}
		data, err := lo.readLinked(s, recReceipt, f.pos)
		if err != nil {
			return nil, err
		}
		if data == nil {
			continue
		}
		var c domain.StatusChange
		if _, err := Decode(data, 1, &c); err != nil {
			return nil, fmt.Errorf("%s at %v: receipt: %w", outboxTable, f.pos, err)
		}
		rs = append(rs, c)
	}
	sort.SliceStable(rs, func(i, j int) bool { return domain.StatusRank(rs[i].Status) < domain.StatusRank(rs[j].Status) })
	return rs, nil
}

// Idem returns the idempotency record idemID (a campaign's).
func (lo *LogOutbox) Idem(idemID string) (domain.IdemRecord, error) { return lo.idem.Get(idemID) }

// IdemOp is the write of an idempotency record, for a caller's own commit (a campaign's).
func (lo *LogOutbox) IdemOp(idemID string, rec domain.IdemRecord) (Op, error) {
	return lo.idem.PutTTLOp(idemID, rec, domain.IdempotencyTTL)
}

// IdemOf returns the idempotency record a message carries (its id is the one derived from the
// key), for domain.IdempotencyTTL after its accept; domain.ErrRecordNotFound otherwise.
func (lo *LogOutbox) IdemOf(messageID string) (domain.IdemRecord, error) {
	f, err := lo.resolve(messageID)
	if err != nil {
		return orOlder(domain.IdemRecord{}, err, lo.older, func(r OutboxReader) (domain.IdemRecord, error) { return r.IdemOf(messageID) })
	}
	return lo.idemOf(f)
}

// IdemFind looks up, together, the idempotency records the messages ids carry (IdemOf each)
// and the record idemID of its own (Idem), and returns the first of them, in that order, that
// keep accepts (an empty id has none), or domain.ErrRecordNotFound. Every record the look-up
// of a never-used key reads in the records' store (each id's outlog_pos, idemID's record) is
// read in one read transaction (issue 32: one each, three or four a send with an
// Idempotency-Key, was a fifth of such a send's CPU, half of it each transaction's set-up).
// On a store without that read, or with an older outbox to ask as well, it answers
// errors.ErrUnsupported and the caller reads one by one.
func (lo *LogOutbox) IdemFind(ids []string, idemID string, keep func(domain.IdemRecord) bool) (domain.IdemRecord, error) {
	rm, ok := lo.kv.(manyReader)
	if !ok || lo.older != nil {
		return domain.IdemRecord{}, errors.ErrUnsupported
	}
	keys := make([][]byte, 0, len(ids)+1)
	for _, id := range ids {
		var k []byte // an empty id reads nothing
		if id != "" {
			k = logPosKey(id)
		}
		keys = append(keys, k)
	}
	if idemID != "" {
		keys = append(keys, lo.idem.key(idemID))
	}
	vals, err := rm.readMany(keys)
	if err != nil {
		return domain.IdemRecord{}, err
	}
	for i, id := range ids {
		f, err := lo.resolveFrom(id, func() ([]byte, error) {
			if vals[i] == nil {
				return nil, domain.ErrRecordNotFound
			}
			return vals[i], nil
		})
		if errors.Is(err, domain.ErrRecordNotFound) {
			continue
		}
		if err != nil {
			return domain.IdemRecord{}, err
		}
		switch rec, err := lo.idemOf(f); {
		case err == nil && keep(rec):
			return rec, nil
		case err != nil && !errors.Is(err, domain.ErrRecordNotFound):
			return domain.IdemRecord{}, err
		}
	}
	if idemID != "" {
		if v := vals[len(vals)-1]; v != nil {
			rec, err := lo.idem.value(idemID, v)
			if err != nil {
				return domain.IdemRecord{}, err
			}
			if keep(rec) {
				return rec, nil
			}
		}
	}
	return domain.IdemRecord{}, domain.ErrRecordNotFound
}

// manyReader is a store that reads many keys in one read transaction (Badger's readMany).
type manyReader interface {
	readMany(keys [][]byte) ([][]byte, error)
}

// idemOf is the idempotency record the accept f carries, for domain.IdempotencyTTL after it.
func (lo *LogOutbox) idemOf(f found) (domain.IdemRecord, error) {
	e, hash, err := decodeBody(f.rec[bodyAt(f.rec):])
	if err != nil {
		return domain.IdemRecord{}, err
	}
	if hash == "" || lo.now().Sub(e.CreatedAt.Time()) > domain.IdempotencyTTL {
		return domain.IdemRecord{}, domain.ErrRecordNotFound
	}
	return domain.IdemRecord{BodyHash: hash, MessageID: e.ID, At: e.CreatedAt}, nil
}

// Settle records a network outcome in the background: its record, then its accept's slot 0 in
// the same round of the log's writer (AppendSlotted); done is called once both are written (the message then leaves pending).
func (lo *LogOutbox) Settle(e domain.OutboxEntry, done func(error)) {
	// What the answer needs, taken out of e into a record kept for reuse (settleCall): a
	// closure over e would move the whole entry to the heap, and any closure is an allocation
	// a message.
	st, at := e.Status, e.UpdatedAt
	lo.mu.Lock()
	var (
		apos  outlog.Pos
		media string
	)
	if p := lo.pending[e.ID]; p != nil {
		apos, media = p.pos, p.media
		if p.state != settling {
			p.state = settling
		}
	}
	c := lo.newSettle()
	lo.mu.Unlock()
	c.lo, c.id, c.done = lo, e.ID, done
	lo.queued.add(1)
	if apos == 0 {
		f, err := lo.resolve(e.ID)
		if err != nil {
			c.finish(0, err)
			return
		}
		apos = f.pos
		// Its media file, if any: one its body cannot name is left to the next boot's sweep.
		_, _, media, _ = lo.body(f)
	}
	c.media = media
	// Room for a sent outcome's record as a rule (about 150 bytes): one allocation, not the
	// growth of a small one field by field. AppendSlotted copies it.
	var buf [320]byte
	rec := binary.LittleEndian.AppendUint64(append(buf[:0], recOutcome), uint64(apos))
	rec = appendOutcome(rec, &e)
	lo.log.AppendSlotted(rec, apos, slotOutcome, func(op outlog.Pos, dst []byte) {
		fillSlot(dst, recOutcome, st, at, op)
	}, c.fn)
}

// settleCall is an outcome's write in flight: the message and the caller's done, with finish
// bound once as fn (LogOutbox keeps these for reuse).
type settleCall struct {
	lo    *LogOutbox
	id    string
	media string // the file holding the message's media ("": none)
	done  func(error)
	fn    func(outlog.Pos, error)
}

// finish answers the outcome's write: the message leaves pending once it is written, and its
// media file goes once the outcome is durable.
func (c *settleCall) finish(op outlog.Pos, err error) {
	lo, id, media, done := c.lo, c.id, c.media, c.done
	c.lo, c.id, c.media, c.done = nil, "", "", nil
	lo.mu.Lock()
	if err == nil && op != 0 {
		lo.dropMedia(op, media)
	}
	if p := lo.pending[id]; p != nil && p.state == settling {
		if err == nil {
			if p.mark != unmarked {
				lo.unmark = append(lo.unmark, id)
			}
			lo.remember(id, p.pos)
			lo.dropPending(id, p)
		} else {
			p.state = waiting
		}
	}
	if len(lo.freeSettle) < freeMax {
		lo.freeSettle = append(lo.freeSettle, c)
	}
	lo.mu.Unlock()
	done(err)
	lo.queued.add(-1)
}

// newSettle is a settleCall, reused when one is kept. mu held.
func (lo *LogOutbox) newSettle() *settleCall {
	if k := len(lo.freeSettle); k > 0 {
		c := lo.freeSettle[k-1]
		lo.freeSettle = lo.freeSettle[:k-1]
		return c
	}
	c := &settleCall{}
	c.fn = c.finish
	return c
}

// newPending is a pending record holding v, reused when one is kept. mu held.
//
// The new record is made with new, not as &v: v's address taken moves v to the heap at
// every call (newPending is inlined into its callers), so a kept record saved nothing and
// each accept allocated one.
func (lo *LogOutbox) newPending(v logPending) *logPending {
	var p *logPending
	if k := len(lo.freePending); k > 0 {
		p = lo.freePending[k-1]
		lo.freePending = lo.freePending[:k-1]
		v.accepted = p.accepted // bound to p
	} else {
		p = new(logPending)
	}
	*p = v
	return p
}

// dropPending removes message id's pending record p and keeps it for reuse: nothing holds it
// outside mu. mu held.
func (lo *LogOutbox) dropPending(id string, p *logPending) {
	delete(lo.pending, id)
	if len(lo.freePending) < freeMax {
		*p = logPending{accepted: p.accepted}
		lo.freePending = append(lo.freePending, p)
	}
}

// settledAccept is a slot of LogOutbox.settled: an accept's position and its id's random bits
// (none: pos 0).
type settledAccept struct {
	pos outlog.Pos
	rnd uint32
}

// settledSlot is the slot of LogOutbox.settled for an id whose position bits are v.
func settledSlot(v uint64) int { return int((v * 0x9E3779B97F4A7C15) >> (64 - settledBits)) }

// remember keeps a settled message's accept position for the receipts that follow. mu held.
func (lo *LogOutbox) remember(id string, p outlog.Pos) {
	if v, rnd, ok := idBits(id); ok && v == posBits(p) {
		lo.settled[settledSlot(v)] = settledAccept{pos: p, rnd: rnd} // the id is all in it
		return
	}
	if len(lo.recent[0]) >= recentMax {
		old := lo.recent[1]
		clear(old) // its room is kept: no new map a generation
		lo.recent[1], lo.recent[0] = lo.recent[0], old
	}
	lo.recent[0][id] = p
}

// known is the accept position of message id when this process knows its accept written
// (pending with its write answered, or settled lately); 0 otherwise: no read needed. An
// accept still being written, or whose write failed, may lie nowhere (a failed write is cut
// off and the next record takes its place): resolve reads it.
func (lo *LogOutbox) known(id string) outlog.Pos {
	lo.mu.Lock()
	defer lo.mu.Unlock()
	if p := lo.pending[id]; p != nil {
		if p.state == waiting || p.state == settling {
			return p.pos
		}
		if p.state == accepting && p.acc == (outlog.Ticket{}) && p.pos != 0 && p.pos < lo.log.Written() {
			// An accept answered on the log's writer (queueAccept's answered), written, whose
			// callback (accepted) has not run yet: its caller may be back already. A cut one
			// is dropped by that callback before the writer writes anything at its position.
			return p.pos
		}
		return 0
	}
	if v, rnd, ok := idBits(id); ok {
		if s := lo.settled[settledSlot(v)]; s.pos != 0 && s.rnd == rnd && posBits(s.pos) == v {
			return s.pos
		}
	}
	if p, ok := lo.recent[0][id]; ok {
		return p
	}
	return lo.recent[1][id]
}

// receiptSlot is the slot a receipt of status st takes.
func receiptSlot(st domain.MessageStatus) int {
	switch st {
	case domain.MsgDelivered:
		return slotDelivered
	case domain.MsgRead:
		return slotRead
	}
	return slotFailed
}

// Receipt records a receipt in the background: its record, then its accept's slot, in one
// round of the log's writer.
func (lo *LogOutbox) Receipt(id string, c domain.StatusChange, done func(error)) {
	lo.queued.add(1)
	rc, _ := receiptCalls.Get().(*receiptCall) // no closure a receipt
	if rc == nil {
		rc = &receiptCall{}
		rc.fn = rc.finish
	}
	rc.lo, rc.done = lo, done
	finish := rc.fn
	apos := lo.known(id)
	if apos == 0 {
		f, err := lo.resolve(id)
		if errors.Is(err, domain.ErrRecordNotFound) && lo.older != nil {
			// Sent before a switch of --outbox: its receipt goes where it is (outbox_older.go),
			// still counted here (Flush waits for it).
			lo.older.Receipt(id, c, func(err error) { finish(0, err) })
			return
		}
		if err != nil {
			finish(0, err)
			return
		}
		apos = f.pos
	}
	rec := appendReceipt(binary.LittleEndian.AppendUint64(append(make([]byte, 0, 96), recReceipt), uint64(apos)), &c)
	lo.log.AppendSlotted(rec, apos, receiptSlot(c.Status), func(rp outlog.Pos, dst []byte) {
		fillSlot(dst, recReceipt, c.Status, c.At, rp)
	}, finish)
}

// receiptCall is a receipt's write in flight: the caller's done, with finish bound once as fn,
// pooled.
type receiptCall struct {
	lo   *LogOutbox
	done func(error)
	fn   func(outlog.Pos, error)
}

var receiptCalls sync.Pool

func (c *receiptCall) finish(_ outlog.Pos, err error) {
	lo, done := c.lo, c.done
	c.lo, c.done = nil, nil
	receiptCalls.Put(c)
	done(err)
	lo.queued.add(-1)
}

// appendReceipt appends a receipt's record body (version 1: the domain.StatusChange's JSON, as
// Encode(1, c) writes it) written by hand: one a receipt, Encode's reflection cost more than the
// rest of the receipt's path (TestAppendReceipt holds them equal).
func appendReceipt(b []byte, c *domain.StatusChange) []byte {
	b = jsonenc.AppendString(append(b, 1, '{', '"', 's', 't', 'a', 't', 'u', 's', '"', ':'), c.Status)
	b = strconv.AppendInt(append(b, `,"at":`...), int64(c.At), 10)
	b = jsonenc.AppendField(b, `,"category":`, c.Category)
	b = jsonenc.AppendField(b, `,"code":`, c.Code)
	b = jsonenc.AppendField(b, `,"error":`, c.Error)
	return append(b, '}')
}

// Flush waits for the outcomes and receipts being written.
func (lo *LogOutbox) Flush() { lo.queued.wait() }

// Requeue writes a queued message's body again (a waiting message released to the session
// its contact wrote to): a requeue record its accept's slot names.
func (lo *LogOutbox) Requeue(_ context.Context, e domain.OutboxEntry) error {
	f, err := lo.resolve(e.ID)
	if err != nil {
		return err
	}
	cur, hash, ref, err := lo.body(f)
	if err != nil {
		return err
	}
	e.UserID, e.CreatedAt = cur.UserID, cur.CreatedAt
	if len(e.Message.Data) == 0 {
		ref = "" // its media, if any, is no longer the accept's
	}
	// The media is the accept's: its file is named again, never written a second time.
	b, size := bodyOf(e, hash, ref)
	rec := binary.LittleEndian.AppendUint64(append(make([]byte, 0, 10+size), recRequeue), uint64(f.pos))
	rec, err = appendBody(append(rec, bodyVersion3), &b)
	if err != nil {
		return err
	}
	qp, err := lo.log.Append(rec)
	if err != nil {
		return err
	}
	if f.rec[1]&acceptChained == 0 {
		// An accept of the layout before the chain: its Badger history entry names the
		// session it goes by now (a chained accept's listing reads its requeue).
		if op, ok, err := historyOp(&e); err != nil {
			return err
		} else if ok {
			if err := lo.kv.Commit(context.Background(), op); err != nil {
				return err
			}
		}
	}
	ch := make(chan error, 1)
	lo.log.WriteSlot(f.pos, slotRequeue, slotPayload(recRequeue, domain.MsgQueued, e.CreatedAt, qp), func(err error) { ch <- err })
	return <-ch
}

// pendingIDs lists the ids pending here (tests).
func (lo *LogOutbox) pendingIDs() []string {
	lo.mu.Lock()
	defer lo.mu.Unlock()
	ids := make([]string, 0, len(lo.pending))
	for id := range lo.pending {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}
