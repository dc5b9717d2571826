package whatsapp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waWa6"
	"go.mau.fi/whatsmeow/store"
	"go.mau.fi/whatsmeow/store/sqlstore"
	"go.mau.fi/whatsmeow/types"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// Linking by phone code: whatsmeow asks for a client type and a "Browser (OS)" display name
// that the server validates against a list of common ones.
const (
	pairClientType    = whatsmeow.PairClientChrome
	pairClientDisplay = "Chrome (Linux)"
	// connectedWait is how long a send or lookup waits for a dropped link to come back
	// (whatsmeow reconnects by itself) before failing with ErrNotConnected.
	connectedWait = 5 * time.Second
	// retryParallel bounds the retry receipts answered at once (each may re-upload media).
	retryParallel = 4
	// reconnectSpreadMax bounds the random extra wait between whatsmeow's reconnect attempts.
	reconnectSpreadMax = 30 * time.Second
	// banEndJitter spreads the reconnects of sessions whose bans end together.
	banEndJitter = 30 * time.Second
)

// client is one session's device: a whatsmeow client plus the state the port needs.
type client struct {
	n         *Network
	sessionID string
	log       *slog.Logger
	sink      atomic.Pointer[func(network.Event)]
	opts      atomic.Pointer[network.ClientOptions] // replaced by a later Open
	http      *http.Client                          // every connection of the session (proxy.go)
	events    *eventQueue
	lookups   *lookupCache
	polls     pollCache // the options of the polls it sent lately (their votes' names)

	ctlMu sync.Mutex // serialises Connect, Disconnect, Logout and shutdown

	mu     sync.Mutex // guards the fields below; never held during I/O
	closed bool
	wa     *whatsmeow.Client
	gen    uint64    // generation of wa; bumped whenever wa is replaced
	waUsed bool      // Connect was called on wa
	phone  string    // linked phone (digits), "" while unpaired
	device types.JID // linked device JID, empty while unpaired
	qr     *qrSession
	loop   *connectLoop
	// loggingIn: the login after linking was started on wa (relogin).
	loggingIn bool
	// wantLogin: the server asked for that login (515) while another connect loop was still
	// running; awaitLogin starts it once that loop is done.
	wantLogin bool
	stayDown  bool // Disconnect was called, or the link stopped for good (no Connect since)
	// online: the last connection event was Connected. whatsmeow's IsLoggedIn is not reset
	// by Disconnect or a connect failure, so the adapter keeps its own. onlineCh is closed
	// while online.
	online      bool
	onlineCh    chan struct{}
	bannedUntil time.Time
	bannedFor   string
	banTimer    *time.Timer // reconnects when a ban with a known end is over
	// redeliver resets the link after an event was left unacked (ack.go).
	redeliver *time.Timer
	// keepaliveDown: keepalives are failing; the link looks open but is dead (online false).
	keepaliveDown bool
	// outdated: WhatsApp refused this client version (405) since the last Connected.
	outdated bool
	// connVersion: the web version the latest connection attempt announced.
	connVersion store.WAVersionContainer
	// The reach-out timelock notice last received (timelock.go): active, and its end (zero:
	// none given). timelockNotice is closed and replaced when a notice is handled.
	timelockActive bool
	timelockUntil  time.Time
	timelockNotice chan struct{}
	// The phone behind the device (see phone.go).
	phoneSeenAt   time.Time
	phonePingedAt time.Time
	phoneWarned   bool
	phoneTimer    *time.Timer
}

// qrSession is whatsmeow's QR channel for the current linking attempt.
type qrSession struct {
	gen   uint64
	first chan struct{} // closed at the first code: the link websocket is up
	done  chan struct{} // closed when the channel ends
	stop  chan struct{} // closed to abandon the channel (its client was replaced)
	once  sync.Once
}

// connectLoop is a running first-connect attempt (with retries).
type connectLoop struct {
	stop chan struct{}
	done chan struct{}
}

