package node

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/gateway/gateway/actors/account"
	"github.com/gateway/gateway/actors/session"
	"github.com/gateway/gateway/actors/webhook"
	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/media"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/network/cloud"
	"github.com/gateway/gateway/persist"
)

// Interface guards: persist's typed stores are the interfaces the core declares.
var (
	_ account.Store          = persist.Accounts{}
	_ session.Records        = persist.Protections{}
	_ engine.Protections     = persist.Protections{}
	_ session.Store          = persist.Sessions{}
	_ engine.Store           = (*persist.Store)(nil)
	_ engine.Outbox          = (*persist.Outbox)(nil)
	_ engine.SessionStore    = persist.Sessions{}
	_ engine.CampaignStore   = (*persist.Campaigns)(nil)
	_ engine.ShopStore       = (*persist.Stores)(nil)
	_ engine.InboxStore      = (*persist.Inbox)(nil)
	_ engine.EventStore      = (*persist.Webhooks)(nil)
	_ engine.MessageHistory  = (*persist.MessageLog)(nil)
	_ engine.Sealer          = (*persist.Sealer)(nil)
	_ network.SendLog        = persist.SendLog{}
	_ engine.RoutingStore    = persist.Routings{}
	_ engine.WindowStore     = persist.Windows{}
	_ engine.FrontMediaStore = persist.FrontMedia{}
	_ engine.Outbox          = (*persist.LogOutbox)(nil)

	_ engine.CloudTemplateStore = persist.CloudTemplates{}
)

// The allowances' recount at boot (--store nats; the log outbox of a lone gateway) is persist's.
var (
	_ engine.AccountRecounter = persist.Accounts{}
	_ engine.AccountRecounter = persist.LogRecount{}
)

// shared is what every runtime of a node shares.
type shared struct {
	c      Config
	plans  engine.Plans
	stores engine.StoreConfig
	reg    prometheus.Registerer
	// forward publishes every runtime's events to NATS JetStream (--events-nats; nil: off).
	forward engine.EventForwarder
	// cloud is the node's Cloud API network (a partition's runtime gets it fenced).
	cloud *cloud.Network
}

// runtime is the core on one set of records: the engine and its events facet (webhooks, live
// events). A single node runs one over its whole store; a cluster node one per partition it
// owns, over the partition's fenced view. This file is the only place either is built.
type runtime struct {
	events *engine.Events
	engine *engine.Engine
	outbox *persist.LogOutbox // --outbox log's (nil: the records' own)
	// older: the outbox's log a switch to --outbox badger left behind, open for reads (nil: none).
	older *persist.LogOutbox
}

// runtimeOptions is what differs between a single node's runtime and a partition's.
type runtimeOptions struct {
	kv  persist.KV
	log *slog.Logger // the node's; a partition's carries its number
	net network.Network
	// cloud is the Cloud API network of the runtime's cloud sessions.
	cloud engine.CloudNetwork
	// live carries users' live events across a cluster (nil: the events facet's own streams);
	// watchers are the users streaming on any node of it, whose events the journal keeps (nil:
	// the events facet's own, marked by its streams).
	live     engine.LiveSink
	watchers *engine.Watchers
	// mover moves sessions to other partitions (a cluster's; nil on a single node); it gets
	// the runtime's records.
	mover func(*persist.Records) engine.Mover
	// adoptInbound runs the one-time move of incoming messages into the history index (stores
	// written by versions before it; a cluster's records never had the old table).
	adoptInbound bool
	// askTimeout bounds the engine's waits for its actors (0: the engine's default): on NATS,
	// longer than the store holds a write while a stream elects its leader, so a request waits
	// for the store instead of giving up before it.
	askTimeout time.Duration
}

