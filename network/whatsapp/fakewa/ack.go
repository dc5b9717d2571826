// Acknowledgements, as WhatsApp's server keeps them: what it delivers to a linked device (a
// message, a receipt) stays queued for that device until the device acknowledges it (a message
// by its delivery receipt, <receipt id=…/> with no type or type inactive, sender or peer_msg; a
// receipt by <ack class="receipt" id=…/>, whatsmeow's receipt.go sendMessageReceipt and
// sendAck), and what is still queued is delivered again, the same node, when the device next
// logs in (the offline queue a device drains after <success/>).

package fakewa

import (
	"slices"

	"go.mau.fi/whatsmeow/types"
)

// unacked is one node delivered to a device and not acknowledged yet.
type unacked struct {
	class string // "message" or "receipt"
	id    string
	n     node
}

// hold queues n (of class, with id) for the device c is logged in as until it is acknowledged.
// Call it before sending n: the acknowledgement can come before send returns.
func (c *conn) hold(class, id string, n node) {
	jid := c.loginJID()
	if jid == nil {
		return
	}
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.s.pending == nil {
		c.s.pending = map[types.JID][]unacked{}
	}
	c.s.pending[*jid] = append(c.s.pending[*jid], unacked{class: class, id: id, n: n})
}

// acked takes what the device acknowledged off its queue, records it, and tells OnAck's f.
func (c *conn) acked(class, id string) {
	jid := c.loginJID()
	if jid == nil || id == "" {
		return
	}
	c.s.mu.Lock()
	q := c.s.pending[*jid]
	i := slices.IndexFunc(q, func(u unacked) bool { return u.class == class && u.id == id })
	if i < 0 {
		c.s.mu.Unlock()
		return
	}
	c.s.pending[*jid] = slices.Delete(q, i, i+1)
	c.s.acks = append(c.s.acks, class+" "+id)
	f := c.s.onAck
	c.s.mu.Unlock()
	if f != nil {
		f(class, id)
	}
}

// OnAck has f called with each acknowledgement, as it arrives (before the server reads the
// client's next node); nil stops it.
func (s *Server) OnAck(f func(class, id string)) {
	s.mu.Lock()
	s.onAck = f
	s.mu.Unlock()
}

// ackOf takes the acknowledgements a client node carries.
func (c *conn) ackOf(n *node) {
	id, _ := n.Attrs["id"].(string)
	switch n.Tag {
	case "receipt":
		switch t, _ := n.Attrs["type"].(string); t {
		case "", string(types.ReceiptTypeInactive), string(types.ReceiptTypeSender), string(types.ReceiptTypePeerMsg):
			c.acked("message", id)
		}
	case "ack":
		if class, _ := n.Attrs["class"].(string); class == "receipt" {
			c.acked("receipt", id)
		}
	}
}

// redeliver sends the device what it did not acknowledge on its earlier connections.
func (c *conn) redeliver() error {
	jid := c.loginJID()
	if jid == nil {
		return nil
	}
	c.s.mu.Lock()
	q := slices.Clone(c.s.pending[*jid])
	c.s.mu.Unlock()
	for _, u := range q {
		if err := c.send(u.n); err != nil {
			return err
		}
	}
	return nil
}

// Acked tells whether a device acknowledged the message (class "message") or receipt
// ("receipt") with id.
func (s *Server) Acked(class, id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Contains(s.acks, class+" "+id)
}

// Unacked lists the ids of what phone's devices were delivered and did not acknowledge.
func (s *Server) Unacked(phone string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for jid, q := range s.pending {
		if jid.User != phone {
			continue
		}
		for _, u := range q {
			ids = append(ids, u.id)
		}
	}
	return ids
}

// Drop closes phone's logged-in connections without a word, as a network cut does (the client
// reconnects).
func (s *Server) Drop(phone string) int {
	s.mu.Lock()
	conns := s.loggedIn(phone)
	s.mu.Unlock()
	for _, c := range conns {
		c.ws.CloseNow()
	}
	return len(conns)
}