func newClient(n *Network, sessionID string, dev *store.Device, sink func(network.Event), opts network.ClientOptions) *client {
	c := &client{
		n:         n,
		sessionID: sessionID,
		log:       n.log.With("session", sessionID),
		events:    newEventQueue(),
		lookups:   newLookupCache(lookupTTL, negativeLookupTTL, lookupCacheMax),
	}
	c.sink.Store(&sink)
	c.opts.Store(&opts)
	c.http = c.newHTTPClient()
	c.onlineCh = make(chan struct{})
	c.timelockNotice = make(chan struct{})
	if dev.ID != nil {
		c.phone, c.device = dev.ID.User, *dev.ID
	}
	c.wa = c.newWA(dev, c.gen)
	go c.events.run(c.handle)
	return c
}

// newWA makes the whatsmeow client of a device. Its event handler only queues.
func (c *client) newWA(dev *store.Device, gen uint64) *whatsmeow.Client {
	wa := whatsmeow.NewClient(dev, newWALogger(c.log, "whatsmeow/Client"))
	wa.DisableLoginAutoReconnect = true // see relogin
	opts := c.opts.Load()
	// The websocket and media go through the session's proxy (proxy.go).
	wa.SetWebsocketHTTPClient(c.http)
	wa.SetPreLoginHTTPClient(c.http)
	wa.SetMediaHTTPClient(c.http)
	// Which version each connection announces (the process-wide one may move meanwhile).
	wa.GetClientPayload = func() *waWa6.ClientPayload {
		p := wa.Store.GetClientPayload()
		c.mu.Lock()
		c.connVersion = payloadVersion(p)
		c.mu.Unlock()
		return p
	}
	// Re-send requests (retry receipts) for messages older than whatsmeow's in-memory 256:
	// answered from the core's outbox when it gives a MessageSource, else from whatsmeow's own
	// store of sent messages (7 days, in the device database).
	if opts.Messages != nil {
		wa.GetMessageForRetry = c.messageForRetry
	} else {
		wa.UseRetryMessageStore = true
	}
	wa.SetMaxParallelRetryReceiptHandling(retryParallel)
	// whatsmeow retries a dropped link after 0, 2, 4, 6… s, the same for every session: after
	// a server-wide drop they would all come back in step. A random extra wait on each failed
	// attempt spreads them out (the hook runs on the reconnect goroutine, before the next try).
	wa.AutoReconnectHook = func(error) bool {
		spread := min(time.Duration(wa.AutoReconnectErrors)*2*time.Second, reconnectSpreadMax)
		if spread <= 0 {
			return true
		}
		t := time.NewTimer(time.Duration(rand.Int64N(int64(spread))))
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-c.n.ctx.Done():
			return false
		}
	}
	// A message or receipt is acked to the server only once the gateway has kept it (take); an
	// unacked one comes again at the next connection, and the event buffer decrypts it again
	// (its Signal ratchet moved on when it was first decrypted). README, WhatsApp: acks.
	wa.SynchronousAck = true
	wa.EnableDecryptedEventBuffer = true
	wa.AddEventHandlerWithSuccessStatus(func(evt any) bool { return c.take(gen, evt) })
	return wa
}

// replaceWA swaps in a new whatsmeow client for dev. Events of the old one are dropped from
// now on. Called with mu held.
func (c *client) replaceWA(dev *store.Device) *whatsmeow.Client {
	old := c.wa
	c.gen++
	c.wa = c.newWA(dev, c.gen)
	c.waUsed, c.loggingIn, c.wantLogin = false, false, false
	if c.qr != nil {
		c.qr.abandon()
		c.qr = nil
	}
	return old
}

// setOnline records whether the device is connected. Called with mu held.
func (c *client) setOnline(on bool) {
	switch {
	case on && !c.online:
		close(c.onlineCh)
	case !on && c.online:
		c.onlineCh = make(chan struct{})
	}
	c.online = on
}

// pushLocal queues an event the adapter raises itself, behind whatsmeow's.
func (c *client) pushLocal(gen uint64, evt network.Event) {
	c.events.push(queued{gen: gen, evt: evt})
}

func (c *client) emit(evt network.Event) {
	(*c.sink.Load())(evt)
}

