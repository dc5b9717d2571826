package natstest

import (
	"testing"

	"github.com/nats-io/nats-server/v2/server"
)

// The shipped NATS configuration is one the server accepts, with JetStream and the server's
// default limits (README "NATS": a stock server serves the gateway).
func TestShippedConfig(t *testing.T) {
	o, err := server.ProcessConfigFile("../../deploy/nats.conf")
	if err != nil {
		t.Fatal(err)
	}
	if !o.JetStream || o.MaxPayload != 0 || o.JetStreamLimits.MaxBatchSize != 0 || o.JetStreamLimits.MaxBatchInflightPerStream != 0 {
		t.Fatalf("jetstream %v, max_payload %d, batch %d, inflight %d", o.JetStream, o.MaxPayload, o.JetStreamLimits.MaxBatchSize, o.JetStreamLimits.MaxBatchInflightPerStream)
	}
}
