package whatsapp

import (
	"context"
	"fmt"
	"sync"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/types"
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
	// kept, for what must be kept before whatsmeow acks it (client.take), is told once it is
	// (nil) or is not (the error); nil for the rest.
	kept network.Done
}

// qrItem is an item read from whatsmeow's QR channel.
type qrItem struct{ item whatsmeow.QRChannelItem }

// eventQueue is an unbounded FIFO drained by one goroutine: whatsmeow's handler pushes (and
// returns at once, except for what must be kept before whatsmeow acks it: client.take waits
// for that), and events reach the sink in the order they were pushed. The queue stays short.
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
	wa     *whatsmeow.Client // the current whatsmeow client (nil in unit tests)
	// banUntil: the end of a temporary ban being reported, as the client recorded it.
	banUntil time.Time
	// lids stands for the device's LID map in unit tests (nil: wa's).
	lids pnResolver
}

// resolvePN finds the phone number of a LID in the device's LID map.
func (st linkState) resolvePN(ctx context.Context, lid types.JID) (types.JID, error) {
	if st.lids != nil {
		return st.lids(ctx, lid)
	}
	if st.wa == nil || st.wa.Store == nil || st.wa.Store.LIDs == nil {
		return types.JID{}, nil
	}
	return st.wa.Store.LIDs.GetPNForLID(ctx, lid)
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
		return network.Disconnected{Reason: fmt.Sprintf("linking failed: %v", e.Error), StatusReason: network.ReasonNetwork}
	case *events.Connected:
		return network.Connected{Phone: st.phone}
	case *events.KeepAliveRestored:
		return network.Connected{Phone: st.phone}
	case *events.KeepAliveTimeout:
		return network.Disconnected{
			Reason:       fmt.Sprintf("keepalive: no answer from the server since %s", e.LastSuccess.UTC().Format(time.RFC3339)),
			Reconnecting: true, StatusReason: network.ReasonKeepalive,
		}
	case *events.Disconnected:
		if !st.paired {
			// While linking, whatsmeow does not reconnect and the QR channel reports a timeout.
			return nil
		}
		return network.Disconnected{Reason: "connection lost", Reconnecting: true, StatusReason: network.ReasonNetwork}
	case *events.LoggedOut:
		reason := "device removed from the phone"
		if e.OnConnect {
			reason = e.Reason.String()
		}
		return network.LoggedOut{Reason: reason}
	case *events.StreamReplaced:
		return network.Disconnected{Reason: "stream replaced: another client connected with this device", StatusReason: network.ReasonReplaced}
	case *events.TemporaryBan:
		d := network.Disconnected{Reason: e.String(), StatusReason: network.ReasonBanned}
		if e.Expire > 0 {
			until := st.banUntil
			if until.IsZero() {
				until = time.Now().Add(e.Expire)
			}
			d.Until, d.Reconnecting = until.UTC(), true
		}
		return d
	case *events.ClientOutdated:
		return network.Disconnected{
			Reason:       "client outdated (405): WhatsApp refuses this client version; upgrade the gateway (it fetches the current web version at start)",
			StatusReason: network.ReasonOutdated,
		}
	case *events.ConnectFailure:
		return network.Disconnected{Reason: fmt.Sprintf("connect failure %s", e.Reason), StatusReason: network.ReasonNetwork}
	case *events.CATRefreshError:
		return network.Disconnected{Reason: fmt.Sprintf("auth token refresh failed: %v", e.Error), StatusReason: network.ReasonNetwork}
	}
	return nil
}
