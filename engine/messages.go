package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gateway/gateway/actors/account"
	"github.com/gateway/gateway/domain"
)

// SendRequest is one message to accept for a user (DESIGN.md section 3, flow 1).
type SendRequest struct {
	UserID    string
	SessionID string // "" = the user's default session; else it must be assigned to the user
	Origin    string // api, dashboard, campaign:<id>, store:<shop>
	// Message: To must be normalised digits. ID "" = a new one; a caller-chosen id (a campaign's
	// number, a store event, an Idempotency-Key) makes the accept idempotent: a message that
	// exists already is answered as it stands and not queued again.
	Message domain.Message
	// Idem, when IdemID is set, is committed with the outbox entry (Idempotency-Key): its body
	// hash, in the message's one record (the message's id is the one derived from the key).
	IdemID string
	Idem   domain.IdemRecord
	// Reserved: the caller holds this message's allowance already (a campaign's batch). When
	// the message is not accepted (an error), it stays the caller's (a campaign tries the same
	// number again); the caller gives it back if it will not.
	Reserved *Reservation
	// Wait is how long to wait for the network's outcome (0 = answer once queued).
	Wait time.Duration
	// SendAt accepts the message for later (DESIGN.md section 18; zero: now): scheduled until
	// then (later.go). Checked with SendAtLimits.
	SendAt time.Time
	// Transactional sends to a phone on the suppression list (the recipient asked for this
	// message); without it such a send is refused with domain.ErrOptedOut.
	Transactional bool
	// Trace, when set, is given when the accept's steps began (sendtrace.go).
	Trace *SendTrace
}

// Messages is the message facet: accepting a message (Send), reading one back (Get), the
// Idempotency-Keys of v1 POSTs, and the monthly allowance every send reserves from (one account
// actor per user, allowance.go). Its in-flight messages are msgs.
type Messages struct {
	e            *Engine
	msgs         *messages
	accounts     registry[string, *accountEntry]
	accountTable account.Store
	idem         idempotency
	history      MessageHistory
	later        *later   // the messages accepted for later (later.go)
	notes        notes    // what happened to each message after it was written (conversations.go)
	revoking     sync.Map // uid\x00id of the messages a Delete is revoking now (conversations.go)
	lids         lidMap   // the LIDs the network gave for numbers
	renewMu      sync.Mutex
	renewal      *time.Timer // the daily Renew of queued bodies (nil once stopped)
	checkpoints  *time.Timer // the outbox's Checkpoint (nil once stopped)
}

// messages is the Messages facet's state: it accepts messages into the durable outbox, hands
// them to their session's deliverer, and takes their outcomes back (session.Deliveries). It owns
// each in-flight message's reservation and its waiters.
type messages struct {
	e      *Engine
	outbox Outbox
	// mints: the outbox makes a new message's id in its Accept (persist.LogOutbox: the id says
	// where the message's record is), so Send leaves it empty.
	mints  bool
	shards []pendingShard
	depth  atomic.Int64 // accepted, no network outcome yet (gateway_outbox_pending)
	// resumedLeft: messages a boot sends again whose outcome has not asked wasResumed yet.
	resumedLeft atomic.Int64
	// again: the failures and cancellations whose record failed, recorded again (messages_told.go)
	again recordAgain
}

type pendingShard struct {
	mu sync.Mutex
	m  map[string]*pending
	// recent are the last messages whose outcome became durable, kept (without their body)
	// for the receipts that follow at once: each would read the message back from storage.
	recent     [recentPerShard]string
	recentNext int
}

// pendingShards shards a gateway's in-flight messages; each shard keeps its last recentPerShard
// settled messages, 4,096 in all (about 1 MB). A partition's engine (Config.Partitions) has its
// share of the shards, so of the messages kept: what it keeps lasts as long, at its share of the
// rate, and a node of 64 partitions keeps 4,096, not 262,144 (most of a 250-300 MB live heap
// of small objects that the garbage collector marked on every cycle).
const pendingShards, recentPerShard = 64, 64

