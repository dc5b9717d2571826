// Package engine is the application core: the gateway's use cases, as the facets of one
// Engine, over actors that own the gateway's state. It starts the hollywood actor engine,
// spawns and supervises every actor, and rebuilds them from storage at boot. The HTTP layer
// calls only the facets (eng.Keys.Authorize, eng.Messages.Send, ...).
//
// The facets, each a small type with the state it owns:
//
//   - Users (users.go): the user directory, ID-token sign-in, the admin's user management,
//     each user's plan.
//   - Keys (keys.go): API keys; one key actor per key (record and daily counter); the check of
//     a raw key on every v1 call.
//   - Sessions (sessions.go, sessions_own.go): messaging sessions; one session actor per
//     session (state machine, transport client, send queue); the session a send goes through.
//   - Messages (messages.go, batch.go, allowance.go, idempotency.go): accept, then deliver, through the
//     durable outbox; the monthly allowance (one account actor per user) that every send
//     reserves from; the Idempotency-Keys of v1 POSTs.
//   - Campaigns (campaigns.go): bulk sends; one campaign actor per running campaign.
//   - Stores (stores.go, storeconnect.go, templates.go, webhook.go, stores_actors.go): connected
//     stores, their templates and the webhook receiver; one storeevents actor per store with
//     events to run.
//   - Groups, Contacts (groups.go): a session's groups on the network, its linked phone's
//     contact book and number lookups. Conversations on Messages (conversations.go): replies,
//     reactions, edits, revokes and cancellations, read marks, poll votes, each message's notes.
//   - OptOuts (optouts.go): each account's suppression list (STOP, START, the list's routes).
//     The rest of the store loop (DESIGN.md section 18) lives in the facets it serves:
//     messages sent later on Messages' schedule (later.go), quiet hours on Users
//     (settings.go), confirmations, delays and abandoned checkouts on Stores
//     (stores_loop.go, stores_answer.go, stores_writeback.go).
//   - Events (events*.go, publish.go): webhook subscriptions and events out. It is its own
//     type, built by node (NewEvents) and handed to New as Config.Events.
//
// Engine itself holds only what the facets share: the configuration, the hollywood engine and
// spawn, the event publisher and the counters. New builds the facets and boots them in
// order; Stop stops them in the order that loses nothing. Every kind of actor is found through
// one generic registry (registry.go); the package's locks and their order are in LOCKS.md.
//
// Storage arrives as typed stores declared here (records.go), built by node: the engine never
// sees the KV underneath.
//
// Imports: actors/* (one package per actor kind, whose interfaces the engine implements),
// domain, network (the port), ecom, media, hollywood; never persist, httpapi or identity.
package engine

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/anthdm/hollywood/actor"

	"github.com/gateway/gateway/actors/session"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// Config is everything the engine is built from; node (node/runtime.go) constructs it.
