package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gateway/gateway/actors/session"
	"github.com/gateway/gateway/domain"
)

// EventSink is where the core's events go (the Events facet): prepared, committed in batches,
// then handed to their subscriptions once durable.
type EventSink interface {
	Prepare(uid string, ev domain.Event) (PreparedEvent, error)
	Commit(ctx context.Context, ps []PreparedEvent) error
	Committed(p PreparedEvent)
	ReceiveMessage(ctx context.Context, m domain.InboundMessage) error
}

var _ EventSink = (*Events)(nil)

// publisher turns the core's changes (message statuses, sessions, campaigns, store events) into
// events, in the order they happened: one goroutine takes them from a queue, prepares each (its
// place in every subscription's order is fixed then), commits a batch in one group commit and
// only then hands them on. The core never waits for a subscriber; an event is durable within
// milliseconds of the change it reports (a kill -9 in between loses only those milliseconds'
// events; the changes themselves are durable already), except for the changes whose record
// waits for their events (publishThen: a message's outcome and receipts, a reaction), which a
// kill -9 in between leaves unrecorded, to be reported again.
type publisher struct {
	sink EventSink
	log  interface{ Warn(string, ...any) }
	ch   chan pub
	done chan struct{}
	// ctx is the commits' context: stop cancels it when its own ends, so a store that keeps
	// refusing (a fenced partition's view) no longer holds the engine's stop.
	ctx    context.Context
	cancel context.CancelFunc
	// mu guards closed against ch's close: work the actors started on goroutines of their own
	// (a campaign's send in flight) may report a change after Stop (a cluster node stopping a
	// partition, a shutdown past its deadline); its event is dropped, not a panic.
	mu     sync.RWMutex
	closed bool
	// quiet, when the sink can tell, says that nothing would take a user's event now (no
	// webhook subscription, stream, journal or broker): a message's status events are then
	// not even built (three per message on the send path, for nobody).
	quiet func(uid string) bool
}

type pub struct {
	uid string
	ev  domain.Event
	// then, when set, is told once the event is durable (nil) or will not be (publishThen).
	then func(error)
}

// publishBatch is the most events one commit carries.
const publishBatch = 512

// publishQueue is the events queue of a gateway's engine: a change waits for room beyond it
// (storage refusing commits for a while). A partition's engine gets its share of it, at least
// publishQueueLeast: the queue's buffer is marked whole on every garbage collection, full or
// not, and a partition takes its share of the changes.
const publishQueue, publishQueueLeast = 4096, 256

func newPublisher(sink EventSink, log interface{ Warn(string, ...any) }, queue int) *publisher {
	p := &publisher{sink: sink, log: log, ch: make(chan pub, queue), done: make(chan struct{})}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	if q, ok := sink.(interface{ Quiet(uid string) bool }); ok {
		p.quiet = q.Quiet
	}
	go p.run()
	return p
}

// publish queues an event (nil publisher: events are off).
func (p *publisher) publish(uid string, ev domain.Event) { p.publishThen(uid, ev, nil) }

// errEventDropped tells publishThen's then that its event was not committed (the engine
// stopped first).
var errEventDropped = fmt.Errorf("%w: the engine stopped before the event was committed", domain.ErrUnavailable)

// publishThen is publish telling then (when set) once the event is durable, or with an error
// once it will not be: at once when events are off. then runs on the publisher's goroutine
// and must not block. A change whose record must not outlive a lost event (a receipt, a
// reaction: their network sends them again only while unacknowledged) is written from then.
func (p *publisher) publishThen(uid string, ev domain.Event, then func(error)) {
	if p == nil || uid == "" {
		if then != nil {
			then(nil)
		}
		return
	}
	if ev.At.IsZero() {
		ev.At = time.Now()
	}
	p.mu.RLock()
	defer p.mu.RUnlock()
	if p.closed {
		p.log.Warn("events: a change reported after the engine stopped; its event is dropped", "type", ev.Type, "user_id", uid)
		if then != nil {
			then(errEventDropped)
		}
		return
	}
	p.ch <- pub{uid: uid, ev: ev, then: then}
}

// message publishes a message.status event of e as it stands, unless nothing would take it.
// Whether something would is also what prepare decides on the publisher's goroutine a moment
// later: a subscription or a stream that starts in between gets the next event.
func (p *publisher) message(e *domain.OutboxEntry, status domain.MessageStatus, at time.Time) {
	p.messageThen(e, status, at, nil)
}

// messageThen is message telling then as publishThen does (at once when nothing takes it).
func (p *publisher) messageThen(e *domain.OutboxEntry, status domain.MessageStatus, at time.Time, then func(error)) {
	if !p.takes(e.UserID) {
		if then != nil {
			then(nil)
		}
		return
	}
	p.publishThen(e.UserID, messageEvent(*e, status, at), then)
}

// takes tells whether a message's status events of uid are published now (message and
// messageThen publish nothing otherwise): a caller that writes a record only once its events
// are committed writes it at once when they are not, and builds nothing to wait with.
func (p *publisher) takes(uid string) bool {
	return p != nil && uid != "" && (p.quiet == nil || !p.quiet(uid))
}

