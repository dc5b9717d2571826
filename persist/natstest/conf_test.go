package natstest

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// The shipped NATS configuration is one the server accepts, with the limits README "NATS"
// states.
func TestShippedConfig(t *testing.T) {
	o, err := server.ProcessConfigFile("../../deploy/nats.conf")
	if err != nil {
		t.Fatal(err)
	}
	if !o.JetStream || o.MaxPayload != 32<<20 || o.JetStreamLimits.MaxBatchSize != 1000 || o.JetStreamLimits.MaxBatchInflightPerStream != 50 {
		t.Fatalf("jetstream %v, max_payload %d, batch %d, inflight %d", o.JetStream, o.MaxPayload, o.JetStreamLimits.MaxBatchSize, o.JetStreamLimits.MaxBatchInflightPerStream)
	}
}
