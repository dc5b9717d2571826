package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// batchDone is a job's result, for the queue's state (Session.batchDone).
type batchDone struct {
	settled  int       // entries whose outcome is known (sent or failed), reported in order
	attempts int       // sends the network answered (pacing counts them; the refusal rate too)
	refused  int       // of those, refusals (463, 479, timelock)
	last     time.Time // when the network last answered
	back     []item    // entries without an outcome, in batch order, for the queue
	// holds: recipients whose next message waits until then (a per-message backoff).
	holds map[string]time.Time
	// pause: the network asked the whole session to wait until then (429).
	pause time.Time
	// backoff: an outcome is unknown or the link is down: the queue's own backoff.
	backoff bool
	// marks: recipients refused twice as not reachable (their message failed).
	marks []string
	// timelock: the network's account-wide reach-out timelock, until then (zero: none seen).
	timelock time.Time
	// sent: the numbers written to (with the LIDs the network addressed them by), for the
	// contact book.
	sent []domain.NumberCheck
}

// What the deliverer does with a send's answer (network.go's list of errors).
type verdict uint8

const (
	settle     verdict = iota // sent, or a definite failure
	holdTo                    // this recipient's messages wait until a time, then go again
	pauseAll                  // the session's queue waits until a time (429)
	backoffAll                // outcome unknown or link down: the queue's own backoff
	timelocked                // account-wide timelock: first messages to new contacts wait
)

// Retries of per-recipient refusals.
const (
	// notReachableRetry: a 463 without the account-wide notice is tried once more after this,
	// then failed (recipient_not_reachable) and the recipient marked.
	notReachableRetry = time.Minute
	// maxRefusedAttempts: 463 (not reachable) and 479 (refused) are tried at most this often.
	maxRefusedAttempts = 2
	// timelockUnknownEnd: a timelock whose end the network did not say holds this long.
	timelockUnknownEnd = time.Hour
)

// judge says what a send's answer means for the message and the queue, and until when a hold
// lasts. An unknown outcome is never a failure; a refusal is never tried more than twice.
func judge(err error, now time.Time, attempts int) (verdict, time.Time) {
	if err == nil {
		return settle, time.Time{}
	}
	if until, ok := network.TimelockUntil(err); ok {
		if !until.After(now) {
			until = now.Add(timelockUnknownEnd)
		}
		return timelocked, until
	}
	if errors.Is(err, network.ErrNotReachable) {
		if attempts >= maxRefusedAttempts {
			return settle, time.Time{}
		}
		return holdTo, now.Add(notReachableRetry)
	}
	if after, ok := network.RetryAfter(err); ok {
		if errors.Is(err, network.ErrRateLimited) {
			return pauseAll, now.Add(after)
		}
		if attempts >= maxRefusedAttempts {
			return settle, time.Time{}
		}
		return holdTo, now.Add(after)
	}
	switch {
	case errors.Is(err, domain.ErrNotConnected), errors.Is(err, network.ErrUnknownOutcome),
		errors.Is(err, network.ErrBanned), errors.Is(err, network.ErrOutdated),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return backoffAll, time.Time{}
	}
	return settle, time.Time{}
}

// errSendPanicked is a network client's send that panicked: the message settles as failed
// (whether the network took it is not known; sent again, it could arrive twice), and the
// session's other messages and every other session go on (a panic on a send goroutine ended
// the process, with every session in it, and the boot sent the message again).
var errSendPanicked = errors.New("the network client failed (panic) while sending; not sent again")

// sendRecovered is client.Send with a panic in it turned into errSendPanicked (logged with
// its stack).
func sendRecovered(ctx context.Context, client network.Client, m domain.Message, log *slog.Logger) (rc network.Receipt, err error) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("deliverer: the network client panicked while sending", "message_id", m.ID, "panic", p, "stack", string(debug.Stack()))
			rc, err = network.Receipt{}, errSendPanicked
		}
	}()
	return client.Send(ctx, m)
}

// refusal tells whether a send's error is the network refusing the message (what the
// refusal rate counts).
func refusal(err error) bool {
	return errors.Is(err, network.ErrNotReachable) || errors.Is(err, network.ErrTimelock) ||
		errors.Is(err, network.ErrRefused)
}

