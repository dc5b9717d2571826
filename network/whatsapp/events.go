package whatsapp

import (
	"fmt"
	"sync"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/gateway/gateway/network"
)

// queued is one item on a client's event queue: a whatsmeow event, a QR channel item
// (qrItem) or an event the adapter raised itself (a network.Event). gen is the generation of
// the whatsmeow client it came from: items of a replaced client (after a logout, or a
// Disconnect while linking) are dropped.
type queued struct {
	gen uint64
	evt any
}

// qrItem is an item read from whatsmeow's QR channel.
type qrItem struct{ item whatsmeow.QRChannelItem }

// eventQueue is an unbounded FIFO drained by one goroutine: whatsmeow's handlers push and
// return at once (they run on whatsmeow's goroutines and must never block), and events reach
// the sink in the order they were pushed. Events are rare (a few per connection change), so
// the queue stays short.
type eventQueue struct {
	mu    sync.Mutex
	items []queued
	wake  chan struct{} // capacity 1: "there is something to drain"
	stop  chan struct{}
	done  chan struct{}
}

func newEventQueue() *eventQueue {
	return &eventQueue{
		wake: make(chan struct{}, 1),
		stop: make(chan struct{}),
		done: make(chan struct{}),
	}
}

func (q *eventQueue) push(item queued) {
	q.mu.Lock()
	q.items = append(q.items, item)
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// run hands every item to handle, in order, until close.
func (q *eventQueue) run(handle func(queued)) {
	defer close(q.done)
	for {
		select {
		case <-q.stop:
			return
		case <-q.wake:
		}
		for {
			q.mu.Lock()
			if len(q.items) == 0 {
				q.items = nil // let a burst's backing array go
				q.mu.Unlock()
				break
			}
			item := q.items[0]
			q.items[0] = queued{}
			q.items = q.items[1:]
			q.mu.Unlock()
			select {
			case <-q.stop:
				return
			default:
			}
			handle(item)
		}
	}
}

// close stops run (items still queued are dropped) and waits for it.
func (q *eventQueue) close() {
	select {
	case <-q.stop:
	default:
		close(q.stop)
	}
	<-q.done
}

// linkState is what translate needs to know about the device when an event is handled.
type linkState struct {
	paired bool
	phone  string
}

// translate maps one whatsmeow event or QR channel item onto the port's events (DESIGN.md
// section 7). It returns nil for what the port does not report. Side effects (the session
// table, the ban clock, replacing a logged-out device) are done by client.handle.
func translate(evt any, st linkState) network.Event {
	switch e := evt.(type) {
	case network.Event:
		return e
	case qrItem:
		switch {
		case e.item.Event == whatsmeow.QRChannelEventCode:
			return network.QRCode{Code: e.item.Code}
		case e.item == whatsmeow.QRChannelTimeout:
			return network.QRTimeout{}
		}
		// success is reported by PairSuccess, errors by PairError or ClientOutdated.
		return nil
	case *events.PairSuccess:
		return network.Paired{Phone: e.ID.User}
	case *events.PairError:
		return network.Disconnected{Reason: fmt.Sprintf("linking failed: %v", e.Error)}
	case *events.Connected:
		return network.Connected{Phone: st.phone}
	case *events.Disconnected:
		if !st.paired {
			// While linking, whatsmeow does not reconnect and the QR channel reports a timeout.
			return nil
		}
		return network.Disconnected{Reason: "connection lost", Reconnecting: true}
	case *events.LoggedOut:
		reason := "device removed from the phone"
		if e.OnConnect {
			reason = e.Reason.String()
		}
		return network.LoggedOut{Reason: reason}
	case *events.StreamReplaced:
		return network.Disconnected{Reason: "stream replaced: another client connected with this device"}
	case *events.TemporaryBan:
		return network.Disconnected{Reason: e.String()}
	case *events.ClientOutdated:
		return network.Disconnected{Reason: "client outdated: the WhatsApp library needs an update"}
	case *events.ConnectFailure:
		return network.Disconnected{Reason: fmt.Sprintf("connect failure %s", e.Reason)}
	case *events.CATRefreshError:
		return network.Disconnected{Reason: fmt.Sprintf("auth token refresh failed: %v", e.Error)}
	}
	return nil
}