// handle runs on the event goroutine: side effects first, then the sink.
func (c *client) handle(q queued) {
	c.mu.Lock()
	if q.gen != c.gen {
		c.mu.Unlock()
		q.kept.Call(errors.New("the whatsmeow client was replaced"))
		return
	}
	st := linkState{paired: c.phone != "", phone: c.phone, wa: c.wa}
	c.mu.Unlock()

	if fromOwnPhone(q.evt) {
		if evt := c.phoneSeen(time.Now()); evt != nil {
			c.emit(evt)
		}
	}
	switch e := q.evt.(type) {
	case phoneCheck:
		if evt := c.checkPhone(time.Now()); evt != nil {
			c.emit(evt)
		}
		c.maybePingPhone(time.Now())
		return
	case *events.PairSuccess:
		c.paired(e.ID)
		st = linkState{paired: true, phone: e.ID.User, wa: st.wa}
		go c.awaitLogin(q.gen, st.wa)
	case *events.ManualLoginReconnect:
		c.log.Info("logging in as the linked device")
		go c.relogin(q.gen)
	case *events.LoggedOut:
		c.log.Warn("device logged out", "on_connect", e.OnConnect, "reason", e.Reason.String())
		if !c.resetDevice(q.gen) {
			return
		}
	case *events.TemporaryBan:
		c.log.Warn("account temporarily banned", "ban", e.String())
		until := banExpiry(time.Now(), e.Expire)
		st.banUntil = until
		c.mu.Lock()
		c.bannedUntil, c.bannedFor = until, e.String()
		c.stayDown = true
		c.setOnline(false)
		if e.Expire > 0 {
			c.scheduleBanEnd(q.gen, until)
		}
		c.mu.Unlock()
	case *events.Disconnected:
		c.mu.Lock()
		c.setOnline(false)
		c.keepaliveDown = false
		c.mu.Unlock()
	case *events.KeepAliveTimeout:
		c.mu.Lock()
		first := !c.keepaliveDown && c.online
		if first {
			c.keepaliveDown = true
			c.setOnline(false)
		}
		c.mu.Unlock()
		if !first {
			return
		}
		c.log.Warn("keepalive failed; the link is dead until the server answers again",
			"errors", e.ErrorCount, "last_success", e.LastSuccess)
	case *events.KeepAliveRestored:
		c.mu.Lock()
		recovered := c.keepaliveDown && !c.stayDown
		if recovered {
			c.keepaliveDown = false
			c.setOnline(true)
		}
		c.mu.Unlock()
		if !recovered {
			return
		}
		c.log.Info("keepalive answered again; the link is back")
	case *events.Connected:
		c.mu.Lock()
		late := c.stayDown
		if !late {
			c.bannedUntil, c.bannedFor = time.Time{}, ""
			c.keepaliveDown, c.outdated = false, false
			c.setOnline(true)
		}
		c.mu.Unlock()
		if late {
			// whatsmeow reports Connected from a goroutine that can outlive a Disconnect.
			c.log.Debug("ignoring Connected of a connection closed by Disconnect")
			return
		}
		c.log.Info("connected", "phone", st.phone)
		go c.sendUnavailable(st.wa)
		c.emit(network.Connected{Phone: st.phone})
		if evt := c.checkPhone(time.Now()); evt != nil {
			c.emit(evt) // after Connected: the warning stands while connected
		}
		c.maybePingPhone(time.Now())
		c.mu.Lock()
		if c.phoneTimer == nil && !c.closed {
			c.schedulePhoneCheck(q.gen)
		}
		c.mu.Unlock()
		return
	case *events.PushNameSetting:
		go c.sendUnavailable(st.wa)
	case *events.ClientOutdated:
		c.mu.Lock()
		c.stayDown, c.outdated = true, true
		c.setOnline(false)
		refused := c.connVersion
		c.mu.Unlock()
		c.log.Error("WhatsApp refuses this client version (405)", "version", refused.String())
		go c.n.recoverOutdated(c, q.gen, refused)
	case *events.StreamReplaced, *events.ConnectFailure, *events.PairError:
		c.log.Warn("connection stopped", "event", fmt.Sprintf("%T", e))
		c.mu.Lock()
		c.stayDown = true // whatsmeow does not reconnect after these; neither does the adapter
		c.setOnline(false)
		c.mu.Unlock()
	case *events.StreamError:
		c.log.Warn("stream error", "code", e.Code)
	case *events.NotifyAccountReachoutTimelock:
		tl := timelockEvent(e)
		c.log.Warn("reach-out timelock", "active", tl.Active, "until", tl.Until, "type", tl.Kind)
		c.noteTimelock(tl)
		c.emit(tl)
		return
	case *events.Receipt:
		ctx, cancel := context.WithTimeout(c.n.ctx, dbTimeout)
		evt := receiptEvent(ctx, e, st.resolvePN)
		cancel()
		c.emitKept(evt, q.kept)
		return
	case *events.Message:
		ctx, cancel := context.WithTimeout(c.n.ctx, dbTimeout)
		var evt network.Event
		if e.Message.GetPollUpdateMessage() != nil && !e.Info.IsFromMe && st.wa != nil {
			evt = c.pollVoteEvent(ctx, st.wa, e, origin(ctx, e.Info, st.resolvePN))
		} else {
			evt = incomingEvent(ctx, e, st)
		}
		cancel()
		c.emitKept(evt, q.kept)
		return
	case *events.CallOffer:
		if c.n.rejectCalls {
			go c.rejectCall(st.wa, e)
		}
		return
	case qrItem:
		if e.item.Event == whatsmeow.QRChannelEventError || strings.HasPrefix(e.item.Event, "err-") {
			c.log.Warn("linking stopped", "event", e.item.Event, "error", e.item.Error)
		}
	}
	if evt := translate(q.evt, st); evt != nil {
		c.emit(evt)
	}
}