// deliver sends a batch in order and reports each final outcome to the message facet. A
// message held for its recipient holds only the later ones to the same recipient; a hold of
// the whole session (429, unknown outcome, link down) stops the batch.
func deliver(client network.Client, deps Deps, batch []item, sends *sendContext) batchDone {
	r := batchDone{sent: sends.sent[:0]}
	stop := false
	var skip map[string]struct{} // recipients held or just marked: their later messages wait
	for _, it := range batch {
		e := it.e
		to := e.Message.To
		if _, held := skip[to]; held || stop {
			r.back = append(r.back, it)
			continue
		}
		rc, err := sendRecovered(sends.get(deps.SendTimeout), client, e.Message, deps.Log)
		now := deps.Clock.Now()
		e.Attempts++
		v, until := judge(err, now, e.Attempts)
		if v != backoffAll {
			r.attempts++
			r.last = now
			if refusal(err) {
				r.refused++
			}
		}
		switch v {
		case settle:
			if err != nil {
				err = classify(err)
				e.Code, e.Error = domain.CodeOf(err), err.Error()
				e.SetStatus(domain.MsgFailed, now)
				if errors.Is(err, domain.ErrRecipientNotReachable) {
					r.marks = append(r.marks, to)
					skip = addTo(skip, to)
				}
			} else {
				e.NetworkID, e.SentAt, e.LID = rc.ID, domain.MillisOf(now), rc.LID
				e.SetStatus(domain.MsgSent, now)
				if !domain.IsGroup(to) {
					r.sent = append(r.sent, domain.NumberCheck{Phone: to, OnNetwork: true, LID: rc.LID})
				}
			}
			deps.Deliveries.Outcome(e, err)
			r.settled++
			continue
		case holdTo, timelocked:
			if r.holds == nil {
				r.holds = map[string]time.Time{}
			}
			r.holds[to] = until
			skip = addTo(skip, to)
			if v == timelocked {
				// Whom the timelock spares (contacts who wrote) is the actor's to sort out.
				r.timelock, stop = until, true
			}
		case pauseAll:
			r.pause, stop = until, true
		case backoffAll:
			r.backoff, stop = true, true
		}
		it.e = e
		r.back = append(r.back, it)
		deps.Log.Warn("deliverer: message held; it is sent again under its id",
			"session_id", e.SessionID, "message_id", e.ID, "attempts", e.Attempts, "err", err)
	}
	return r
}

// sendContext bounds a worker's sends by SendTimeout each with one context for as many sends
// as start in its first tenth: a context per send (its timer) cost a microsecond and four
// allocations per message (a batch is often one message). Each send so gets between 0.9 and
// 1 times SendTimeout. Used by the worker's goroutine only.
type sendContext struct {
	ctx    context.Context
	cancel context.CancelFunc
	until  time.Time
	// sent: the last batch's batchDone.sent array, back from the actor's bookSent (which keeps
	// none of it), for the next batch's numbers: an allocation per batch otherwise, and a
	// batch is often one message.
	sent []domain.NumberCheck
}

func (c *sendContext) get(timeout time.Duration) context.Context {
	if now := time.Now(); c.ctx == nil || now.Add(timeout-timeout/10).After(c.until) {
		c.stop()
		c.until = now.Add(timeout)
		c.ctx, c.cancel = context.WithDeadline(context.Background(), c.until)
	}
	return c.ctx
}

func (c *sendContext) stop() {
	if c.cancel != nil {
		c.cancel()
	}
	c.ctx, c.cancel = nil, nil
}

func addTo(set map[string]struct{}, k string) map[string]struct{} {
	if set == nil {
		set = map[string]struct{}{}
	}
	set[k] = struct{}{}
	return set
}

// classify turns a network's definite failure into the gateway's error (the network's error
// stays in the chain, so errors.Is matches either).
func classify(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, network.ErrNotOnNetwork):
		return fmt.Errorf("%w: %w", domain.ErrRecipientNotOnNetwork, err)
	case errors.Is(err, network.ErrNotReachable):
		return fmt.Errorf("%w: %w", domain.ErrRecipientNotReachable, err)
	case errors.Is(err, domain.ErrNotConnected):
		return fmt.Errorf("%w: %w", domain.ErrNotConnected, err)
	case domain.CodeOf(err) != "":
		return err // the network named the gateway's code (outside_service_window, ...)
	}
	return fmt.Errorf("%w: %w", domain.ErrNetwork, err)
}