// keep remembers a durable message, forgetting the oldest one kept. Called with mu held.
func (sh *pendingShard) keep(id string) {
	if old := sh.recent[sh.recentNext]; old != "" {
		if p := sh.m[old]; p != nil && p.durable {
			delete(sh.m, old)
		}
	}
	sh.recent[sh.recentNext] = id
	sh.recentNext = (sh.recentNext + 1) % recentPerShard
}

// pending is one accepted message without an outcome.
type pending struct {
	res     *Reservation
	resv    Reservation            // where Send's reservation is (res points here then): no allocation of its own
	hist    [2]domain.StatusChange // where Send's entry's history lies (queuedEntry's room): the same
	waiters []chan outcome
	// receipts that came before the outcome: folded into it and reported after it, in order
	// (each is its own record already when its network waits for it: receiptOf).
	early []domain.StatusChange
	// settled: the outcome is known and being written; entry is the message as it stands
	// until that write lands (a receipt or a wait then reads it here, not from storage).
	settled bool
	entry   domain.OutboxEntry
	// durable: the outcome is written; entry (without its body) is kept a little for the
	// receipts (pendingShard.keep), and nothing else reads it.
	durable bool
	// late: the network failed the message (after taking it) before its outcome was known.
	late *lateFailure
	// resumed: a boot sends it again; receipts that came before the last process had its
	// outcome may be recorded on their own (receiptOf), and its outcome folds them in.
	resumed bool
	// unrecorded: settled failed or cancelled, and its record failed: kept (not durable) until
	// it is recorded again (recordAgain; a cancellation tried again: cancelling).
	unrecorded bool
	// lid: the recipient's LID as the LID map held it at the accept (Send's record; set
	// before the record is tracked, never after): an outcome with the same LID has nothing
	// to tell the map (Outcome).
	lid string
	// minted: Send's record of a message whose id this process minted (NewMessageID, or the
	// outbox's): no record can hold it yet, and trackIn stores it without looking first.
	minted bool
}

type outcome struct {
	entry domain.OutboxEntry
	err   error
}

func newMessages(e *Engine, o Outbox, shards int) *messages {
	m := &messages{e: e, outbox: o, shards: make([]pendingShard, shards)}
	if mi, ok := o.(interface{ MintsIDs() bool }); ok {
		m.mints = mi.MintsIDs()
	}
	for i := range m.shards {
		m.shards[i].m = map[string]*pending{}
	}
	return m
}

func (m *messages) shard(id string) *pendingShard {
	var h uint32 = 2166136261
	for i := 0; i < len(id); i++ {
		h = (h ^ uint32(id[i])) * 16777619
	}
	return &m.shards[h%uint32(len(m.shards))]
}