// drain waits, within ctx, until every event queued before it was committed (or dropped) and
// its then told: the records written once their events are (an outcome, a receipt) are then
// queued for their writer. The publisher goes on.
func (p *publisher) drain(ctx context.Context) {
	if p == nil {
		return
	}
	done := make(chan struct{})
	p.mu.RLock()
	if p.closed {
		p.mu.RUnlock()
		return
	}
	select {
	case p.ch <- pub{then: func(error) { close(done) }}: // no user: a mark, not an event
	case <-ctx.Done(): // the queue full, and storage refusing its commits
	}
	p.mu.RUnlock()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

func (p *publisher) run() {
	defer close(p.done)
	batch := make([]pub, 0, publishBatch)
	for first := range p.ch {
		batch = append(batch[:0], first)
	more:
		for len(batch) < publishBatch {
			select {
			case x, ok := <-p.ch:
				if !ok {
					break more
				}
				batch = append(batch, x)
			default:
				break more
			}
		}
		preps := make([]PreparedEvent, 0, len(batch))
		for _, b := range batch {
			if b.uid == "" {
				continue // drain's mark
			}
			pe, err := p.sink.Prepare(b.uid, b.ev)
			if err != nil {
				p.log.Warn("events: prepare", "type", b.ev.Type, "err", err)
				continue
			}
			preps = append(preps, pe)
		}
		committed := p.commit(preps)
		if committed {
			for _, pe := range preps {
				p.sink.Committed(pe)
			}
		}
		for _, b := range batch {
			switch {
			case b.then == nil:
			case committed:
				b.then(nil) // an event that failed to prepare is one nothing takes
			default:
				b.then(errEventDropped)
			}
		}
	}
}

// commit commits a batch: storage may be full or failing for a while, so it retries, in order,
// until storage takes it or stop gave up waiting (false: the batch is dropped).
func (p *publisher) commit(preps []PreparedEvent) bool {
	for wait := 50 * time.Millisecond; ; wait = min(2*wait, 5*time.Second) {
		err := p.sink.Commit(p.ctx, preps)
		if err == nil {
			return true
		}
		if errors.Is(err, domain.ErrRecordInvalid) {
			p.log.Warn("events: refused by storage, dropped", "events", len(preps), "err", err)
			return true
		}
		if p.ctx.Err() != nil {
			p.log.Warn("events: the engine stopped before they were committed, dropped", "events", len(preps), "err", err)
			return false
		}
		p.log.Warn("events: commit", "events", len(preps), "err", err, "retry_in", wait)
		select {
		case <-p.ctx.Done():
		case <-time.After(wait):
		}
	}
}

// stop publishes what is queued and returns, within ctx: past it, what is not committed yet is
// dropped (as a kill -9 would drop it; the changes it reports are durable already).
func (p *publisher) stop(ctx context.Context) {
	if p == nil {
		return
	}
	// A change waiting for room in a full queue holds mu's read lock until a commit makes
	// room: past ctx the commits end (the batch is dropped), or the lock below never came.
	defer context.AfterFunc(ctx, p.cancel)()
	p.mu.Lock()
	if !p.closed {
		p.closed = true
		close(p.ch)
	}
	p.mu.Unlock()
	select {
	case <-p.done:
	case <-ctx.Done():
		p.cancel() // the commit in flight and the rest end at once
		<-p.done
	}
	p.cancel()
}

// messageEvent is a message.status event of an entry as it stands.
func messageEvent(e domain.OutboxEntry, status domain.MessageStatus, at time.Time) domain.Event {
	d := domain.MessageStatusData{MessageID: e.ID, To: e.Message.To, SessionID: e.SessionID, Status: status, At: at.UTC(),
		LID: e.LID, Type: string(e.Message.Kind), Accepted: e.CreatedAt}
	if domain.IsGroup(e.Message.To) {
		d.Group = e.Message.To
	} else {
		d.Phone = e.Message.To
	}
	if status == domain.MsgFailed || status == domain.MsgCancelled {
		d.Code, d.Error = e.Code, e.Error
	}
	if status == domain.MsgQueued && e.Waiting {
		d.Code = domain.CodeWaitingForContact
	}
	d.Via, d.ViaReason, d.Pricing = e.Via, e.ViaReason, e.Pricing
	return domain.Event{Type: domain.EventMessageStatus, At: at, Data: d}
}

// sessionEvents publishes a session's status changes (session.Events).
type sessionEvents struct{ p *publisher }

func (s sessionEvents) SessionChanged(st domain.Session) {
	d := domain.SessionStatusData{SessionID: st.ID, Status: st.ClientStatus(), Reason: st.StatusReason, Phone: st.Phone}
	if st.Status == domain.StatusConnected {
		d.Reason = ""
	}
	if !st.Until.IsZero() {
		u := st.Until.UTC()
		d.Until = &u
	}
	if !st.TimelockUntil.IsZero() {
		u := st.TimelockUntil.UTC()
		d.RestrictedUntil = &u
	}
	s.p.publish(st.AssignedTo, domain.Event{Type: domain.EventSessionStatus, Data: d})
}

func (s sessionEvents) SessionWarning(st domain.Session, reason string, until time.Time) {
	d := domain.SessionWarningData{SessionID: st.ID, Reason: reason, Until: until.UTC()}
	s.p.publish(st.AssignedTo, domain.Event{Type: domain.EventSessionWarning, Data: d})
}

var _ session.Events = sessionEvents{}