// newRuntime builds a runtime and starts it from its records: events out (it resumes the
// deliveries queued before the last stop or crash) booted beside the engine's reads and ready
// before the engine builds anything that publishes into it, while the events journal's epoch
// is counted; it returns once that count is durable. On error nothing of it runs.
func newRuntime(ctx context.Context, sh shared, o runtimeOptions) (_ *runtime, err error) {
	c := sh.c
	// Every typed store on the one KV; each part of the core gets the ones it uses, as the
	// interfaces it declares.
	recs := persist.NewRecords(o.kv)
	recs.Outbox.SetLogger(o.log.With("component", "outbox"))
	if c.NATSOutcomeRecords {
		recs.Outbox.WriteOutcomeRecords()
	}
	if c.Cluster {
		// A partition has about one outcome a 10 ms window at a node's rate: its pages held
		// and per second (the lone gateway's window holds about nine: it keeps them), read by
		// every node, written once none runs the release before (--nats-window-pages).
		recs.Outbox.PagesPerSecond(!c.NATSWindowPages)
	}
	rt := &runtime{}
	var eventsBooted func() error // nil until the events facet's boot is started
	defer func() {
		if err != nil {
			if eventsBooted != nil {
				_ = eventsBooted() // its boot ends before it stops
			}
			rt.stop(context.Background())
		}
	}()
	// Webhook URLs pass the media address checks unless --webhook-allow-private; signing
	// secrets are sealed at rest with the key of the store credentials.
	hw, err := actor.NewEngine(actor.NewEngineConfig())
	if err != nil {
		return nil, fmt.Errorf("events: %w", err)
	}
	guard := media.Guard{AllowPrivate: c.WebhookAllowPrivate}
	if rt.events, err = engine.NewEvents(engine.EventsConfig{
		Store: recs.Webhooks, Actors: hw, Log: o.log.With("component", "events"), Metrics: sh.reg,
		Poster: webhook.NewHTTPPoster(guard.Dialer(5*time.Second), webhook.Timeout, 0), Guard: guard,
		Secrets: engine.NewSecretBox(sh.stores.Sealer), Live: o.live, Watchers: o.watchers,
		Forward: sh.forward, ForwardBacklog: c.eventsBacklog(),
	}); err != nil {
		return nil, err
	}
	// The events facet boots beside the engine's reads (its subscriptions, queues and journal
	// are read while the engine reads its records; 60-150 ms of a partition's start at load
	// 11, before): the engine waits for it before it builds anything that publishes.
	booted := make(chan error, 1)
	go func() { booted <- rt.events.Boot(ctx) }()
	eventsBooted = sync.OnceValue(func() error { return <-booted })
	if o.adoptInbound {
		// The history index holds incoming messages now; earlier versions kept them in a table
		// of their own, moved once here.
		if n, err := recs.History.AdoptInbound(ctx); err != nil {
			return nil, fmt.Errorf("message history: %w", err)
		} else if n > 0 {
			o.log.Info("incoming messages moved into the message history", "messages", n)
		}
	}
	var mover engine.Mover
	if o.mover != nil {
		mover = o.mover(recs)
	}
	ers := engineRecords(recs)
	if c.Store == "nats" {
		// The outbox is on the records' store, which reads its records by time: a boot counts
		// what a kill -9 left out of the allowances, so their count is written seldom.
		ers.Recount = recs.Accounts
	} else {
		if c.Outbox, err = pickOutbox(c, recs.Outbox, o.log); err != nil {
			return nil, err
		}
		var older persist.OutboxReader
		if older, rt.older, err = otherOutbox(c, recs.Outbox, o.kv); err != nil {
			return nil, err
		}
		if rt.outbox, err = openLogOutbox(c, o.kv, o.log); err != nil {
			return nil, fmt.Errorf("outbox: %w", err)
		}
		if rt.outbox != nil {
			ers.Outbox = rt.outbox
			rt.outbox.SetOlder(older)
			// The log is in time order: a boot counts from its last records what a kill -9
			// left out of the allowances, so their count is written seldom here too. (On
			// --outbox badger, every 20 ms: its outcomes have no time order to start from.)
			ers.Recount = persist.LogRecount{Accounts: recs.Accounts, Outbox: rt.outbox}
		} else if older != nil {
			recs.Outbox.SetOlder(older)
		}
	}
	rt.engine, err = engine.New(engine.Config{
		Store: recs.Store, Records: ers, Logger: o.log.With("component", "engine"), Plans: sh.plans,
		DefaultPlan: c.DefaultPlan, AdminUIDs: c.AdminUIDs, DevRoles: c.Auth == "dev",
		Network: o.net, Cloud: o.cloud, Stores: sh.stores, Now: c.Now, AfterFunc: c.AfterFunc, Pacing: c.pacing(), BootWindow: c.bootWindow(),
		Events: rt.events, EventsReady: eventsBooted, Mover: mover, AskTimeout: o.askTimeout, Partitions: c.enginePartitions(),
	})
	if err != nil {
		return nil, err
	}
	if err := eventsBooted(); err != nil { // the engine waited for it, unless it failed first
		return nil, err
	}
	// The journal's epoch was counted beside the boot (engine/events_journal.go): the runtime
	// serves nothing before it is durable.
	if err := rt.events.Counted(ctx); err != nil {
		return nil, err
	}
	return rt, nil
}

// engineRecords hands persist's typed stores to the engine as the interfaces it declares.
func engineRecords(r *persist.Records) engine.Records {
	return engine.Records{Outbox: r.Outbox, Accounts: r.Accounts, Sessions: r.Sessions, Protections: r.Protections,
		Campaigns: r.Campaigns, Shops: r.Stores, Inbox: r.Inbox, History: r.History, Notes: r.Notes, StoreLoop: r.StoreLoop,
		SendLog: r.SendLog, CloudTemplates: r.CloudTemplates, Routings: r.Routings, Windows: r.Windows,
		FrontMedia: r.FrontMedia}
}

// stop stops the engine (its actors finish what is in flight and flush their state), then the
// events facet (which publishes the engine's last changes). Safe on a runtime half built; call
// it once.
func (rt *runtime) stop(ctx context.Context) {
	if rt.engine != nil {
		rt.engine.Stop(ctx)
	}
	if rt.events != nil {
		rt.events.Stop(ctx)
	}
	for _, lo := range []*persist.LogOutbox{rt.outbox, rt.older} {
		if lo != nil {
			_ = lo.Close()
		}
	}
}
