// Package jsstream is what the gateway's two JetStream clients share, its record store
// (persist/natskv) and its events stream (natsevents): the options of a credentials file and
// a CA, and a stream created with as many replicas as the NATS deployment allows.
package jsstream

import (
	"context"
	"errors"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Create creates the stream cfg with replicas copies; replicas 0 means 1 on a single server
// and the most a cluster takes (3, else 2, else 1). cfg.Replicas is set to the count used.
func Create(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, cfg *jetstream.StreamConfig, replicas int) (jetstream.Stream, error) {
	return CreateEach(ctx, nc, js, replicas, func(int) *jetstream.StreamConfig { return cfg })
}

// CreateEach is Create for a stream whose configuration depends on its replica count: each
// count tried creates cfg(count), its Replicas set to the count.
func CreateEach(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, replicas int, cfg func(replicas int) *jetstream.StreamConfig) (jetstream.Stream, error) {
	counts := []int{replicas}
	if replicas == 0 {
		counts = []int{1}
		if nc.ConnectedClusterName() != "" {
			counts = []int{3, 2, 1}
		}
	}
	var st jetstream.Stream
	var err error
	for _, r := range counts {
		c := cfg(r)
		c.Replicas = r
		if st, err = js.CreateStream(ctx, *c); err == nil || !replicaRefusal(err) {
			break
		}
	}
	return st, err
}

// replicaRefusal tells a refusal of the replica count (the cluster has fewer servers, or the
// server is not clustered) from other errors.
func replicaRefusal(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == 10023 /* insufficient resources */ ||
		apiErr.ErrorCode == 10074 /* replicas > 1 not supported in non-clustered mode */)
}

// Auth is the connection options of a credentials file and a CA file ("": none).
func Auth(creds, tlsCA string) []nats.Option {
	var opts []nats.Option
	if creds != "" {
		opts = append(opts, nats.UserCredentials(creds))
	}
	if tlsCA != "" {
		opts = append(opts, nats.RootCAs(tlsCA))
	}
	return opts
}
