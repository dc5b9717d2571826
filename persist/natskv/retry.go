package natskv

import (
	"context"
	"errors"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The backoff between tries of a request that reached no responder (see whileUnrouted).
const (
	unroutedFirstWait = 10 * time.Millisecond
	unroutedMaxWait   = 250 * time.Millisecond
)

// noResponders tells whether err says that a request was delivered to no subscriber at all:
// the NATS server the connection is on matched no interest for its subject and answered with
// a 503 status (nats.ErrNoResponders; jetstream's PublishMsg reports it as ErrNoStreamResponse).
func noResponders(err error) bool {
	return errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse)
}

// whileUnrouted runs op, and again while it fails with no responders, until ctx ends; then the
// no-responders error is returned (mapped to storage_unavailable by the caller). Safe for
// reads, single publishes and the commit of an atomic batch alike: a no-responders answer
// means the server delivered the request to nobody, so nothing was stored (package doc,
// "Retries"). Any other failure, a timeout above all, is returned at once.
func whileUnrouted(ctx context.Context, op func() error) error {
	wait := unroutedFirstWait
	for {
		err := op()
		if !noResponders(err) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		wait = min(2*wait, unroutedMaxWait)
	}
}