// scheduleBanEnd reconnects when a temporary ban ends (plus a little jitter, so the sessions
// of one ban wave do not come back together). Called with mu held.
func (c *client) scheduleBanEnd(gen uint64, until time.Time) {
	if c.banTimer != nil {
		c.banTimer.Stop()
	}
	wait := time.Until(until) + time.Duration(rand.Int64N(int64(c.n.banEndJitter)))
	c.banTimer = time.AfterFunc(wait, func() {
		c.mu.Lock()
		current := c.gen == gen && !c.closed && c.banTimer != nil
		c.banTimer = nil
		c.mu.Unlock()
		if !current {
			return
		}
		c.log.Info("temporary ban over; reconnecting")
		ctx, cancel := context.WithTimeout(c.n.ctx, dbTimeout)
		defer cancel()
		if err := c.Connect(ctx); err != nil {
			c.log.Warn("reconnect after the ban failed", "error", err)
		}
	})
}

// stopBanTimer cancels a scheduled reconnect. Called with mu held.
func (c *client) stopBanTimer() {
	if c.banTimer != nil {
		c.banTimer.Stop()
		c.banTimer = nil
	}
}

// sendUnavailable tells the server the device is connected but nobody is looking at it, so
// the phone keeps its notifications (whatsmeow asks for one presence per connection so the
// server knows the push name; mautrix sends "unavailable" too). Without a push name (not yet
// synced from the phone) there is nothing to send; PushNameSetting sends it later.
func (c *client) sendUnavailable(wa *whatsmeow.Client) {
	if wa == nil || wa.Store.PushName == "" {
		return
	}
	ctx, cancel := context.WithTimeout(c.n.ctx, dbTimeout)
	defer cancel()
	if err := wa.SendPresence(ctx, types.PresenceUnavailable); err != nil {
		c.log.Debug("could not send presence", "error", err)
	}
}

// rejectCall declines an incoming call (Options.RejectCalls): nobody answers calls on a
// gateway, and a call left ringing looks like an absent business.
func (c *client) rejectCall(wa *whatsmeow.Client, e *events.CallOffer) {
	ctx, cancel := context.WithTimeout(c.n.ctx, dbTimeout)
	defer cancel()
	if err := wa.RejectCall(ctx, e.From, e.CallID); err != nil {
		c.log.Warn("could not reject a call", "from", e.From.String(), "error", err)
		return
	}
	c.log.Info("rejected an incoming call", "from", e.From.String())
}

