package whatsapp

// Acks: whatsmeow acks a message or a receipt to the server only once the gateway has kept what
// it carries (SynchronousAck; README, WhatsApp: "An incoming message is acked once kept").

import (
	"errors"
	"fmt"
	"time"

	"go.mau.fi/whatsmeow/types/events"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// take hands a whatsmeow event to the event goroutine. An incoming message or a receipt is
// waited for, at most keepWait, until the sink has kept what it carries: false (a failed
// commit, the wait's end, the client closing) and whatsmeow does not ack it, so the server
// delivers it again; one the sink refused as invalid is acked (a retry cannot keep it). It
// runs on whatsmeow's node handler, which handles one node at a time.
func (c *client) take(gen uint64, evt any) bool {
	switch evt.(type) {
	case *events.Message, *events.Receipt:
	default:
		c.events.push(queued{gen: gen, evt: evt})
		return true
	}
	kept := make(chan error, 1)
	c.events.push(queued{gen: gen, evt: evt, kept: func(err error) { kept <- err }})
	t := time.NewTimer(c.n.keepWait)
	defer t.Stop()
	var err error
	select {
	case err = <-kept:
	case <-t.C:
		err = fmt.Errorf("not kept within %s", c.n.keepWait)
	case <-c.events.stop:
		err = errors.New("the client is closed")
	}
	if err != nil && (errors.Is(err, domain.ErrValidation) || errors.Is(err, domain.ErrRecordInvalid)) {
		// Refused for what it is, not for the moment: delivered again it would be refused
		// again, and the link reset every redeliverAfter for ever (review). Acked, and said.
		c.log.Error("acking an event the gateway refused to keep: delivered again it would be refused again",
			"event", fmt.Sprintf("%T", evt), "err", err)
		return true
	}
	if err != nil {
		c.log.Warn("not acking an event the gateway did not keep; the server delivers it again at the next connection",
			"event", fmt.Sprintf("%T", evt), "err", err)
		c.redeliverSoon(gen)
		return false
	}
	return true
}

// emitKept emits evt (nil: nothing) carrying kept, which the sink calls once evt is kept (a
// message, a reaction, an edit, a revoke, a vote); an event that carries no Done (a message
// kind the port does not report...) is kept as the port's events always were, and kept is told
// so at once.
func (c *client) emitKept(evt network.Event, kept network.Done) {
	if evt == nil {
		kept.Call(nil)
		return
	}
	evt, carries := network.WithDone(evt, kept)
	c.emit(evt)
	if !carries {
		kept.Call(nil)
	}
}

// redeliverSoon has the server deliver again what was left unacked. It keeps it for the
// device's next login and sends nothing again on a live connection, so once redeliverAfter has
// passed the link is reset (whatsmeow reconnects at once): one reset for however many were left
// meanwhile, and none when the link is down (its next connection brings them).
func (c *client) redeliverSoon(gen uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.redeliver != nil || c.closed || c.gen != gen {
		return
	}
	c.redeliver = time.AfterFunc(c.n.redeliverAfter, func() {
		c.mu.Lock()
		wa, now := c.wa, c.gen == gen && !c.closed && c.online && c.redeliver != nil
		c.redeliver = nil
		c.mu.Unlock()
		if now {
			c.log.Info("resetting the link: the server delivers again what was not acked")
			wa.ResetConnection()
		}
	})
}