type Config struct {
	// Store and Records are every typed store the engine works on (records.go); node builds
	// them on one KV.
	Store       Store
	Records     Records
	Logger      *slog.Logger
	Plans       Plans
	DefaultPlan string
	AdminUIDs   []string
	// DevRoles honours the role claim of ID tokens (dev auth only: the embedded issuer's tokens).
	DevRoles bool
	// Now is the clock (tests move it); nil = time.Now.
	Now func() time.Time
	// AfterFunc runs f once d has passed by Now's clock (the session deliverers' pacing and
	// protection waits); nil = time.AfterFunc. Tests that move Now give one that fires when
	// they move it.
	AfterFunc func(d time.Duration, f func()) session.Timer
	// KeyBlock is the most a key counter reserves at a time (0: key.New's default, 1,000; a
	// key with a daily cap reserves 1 % of it when that is less). One durable mark per half
	// block: at 100 a key calling 800 times a second made 16 Badger commits a second, each
	// synced on its own with --fsync batch (bench/README.md, "Twenty-sixth look").
	KeyBlock int64
	// AskTimeout bounds every wait for an actor's reply (default 5 s).
	AskTimeout time.Duration
	// Network is the messaging network the linked sessions use.
	Network network.Network
	// Cloud is the Cloud API network the cloud sessions use (DESIGN.md section 17; nil: none).
	Cloud CloudNetwork
	// SessionTimeout bounds a wait for a session's answer that involves the network (a first QR
	// code, a pair code); default 20 s.
	SessionTimeout time.Duration
	// SendTimeout bounds one send on the network (default 60 s).
	SendTimeout time.Duration
	// Events takes the core's events (message.status, session.status, campaigns, stores,
	// incoming messages); nil: none are published.
	Events EventSink
	// EventsReady, when set, is waited for between the boot's reads and what the boot builds
	// from them (an error fails the boot): a runtime boots its events facet beside the
	// engine's reads, and nothing of the engine publishes to it before it is ready.
	EventsReady func() error
	// BootWindow spreads linked sessions' reconnects at boot over this long (0: at once).
	BootWindow time.Duration
	// Pacing is the network's default pacing of every session's queue (DESIGN.md section 9); a
	// plan's pacing and a session's own lie over it.
	Pacing domain.Pacing
	// Stores configures the store integration (stores.go).
	Stores StoreConfig
	// Mover moves sessions to the partitions of other users (a cluster node's engine runs one
	// partition; sessions_move.go); nil on a single node.
	Mover Mover
	// Partitions: the engine runs one partition of a cluster of this many (0: a single node's
	// one engine). What an engine keeps sized for a whole gateway's load (the settled messages
	// kept for their receipts, the events queue) it then keeps at its partition's share, so a
	// node of 64 partitions holds what one gateway holds, not 64 times that: each is live heap
	// the garbage collector marks on every cycle (bench/README.md, issue 27's nodegc section).
	Partitions int
}

// share is n divided among the engine's partitions, at least least.
func (c Config) share(n, least int) int {
	if c.Partitions <= 1 {
		return n
	}
	return max(n/c.Partitions, least)
}

// Engine is the running core: its exported fields are the facets (see the package doc).
type Engine struct {
	Users     *Users
	Keys      *Keys
	Sessions  *Sessions
	Messages  *Messages
	Campaigns *Campaigns
	Stores    *Stores
	OptOuts   *OptOuts
	Groups    *Groups
	Contacts  *Contacts
	Cloud     *Cloud
	Routing   *Routing
	// Front is the Cloud-API-shaped front's uploads and number records (front.go).
	Front *Front

	// What the facets share.
	cfg     Config
	log     *slog.Logger
	hw      *actor.Engine // the hollywood engine every actor runs on (spawn)
	events  *actor.PID    // logs the actor system's events (onEvent)
	pub     *publisher    // events out, in order (nil: off)
	metrics engineMetrics // the counters Stats reads
	// bg counts the engine's own background work (finishing moves, what a session reported);
	// stopCtx ends it at Stop. bgMu and bgClosed keep an Add from racing Stop's wait
	// (goBackground).
	bg         sync.WaitGroup
	bgMu       sync.Mutex
	bgClosed   bool
	stopCtx    context.Context
	stopCancel context.CancelFunc
	lanes      contactLanes // what each contact wrote, read in the order they wrote it

	// wallClock: the clock is time.Now (Config.Now unset): a send's trace takes the accept's
	// own clock read (Messages.Send), not one more.
	wallClock bool
}

