package sim

import "github.com/gateway/gateway/internal/runq"

// keptDrainers is the most event goroutines a network keeps waiting for work; more start
// when every kept one is busy, and those exit once nothing waits for them.
const keptDrainers = 4

// newDrainers returns a network's event goroutines: they take the clients that have events
// waiting (made ready in the order they got them) and deliver each one's events to its sink
// (client.drain). A client is ready at most once and taken by one goroutine at a time
// (client.draining), so its events reach its sink in order, from one goroutine at a time.
//
// A goroutine a burst of events was the sim's own cost on the send path (issue 32: a
// delivery receipt a message, each a new goroutine, its start, its exit and its stack grown
// by the sink's frame). These live on (internal/runq): a wake hands work to one that waits,
// and one that finds more ready when it is done takes it without waiting (a wake per burst,
// not per receipt). Sinks must not block (network.Event): a sink that did would hold its
// goroutine and the clients made ready while that goroutine was on its way to them (not
// Spread: a client made ready when none waits or comes starts another goroutine).
func newDrainers() *runq.Q[*client] {
	return runq.New((*client).drain, runq.Options{Keep: keptDrainers})
}