// paired records a successful link: in memory, then in the session table, before the sink
// hears of it (so a restart after Paired finds the device).
func (c *client) paired(jid types.JID) {
	c.mu.Lock()
	c.phone, c.device = jid.User, jid
	c.phoneSeenAt, c.phonePingedAt, c.phoneWarned = time.Now(), time.Time{}, false // the phone just scanned
	c.mu.Unlock()
	c.log.Info("device linked", "phone", jid.User, "device", jid.String())
	ctx, cancel := context.WithTimeout(c.n.ctx, dbTimeout)
	defer cancel()
	now := time.Now()
	if err := saveSessionDevice(ctx, c.n.db, c.sessionID, jid, now); err != nil {
		// The link works until the process stops; after a restart the session must link again.
		c.log.Error("could not record the linked device; the session will need a new link after a restart",
			"device", jid.String(), "error", err)
	}
}

// relogin connects a device that was just linked: after pair-success the server ends the
// link connection (stream error 515) and the device must log in on a new one. whatsmeow would
// try that once and give up on failure (DisableLoginAutoReconnect is set); the connect loop
// retries with backoff.
func (c *client) relogin(gen uint64) {
	c.ctlMu.Lock()
	defer c.ctlMu.Unlock()
	c.mu.Lock()
	if gen != c.gen || c.closed || c.loop != nil {
		if gen == c.gen && c.loop != nil && !c.wantLogin {
			// The link's first connect loop has not returned yet: awaitLogin logs in after it.
			c.wantLogin = true
			c.log.Info("a connection attempt is still under way; the login follows it")
		}
		c.mu.Unlock()
		return
	}
	wa := c.wa
	loop := &connectLoop{stop: make(chan struct{}), done: make(chan struct{})}
	c.loop, c.waUsed, c.stayDown, c.loggingIn = loop, true, false, true
	c.mu.Unlock()
	go c.runConnect(loop, wa, gen)
}

// awaitLogin makes sure a device linked a moment ago logs in. The server ends the link's
// connection with a 515 that starts the login (ManualLoginReconnect, relogin), but the socket
// can close before whatsmeow has handled that last frame: whatsmeow drops frames still queued
// when its socket closes, and expects this disconnect (it reports nothing). The device would
// stay linked and offline with nothing left to connect it. The link connection's end raises no
// event, so this polls it until the login is under way, the session is connected, or the
// client was disconnected, replaced or closed.
func (c *client) awaitLogin(gen uint64, wa *whatsmeow.Client) {
	t := time.NewTicker(loginPoll)
	defer t.Stop()
	gone, warned := 0, false
	for start := time.Now(); ; {
		select {
		case <-t.C:
		case <-c.n.ctx.Done():
			return
		}
		c.mu.Lock()
		done := gen != c.gen || c.closed || c.stayDown || c.online || c.loggingIn
		want := c.wantLogin && c.loop == nil
		c.mu.Unlock()
		var why string
		switch {
		case done:
			return
		case want:
		case wa.IsConnected() && time.Since(start) < loginWait:
			gone = 0
			continue
		case wa.IsConnected():
			why = "no restart from the server after linking"
		default:
			// Twice in a row: whatsmeow finishes closing the socket in between.
			if gone++; gone < 2 {
				continue
			}
			why = "the link connection closed before the login started"
		}
		if why != "" && !warned {
			warned = true
			c.log.Warn(why + "; logging in as the linked device")
		}
		// Polled again until it is under way: relogin waits out a connect loop still running.
		c.relogin(gen)
	}
}

// resetDevice replaces a logged-out device with a fresh unpaired one and drops its session
// row. It reports false if gen is no longer current (the device was already replaced).
func (c *client) resetDevice(gen uint64) bool {
	c.mu.Lock()
	if gen != c.gen {
		c.mu.Unlock()
		return false
	}
	old, device := c.replaceWA(c.n.container.NewDevice()), c.device
	c.phone, c.device = "", types.JID{}
	c.bannedUntil, c.bannedFor = time.Time{}, ""
	c.stopBanTimer()
	c.keepaliveDown, c.timelockActive, c.timelockUntil = false, false, time.Time{}
	c.phoneSeenAt, c.phonePingedAt, c.phoneWarned = time.Time{}, time.Time{}, false
	if c.phoneTimer != nil {
		c.phoneTimer.Stop()
		c.phoneTimer = nil
	}
	c.setOnline(false)
	c.mu.Unlock()
	c.lookups.clear()
	// The old client may still hold its socket; closing it can wait on whatsmeow's locks.
	go func() {
		old.Disconnect()
		if !device.IsEmpty() {
			c.n.locks.release(device)
		}
	}()
	if !device.IsEmpty() {
		ctx, cancel := context.WithTimeout(c.n.ctx, dbTimeout)
		defer cancel()
		if err := forgetSessionDevice(ctx, c.n.db, c.sessionID, device); err != nil {
			c.log.Error("could not drop the logged-out device from the session table", "error", err)
		}
	}
	return true
}

