package sim

import "sync"

// keptDrainers is the most event goroutines a network keeps waiting for work; more start
// when every kept one is busy, and those exit once nothing waits for them.
const keptDrainers = 4

// drainers are a network's event goroutines: they take the clients that have events waiting
// (ready, in the order they got them) and deliver each one's events to its sink. A client is
// in ready at most once and taken by one goroutine at a time (client.draining), so its
// events reach its sink in order, from one goroutine at a time.
//
// A goroutine a burst of events was the sim's own cost on the send path (issue 32: a
// delivery receipt a message, each a new goroutine, its start, its exit and its stack grown
// by the sink's frame). These live on: a wake hands work to one that waits, and one that
// finds more ready when it is done takes it without waiting (a wake per burst, not per
// receipt). Sinks must not block (network.Event): a sink that did would hold its goroutine and
// the clients made ready while that goroutine was on its way to them (a client made ready
// when none waits or comes starts another goroutine).
type drainers struct {
	mu    sync.Mutex
	cond  sync.Cond
	ready []*client // from head on: taken ones are nil
	head  int
	idle  int // goroutines waiting on cond
	// coming: goroutines signalled or started that have not looked at ready yet; one will
	// take what is ready, so a schedule meanwhile wakes none.
	coming int
	quit   bool // Close: the waiting ones exit
	live   sync.WaitGroup
}

// schedule makes c ready; its events are delivered by a kept goroutine or a new one. Called
// with c.mu held, after c.draining was set (and Network.events counted it).
func (d *drainers) schedule(c *client) {
	d.mu.Lock()
	d.ready = append(d.ready, c)
	switch {
	case d.coming > 0:
		// One is on its way: it takes c with the rest.
	case d.idle > 0:
		d.coming++
		d.cond.Signal()
	default:
		d.coming++
		d.live.Add(1)
		go d.run()
	}
	d.mu.Unlock()
}

// run is an event goroutine: it drains the ready clients, then waits for more while fewer
// than keptDrainers wait, else exits.
func (d *drainers) run() {
	defer d.live.Done()
	d.mu.Lock()
	d.coming--
	for {
		if c := d.take(); c != nil {
			d.mu.Unlock()
			c.drain()
			d.mu.Lock()
			continue
		}
		if d.quit || d.idle >= keptDrainers {
			d.mu.Unlock()
			return
		}
		d.idle++
		d.cond.Wait()
		d.idle--
		if !d.quit {
			d.coming-- // a Signal woke it (Broadcast is stop's alone)
		}
	}
}

// take returns the first ready client, or nil. Called with mu held.
func (d *drainers) take() *client {
	if d.head == len(d.ready) {
		return nil
	}
	c := d.ready[d.head]
	d.ready[d.head] = nil
	d.head++
	switch {
	case d.head == len(d.ready):
		d.ready, d.head = d.ready[:0], 0 // ran dry: the array is kept
	case d.head > len(d.ready)/2:
		n := copy(d.ready, d.ready[d.head:]) // never dry: keep it from growing
		clear(d.ready[n:])
		d.ready, d.head = d.ready[:n], 0
	}
	return c
}

// stop ends the waiting goroutines and waits for every one to exit. Called by Close once no
// event is pending (Network.events), so none has work.
func (d *drainers) stop() {
	d.mu.Lock()
	d.quit = true
	d.cond.Broadcast()
	d.mu.Unlock()
	d.live.Wait()
}
