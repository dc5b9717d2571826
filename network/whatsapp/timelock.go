package whatsapp

// The reach-out timelock and WhatsApp's 463. Since 2026 WhatsApp answers 463 in two cases
// that look the same on the wire: per recipient, to a first message to a cold contact (no
// privacy token), and account-wide, while a reach-out timelock is in force (the server then
// sends its mex notification, with the end). The port tells them apart (network.ErrNotReachable
// and *network.TimelockError): a 463 is a timelock only while a notice is in force. The adapter
// never refuses a send itself: the core decides which messages are first contacts and holds
// them; replies to contacts who wrote still go, and WhatsApp accepts them.
//
// The notice is kept in the session table, so a 463 after a restart is still read right.

import (
	"context"
	"fmt"
	"time"

	"github.com/gateway/gateway/network"
)

// timelockNoticeWait: after a 463 with no notice in force, how long the adapter waits for one
// (the server may send the notification right after the acknowledgement).
const timelockNoticeWait = 2 * time.Second

// timelockNoEnd is the stored end of a notice in force that gave no end.
const timelockNoEnd = -1

// timelockInForce tells whether an account-wide notice holds at now. Called with mu held.
func (c *client) timelockInForce(now time.Time) bool {
	return c.timelockActive && (c.timelockUntil.IsZero() || now.Before(c.timelockUntil))
}

// noteTimelock records a notice (on the event goroutine) and wakes sends waiting for one.
func (c *client) noteTimelock(tl network.Timelock) {
	c.mu.Lock()
	c.timelockActive, c.timelockUntil = tl.Active, tl.Until
	close(c.timelockNotice)
	c.timelockNotice = make(chan struct{})
	c.mu.Unlock()
	stored := int64(0)
	switch {
	case tl.Active && tl.Until.IsZero():
		stored = timelockNoEnd
	case tl.Active:
		stored = tl.Until.UnixMilli()
	}
	ctx, cancel := context.WithTimeout(c.n.ctx, dbTimeout)
	defer cancel()
	if _, err := c.n.db.ExecContext(ctx,
		`UPDATE gateway_session_device SET timelock_until = $1 WHERE session_id = $2`, stored, c.sessionID); err != nil {
		c.log.Warn("could not record the reach-out timelock", "error", err)
	}
}

// loadTimelock reads the stored notice of the session. Called before the client is shared.
func (c *client) loadTimelock(ctx context.Context) {
	var ms int64
	if err := c.n.db.QueryRowContext(ctx,
		`SELECT timelock_until FROM gateway_session_device WHERE session_id = $1`, c.sessionID).Scan(&ms); err != nil {
		return
	}
	switch {
	case ms == timelockNoEnd:
		c.timelockActive = true
	case ms > 0:
		c.timelockActive, c.timelockUntil = true, time.UnixMilli(ms).UTC()
	}
}

// classify463 maps a 463: a TimelockError while a notice is in force (waiting briefly for one
// that may be on its way), else ErrNotReachable for this recipient.
func (c *client) classify463(ctx context.Context, err error) error {
	c.mu.Lock()
	inForce, until, notice := c.timelockInForce(time.Now()), c.timelockUntil, c.timelockNotice
	c.mu.Unlock()
	if !inForce {
		t := time.NewTimer(timelockNoticeWait)
		select {
		case <-notice:
		case <-t.C:
		case <-ctx.Done():
		case <-c.n.ctx.Done():
		}
		t.Stop()
		c.mu.Lock()
		inForce, until = c.timelockInForce(time.Now()), c.timelockUntil
		c.mu.Unlock()
	}
	if inForce {
		return &network.TimelockError{Until: until, Code: ackReachoutTimelock, Detail: err}
	}
	return fmt.Errorf("whatsapp: 463 with no reach-out timelock notice: %w: %w", network.ErrNotReachable, err)
}
