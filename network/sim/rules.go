package sim

import (
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// The network's refusals, timelocks and bans, played on demand (DESIGN.md section 14): the dev
// routes /api/dev/sim/refuse, /timelock and /ban. Like the latency they are kept in memory
// only: a restart of the sim forgets them (the gateway's own records must not).

// ErrBadRefusal: Refuse was given a code the sim does not play, or a negative count.
var ErrBadRefusal = fmt.Errorf("%w: code must be 463, 479, 429 or 0 (clear), and times 0 or more", domain.ErrValidation)

// Waits the sim's refusals ask for (WhatsApp's adapter asks for minutes; tests want seconds).
const (
	refusedAfter     = time.Second // 479: try again after this, once
	rateLimitedAfter = time.Second // 429: the session waits this long
)

// rules are the refusals in force. Send reads hasRules first, so a network without any pays
// one atomic load per send.
type rules struct {
	hasRules  atomic.Bool
	mu        sync.Mutex
	refuse    map[string]*refusal  // recipient → what it answers
	timelocks map[string]time.Time // session → end of its reach-out timelock
	wrote     map[string]map[string]struct{}
}

// refusal: the recipient refuses with code, left more times (0: until cleared).
type refusal struct {
	code    int
	left    int
	forever bool
}

func (r *rules) update() {
	r.hasRules.Store(len(r.refuse) > 0 || len(r.timelocks) > 0)
}

// Refuse makes recipient to refuse the next times messages with code (463: not reachable, or
// the account's timelock when one is in force; 479: refused; 429: rate limited); times 0 =
// until cleared; code 0 clears.
func (n *Network) Refuse(to string, code, times int) error {
	to = normalizePhone(to)
	if !validPhone(to) {
		return ErrBadPhone
	}
	if times < 0 || (code != 0 && code != 463 && code != 479 && code != 429) {
		return ErrBadRefusal
	}
	r := &n.rules
	r.mu.Lock()
	defer r.mu.Unlock()
	if code == 0 {
		delete(r.refuse, to)
	} else {
		if r.refuse == nil {
			r.refuse = map[string]*refusal{}
		}
		r.refuse[to] = &refusal{code: code, left: times, forever: times == 0}
	}
	r.update()
	return nil
}

// Timelock is the network's account-wide reach-out timelock notice for a session: until then,
// first messages to numbers that never wrote to its phone are refused (463 with the notice);
// a zero or past until lifts it. The session hears a Timelock event.
func (n *Network) Timelock(sessionID string, until time.Time) error {
	c, err := n.client(sessionID)
	if err != nil {
		return err
	}
	active := until.After(time.Now())
	r := &n.rules
	r.mu.Lock()
	if active {
		if r.timelocks == nil {
			r.timelocks = map[string]time.Time{}
		}
		r.timelocks[sessionID] = until
	} else {
		delete(r.timelocks, sessionID)
		until = time.Time{}
	}
	r.update()
	r.mu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.emit(network.Timelock{Active: active, Until: until})
	return nil
}

// Ban bans a paired session's account until then: it drops (Disconnected, reason banned, with
// the end) and reconnects by itself at the end; sends meanwhile find it not connected. A zero
// or past until lifts a ban now.
func (n *Network) Ban(sessionID string, until time.Time) error {
	c, err := n.client(sessionID)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.phone == "" {
		return fmt.Errorf("sim: session %s is not paired: %w", sessionID, domain.ErrNotConnected)
	}
	if !until.After(time.Now()) {
		if !c.bannedUntil.IsZero() {
			c.unbanLocked()
		}
		return nil
	}
	c.setState(offline)
	c.bannedUntil = until
	c.emit(network.Disconnected{Reason: "account temporarily banned", Reconnecting: true, StatusReason: network.ReasonBanned, Until: until})
	gen := c.gen
	c.timer = time.AfterFunc(time.Until(until), func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.gen != gen || n.closed.Load() {
			return
		}
		c.unbanLocked()
	})
	return nil
}

// unbanLocked ends a ban: the device is back online. Called with c.mu held.
func (c *client) unbanLocked() {
	c.bannedUntil = time.Time{}
	c.setState(online)
	c.emit(network.Connected{Phone: c.phone})
}

// wroteTo records that from wrote to phone (a timelock spares it).
func (r *rules) wroteTo(phone, from string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.wrote == nil {
		r.wrote = map[string]map[string]struct{}{}
	}
	if r.wrote[phone] == nil {
		r.wrote[phone] = map[string]struct{}{}
	}
	r.wrote[phone][from] = struct{}{}
}

// refusal is the network's refusal of a message from session (its phone from) to to, if any.
// A message id delivered before is never refused: the network already has it.
func (n *Network) refusal(session, from, to, id string) error {
	r := &n.rules
	r.mu.Lock()
	rule := r.refuse[to]
	tl, locked := r.timelocks[session]
	if locked && !time.Now().Before(tl) {
		delete(r.timelocks, session)
		r.update()
		locked = false
	}
	_, wrote := r.wrote[from][to]
	r.mu.Unlock()
	if rule == nil && (!locked || wrote) {
		return nil
	}
	if _, delivered, err := n.deliveries.receipt(id); delivered || err != nil {
		return err
	}
	if rule == nil {
		return &network.TimelockError{Until: tl, Code: 463, Detail: fmt.Errorf("sim: %s never wrote to %s", to, from)}
	}
	r.mu.Lock()
	if !rule.forever {
		if rule.left--; rule.left <= 0 && r.refuse[to] == rule {
			delete(r.refuse, to)
			r.update()
		}
	}
	r.mu.Unlock()
	switch rule.code {
	case 463:
		if locked {
			return &network.TimelockError{Until: tl, Code: 463, Detail: fmt.Errorf("sim: %s refuses", to)}
		}
		return fmt.Errorf("sim: %s refuses messages from %s (463): %w", to, from, network.ErrNotReachable)
	case 479:
		return &network.RetryLaterError{Err: network.ErrRefused, Code: 479, After: refusedAfter, Detail: fmt.Errorf("sim: %s refuses", to)}
	default:
		return &network.RetryLaterError{Err: network.ErrRateLimited, Code: 429, After: rateLimitedAfter, Detail: fmt.Errorf("sim: %s", to)}
	}
}
