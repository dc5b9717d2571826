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

// notSent tells whether err says that nothing was stored, so the request may be sent again:
// no responders (above); the connection was down, so nothing left this process (nothing is
// buffered while reconnecting: ReconnectBufSize -1); or the server dropped an atomic batch it
// had not committed (another leader took over mid-batch, or the stream had too many batches
// open).
func notSent(err error) bool {
	if noResponders(err) || errors.Is(err, nats.ErrReconnectBufExceeded) || errors.Is(err, nats.ErrConnectionReconnecting) {
		return true
	}
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && (apiErr.ErrorCode == errIncompleteBatch || apiErr.ErrorCode == errTooManyInflight)
}

// whileUnrouted runs op, and again while it fails with no responders, until ctx ends; then the
// no-responders error is returned (mapped to storage_unavailable by the caller). Safe for
// reads, single publishes and the commit of an atomic batch alike: a no-responders answer
// means the server delivered the request to nobody, so nothing was stored (package doc,
// "Retries"). Any other failure, a timeout above all, is returned at once.
func whileUnrouted(ctx context.Context, op func() error) error {
	return retryWhile(ctx, noResponders, op)
}

func retryWhile(ctx context.Context, again func(error) bool, op func() error) error {
	wait := unroutedFirstWait
	for {
		err := op()
		if !again(err) {
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

// retry runs op, each try bounded by the store's round-trip Timeout, and again while what it
// sent was not stored (notSent: a stream electing its leader, a lost server the connection is
// moving off), until ctx (the store's Hold) ends. A timeout or a server's answer is returned.
func (s *Store) retry(ctx context.Context, op func(ctx context.Context) error) error {
	return retryWhile(ctx, notSent, func() error {
		tctx, cancel := context.WithTimeout(ctx, s.timeout)
		defer cancel()
		return op(tctx)
	})
}

// retryRead is retry for a read, which may be sent again whatever became of it: a try that
// timed out (its answer lost with a server, a leader stepping down) or whose answers came with
// one missing (errAnswerLost) is tried again too.
func (s *Store) retryRead(ctx context.Context, op func(ctx context.Context) error) error {
	return retryWhile(ctx, func(err error) bool {
		return notSent(err) || (ctx.Err() == nil && (errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, errAnswerLost)))
	}, func() error {
		tctx, cancel := context.WithTimeout(ctx, s.timeout)
		defer cancel()
		return op(tctx)
	})
}
