// Package natskv is persist.KV on NATS JetStream: the gateway's records in streams that
// several gateways can share (DESIGN.md sections 13 and 19). It passes the same contract as
// Badger (persist/kvtest), on one server and on a three-node cluster, with the server's
// defaults (a stock nats-server: 1 MiB max_payload, 1,000 messages per batch).
//
// # Layout
//
// Records streams per prefix (streams.go): one, <prefix>_records, capturing <prefix>.*.*.>,
// or Options.Streams of them with partition p in stream p mod Streams, their leaders spread
// over the NATS servers. Each is file storage, keeps one message per subject
// (MaxMsgsPerSubject 1: a record is its subject's last message), refuses new messages when
// full (DiscardNew: a full stream never drops records), with atomic batches, per-message TTLs
// and direct gets allowed. A key is the subject <prefix>.<table>.<partition>.<id tokens>
// (keys.go: the encoding keeps byte order and is reversible, every byte value allowed, at most
// MaxEncodedKey bytes). The partition token comes from Options.Partition (a pure function of
// the key; 0 by default), so a cluster gives every record of a user the user's partition and a
// new owner scans only its partitions. The store's own records (the lease, the partition
// fences, condition carriers) use the table token "!", which no key encodes to. Values over
// what a message takes go to the object store bucket <prefix>_media (blobs.go; persist.Outbox
// keeps media bodies there and a reference in the record).
//
// # How the KV contract maps onto the server
//
//   - Commit: the ops reduced to one message per key (a later op on a key wins; a delete is a
//     tombstone message, Gw-Op: del, removed after a minute by its TTL). One message is a plain
//     publish; more are one atomic batch (Nats-Batch-Id/-Sequence/-Commit, orbit.go's
//     jetstreamext.PublishMsgBatch, without the first-message ack: one round trip). A commit's
//     first message carries its id (Gw-Commit), so a commit whose answer was lost is settled by
//     reading its subject back (commit.go, resolve) instead of being reported unknown.
//   - IfAbsent / IfPresent: the key's last message is read (one multi-subject direct get for a
//     whole group, or a fenced view's owner cache), the condition decided on it, and the write
//     of that key carries Nats-Expected-Last-Subject-Sequence with the sequence read (0: no
//     message); a condition on a key the commit does not write rides on a carrier message to
//     <prefix>.!.<partition>.c with Nats-Expected-Last-Subject-Sequence-Subject naming the key.
//     The server's check makes a concurrent writer's change between our read and the commit
//     fail the whole batch (wrong last sequence); the commit is then read again, from the
//     leader, and tried again.
//   - Fences (fence.go): a View with a Fencer (a cluster node's acquisition of the partition)
//     adds to each commit one expected-sequence check of a fence lane against the sequence its
//     acquisition's fence write got; once another node wrote the fence, the server refuses the
//     commit, the store answers ErrFenced and tells the Fencer.
//   - TTL: Nats-TTL in whole seconds, rounded up, with their unit ("1209600s": the server
//     parses a duration first), and the writer's own expiry in Gw-Exp
//     (milliseconds): a record past Gw-Exp reads as absent before the server removes it.
//   - Get (read.go): Gets of one stream waiting behind one in flight go out together as one
//     multi-subject direct get (GetMany likewise). On a replicated stream a direct get may be
//     answered by a replica that has not applied the newest commits: a fenced view takes an
//     answer only from a replica at or past what it must see (its floor), else asks the leader;
//     the Store's own reads ask the leader.
//   - Scan (scan.go): direct batch gets with the prefix's subject filter (the complete
//     "/"-parts of the prefix; the partial last part is matched on the decoded keys), read
//     forward from the first sequence (ScanSince: from the first message at a time, the
//     stream's time index) in pages, each key's newest message kept, then sorted by key. NATS
//     keeps no subject order and has no seek, so the scan holds the prefix's records in memory
//     before calling fn; a key written during the scan shows its old or its new value.
//   - Group commit (commit.go): one dispatcher per store (a node) merges the commits of every
//     partition (every View) of a stream waiting behind the groups in flight into one batch,
//     at most MaxBatches batches in flight over all the streams; commits sharing a key run in
//     order. On one server the one-message commits of a group (its fence check riding on its
//     message) go as pipelined publishes, each answered by its own ack (read from the store's
//     one ack subscription: acks.go; a success is answered to its caller from the ack's
//     callback at once, piped.go earlyAnswers), without a batch slot (an R1 atomic batch stages in a
//     file store the server makes for it: directory, metadata, sync; it was most of the
//     server's CPU); only commits of several messages take a batch slot there. On a replicated stream every group takes a batch slot (a plain publish costs
//     a raft proposal as a batch does, so it waits and joins the next batch). A node's outboxes
//     share one outcome writer (persist.OutcomeWriter, through CommitParts): every partition's
//     outcomes reach the dispatcher together, each a commit with its own view's fence. Each stream keeps the same limits
//     of its own, and a group in flight for over 250 ms leaves the node's budget, so a stream
//     electing a leader holds only its own partitions' commits.
//   - Unavailable: a full stream; no answer in Options.Timeout; or no stream leader, no
//     connection (a NATS server lost), for longer than Options.Hold (see "Retries"):
//     domain.ErrStorageUnavailable. A fenced commit whose partition moved: ErrFenced
//     (domain.ErrNodeUnavailable).
//
// # What the server guarantees (read in nats-server v2.15.2's source, server/stream.go and
// server/jetstream_batching.go)
//
//   - An atomic batch covers one stream. Its consistency checks (expected sequences, limits,
//     TTL validity) run for every message before any is stored; then, on one server, the whole
//     batch is applied under the stream's isolation lock, which direct gets also take (a
//     reader sees all of a batch or none); clustered, the batch is one multi-entry raft
//     proposal (ProposeMulti).
//   - Limits (server defaults, which the gateway runs with: natstest does not raise them):
//     1 MiB per message (max_payload), 1,000 messages per batch (max_batch_size), 50 open
//     batches per stream and 1,000 per server, 10 s to commit a batch after its first message.
//     Batches refuse Nats-Msg-Id and Nats-Expected-Last-Msg-Id.
//   - Nats-Expected-Last-Subject-Sequence is checked per message, against the subject's last
//     sequence, or the subject named by Nats-Expected-Last-Subject-Sequence-Subject. It fails on
//     a subject the same batch wrote earlier (hence: one message per key, carriers first), and,
//     clustered, while another proposal on that subject is in flight (error 10164; hence:
//     commits sharing a key are serialised here, and a partition has FenceLanes fence
//     subjects, so one of its groups can be in flight while the next fills). There is no "exists" check: IfPresent needs the current
//     sequence, IfAbsent after a delete the tombstone's.
//   - DiscardNew with max_bytes is checked for the whole batch before it is applied, counting
//     the messages a batch would replace (MaxMsgsPerSubject) as new bytes: near full, an update
//     can be refused though it would free as much as it takes.
//   - On R1 file storage an atomic batch is staged in a temporary file store of its own
//     (newBatchStore), about 10 ms a batch on this machine; R>1 stages in memory. Single
//     messages are plain publishes.
//   - Per-message TTL (AllowMsgTTL, Nats-TTL): a Go duration, else a number of seconds; at
//     least 1 s; "never" allowed.
//   - Direct batch get (next_by_subj with batch, max_bytes): any number of messages in
//     sequence order; multi_last (the last message of many subjects) answers at most 1,024
//     subjects, so scans page with next_by_subj instead.
//
// What it does not guarantee, and what this package does about it:
//   - On one server, a batch whose checks passed but whose store write fails midway (a disk
//     error) may be partly stored; the server keeps the batch to recover at restart. Not
//     handled here: the file store's own failure.
//   - A publish whose answer is lost (timeout, connection cut) may have been applied. The
//     commit's id (Gw-Commit) on its first message settles it once the leader answers again
//     (applied: the commit succeeded; else it is sent again); with no answer within Hold it
//     is storage_unavailable, and callers retry (the gateway's writes are idempotent: message
//     ids, Idempotency-Keys).
//   - Durability is replication: a record acknowledged by an R3 stream is on a majority of
//     three servers; --fsync sets nothing here (the NATS server's sync_interval decides when a
//     server's own files are synced).
//
// # Retries: what was not stored (retry.go)
//
// A request that matches no subscription on the server the connection is on is answered by
// that server with a 503 status, nats.ErrNoResponders (nats-server client.go,
// processMsgResults: only when it delivered the message to nobody). In a cluster this happens
// while a stream has no leader (an election: only the leader subscribes to the stream's
// subjects) and for a moment after a stream is created or moves; direct gets likewise before a
// replica's subscription arrives. Nothing was stored. Likewise when the connection is down
// (nothing is buffered while reconnecting: the request never left), and when the server drops
// an atomic batch it had not committed (10176: another leader took over mid-batch; 10210: too
// many batches open). Every request here is sent again while it fails that way (notSent), with
// a backoff of 10 to 250 ms, each try bounded by Options.Timeout, for at most Options.Hold
// (DefaultHold, 10 s): a NATS server's loss, the records' stream leader included, costs clients
// the seconds of an election and a reconnect, not errors. A commit waits for the connection to
// move to another server (awaitConnected) when the NATS cluster has one; with a lone NATS
// server down it fails at once. A batch is safe to send again because of how it goes out
// (PublishMsgBatch): its first messages are published without a reply and only the commit
// message is a request, so a no-responders answer is about the commit message, and the batch
// was not committed; a retry sends the whole batch under a new batch id. A fenced commit's
// retries stop as soon as its acquisition is no longer valid. nats.go's own retry of a single
// publish is off, so one rule holds for all. A server's answer (wrong last sequence, a full
// stream) is not retried here.
//
// Imports: persist, nats.go (jetstream) and orbit.go/jetstreamext (batch publish: the NATS
// maintainers' own helper for the newest server API, so this package does not hand-roll its
// wire format), and the standard library. Direct gets (multi_last, batch gets for scans) are
// read here, by one request whose answers must end with the server's end of batch: orbit.go's
// GetBatch ends its iteration silently when its context expires, which a scan cannot tell from
// the end of the records.
package natskv
