package whatsapp

// The phone behind a linked device. WhatsApp unlinks companion devices whose phone has not
// been online for about 14 days; mautrix-whatsapp warns at 12 (phoneping.go). The adapter
// records when the phone last showed signs of life (a message or receipt from the phone
// itself, history and app-state syncs, which only the phone sends) and raises PhoneOffline
// when that is older than phoneOfflineWarn, PhoneOnline when the phone is back.

import (
	"context"
	"fmt"
	"time"

	"go.mau.fi/whatsmeow"
	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types/events"

	"github.com/gateway/gateway/network"
)

const (
	phoneUnlinkAfter = 14 * 24 * time.Hour
	phoneOfflineWarn = 12 * 24 * time.Hour
	// phoneSeenWrite: the last-seen time is written at most this often per session.
	phoneSeenWrite = time.Hour
	// phoneCheckEvery: how often a connected session checks its phone.
	phoneCheckEvery = 6 * time.Hour
)

// fromOwnPhone tells whether a whatsmeow event shows the linked phone (device 0) online.
func fromOwnPhone(evt any) bool {
	switch e := evt.(type) {
	case *events.Message:
		return e.Info.IsFromMe && e.Info.Sender.Device == 0
	case *events.Receipt:
		return e.IsFromMe && e.Sender.Device == 0
	case *events.HistorySync, *events.AppState, *events.PushNameSetting:
		return true
	}
	return false
}

// loadPhoneSeen reads when the session's phone was last seen and last pinged (zero if never
// recorded). Called before the client is shared.
func (c *client) loadPhoneSeen(ctx context.Context) {
	var seen, pinged int64
	err := c.n.db.QueryRowContext(ctx,
		`SELECT phone_seen_at, phone_pinged_at FROM gateway_session_device WHERE session_id = $1`, c.sessionID).Scan(&seen, &pinged)
	if err != nil {
		return
	}
	if seen != 0 {
		c.phoneSeenAt = time.UnixMilli(seen)
	}
	if pinged != 0 {
		c.phonePingedAt = time.UnixMilli(pinged)
	}
}

// phoneSeen records that the phone was online now; it returns PhoneOnline when that ends a
// warning.
func (c *client) phoneSeen(now time.Time) network.Event {
	c.mu.Lock()
	write := now.Sub(c.phoneSeenAt) >= phoneSeenWrite || c.phoneWarned
	warned := c.phoneWarned
	c.phoneSeenAt, c.phoneWarned = now, false
	c.mu.Unlock()
	if write {
		ctx, cancel := context.WithTimeout(c.n.ctx, dbTimeout)
		defer cancel()
		if _, err := c.n.db.ExecContext(ctx,
			`UPDATE gateway_session_device SET phone_seen_at = $1 WHERE session_id = $2`, now.UnixMilli(), c.sessionID); err != nil {
			c.log.Warn("could not record when the phone was seen", "error", err)
		}
	}
	if warned {
		c.log.Info("the phone is online again")
		return network.PhoneOnline{}
	}
	return nil
}

// checkPhone raises PhoneOffline once when the phone has not been seen for phoneOfflineWarn.
// A session with no record yet (linked before the adapter kept one) counts from now.
func (c *client) checkPhone(now time.Time) network.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.phone == "" {
		return nil
	}
	if c.phoneSeenAt.IsZero() {
		c.phoneSeenAt = now
		return nil
	}
	if c.phoneWarned || now.Sub(c.phoneSeenAt) < phoneOfflineWarn {
		return nil
	}
	c.phoneWarned = true
	logoutAt := c.phoneSeenAt.Add(phoneUnlinkAfter)
	c.log.Warn(fmt.Sprintf("the phone has been offline since %s; WhatsApp unlinks this device around %s unless the phone comes online",
		c.phoneSeenAt.UTC().Format(time.RFC3339), logoutAt.UTC().Format(time.RFC3339)))
	return network.PhoneOffline{LastSeen: c.phoneSeenAt.UTC(), LogoutAt: logoutAt.UTC()}
}

// schedulePhoneCheck checks the phone every phoneCheckEvery while the client lives. Called
// with mu held.
func (c *client) schedulePhoneCheck(gen uint64) {
	if c.phoneTimer != nil {
		c.phoneTimer.Stop()
	}
	c.phoneTimer = time.AfterFunc(phoneCheckEvery, func() {
		c.mu.Lock()
		alive := !c.closed && c.gen == gen
		c.mu.Unlock()
		if !alive {
			return
		}
		c.events.push(queued{gen: gen, evt: phoneCheck{}})
		c.mu.Lock()
		if !c.closed && c.gen == gen {
			c.schedulePhoneCheck(gen)
		}
		c.mu.Unlock()
	})
}

// phoneCheck is a queued request to check the phone (handled on the event goroutine).
type phoneCheck struct{}

// The phone ping, as mautrix-whatsapp does it (pkg/connector/phoneping.go): a phone that is
// online but idle (a SIM in a drawer) shows no sign of life, and WhatsApp would unlink the
// device at about 14 days. Past phonePingAfter without a sign, at most once per phonePingEvery,
// the device asks its own phone for an app-state key (a peer protocol message); an online
// phone answers, which counts as seen.
const (
	phonePingAfter = 10 * 24 * time.Hour
	phonePingEvery = 24 * time.Hour
)

// maybePingPhone pings the phone when it is due (on the event goroutine). The ping is recorded
// when it is decided, in memory and in the store alike, before it goes out: at most one ping a
// day whether or not the process restarts meanwhile (a restart while a ping is in flight does
// not ping again), and a ping that fails is tried again a day later, as in memory.
func (c *client) maybePingPhone(now time.Time) {
	c.mu.Lock()
	due := c.phone != "" && c.online && !c.phoneSeenAt.IsZero() &&
		now.Sub(c.phoneSeenAt) > phonePingAfter && now.Sub(c.phonePingedAt) > phonePingEvery
	wa := c.wa
	if due {
		c.phonePingedAt = now
	}
	c.mu.Unlock()
	if !due {
		return
	}
	ctx, cancel := context.WithTimeout(c.n.ctx, dbTimeout)
	defer cancel()
	if _, err := c.n.db.ExecContext(ctx,
		`UPDATE gateway_session_device SET phone_pinged_at = $1 WHERE session_id = $2`, now.UnixMilli(), c.sessionID); err != nil {
		c.log.Warn("could not record the phone ping", "error", err)
	}
	go c.pingPhone(wa)
}

func (c *client) pingPhone(wa *whatsmeow.Client) {
	ctx, cancel := context.WithTimeout(c.n.ctx, c.n.sendTimeout)
	defer cancel()
	own := wa.Store.ID
	if own == nil {
		return
	}
	var keyIDs []*waE2E.AppStateSyncKeyId
	if id, err := wa.Store.AppStateKeys.GetLatestAppStateSyncKeyID(ctx); err == nil && id != nil {
		keyIDs = append(keyIDs, &waE2E.AppStateSyncKeyId{KeyID: id})
	}
	_, err := wa.SendMessage(ctx, own.ToNonAD(), &waE2E.Message{ProtocolMessage: &waE2E.ProtocolMessage{
		Type:                   waE2E.ProtocolMessage_APP_STATE_SYNC_KEY_REQUEST.Enum(),
		AppStateSyncKeyRequest: &waE2E.AppStateSyncKeyRequest{KeyIDs: keyIDs},
	}}, whatsmeow.SendRequestExtra{Peer: true})
	if err != nil {
		c.log.Warn("could not ping the phone", "error", err)
		return
	}
	c.log.Info("pinged the phone: not seen for over 10 days")
}