// New builds the engine and rebuilds every actor from storage.
func New(cfg Config) (*Engine, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Plans == nil {
		cfg.Plans = DefaultPlans()
	}
	if cfg.DefaultPlan == "" {
		cfg.DefaultPlan = BuiltinDefaultPlan
	}
	if _, ok := cfg.Plans[cfg.DefaultPlan]; !ok {
		return nil, fmt.Errorf("engine: default plan %q is not in the plan table %v", cfg.DefaultPlan, cfg.Plans.Names())
	}
	wallClock := cfg.Now == nil
	if wallClock {
		cfg.Now = time.Now
	}
	if cfg.AfterFunc == nil {
		cfg.AfterFunc = func(d time.Duration, f func()) session.Timer { return time.AfterFunc(d, f) }
	}
	if cfg.AskTimeout <= 0 {
		cfg.AskTimeout = 5 * time.Second
	}
	if cfg.SessionTimeout <= 0 {
		cfg.SessionTimeout = 20 * time.Second
	}
	if cfg.SendTimeout <= 0 {
		cfg.SendTimeout = 60 * time.Second
	}
	if cfg.Network == nil {
		return nil, fmt.Errorf("engine: a messaging network is required")
	}
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	e := &Engine{cfg: cfg, log: cfg.Logger, hw: hw, wallClock: wallClock}
	if c, ok := cfg.Records.Outbox.(interface{ SetClock(func() time.Time) }); ok && !wallClock {
		c.SetClock(cfg.Now) // the outbox's times by the clock that stamps the messages
	}
	e.stopCtx, e.stopCancel = context.WithCancel(context.Background())
	if cfg.Events != nil {
		e.pub = newPublisher(cfg.Events, e.log, cfg.share(publishQueue, publishQueueLeast))
	}
	e.Users = newUsers(e, cfg.AdminUIDs)
	e.Keys = newKeys(e)
	e.Sessions = newSessions(e)
	if n, ok := cfg.Events.(interface{ SetNumbers(func(string) string) }); ok {
		n.SetNumbers(e.Sessions.phoneOf) // Meta's payloads name the session's phone (events_meta.go)
	}
	e.Messages = &Messages{e: e, msgs: newMessages(e, cfg.Records.Outbox, cfg.share(pendingShards, 1)), accountTable: cfg.Records.Accounts, history: cfg.Records.History,
		notes: notes{store: cfg.Records.Notes}}
	e.Messages.accounts.init()
	e.Messages.later = newLater(e.Messages)
	e.OptOuts = newOptOuts(e)
	e.Campaigns = newCampaigns(e)
	e.Stores = newStores(e)
	e.Groups, e.Contacts = &Groups{e}, &Contacts{e}
	e.Cloud, e.Routing, e.Front = newCloud(e), newRouting(e), newFront(e)
	e.events = hw.SpawnFunc(e.onEvent, "events", actor.WithInboxSize(64))
	hw.Subscribe(e.events)
	if err := e.boot(); err != nil {
		// What the boot started stops (its actors flush as at a hand-over; a later boot
		// reclaims their reservations): a cluster node that tries the partition again must not
		// leave this engine's timers and actors running beside the next one.
		ctx, cancel := context.WithTimeout(context.Background(), failedBootStop)
		e.Stop(ctx)
		cancel()
		return nil, err
	}
	return e, nil
}

// failedBootStop bounds the stop of an engine whose boot failed.
const failedBootStop = 5 * time.Second

// Stop stops every actor (each flushes its state) and waits for them, within ctx.
func (e *Engine) Stop(ctx context.Context) {
	e.stopCancel()
	// An outbox that holds outcomes a while before it writes them (a cluster's partition on
	// NATS) holds none from now on: a send still in flight past the stop's bound is written
	// while the view is open.
	if h, ok := e.Messages.msgs.outbox.(interface{ EndHolds() }); ok {
		h.EndHolds()
	}
	e.Messages.later.stop() // what waits for its time stays scheduled in the outbox
	e.bgMu.Lock()
	e.bgClosed = true // no background work starts after this: the wait below covers all of it
	e.bgMu.Unlock()
	waitCtx(ctx, &e.bg)
	// Store actors before the rest: an event they leave unfinished stays in their durable inbox.
	e.Stores.stop(ctx)
	// Campaigns next, so no new number starts; their cursors are persisted with every number.
	e.poisonAll(ctx, e.Campaigns.idx.pids())
	e.poisonAll(ctx, append(e.Keys.idx.pids(), e.Sessions.idx.pids()...))
	// The outcomes of the sessions' last sends are written, and only then settled into the
	// accounts (messages.Outcome); accounts last.
	e.Messages.stopRenewal()
	e.Routing.stop()
	// An outcome is written once its events are committed (settleAfterEvents): those queued
	// are committed first, then the outcomes written.
	e.pub.drain(ctx)
	e.Messages.msgs.outbox.Flush()
	// Every change above has been reported: publish what is queued, then write the records
	// written once their events are (a network's receipts: recordAfterEvent).
	defer func() {
		e.pub.stop(ctx)
		e.Messages.msgs.outbox.Flush()
	}()
	var accounts []*actor.PID
	for _, a := range e.Messages.accounts.drain() {
		if pid := a.actorPID(); pid != nil { // a spawn under way ends first (nil: it panicked)
			accounts = append(accounts, pid)
		}
	}
	e.poisonAll(ctx, accounts)
	e.Messages.msgs.outbox.Flush()
	e.hw.Unsubscribe(e.events)
	<-e.hw.Poison(e.events).Done()
}