// Connect connects a paired device or starts linking an unpaired one; see network.Client.
// A failed first connection is retried with capped exponential backoff until it succeeds or
// Disconnect is called (once up, whatsmeow reconnects by itself).
func (c *client) Connect(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	// The version this client announces: checked once a day, before connecting, through the
	// session's proxy.
	c.n.version.ensure(ctx, false, c.http)
	c.ctlMu.Lock()
	defer c.ctlMu.Unlock()
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return errClosed
	}
	if c.loop != nil || c.online || (c.phone == "" && c.qr != nil) {
		// Already connecting or connected, or linking (the QR session holds the connection).
		c.mu.Unlock()
		return nil
	}
	if c.phone == "" && c.qr == nil && c.waUsed {
		// A new linking attempt gets a fresh unpaired device (nothing of it is stored yet):
		// goroutines of the previous attempt may still read the old device, which linking
		// writes to.
		old := c.replaceWA(c.n.container.NewDevice())
		go old.Disconnect()
	}
	wa, gen, unpaired, qr := c.wa, c.gen, c.phone == "", c.qr
	c.waUsed, c.stayDown = true, false
	c.mu.Unlock()

	if unpaired && qr == nil {
		// The QR channel must exist before the connection: it listens for the codes.
		ch, err := wa.GetQRChannel(c.n.ctx)
		switch {
		case errors.Is(err, whatsmeow.ErrQRAlreadyConnected):
			return nil
		case errors.Is(err, whatsmeow.ErrQRStoreContainsID):
			// Linked a moment ago; the PairSuccess event is on its way.
		case err != nil:
			return fmt.Errorf("whatsapp: start linking: %w", err)
		default:
			qr = &qrSession{gen: gen, first: make(chan struct{}), done: make(chan struct{}), stop: make(chan struct{})}
			go c.readQR(qr, ch)
		}
	}
	loop := &connectLoop{stop: make(chan struct{}), done: make(chan struct{})}
	c.mu.Lock()
	if qr != nil && c.gen == gen {
		c.qr = qr
	}
	c.loop = loop
	c.mu.Unlock()
	go c.runConnect(loop, wa, gen)
	return nil
}

// readQR forwards QR channel items to the event queue. It keeps draining an abandoned channel
// (whatsmeow's emitter gives up on a full one by disconnecting its client).
func (c *client) readQR(qr *qrSession, ch <-chan whatsmeow.QRChannelItem) {
	defer func() {
		close(qr.done)
		c.mu.Lock()
		if c.qr == qr {
			c.qr = nil
		}
		c.mu.Unlock()
	}()
	for {
		select {
		case item, ok := <-ch:
			if !ok {
				return
			}
			if item.Event == whatsmeow.QRChannelEventCode {
				qr.once.Do(func() { close(qr.first) })
			} else {
				// The last item: forget the session before the sink hears of it, so a Connect
				// made on hearing QRTimeout starts a new one.
				c.mu.Lock()
				if c.qr == qr {
					c.qr = nil
				}
				c.mu.Unlock()
			}
			c.events.push(queued{gen: qr.gen, evt: qrItem{item}})
		case <-qr.stop:
			return
		}
	}
}

func (qr *qrSession) abandon() {
	select {
	case <-qr.stop:
	default:
		close(qr.stop)
	}
}

