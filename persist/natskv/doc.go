// Package natskv is persist.KV on NATS JetStream: the gateway's records in one stream that
// several gateways can share (DESIGN.md section 13). It passes the same contract as Badger
// (persist/kvtest), on one server and on a three-node cluster.
//
// # Layout
//
// One stream per prefix, <prefix>_records, capturing <prefix>.*.*.> in file storage, keeping
// one message per subject (MaxMsgsPerSubject 1: a record is its subject's last message),
// refusing new messages when full (DiscardNew: a full stream never drops records), with
// atomic batches, per-message TTLs and direct gets allowed. A key is the subject
// <prefix>.<table>.<partition>.<id tokens> (keys.go: the encoding keeps byte order and is
// reversible, every byte value allowed, at most MaxEncodedKey bytes). The partition token comes
// from Options.Partition (a pure function of the key; 0 by default), so a cluster can give
// every record of a user the user's partition and a new owner can scan only its partitions.
// The store's own records (the lease, condition carriers) use the table token "!", which no
// key encodes to.
//
// # How the KV contract maps onto the server
//
//   - Commit: the ops reduced to one message per key (a later op on a key wins; a delete is a
//     tombstone message, Gw-Op: del, removed after a minute by its TTL). One message is a plain
//     publish; more are one atomic batch (Nats-Batch-Id/-Sequence/-Commit, orbit.go's
//     jetstreamext.PublishMsgBatch, without the first-message ack: one round trip).
//   - IfAbsent / IfPresent: the key's last message is read (one multi-subject direct get for a
//     whole group), the condition decided on it, and the write of that key carries
//     Nats-Expected-Last-Subject-Sequence with the sequence read (0: no message); a condition
//     on a key the commit does not write rides on a carrier message to <prefix>.!.0.c with
//     Nats-Expected-Last-Subject-Sequence-Subject naming the key. The server's check makes a
//     concurrent writer's change between our read and the commit fail the whole batch (wrong
//     last sequence); the commit is then read and tried again (at most 20 times).
//   - TTL: Nats-TTL in whole seconds, rounded up, and the writer's own expiry in Gw-Exp
//     (milliseconds): a record past Gw-Exp reads as absent before the server removes it.
//   - Get: a direct get of the subject's last message (R1), or a STREAM.MSG.GET answered by
//     the stream leader (R>1: a replica answering a direct get may not have applied the last
//     acknowledged commit yet).
//   - Scan: direct batch gets with the prefix's subject filter (the complete "/"-parts of the
//     prefix; the partial last part is matched on the decoded keys), read forward from the
//     first sequence in pages of 512, each key's newest message kept, then sorted by key. NATS
//     keeps no subject order and has no seek, so the scan holds the prefix's records in memory
//     before calling fn; a key written during the scan shows its old or its new value.
//   - Group commit: commits with disjoint keys waiting behind the batches in flight are merged
//     into one batch; commits sharing a key run in order (dispatch in commit.go).
//   - Unavailable: no connection (nothing is buffered while reconnecting: a commit fails at
//     once), no answer in Options.Timeout, no stream leader for Options.Timeout (see
//     "Retries"), or a full stream: domain.ErrStorageUnavailable. A timed-out commit's outcome
//     is unknown (as with a Badger commit whose ctx ended).
//
// # What the server guarantees (read in nats-server v2.15.2's source, server/stream.go and
// server/jetstream_batching.go)
//
//   - An atomic batch covers one stream. Its consistency checks (expected sequences, limits,
//     TTL validity) run for every message before any is stored; then, on one server, the whole
//     batch is applied under the stream's isolation lock, which direct gets also take (a
//     reader sees all of a batch or none); clustered, the batch is one multi-entry raft
//     proposal (ProposeMulti).
//   - Limits (server defaults; deploy/nats.conf spells them out, natstest raises them): 1,000
//     messages per batch (max_batch_size), 50 open batches per stream and 1,000 per server,
//     10 s to commit a batch after its first message. Batches refuse Nats-Msg-Id and
//     Nats-Expected-Last-Msg-Id.
//   - Nats-Expected-Last-Subject-Sequence is checked per message, against the subject's last
//     sequence, or the subject named by Nats-Expected-Last-Subject-Sequence-Subject. It fails on
//     a subject the same batch wrote earlier (hence: one message per key, carriers first), and,
//     clustered, while another proposal on that subject is in flight (hence: commits sharing a
//     key are serialised here). There is no "exists" check: IfPresent needs the current
//     sequence, IfAbsent after a delete the tombstone's.
//   - DiscardNew with max_bytes is checked for the whole batch before it is applied, counting
//     the messages a batch would replace (MaxMsgsPerSubject) as new bytes: near full, an update
//     can be refused though it would free as much as it takes.
//   - On R1 file storage an atomic batch is staged in a temporary file store of its own
//     (newBatchStore), about 10 ms a batch on this machine; R>1 stages in memory. Single
//     messages are plain publishes.
//   - Per-message TTL (AllowMsgTTL, Nats-TTL): whole seconds, at least 1 s; "never" allowed.
//   - Direct batch get (next_by_subj with batch, max_bytes): any number of messages in
//     sequence order; multi_last (the last message of many subjects) answers at most 1,024
//     subjects, so scans page with next_by_subj instead.
//
// What it does not guarantee, and what this package does about it:
//   - On one server, a batch whose checks passed but whose store write fails midway (a disk
//     error) may be partly stored; the server keeps the batch to recover at restart. Not
//     handled here: the file store's own failure.
//   - A publish whose answer is lost (timeout, connection cut) may have been applied.
//     Callers treat it as storage_unavailable and retry; the gateway's writes are idempotent
//     (message ids, Idempotency-Keys). This package never sends such a commit again itself.
//   - Durability is replication: a record acknowledged by an R3 stream is on a majority of
//     three servers; --fsync sets nothing here (the NATS server's sync_interval decides when a
//     server's own files are synced).
//
// # Retries: "no responders" only (retry.go)
//
// A request that matches no subscription on the server the connection is on is answered by
// that server with a 503 status, nats.ErrNoResponders (nats-server client.go,
// processMsgResults: only when it delivered the message to nobody, locally, over a route or a
// gateway). In a cluster this happens while a stream has no leader (an election: only the
// leader subscribes to the stream's subjects, stream.go setLeader/subscribeToStream) and for a
// moment after a stream is created or moves, until the leader's interest has crossed the
// routes (the create response does not wait for it); direct gets likewise before a replica's
// subscription arrives. The request was not delivered, so nothing was stored, and it is safe
// to send again: every request here (reads, a single publish, the commit message of an atomic
// batch, the lease) is tried again, with a backoff of 10 to 250 ms, while it fails that way,
// for at most Options.Timeout; then it answers storage_unavailable. For a batch this holds
// because of how it goes out (orbit.go's PublishMsgBatch): its first messages are published
// without a reply and only the commit message is a request, so a no-responders answer is
// about the commit message, which then reached no server, and the batch was not committed. A
// retry sends the whole batch again under a new batch id; what the previous attempt staged on a
// leader that lost its interest meanwhile is never committed and is dropped by the server
// after its batch timeout (10 s). nats.go's own retry of a single publish (twice, 250 ms) is
// off, so one rule holds for all. Anything else is not retried here: a timeout or a lost
// connection leaves a commit's outcome unknown (it may have been applied), a server error
// (wrong last sequence, a full stream) is an answer.
//
// Imports: persist, nats.go (jetstream) and orbit.go/jetstreamext (batch publish, batch get:
// the NATS maintainers' own helpers for the newest server APIs, so this package does not
// hand-roll their wire format), and the standard library.
package natskv