// Send accepts a message: session resolved (assigned to the user, and linked), allowance
// reserved, ONE commit holding the outbox entry (and the Idempotency-Key's record), the entry
// handed to the session's deliverer. It answers once queued, or, with r.Wait, once the network's
// outcome is known or the wait is over (still queued then: not an error).
func (ms *Messages) Send(ctx context.Context, r SendRequest) (domain.OutboxEntry, error) {
	e := ms.e
	if err := ms.resolveRefs(&r); err != nil {
		return domain.OutboxEntry{}, err
	}
	way, def, err := ms.route(ctx, &r)
	if err != nil {
		return domain.OutboxEntry{}, err
	}
	var ent *sessionEntry
	if def != nil {
		ent, err = sendable(def) // the user's default session, as route read it
	} else {
		ent, err = e.Sessions.forSend(r.UserID, r.SessionID)
	}
	if err != nil {
		return domain.OutboxEntry{}, err
	}
	m := ms.msgs
	minted := r.Message.ID == ""
	if !minted {
		// A caller-chosen id: the message may exist already (a retry, a resumed campaign).
		if old, err := m.outbox.Get(r.Message.ID); err == nil {
			if r.Reserved != nil {
				r.Reserved.Release()
			}
			if old.UserID != r.UserID {
				return domain.OutboxEntry{}, fmt.Errorf("%w: message id %s", domain.ErrForbidden, r.Message.ID)
			}
			ms.resume(old) // an accept that seemed to fail may have stored it (messages_resume.go)
			return m.wait(ctx, old, r.Wait)
		} else if !errors.Is(err, domain.ErrRecordNotFound) {
			return domain.OutboxEntry{}, fmt.Errorf("%w: outbox: %w", domain.ErrUnavailable, err)
		}
	} else if !m.mints {
		r.Message.ID = NewMessageID()
	}
	if err := r.Message.CheckSizes(); err != nil {
		return domain.OutboxEntry{}, err
	}
	view := ent.view.Load()
	if until, ok := view.Unreachable[r.Message.To]; ok && e.now().Before(until) {
		// The network refused this recipient twice: nothing is charged, nothing queued.
		return domain.OutboxEntry{}, fmt.Errorf("%w: it was refused until %s unless it writes to the session first",
			domain.ErrRecipientNotReachable, until.UTC().Format(time.RFC3339))
	}
	at := e.now() // the accept's clock read, shared with its reservation
	now := at.UTC()
	sendAt, err := SendAtLimits(r.SendAt, now)
	if err != nil {
		return domain.OutboxEntry{}, err
	}
	// A customer who opted out gets no new message (an edit, a revoke or a reaction is about
	// one they have) unless it is transactional.
	if k := r.Message.Kind; !r.Transactional && k.Charged() && k != domain.KindReaction && e.OptOuts.Has(r.UserID, r.Message.To) {
		return domain.OutboxEntry{}, fmt.Errorf("%w (%s)", domain.ErrOptedOut, r.Message.To)
	}
	// The message's record, made first: a reservation taken here goes into it (one allocation,
	// not two), unless the message waits for later (its reservation is kept until then, the
	// record not).
	p := &pending{minted: minted}
	into := &p.resv
	if !sendAt.IsZero() {
		into = nil
	}
	res := r.Reserved
	if t := r.Trace; t != nil {
		// On the wall clock, the accept's own read (a few hundred ns earlier, the opt-out check
		// between): a clock read is 0.1-0.2 µs of a send under load (bench/README.md, seventeenth
		// pass). A test clock may stand still: the monotonic clock then.
		t.Reserve = at
		if !e.wallClock {
			t.Reserve = time.Now()
		}
	}
	switch {
	case res != nil:
	case !r.Message.Kind.Charged():
		res = ms.adoptInto(into, r.UserID, 0) // an edit or a revoke: the message it changes was counted
	default:
		if res, err = ms.reserve(ctx, r.UserID, 1, ReserveOpts{at: at, into: into}); err != nil {
			return domain.OutboxEntry{}, err
		}
	}
	// The entry is made in its pending record's (unused until its outcome) and copied out
	// once accepted: the outbox takes it by pointer through an interface, which moved a
	// local entry (768 bytes) to the heap for every message, beside the record.
	pe := &p.entry
	*pe = queuedEntry(r.Message, view, r.UserID, r.Origin, now, p.hist[:0])
	if !sendAt.IsZero() {
		*pe = scheduledEntry(r.Message, view, r.UserID, r.Origin, now, sendAt)
	}
	pe.Transactional = r.Transactional
	pe.LID = ms.lids.get(pe.Message.To)
	p.lid = pe.LID
	way.apply(pe)
	idemHash := ""
	if r.IdemID != "" {
		idemHash = r.Idem.BodyHash
	}
	if t := r.Trace; t != nil {
		t.Commit = time.Now()
	}
	err = m.outbox.Accept(ctx, pe, idemHash)
	if t := r.Trace; t != nil {
		t.Committed = time.Now()
	}
	entry := *pe
	*pe = domain.OutboxEntry{} // the record holds no entry until its outcome
	if err != nil {
		if r.Reserved == nil {
			res.Release()
		}
		return domain.OutboxEntry{}, acceptErr(err)
	}
	if !sendAt.IsZero() {
		ms.scheduled(entry, res)
		return entry, nil // nothing to wait for before its time
	}
	var ch chan outcome
	if r.Wait > 0 {
		ch = make(chan outcome, 1)
	}
	ms.enqueueIn(p, ent, entry, res, ch, now)
	if ch == nil {
		return entry, nil
	}
	return m.await(ctx, entry, ch, r.Wait)
}