// poisonAll stops actors (each handles what is queued before, then flushes its state in
// Stopped) and waits for them, within ctx.
func (e *Engine) poisonAll(ctx context.Context, pids []*actor.PID) {
	var wg sync.WaitGroup
	for _, pid := range pids {
		wg.Add(1)
		done := e.hw.Poison(pid)
		go func() { defer wg.Done(); <-done.Done() }()
	}
	waitCtx(ctx, &wg)
}

// spawn is the one way every actor is started: a small inbox (the ring buffer grows on demand;
// hollywood's default of 1024 costs about 28 KB per idle actor) and an unlimited restart budget
// (hollywood v1.0.5 takes the whole process down when MaxRestarts is exceeded).
func (e *Engine) spawn(p actor.Producer, kind, id string) *actor.PID {
	return e.hw.Spawn(p, kind,
		actor.WithID(id),
		actor.WithInboxSize(8),
		actor.WithMaxRestarts(math.MaxInt32),
		actor.WithRestartDelay(10*time.Millisecond),
	)
}

// onEvent logs the actor system's events that an operator must see.
func (e *Engine) onEvent(c *actor.Context) {
	switch ev := c.Message().(type) {
	case actor.ActorRestartedEvent:
		e.log.Error("actor restarted after a panic", "pid", ev.PID.String(), "reason", fmt.Sprint(ev.Reason), "restarts", ev.Restarts, "stack", string(ev.Stacktrace))
	case actor.ActorMaxRestartsExceededEvent:
		e.log.Error("actor exceeded its restart budget", "pid", ev.PID.String())
	case actor.DeadLetterEvent:
		e.log.Debug("dead letter", "target", ev.Target.String(), "msg", fmt.Sprintf("%T", ev.Message))
	}
}

// engineMetrics are counters the HTTP layer exports.
type engineMetrics struct {
	sent, failed                             atomic.Int64
	campCompleted, campCancelled, campFailed atomic.Int64
}

func (m *engineMetrics) campaignsDone(status string) {
	switch status {
	case domain.CampaignCompleted:
		m.campCompleted.Add(1)
	case domain.CampaignCancelled:
		m.campCancelled.Add(1)
	default:
		m.campFailed.Add(1)
	}
}

// Stats are the engine's counters for metrics.
type Stats struct {
	MessagesSent, MessagesFailed, OutboxDepth int64
	Sessions, Keys, CampaignsRunning          int
	CampaignsCompleted, CampaignsCancelled    int64
	CampaignsFailed                           int64
}

// Stats reads the engine's counters.
func (e *Engine) Stats() Stats {
	return Stats{
		MessagesSent: e.metrics.sent.Load(), MessagesFailed: e.metrics.failed.Load(), OutboxDepth: e.Messages.msgs.depth.Load(),
		Sessions: e.Sessions.idx.len(), Keys: e.Keys.idx.len(), CampaignsRunning: e.Campaigns.running(),
		CampaignsCompleted: e.metrics.campCompleted.Load(), CampaignsCancelled: e.metrics.campCancelled.Load(),
		CampaignsFailed: e.metrics.campFailed.Load(),
	}
}

// now is the engine's clock (Config.Now).
func (e *Engine) now() time.Time { return e.cfg.Now() }

// clockFunc is the engine's clock as the actors consume it (their Clock interfaces).
type clockFunc func() time.Time

// Now implements the actors' Clock.
func (c clockFunc) Now() time.Time { return c() }

// sessionClock is the session actors' clock: Now and the timers that follow it.
type sessionClock struct {
	now   func() time.Time
	after func(time.Duration, func()) session.Timer
}

func (c sessionClock) Now() time.Time { return c.now() }

func (c sessionClock) AfterFunc(d time.Duration, f func()) session.Timer { return c.after(d, f) }

func newStoppedTimer() *time.Timer {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}

func waitCtx(ctx context.Context, wg *sync.WaitGroup) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
