// Package jsstream creates a JetStream stream with as many replicas as the NATS deployment
// allows: the gateway's record store (persist/natskv) and its events stream (natsevents) both
// make their stream this way.
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
		cfg.Replicas = r
		if st, err = js.CreateStream(ctx, *cfg); err == nil || !replicaRefusal(err) {
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