// enqueue hands an accepted (committed) entry on: its reservation and waiter tracked, its
// queued status published, the entry given to its session's deliverer.
func (ms *Messages) enqueue(ent *sessionEntry, entry domain.OutboxEntry, res *Reservation, ch chan outcome, now time.Time) {
	ms.enqueueIn(nil, ent, entry, res, ch, now)
}

// enqueueIn is enqueue tracking the message in record p (nil: a new one).
func (ms *Messages) enqueueIn(p *pending, ent *sessionEntry, entry domain.OutboxEntry, res *Reservation, ch chan outcome, now time.Time) {
	ms.msgs.trackIn(p, entry.ID, res, ch)
	ms.e.pub.message(&entry, domain.MsgQueued, now)
	ms.push(ent, entry)
}

// push gives a queued entry to its session's deliverer, or to Routing to wait for its contact
// to write (routing.go) when it waits.
func (ms *Messages) push(ent *sessionEntry, entry domain.OutboxEntry) {
	if entry.Waiting {
		ms.e.Routing.wait(entry)
		return
	}
	ent.queue.Push(entry)
}

// track registers an accepted message's reservation (and a waiter); false when it was tracked
// already (res then goes back).
func (m *messages) track(id string, res *Reservation, ch chan outcome) bool {
	return m.trackIn(nil, id, res, ch)
}

// trackIn is track with the record to keep when the message is new (nil: a new one; its entry
// zero).
func (m *messages) trackIn(np *pending, id string, res *Reservation, ch chan outcome) bool {
	sh := m.shard(id)
	sh.mu.Lock()
	var p *pending
	if np == nil || !np.minted {
		p = sh.m[id] // a minted id is in no record: one map lookup a message fewer
	}
	fresh := p == nil || p.durable
	if fresh {
		if np == nil {
			np = &pending{}
		}
		p = np
		p.res = res
		sh.m[id] = p
		m.depth.Add(1)
	} else if res != nil && res != p.res {
		res.Release() // tracked twice (a retry racing its first accept): one reservation is enough
	}
	if ch != nil {
		p.waiters = append(p.waiters, ch)
	}
	sh.mu.Unlock()
	return fresh
}

// settling returns a message whose outcome is known and still being written.
func (m *messages) settling(id string) (domain.OutboxEntry, bool) {
	sh := m.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if p := sh.m[id]; p != nil && p.settled && !p.durable {
		return p.entry, true
	}
	return domain.OutboxEntry{}, false
}

// wait answers an existing message as it stands, or waits for its outcome while it is queued.
func (m *messages) wait(ctx context.Context, e domain.OutboxEntry, d time.Duration) (domain.OutboxEntry, error) {
	if e.Final() || d <= 0 {
		return e, failure(e)
	}
	ch := make(chan outcome, 1)
	sh := m.shard(e.ID)
	sh.mu.Lock()
	p := sh.m[e.ID]
	if p != nil && p.durable {
		p = nil // written: read from storage below
	}
	if p != nil && p.settled && !toldOnceRecorded(p.entry) {
		cur := p.entry
		sh.mu.Unlock()
		return cur, failure(cur)
	}
	if p != nil { // queued, or failed or cancelled and not recorded yet (told once it is: settled)
		p.waiters = append(p.waiters, ch)
	}
	sh.mu.Unlock()
	if p == nil {
		// Settled meanwhile: read it again.
		if cur, err := m.outbox.Get(e.ID); err == nil {
			return cur, failure(cur)
		}
		return e, nil
	}
	return m.await(ctx, e, ch, d)
}

