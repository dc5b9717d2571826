package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/anthdm/hollywood/actor"
	"github.com/gateway/gateway/domain"
)

// An ask is a message that carries its own reply channel (buffered, capacity 1): the actor
// never blocks on a reply, and the caller waits on the channel without hollywood's request
// registry.

// failer is an actor reply that carries its own error (account.Result, key.Result,
// session.Reply).
type failer interface{ Failure() error }

// ask sends msg to pid and waits for its reply (ctx, timeout): one error path, the wait's or the
// reply's own. who names the actor in the timeout's error.
func ask[R failer](ctx context.Context, e *Engine, pid *actor.PID, msg any, reply chan R, timeout time.Duration, who string) (R, error) {
	e.hw.Send(pid, msg)
	r, err := waitReply(ctx, reply, timeout, who)
	if err == nil {
		err = r.Failure()
	}
	return r, err
}

// waitReply waits for an actor's reply, ctx, or the timeout.
func waitReply[T any](ctx context.Context, reply chan T, timeout time.Duration, who string) (T, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case r := <-reply:
		return r, nil
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	case <-t.C:
		var zero T
		return zero, fmt.Errorf("%w: the %s did not answer in time", domain.ErrUnavailable, who)
	}
}
