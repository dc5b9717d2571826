package sim

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// linkState is where a client's link to the network stands.
type linkState uint8

const (
	offline      linkState = iota // not connected (paired or not)
	linking                       // unpaired and showing QR codes
	online                        // paired and connected: can send
	reconnecting                  // paired, the link dropped, coming back by itself
)

// client is one session's device on the sim network. An idle client is a small struct: no
// goroutine; timers (QR rotation, auto-pair, reconnect) are time.AfterFunc.
type client struct {
	n       *Network
	session string

	mu        sync.Mutex
	sink      func(network.Event)
	phone     string // paired phone, "" when unpaired (mirrors Network.pairings)
	state     linkState
	qr        string // current QR code while linking
	pairCode  string // code given by PairPhone, waiting to be typed on the phone
	pairPhone string
	gen       uint64      // bumped by every state change: a timer of an older gen does nothing
	timer     *time.Timer // QR rotation or reconnect, per state
	autoTimer *time.Timer // AutoPair while linking
	queue     []network.Event
	draining  bool // queue is with the network's event goroutines (drainers.go)
	// bannedUntil: the account is banned until then (rules.go); zero when not.
	bannedUntil time.Time
}

// setState moves to s, stopping the timers of the state left. Called with mu held.
func (c *client) setState(s linkState) {
	c.gen++
	c.state = s
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
	if c.autoTimer != nil {
		c.autoTimer.Stop()
		c.autoTimer = nil
	}
	if s != linking {
		c.qr = ""
	}
}

// emit queues ev for the sink. Events reach the sink in order, from one of the network's event
// goroutines (drainers.go), so a sink never blocks the sim and an idle client costs no
// goroutine. Called with mu held.
func (c *client) emit(ev network.Event) {
	if c.n.closed.Load() {
		return
	}
	c.queue = append(c.queue, ev)
	if c.draining {
		return
	}
	c.draining = true
	c.n.events.Add(1)
	c.n.drainers.Schedule(c)
}

// keptEvents is the most events an idle client's buffer holds room for (drain).
const keptEvents = 16

// drain delivers the queued events to the sink until none is left (an event goroutine's,
// drainers.go).
func (c *client) drain() {
	defer c.n.events.Done()
	var batch []network.Event
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.draining = false
			// An idle client keeps a small buffer (its entries cleared below): at one receipt a
			// message, a new one for each drain was an allocation a message.
			if cap(batch) <= keptEvents {
				c.queue = batch[:0]
			} else {
				c.queue = nil
			}
			c.mu.Unlock()
			return
		}
		batch, c.queue = c.queue, batch[:0]
		sink := c.sink
		c.mu.Unlock()
		for i, ev := range batch {
			if sink != nil {
				sink(ev)
			}
			batch[i] = nil
		}
	}
}

// Connect connects a paired device (Connected) or shows QR codes for an unpaired one
// (QRCode, rotating; Connect while a code is shown sends the current code again).
func (c *client) Connect(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n.closed.Load() {
		return errClosed
	}
	if !c.bannedUntil.IsZero() && !time.Now().Before(c.bannedUntil) {
		c.bannedUntil = time.Time{} // its end passed while nobody was connected
	}
	if !c.bannedUntil.IsZero() {
		c.emit(network.Disconnected{Reason: "account temporarily banned", Reconnecting: true, StatusReason: network.ReasonBanned, Until: c.bannedUntil})
		return nil
	}
	if c.phone != "" {
		c.setState(online)
		c.emit(network.Connected{Phone: c.phone})
		return nil
	}
	if c.state == linking {
		c.emit(network.QRCode{Code: c.qr})
		return nil
	}
	c.setState(linking)
	c.qr = newQRCode()
	c.emit(network.QRCode{Code: c.qr})
	gen := c.gen
	c.scheduleRotation(gen)
	if d := c.n.autoPair; d > 0 {
		c.autoTimer = time.AfterFunc(d, func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.gen != gen || c.n.closed.Load() {
				return
			}
			if err := c.pairLocked(autoPhone(c.session)); err != nil {
				c.n.log.Error("sim: auto-pair", "session", c.session, "err", err)
			}
		})
	}
	return nil
}

// scheduleRotation shows a new QR code every qrRotate while the client stays in gen.
func (c *client) scheduleRotation(gen uint64) {
	c.timer = time.AfterFunc(c.n.qrRotate, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.gen != gen || c.n.closed.Load() {
			return
		}
		c.qr = newQRCode()
		c.emit(network.QRCode{Code: c.qr})
		c.scheduleRotation(gen)
	})
}

// pairLocked pairs the device with phone and connects it. Called with mu held.
func (c *client) pairLocked(phone string) error {
	if err := c.n.setPairing(c.session, phone); err != nil {
		return err
	}
	c.n.log.Info("sim: device paired", "session", c.session, "phone", phone)
	c.phone = phone
	c.pairCode, c.pairPhone = "", ""
	c.setState(online)
	c.emit(network.Paired{Phone: phone})
	c.emit(network.Connected{Phone: phone})
	return nil
}

