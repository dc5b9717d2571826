package cluster

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"regexp"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
)

// Defaults (DESIGN.md section 13).
const (
	DefaultPartitions = 64
	DefaultLeaseTTL   = 5 * time.Second
	DefaultPrefix     = "gateway"
	// FenceMargin: an owner stops using a partition this long before its lease can lapse on
	// the server (last renewal sent + TTL − FenceMargin, on the monotonic clock). It covers
	// the skew between the NATS servers' clocks (which expire the lease) and the rate of ours.
	FenceMargin = time.Second
	// HoldMax is the longest a request is held while its partition is handed over gracefully
	// (or its new owner is starting), before it is answered 503 node_unavailable.
	HoldMax = 5 * time.Second
	// ForwardGrace is added to a route's own wait to make the forwarding timeout.
	ForwardGrace = 5 * time.Second
	// AckTimeout: a forwarded request not acknowledged by its owner within it was not
	// received (NATS dropped it, or the owner is stuck): 503 node_unavailable.
	AckTimeout = 2 * time.Second
	// ChunkSize: bodies over it cross NATS in chunks (NATS's default max_payload is 1 MiB).
	ChunkSize = 512 << 10
)

// Handler is what a node asks of the engine for the partitions it owns. Every call for one
// partition comes from one goroutine at a time, in the order acquire → (release | fenced);
// calls for different partitions run concurrently.
type Handler interface {
	// Acquire starts the partition's actors from the stored records (and reconnects its
	// sessions). It is called only once the lease is held and the previous owner's lease has
	// lapsed or was released, so nothing else runs the partition. An error gives the lease up
	// (another node, or this one later, tries again); Acquire must leave nothing running then.
	Acquire(ctx context.Context, partition int) error
	// Release hands the partition over gracefully: finish what is in flight, flush counters,
	// stop its actors. Requests of the partition are no longer let in (Node.Enter refuses) and
	// the ones in flight have finished before it is called; the lease is still held and
	// renewed while it runs and given up after it returns (error or not).
	Release(ctx context.Context, partition int) error
	// Fenced says the lease was lost without a hand-over (renewals failed until the fence
	// deadline, or another node holds it): stop the partition's actors at once without
	// writing (the store's lease check refuses those writes anyway) and without sending.
	// It must not block on the network.
	Fenced(partition int)
}

// Config configures a node.
type Config struct {
	// Conn is the connection to the NATS servers (the caller owns and closes it; give it
	// nats.MaxReconnects(-1) so a lost server is never the end).
	Conn *nats.Conn
	// Prefix starts every bucket name and subject (default "gateway"): several gateways or
	// test runs can share one NATS server.
	Prefix string
	// NodeID names this node (main's default: <host name>:<port>). Two live nodes never share one.
	NodeID string
	// Partitions is the number of partitions (default 64), fixed when the cluster's buckets
	// are first made; a node started with another number is refused.
	Partitions int
	// LeaseTTL (default 5 s, at least 2 s) is fixed with the buckets too.
	LeaseTTL time.Duration
	// Replicas of the cluster's buckets (default 1; main passes min(3, JetStream peers)).
	Replicas int
	// Handler starts and stops partitions (the engine). Required.
	Handler Handler
	// Serve answers the requests other nodes forward to this one (httpapi's; nil: this node
	// takes no forwarded requests, the others get 503 node_unavailable for its partitions).
	Serve ServeFunc
	// Sessions is the number of sessions this node runs, for the cluster snapshot (nil: 0).
	Sessions func() int
	// FenceSubject names, per partition, a subject of the records stream that a new owner
	// writes once per acquisition; the message's stream sequence is the partition's fence
	// token (Lease.Fence). The store puts an expected-last-subject-sequence check on it
	// (Nats-Expected-Last-Subject-Sequence-Subject) into every commit of the partition, so a
	// paused former owner cannot write after a new one took over. Nil: no fence writes.
	FenceSubject func(partition int) string
	// Logger (default: discard) and Metrics (nil: none registered).
	Logger  *slog.Logger
	Metrics prometheus.Registerer
	// Parallel is how many partitions are acquired or released at once (default 8).
	Parallel int
}

// ServeFunc answers a forwarded request of a partition this node owns; the node has let
// the request in (Enter) and lets it out when ServeFunc returns. It always answers: an
// error is a response too (httpapi's error model).
type ServeFunc func(ctx context.Context, partition int, req *Envelope) *Response

var prefixRE = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func (c *Config) defaults() error {
	if c.Conn == nil {
		return errors.New("cluster: a NATS connection is required")
	}
	if c.Handler == nil {
		return errors.New("cluster: a Handler is required")
	}
	if c.NodeID == "" {
		return errors.New("cluster: a node id is required")
	}
	if c.Prefix == "" {
		c.Prefix = DefaultPrefix
	}
	if !prefixRE.MatchString(c.Prefix) {
		return fmt.Errorf("cluster: prefix %q: use letters, digits, - and _", c.Prefix)
	}
	if c.Partitions == 0 {
		c.Partitions = DefaultPartitions
	}
	if c.Partitions < 1 || c.Partitions > 4096 {
		return fmt.Errorf("cluster: %d partitions: use 1 to 4096", c.Partitions)
	}
	if c.LeaseTTL == 0 {
		c.LeaseTTL = DefaultLeaseTTL
	}
	if c.LeaseTTL < 2*time.Second || c.LeaseTTL%time.Second != 0 {
		return fmt.Errorf("cluster: lease TTL %v: use whole seconds, at least 2 s", c.LeaseTTL)
	}
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	if c.Parallel <= 0 {
		c.Parallel = 8
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return nil
}

// PartitionOf is the partition of a user id (a session with no user: of its id) among n
// partitions: FNV-1a 64 of the id, modulo n. It never changes for a cluster (n is fixed when
// its buckets are made), so records written under a partition stay there.
func PartitionOf(id string, n int) int {
	h := fnv.New64a()
	h.Write([]byte(id))
	return int(h.Sum64() % uint64(n))
}
