// Package node is one gateway process: a single node, or one node of a cluster. It is built
// from a typed Config (`gateway serve`'s flags; the command line and the environment are
// package main's to read) by Open, serves the HTTP API with Serve and stops with Shutdown.
//
// # Run modes
//
//   - A single node: one runtime (the engine and its events facet) over the whole store:
//     Badger in the data directory, or NATS JetStream under the prefix's single-writer lease
//     (--store nats; Lost is closed if another gateway takes the lease).
//   - A cluster node (--cluster, DESIGN.md section 13): the cluster's membership (package
//     cluster) on one NATS connection with the records stream, and one runtime per partition
//     this node owns, on the partition's fenced view of the store; the HTTP layer runs each
//     request on its partition's runtime, here or on the owner (httpapi.Cluster).
//
// # Start order (Open)
//
// The configuration is checked, then: the data directory, the plans, storage (before the
// identity provider, so a data directory that cannot be opened fails at once), the identity
// provider (a cluster's dev issuer key from the store), the network, the publisher of events to
// NATS (--events-nats: it never waits for a server that is down), the metrics, and last the
// core: a single node's runtime (events out first: it resumes the deliveries queued before the
// last stop or crash, and the engine publishes into it from boot on) and the HTTP server over
// it; or a cluster node's HTTP server, then its membership, which acquires partitions.
//
// # Stop order (Shutdown), one for every mode
//
// Stop accepting and drain the requests in flight; hand a cluster node's partitions over
// (each partition's runtime stops as a single node's does); stop the engine (its actors
// finish and flush), then events out (which publishes the engine's last changes); close the
// publisher of events to NATS, the network, the identity provider, storage, and last the NATS
// connection.
//
// # Files, in layers
//
// Each file uses only the files of its layer and those below (layers_test.go checks it):
//
//  1. config.go: Config, its checks and the defaults that follow from it; fakewa.go (the
//     fakewa test build's hook, which points Config at the fake WhatsApp server) and
//     release.go (the same hook in a release build: nothing); gc.go (TuneGC: the garbage
//     collector's target and soft memory limit for --store nats).
//  2. storage.go (the records store, the dev issuer key of a cluster), network.go (the
//     messaging network, and its fenced form for a partition) and events.go (the publisher of
//     events to NATS JetStream, --events-nats).
//  3. runtime.go: the only place the engine and its events facet are built, for a single
//     node over the whole store and for each partition of a cluster node.
//  4. cluster.go (a partition's life: acquire, release, fenced; httpapi.Cluster), mover.go,
//     directory.go, live.go, lists.go.
//  5. node.go: Open, Serve, Shutdown.
package node