// runConnect makes the first connection, retrying with backoff.
func (c *client) runConnect(loop *connectLoop, wa *whatsmeow.Client, gen uint64) {
	defer func() {
		c.mu.Lock()
		if c.loop == loop {
			c.loop = nil
		}
		c.mu.Unlock()
		close(loop.done)
	}()
	// Start from a clean socket: after a ban or a replaced stream the server closes the old one
	// only after a while, and whatsmeow would take it for a live connection.
	wa.Disconnect()
	for attempt := 0; ; attempt++ {
		err := c.lockDevice(wa)
		if err == nil {
			err = wa.ConnectContext(c.n.ctx)
		}
		if err == nil || errors.Is(err, whatsmeow.ErrAlreadyConnected) {
			select {
			case <-loop.stop:
				// Disconnect was called while this attempt was under way.
				wa.Disconnect()
			default:
			}
			return
		}
		delay := backoff(attempt, c.n.backoffBase, c.n.backoffMax, rand.Float64())
		c.log.Warn("connect failed; retrying", "attempt", attempt+1, "retry_in", delay, "error", err)
		if attempt == 0 {
			c.pushLocal(gen, network.Disconnected{
				Reason:       fmt.Sprintf("connect failed: %v", err),
				Reconnecting: true,
				StatusReason: network.ReasonNetwork,
			})
		}
		select {
		case <-time.After(delay):
		case <-loop.stop:
			return
		case <-c.n.ctx.Done():
			return
		}
	}
}

// backoff is the wait before retry attempt+1: base·2^attempt capped at ceiling, with "equal
// jitter" (half fixed, half random) so sessions that lost the network together do not
// reconnect in lockstep. rnd is in [0, 1).
func backoff(attempt int, base, ceiling time.Duration, rnd float64) time.Duration {
	d := ceiling
	if attempt < 30 {
		if e := base << attempt; e > 0 && e < ceiling {
			d = e
		}
	}
	return d/2 + time.Duration(rnd*float64(d/2))
}

// stopLoop ends a running first-connect loop. Called with ctlMu held.
func (c *client) stopLoop() {
	c.mu.Lock()
	loop := c.loop
	c.loop = nil
	c.mu.Unlock()
	if loop != nil {
		close(loop.stop)
	}
}

// Disconnect closes the connection and keeps the pairing. While linking, the QR session ends
// too: the unpaired device and its whatsmeow client are replaced so the old QR timers cannot
// disturb a later Connect.
func (c *client) Disconnect() {
	c.ctlMu.Lock()
	defer c.ctlMu.Unlock()
	c.disconnect()
}

// disconnect is Disconnect with ctlMu held.
func (c *client) disconnect() {
	c.stopLoop()
	c.mu.Lock()
	c.stopBanTimer()
	c.stayDown = true
	c.setOnline(false)
	wa, device := c.wa, c.device
	if c.phone == "" && !c.closed && c.waUsed {
		wa = c.replaceWA(c.n.container.NewDevice())
	}
	c.mu.Unlock()
	wa.Disconnect()
	if !device.IsEmpty() {
		c.n.locks.release(device)
	}
}

// PairPhone starts linking by phone number and returns the code to type on the phone. The
// link websocket must be up first: it connects as for a QR and waits for the first code.
func (c *client) PairPhone(ctx context.Context, phone string) (string, error) {
	digits, err := phoneDigits(phone)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	paired := c.phone != ""
	c.mu.Unlock()
	if paired {
		return "", fmt.Errorf("whatsapp: pair by phone: %w", network.ErrAlreadyPaired)
	}
	if err := c.Connect(ctx); err != nil {
		return "", err
	}
	c.mu.Lock()
	wa, qr := c.wa, c.qr
	c.mu.Unlock()
	if qr == nil {
		return "", fmt.Errorf("whatsapp: pair by phone: no linking session is running: %w", domain.ErrNotConnected)
	}
	select {
	case <-qr.first:
	case <-qr.done:
		return "", fmt.Errorf("whatsapp: pair by phone: linking ended before a code could be requested: %w", domain.ErrNotConnected)
	case <-ctx.Done():
		return "", fmt.Errorf("whatsapp: pair by phone: waiting for the link connection: %w", ctx.Err())
	}
	code, err := wa.PairPhone(ctx, digits, true, pairClientType, pairClientDisplay)
	if err != nil {
		return "", fmt.Errorf("whatsapp: pair by phone: %w", classifyError(err))
	}
	return strings.ReplaceAll(code, "-", ""), nil
}

