// Package cluster runs gateway nodes as one cluster on NATS JetStream (DESIGN.md section 13):
// every user's data lives on one of a fixed number of partitions (PartitionOf: FNV-1a of the
// user id, modulo 64 by default), each partition is owned by one node through a lease, any
// node takes any request and forwards it to the owner, and a node's loss moves its partitions
// to the others within seconds.
//
// # What a node does
//
//   - Heartbeat: its key in the bucket <prefix>_nodes (TTL = the lease TTL, 2 s by default),
//     written every renewal interval (lease TTL / 4) with a revision check, so a second process
//     under the same node id is found out; one is refused at start while the other heartbeats.
//   - Leases: one key per partition in the bucket <prefix>_leases. A node renews its leases
//     every interval with the revision it holds, and releases one with a revision-checked
//     delete. A lease nobody renewed for the TTL, as this node's watcher saw it (its last
//     revision seen a TTL ago on this node's monotonic clock), is taken by a write expecting
//     that revision (claimLease): its holder stopped using the partition at that renewal's send
//     time + TTL − the fence margin, on its own monotonic clock, so the take comes at least the
//     margin after it, whatever the machines' clocks say; a renewal or another take that
//     landed meanwhile makes the write fail. A timer runs balancing at each lease's last write
//     seen + the TTL, so the take is at that moment, not at a tick. The bucket (as this release
//     makes it) keeps a lease leasesMaxAge TTLs, with lapse markers: the server's expiry only
//     clears the leases of a cluster that stopped whole, and its marker (a rollup of the key,
//     proposed without a condition: it would purge a take written beside it) comes two TTLs
//     after the takes; a lease past takeOverWithin is taken by a create once the marker is in. The
//     markers also keep a node of the release before from rewriting the bucket (leasesMaxAge).
//     A bucket an earlier release made (MaxAge = the TTL, lapse markers) is kept as it is, and
//     there a lease is taken by a create once the server expired it.
//   - Fair share: each live node takes free partitions up to its share (P/N, the first P%N
//     nodes by id one more), Parallel at a time, and hands back, gracefully, those above it
//     when a node joins; Stop (SIGTERM) hands every partition back before the node leaves.
//     Balancing runs on its own goroutine, on every change of the view, at the next lapse and
//     every renewal interval; heartbeats and renewals on another, so a slow write never
//     delays a take.
//   - Fencing (acquisition.go): a node stops using a partition at its last renewal's send
//     time + TTL − the fence margin (TTL / 4, at most 1 s) on the monotonic clock (Enter and
//     Lease refuse from then on, and the engine is told Fenced), before the server can expire
//     the lease. Each taking of a partition is an Acquisition: the node reads the partition's
//     fence in the records stream, writes it expecting what it read (Config.Fences), and the
//     sequences it gets are the acquisition's token, the only one the partition's engine
//     writes and sends under (its store view's Fencer, its network guard); so a paused former
//     owner's writes are refused by the server itself, and an engine of an earlier acquisition
//     by the same node cannot pass the new one's fence. A commit refused as fenced gives the
//     lease up at once (Acquisition.Fenced).
//   - Forwarding (forward.go): a request for a partition owned elsewhere goes to its owner
//     over NATS request-reply, signed (HMAC keyed from the cluster's secret, at most
//     ForwardMaxAge old, never twice), on the subject the owner node serves for its whole life;
//     a node that does not run the partition answers "moved" without running it; while the
//     partition has no owner that serves it (a hand-over, a lost node's lease not yet lapsed,
//     an election in NATS) the request is held, at most HoldMax, and replayed to the new owner;
//     else a typed error, UnavailableError (domain.ErrNodeUnavailable: 503 with Retry-After).
//
// The engine is reached only through Handler (Acquire, Release, Fenced) and the request
// path through Enter / Forward / Lease, so this package imports domain and the NATS client
// libraries, never the core.
//
// # What NATS JetStream guarantees, and what is designed around it
//
// Read in nats-server v2.15.2 and nats.go v1.55.0 (the versions go.mod pins):
//
//   - Revision checks. A KV create is a publish with Nats-Expected-Last-Subject-Sequence: 0
//     and an update one with the revision held (nats.go jetstream/kv.go, updateRevision). The
//     server checks it against the subject's last message before proposing, and in a
//     replicated stream also refuses a check on a subject that has a proposal in flight
//     ("expectedPerSubjectInProcess", server/jetstream_batching.go,
//     checkMsgHeadersPreClusteredProposal): such a refusal is error 10164 (wrong last
//     sequence, "constant") where a real mismatch is 10071; nats.go maps both to
//     ErrKeyRevisionMismatch. So a refused renewal is read back before the lease is counted
//     lost. The check may name another subject (Nats-Expected-Last-Subject-Sequence-Subject,
//     the same function), which is how a commit checks the fence subject; the same in-flight
//     rule makes a replicated stream refuse a second commit checking one fence subject while
//     the first is proposed: so a partition's fence has two lanes (subjects, written together
//     at each acquisition) and the store keeps no two groups in flight on one lane, and the
//     fence is written once per acquisition, not the lease key, whose renewals would change
//     its sequence every interval.
//   - TTLs. A bucket's TTL is the stream's MaxAge: the server removes a subject's last
//     message once it is older than that by the stream leader's clock; memstore.go and
//     filestore.go run the age check at the next expiry, at least 250 ms apart
//     (resetAgeChk). With LimitMarkerTTL (SubjectDeleteMarkerTTL) the expiry is a marker
//     proposed through the stream's raft: a rollup of the subject with no condition
//     (fileStore.handleRemovalOrSdm), so a write that lands between the expiry and the marker
//     is purged with it; without, each replica removes the expired sequence only
//     (removeMsgViaLimits). So the leases bucket this release makes has a MaxAge of
//     leasesMaxAge TTLs (its markers come two TTLs after the takes), and the lease's TTL is the
//     nodes bucket's MaxAge, and in the buckets' metadata (gateway_lease_ttl; clusterTTL,
//     bucketTTL). The nodes bucket keeps MaxAge = the TTL and markers: a
//     node's heartbeat key lapses by the server's expiry, which the watchers see at once, and
//     a restarted node claims its id with a create once its old key lapsed.
//   - Leader elections. A stream's raft group elects a new leader after its election
//     timeout, random between 4 and 9 s (server/raft.go, minElectionTimeoutDefault,
//     maxElectionTimeoutDefault), with heartbeats every second; it cannot be shortened. A
//     server that shuts down steps its leaderships down first (Server.Shutdown →
//     stepdownRaftNodes), so only a crash costs an election. While the leases stream has no
//     leader every renewal fails and owners are fenced after TTL − the margin; requests are
//     held meanwhile (HoldMax, and the store's own Hold for a commit whose records stream
//     lost its leader), not answered 503; after the election each node retakes its own
//     partitions first (a node whose writes just failed takes only its own for two renewal
//     intervals, and the others wait for a node that just came back). test-cluster kills the
//     records stream's leading nats-server with SIGKILL under load and counts the 503s (none).
//   - No responders. A request published with a reply subject that reaches no subscriber is
//     answered by the server with a 503 status (server/client.go, processInboundClientMsg and
//     the no_responders CONNECT option), but in a NATS cluster a message routed to a server
//     whose subscriber left a moment ago is dropped silently. So the owner acknowledges each
//     request at once (AckTimeout, 2 s), a node subscribes to its requests once for its whole
//     life (a first design with a queue group per partition, unsubscribed at each hand-over,
//     lost one request in about two thousand during a graceful stop), and a stopping node
//     exits only once every partition is served elsewhere and seen so for a second.
//   - Watchers. nats.go's KV watcher is an ordered consumer that recreates itself after a gap
//     or a lost server; entries it delivers again after a reset are not taken for renewals,
//     and a node whose watchers delivered nothing for a lease TTL makes them anew.
//
// Buckets are file-backed with Config.Replicas replicas (node: min(3, the JetStream peers)),
// and carry the partition count and lease TTL in their metadata: a node started with another
// partition count is refused (ErrPartitionsDiffer), and one started with another lease TTL too
// (ErrLeaseTTLDiffers) unless it was given none (LeaseTTL 0: the cluster's). Forwarding subjects start
// with <prefix>_fwd, outside the records stream's <prefix>.> subjects.
package cluster
