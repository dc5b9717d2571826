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

// Defaults (DESIGN.md sections 13 and 19).
const (
	DefaultPartitions = 64
	DefaultLeaseTTL   = 2 * time.Second
	DefaultPrefix     = "gateway"
	// HoldMax is the longest a request is held while its partition has no owner that serves it
	// (handed over gracefully, its new owner starting, its owner lost and the partition not yet
	// taken, every lease lapsed while NATS elects a leader), before it is answered 503
	// node_unavailable: clients see latency, not errors (DESIGN.md section 19).
	HoldMax = 10 * time.Second
	// ForwardGrace is added to a route's own wait to make the forwarding timeout.
	ForwardGrace = 5 * time.Second
	// AckTimeout: a forwarded request not acknowledged by its owner within it was not
	// received (NATS dropped it, or the owner is stuck): 503 node_unavailable.
	AckTimeout = 2 * time.Second
	// KeepAlive: an owner running a forwarded request says so this often (Gw-Reply: accepted
	// again); a requester that hears nothing for 3 of them counts the answer lost (a NATS
	// server lost under it drops what it was routing) and answers 503 then, not at the
	// route's full wait.
	KeepAlive = time.Second
	// ChunkSize: bodies over it cross NATS in chunks (NATS's default max_payload is 1 MiB).
	ChunkSize = 512 << 10
)

// Handler is what a node asks of the engine for the partitions it owns. Every call for one
// partition comes from one goroutine at a time, in the order acquire → (release | fenced);
// calls for different partitions run concurrently.
type Handler interface {
	// Acquire starts the partition's actors from the stored records (and reconnects its
	// sessions). It is called only once the lease is held, the previous owner's lease has
	// lapsed or was released and this acquisition's fence is written, so nothing else runs the
	// partition. Everything it starts writes and sends under a (its store view's Fencer, its
	// network guard), never under a later acquisition of the same partition; if the node ran
	// the partition before (lost and taken back), Acquire waits for that engine to stop. An
	// error ends the acquisition (nothing it started can write or send from then on); the
	// node tries again under the same lease, still starting, with a new acquisition a couple
	// of times (a records stream electing its leader fails a start for a moment), then gives
	// the lease up (another node, or this one later, tries again). Acquire must leave nothing
	// running after an error.
	Acquire(ctx context.Context, a *Acquisition) error
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
	// NodeID names this node (the command line's default, flags.go: <host name>:<port>). Two live
	// nodes never share one.
	NodeID string
	// Partitions is the number of partitions (default 64), fixed when the cluster's buckets
	// are first made; a node started with another number is refused.
	Partitions int
	// LeaseTTL (whole seconds, at least 2 s) is fixed with the buckets too: 0 takes the
	// cluster's (the buckets'), or DefaultLeaseTTL for a new cluster; another value than the
	// cluster's is refused.
	LeaseTTL time.Duration
	// Replicas of the cluster's buckets (default 1; node/ passes its records streams': 3 on a NATS
	// cluster, else 1).
	Replicas int
	// Handler starts and stops partitions (the engine). Required.
	Handler Handler
	// Serve answers the requests other nodes forward to this one (httpapi's; nil: this node
	// takes no forwarded requests, the others get 503 node_unavailable for its partitions).
	Serve ServeFunc
	// Sessions is the number of sessions this node runs, for the cluster snapshot (nil: 0).
	Sessions func() int
	// Fences reads and writes the partitions' fences in the records streams (persist/natskv's
	// Store): at each acquisition the node reads the fence, then writes it expecting what it
	// read, and the sequences it gets are the acquisition's token (Acquisition.Fence), which
	// every commit of the partition carries as an expected-sequence check, so a paused former
	// owner cannot write after a new one took over. Nil: no fences (tests of membership).
	Fences Fences
	// Secret keys the HMAC that signs forwarded requests (derived from GATEWAY_SECRET_KEY,
	// the same on every node): an owner runs only requests signed with it within
	// ForwardMaxAge. Required.
	Secret []byte
	// Logger (default: discard) and Metrics (nil: none registered).
	Logger  *slog.Logger
	Metrics prometheus.Registerer
	// Parallel is how many partitions are acquired or released at once (default 32: a node
	// that takes over a lost node's partitions boots them together).
	Parallel int
}

// Fences is what a node needs of the records store to fence a partition (persist/natskv's
// Store implements it).
type Fences interface {
	// ReadFence reads partition p's fence lanes' sequences (any replica: a stale answer makes
	// the conditional write fail); ReadFenceLeader as the stream leader has them.
	ReadFence(ctx context.Context, p int) ([]uint64, error)
	ReadFenceLeader(ctx context.Context, p int) ([]uint64, error)
	// WriteFence writes every lane, each expecting what expect says, and returns the new
	// sequences; an error when a lane moved since it was read (another acquisition wrote it).
	WriteFence(ctx context.Context, p int, expect []uint64, value []byte) ([]uint64, error)
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
	if c.LeaseTTL != 0 && (c.LeaseTTL < 2*time.Second || c.LeaseTTL%time.Second != 0) {
		return fmt.Errorf("cluster: lease TTL %v: use whole seconds, at least 2 s", c.LeaseTTL)
	}
	if c.Replicas <= 0 {
		c.Replicas = 1
	}
	if c.Parallel <= 0 {
		c.Parallel = 32
	}
	if len(c.Secret) < 16 {
		return errors.New("cluster: a secret of at least 16 bytes is required (it signs forwarded requests)")
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