// Logout unlinks the device. The local device is removed even when the network cannot be told
// (link down): the session must link again either way; the phone then lists a stale linked
// device that its user can remove.
func (c *client) Logout(ctx context.Context) error {
	c.ctlMu.Lock()
	defer c.ctlMu.Unlock()
	c.stopLoop()
	c.mu.Lock()
	wa, gen, paired, closed := c.wa, c.gen, c.phone != "", c.closed
	c.mu.Unlock()
	if closed {
		return errClosed
	}
	if !paired {
		c.disconnect()
		return nil
	}
	if err := wa.Logout(ctx); err != nil {
		c.log.Warn("could not tell the network about the logout; removing the device locally", "error", err)
		wa.Disconnect()
		if err := wa.Store.Delete(ctx); err != nil && !errors.Is(err, sqlstore.ErrDeviceIDMustBeSet) {
			return fmt.Errorf("whatsapp: logout: delete device: %w", err)
		}
	}
	if c.resetDevice(gen) {
		c.mu.Lock()
		gen = c.gen
		c.mu.Unlock()
		c.pushLocal(gen, network.LoggedOut{Reason: "logged out by the gateway"})
	}
	return nil
}

// Paired tells whether the device is linked, and to which phone.
func (c *client) Paired() (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.phone, c.phone != ""
}

// shutdown disconnects for Network.Close and stops the event goroutine.
func (c *client) shutdown() {
	c.ctlMu.Lock()
	c.stopLoop()
	c.mu.Lock()
	c.closed = true
	c.stopBanTimer()
	if c.redeliver != nil {
		c.redeliver.Stop()
		c.redeliver = nil
	}
	if c.phoneTimer != nil {
		c.phoneTimer.Stop()
		c.phoneTimer = nil
	}
	c.setOnline(false)
	wa, device := c.wa, c.device
	if c.qr != nil {
		c.qr.abandon()
		c.qr = nil
	}
	c.mu.Unlock()
	wa.Disconnect()
	if !device.IsEmpty() {
		c.n.locks.release(device)
	}
	c.ctlMu.Unlock()
	c.events.close()
}

// ready returns the whatsmeow client if the device can send now, waiting briefly for a link
// that is being (re-)established.
func (c *client) ready(ctx context.Context) (*whatsmeow.Client, error) {
	c.mu.Lock()
	wa, paired, closed, online, onlineCh := c.wa, c.phone != "", c.closed, c.online, c.onlineCh
	bannedUntil, bannedFor, outdated := c.bannedUntil, c.bannedFor, c.outdated
	reconnecting := c.waUsed && !c.stayDown // Connect was called and nothing stopped the link
	c.mu.Unlock()
	switch {
	case closed:
		return nil, fmt.Errorf("%w: %w", domain.ErrNotConnected, errClosed)
	case !paired:
		return nil, fmt.Errorf("whatsapp: device is not linked: %w", domain.ErrNotConnected)
	case time.Now().Before(bannedUntil):
		return nil, fmt.Errorf("whatsapp: %s: %w", bannedFor, network.ErrBanned)
	case outdated && !online:
		return nil, fmt.Errorf("whatsapp: client version %s refused: %w", store.GetWAVersion().String(), network.ErrOutdated)
	case online:
		return wa, nil
	case !reconnecting:
		return nil, fmt.Errorf("whatsapp: link is down: %w", domain.ErrNotConnected)
	}
	timer := time.NewTimer(c.n.connectedWait)
	defer timer.Stop()
	select {
	case <-onlineCh:
		return c.ready(ctx)
	case <-timer.C:
	case <-ctx.Done():
	}
	return nil, fmt.Errorf("whatsapp: link is down: %w", domain.ErrNotConnected)
}

// banExpiry is when a temporary ban ends; a ban without a stated expiry is assumed to last
// until the next successful connection.
func banExpiry(now time.Time, expire time.Duration) time.Time {
	if expire <= 0 {
		return now.Add(100 * 365 * 24 * time.Hour)
	}
	return now.Add(expire)
}
