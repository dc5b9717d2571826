package node

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/gateway/gateway/engine"
	"github.com/gateway/gateway/natsevents"
)

// Defaults of the --events-nats flags.
const (
	DefaultEventsSubjectPrefix = natsevents.DefaultPrefix
	DefaultEventsBacklog       = engine.DefaultForwardBacklog
)

// Interface guard: the publisher is the engine's forwarder of events to a broker.
var _ engine.EventForwarder = (*natsevents.Publisher)(nil)

// openEvents opens the publisher of events to NATS JetStream (--events-nats; nil without it):
// a server that answers is checked now (a stream it refuses fails the start), one that does
// not is waited for in the background while events wait in each runtime's outbox.
func openEvents(ctx context.Context, c Config, log *slog.Logger) (*natsevents.Publisher, error) {
	if c.EventsNATS == "" {
		return nil, nil
	}
	p, err := natsevents.Open(ctx, natsevents.Options{
		URL: c.EventsNATS, Prefix: c.EventsSubjectPrefix, Creds: c.EventsNATSCreds, TLSCA: c.EventsNATSTLSCA,
		Replicas: c.EventsNATSReplicas, Logger: log.With("component", "events-nats"),
	})
	if err != nil {
		return nil, fmt.Errorf("--events-nats: %w", err)
	}
	return p, nil
}

// enginePartitions is engine.Config.Partitions: a cluster node's engines each run one
// partition of c.Partitions; a single node's one engine has the whole load (0).
func (c Config) enginePartitions() int {
	if c.Cluster {
		return c.Partitions
	}
	return 0
}

// eventsBacklog is one runtime's share of --events-nats-backlog: all of it on a single node, a
// partition's share on a cluster node.
func (c Config) eventsBacklog() int {
	b := c.EventsNATSBacklog
	if b <= 0 {
		b = engine.DefaultForwardBacklog
	}
	if p := c.enginePartitions(); p > 0 {
		b = max(b/p, 1)
	}
	return b
}
