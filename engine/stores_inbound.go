package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// storeLoopIncoming reads a customer's message to one of the user's sessions for the store
// loop (DESIGN.md section 18): a text that is exactly a stop word or START changes the
// suppression list; otherwise a "1", "2" or an answer's word answers the order that awaits
// this phone's answer; a tapped reply button (a cloud session's) answers the question whose
// buttons it names. It runs in the background (Inbound): a session actor never waits on storage.
func (e *Engine) storeLoopIncoming(ctx context.Context, s domain.Session, m network.Incoming) error {
	if m.From == "" || m.Group != "" {
		return nil // a group's chatter is nobody's answer
	}
	uid := s.AssignedTo
	quoted := ""
	if r := m.Message.ReplyTo; r != nil && r.FromMe {
		quoted = r.ID // our id of the message quoted (a cloud session's network maps Meta's)
	}
	switch {
	case m.Message.Kind == domain.KindButtonReply && m.Message.ButtonID != "":
		_, err := e.Stores.s.buttonAnswer(ctx, uid, m.From, m.Message.ButtonID, m.Message.Text, quoted)
		return err
	case m.Message.Kind == domain.KindText && m.Message.Text != "":
		stop, err := e.OptOuts.incoming(ctx, uid, s.ID, m.From, m.Message.Text)
		if stop || err != nil {
			return err
		}
		_, err = e.Stores.s.incomingAnswer(ctx, uid, m.From, m.Message.Text, quoted)
		return err
	}
	return nil
}

// storeLoopVote reads a vote on a poll: one that asks an order's confirmation is its answer.
// done is told once it is read (with the answer's write failing it: the network delivers the
// vote again, and an answer recorded twice is a no-op).
func (e *Engine) storeLoopVote(s domain.Session, v network.PollVote, done network.Done) {
	if s.AssignedTo == "" || v.Group != "" {
		done.Call(nil)
		return
	}
	uid := s.AssignedTo
	started := e.inContactLane(s.ID+"|"+v.From, func(ctx context.Context) {
		_, err := e.Stores.s.voteAnswer(ctx, uid, v.Poll, v.From, v.Options)
		done.Call(errors.Join(err, ctx.Err()))
	})
	if !started {
		done.Call(fmt.Errorf("%w: the gateway is stopping", domain.ErrUnavailable))
	}
}

// contactLanes runs the work on what one contact wrote to one session in the order they wrote
// it, one piece at a time (each contact's lane drains on a background goroutine of its own;
// different contacts go on at once). An answer and the "thanks" after it are then read in that
// order: the answer cancels an order's follow-up before the next message releases what waits
// for the contact. The changes to one message (reactions, edits, revokes, votes) have a lane
// of their own the same way (noteLane).
type contactLanes struct {
	mu      sync.Mutex
	waiting map[string][]func(context.Context) // by lane; present while the lane's goroutine runs
}

// inContactLane runs fn on key's lane (after what that lane already holds), off the session
// actor's goroutine (it never waits on storage), counted for Stop and bounded in time; false
// when the engine stops (fn does not run).
func (e *Engine) inContactLane(key string, fn func(ctx context.Context)) bool {
	l := &e.lanes
	l.mu.Lock()
	defer l.mu.Unlock()
	if q, busy := l.waiting[key]; busy {
		l.waiting[key] = append(q, fn)
		return true
	}
	started := e.goBackground(func() {
		for next := fn; next != nil; {
			ctx, cancel := context.WithTimeout(e.stopCtx, 2*e.cfg.AskTimeout)
			next(ctx)
			cancel()
			next = l.next(key)
		}
	})
	if started {
		if l.waiting == nil {
			l.waiting = map[string][]func(context.Context){}
		}
		l.waiting[key] = nil
	}
	return started
}

// next takes the lane's next piece of work, or closes the lane (nil) when it holds none.
func (l *contactLanes) next(key string) func(context.Context) {
	l.mu.Lock()
	defer l.mu.Unlock()
	q := l.waiting[key]
	if len(q) == 0 {
		delete(l.waiting, key)
		return nil
	}
	l.waiting[key] = q[1:]
	return q[0]
}

// goBackground runs fn on a goroutine of its own counted in bg, unless Stop has begun (false:
// fn does not run). The count is taken under bgMu, so no Add races Stop's wait.
func (e *Engine) goBackground(fn func()) bool {
	e.bgMu.Lock()
	defer e.bgMu.Unlock()
	if e.bgClosed {
		return false
	}
	e.bg.Add(1)
	go func() {
		defer e.bg.Done()
		fn()
	}()
	return true
}