func (m *messages) await(ctx context.Context, e domain.OutboxEntry, ch chan outcome, d time.Duration) (domain.OutboxEntry, error) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case o := <-ch:
		if o.err == errNotRecorded {
			return e, nil // as a wait that ran out: the outcome is not durable
		}
		return o.entry, o.err
	case <-t.C:
		return e, nil
	case <-ctx.Done():
		return e, nil
	}
}

// toldOnceRecorded says whether a settled message's status is told to those who wait for it
// only once its record is durable: failed or cancelled (Outcome).
func toldOnceRecorded(e domain.OutboxEntry) bool {
	return e.Status == domain.MsgFailed || e.Status == domain.MsgCancelled
}

// failure is a settled entry's error (nil unless it failed).
func failure(e domain.OutboxEntry) error {
	if e.Status != domain.MsgFailed {
		return nil
	}
	for _, known := range []*domain.Error{domain.ErrRecipientNotOnNetwork, domain.ErrRecipientNotReachable,
		domain.ErrSessionReassigned, domain.ErrSessionLoggedOut, domain.ErrSessionDeleted, domain.ErrOutsideServiceWindow,
		domain.ErrTemplateNotApproved, domain.ErrContactNeverWrote} {
		if e.Code == known.Code {
			return fmt.Errorf("%w: %s", known, e.Error)
		}
	}
	return fmt.Errorf("%w: %s", domain.ErrNetwork, e.Error)
}

// Message implements network.MessageSource: a message sent earlier, for the network's re-send
// requests (retry receipts). The outbox keeps every message, media included, 7 days.
func (m *messages) Message(_ context.Context, id string) (domain.Message, bool) {
	e, err := m.outbox.Get(id)
	if err != nil {
		return domain.Message{}, false
	}
	return e.Message, true
}

// Get returns one of the user's messages by id, with its history.
//
// A failure or a cancellation whose record is being written reads as the disk has the message
// until it is durable: told first, as a waiter would be (Outcome), a restart before the
// record would send the message again.
func (ms *Messages) Get(uid, id string) (domain.OutboxEntry, error) {
	cur, settling := ms.msgs.settling(id)
	if settling && cur.UserID == uid && !toldOnceRecorded(cur) {
		return cur, nil
	}
	m, err := ms.msgs.outbox.Get(id)
	switch {
	case errors.Is(err, domain.ErrRecordNotFound) || (err == nil && m.UserID != uid):
		return domain.OutboxEntry{}, fmt.Errorf("%w: %s", domain.ErrMessageNotFound, id)
	case err != nil:
		// The store cannot say (unavailable, the partition handed over): 503, never a 404 for
		// a message that may exist.
		return domain.OutboxEntry{}, fmt.Errorf("%w: message %s: %w", domain.ErrUnavailable, id, err)
	}
	if settling {
		return m, nil // as stored (a scheduled one taken back reads scheduled, not queued)
	}
	return ms.asItStands(m), nil
}

// asItStands is a message read from the outbox as it stands here: one accepted for later that
// was handed to its session's queue at its time reads as queued (nothing is written at that
// hand-over, later.go).
func (ms *Messages) asItStands(m domain.OutboxEntry) domain.OutboxEntry {
	if m.Status == domain.MsgScheduled && !ms.later.has(m.ID) && ms.msgs.tracked(m.ID) {
		m.SetStatus(domain.MsgQueued, m.SendAt.Time())
	}
	return m
}

// stored looks a message up in the outbox.
func (ms *Messages) stored(id string) (domain.OutboxEntry, bool) {
	m, err := ms.msgs.outbox.Get(id)
	return m, err == nil
}