// logoutLocked unlinks the device (LoggedOut). Called with mu held.
func (c *client) logoutLocked(reason string) error {
	if err := c.n.setPairing(c.session, ""); err != nil {
		return err
	}
	c.n.log.Info("sim: device unlinked", "session", c.session, "reason", reason)
	c.phone = ""
	c.setState(offline)
	c.emit(network.LoggedOut{Reason: reason})
	return nil
}

// PairPhone returns the eight-character code to type on the phone; Network.Pair with it links
// the device to phone. A new call replaces the previous code.
func (c *client) PairPhone(ctx context.Context, phone string) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	phone = normalizePhone(phone)
	if !validPhone(phone) {
		return "", fmt.Errorf("sim: pair phone %q: %w", phone, ErrBadPhone)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n.closed.Load() {
		return "", errClosed
	}
	if c.phone != "" {
		return "", network.ErrAlreadyPaired
	}
	c.pairCode, c.pairPhone = newPairCode(), phone
	return c.pairCode, nil
}

// online returns the phone of a connected device.
func (c *client) online() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.phone, c.state == online && !c.n.closed.Load()
}

// Send delivers m after the network's latency and returns its receipt. A message id is
// delivered at most once: a re-send of a delivered id returns the first receipt (after the
// latency, like any answer from the network) and delivers nothing.
func (c *client) Send(ctx context.Context, m domain.Message) (network.Receipt, error) {
	if err := ctx.Err(); err != nil {
		return network.Receipt{}, err
	}
	from, ok := c.online()
	if !ok {
		return network.Receipt{}, domain.ErrNotConnected
	}
	if !c.n.reachable(m.To) {
		// A message delivered before its number left the network is still delivered.
		if r, ok, err := c.n.deliveries.receipt(m.ID); ok || err != nil {
			return r, err
		}
		return network.Receipt{}, fmt.Errorf("sim: %s: %w", m.To, network.ErrNotOnNetwork)
	}
	d, err := c.n.delivery(from, m)
	if err != nil {
		return network.Receipt{}, err
	}
	if d.ID == "" {
		d.ID = uuid.NewString() // the network names the message when the caller does not
	}
	if c.n.rules.hasRules.Load() && d.Group == "" {
		if err := c.n.refusal(c.session, from, m.To, d.ID); err != nil {
			return network.Receipt{}, err
		}
	}
	if err := c.n.typing(ctx, m); err != nil {
		return network.Receipt{}, err
	}
	if lat := time.Duration(c.n.latency.Load()); lat > 0 {
		t := time.NewTimer(lat)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return network.Receipt{}, ctx.Err()
		case <-c.n.done:
			t.Stop()
			return network.Receipt{}, errClosed
		}
		// A link that dropped while the message was on its way fails the send, as on the network.
		if _, ok := c.online(); !ok {
			return network.Receipt{}, domain.ErrNotConnected
		}
	}
	d.Timestamp = time.Now().UTC().Truncate(time.Millisecond)
	r, _, err := c.n.deliveries.deliver(&d)
	if err == nil && d.Group == "" {
		// The recipient's phone has it: the delivery receipt follows (the latency was the way
		// there); a re-send of a delivered id hears it again. It may reach the sink before
		// Send returns: keep the furthest status.
		c.mu.Lock()
		c.emit(network.MessageReceipt{IDs: []string{r.ID}, Status: network.StatusDelivered, From: d.To, At: r.At})
		c.mu.Unlock()
	}
	return r, err
}

// Logout unlinks the device (LoggedOut); a new QR scan is needed afterwards. Logging out an
// unpaired device just stops its QR codes.
func (c *client) Logout(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.phone == "" {
		c.setState(offline)
		return nil
	}
	return c.logoutLocked("logged out")
}

// Disconnect takes the device offline and keeps the pairing. As with whatsmeow, no event.
func (c *client) Disconnect() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.setState(offline)
}

// Paired tells whether the device is paired, and to which phone.
func (c *client) Paired() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.phone, c.phone != ""
}

// newQRCode returns the text of a QR code: a random ref, as the real network's codes are.
func newQRCode() string {
	b := make([]byte, 24)
	rand.Read(b)
	return "sim@" + base64.RawURLEncoding.EncodeToString(b)
}

// pairCodeAlphabet leaves out 0, O, 1 and I, which people mistype.
const pairCodeAlphabet = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"

// newPairCode returns eight random characters of pairCodeAlphabet.
func newPairCode() string {
	b := make([]byte, 8)
	rand.Read(b)
	for i := range b {
		b[i] = pairCodeAlphabet[int(b[i])%len(pairCodeAlphabet)] // 256 is a multiple of 32: unbiased
	}
	return string(b)
}
