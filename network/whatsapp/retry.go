package whatsapp

// Re-send requests. When a recipient's device cannot decrypt a message it sends a retry
// receipt, and the sender must encrypt the same message again. whatsmeow remembers the last
// 256 messages it sent; older ones are asked of GetMessageForRetry, which the adapter answers
// from the core's outbox (network.MessageSource). Without one, whatsmeow's own retry store
// (UseRetryMessageStore: the last 7 days in the device database) is used instead.

import (
	"context"
	"time"

	"go.mau.fi/whatsmeow/proto/waE2E"
	"go.mau.fi/whatsmeow/types"
)

// retryBuildTimeout bounds rebuilding one message for a retry (media is uploaded again).
const retryBuildTimeout = 60 * time.Second

// messageForRetry is whatsmeow's GetMessageForRetry hook: the message id sent to chat "to"
// (a LID or a phone-number JID), rebuilt from the outbox. It answers nil (whatsmeow then
// drops the request) for an unknown id and for a message that was sent to someone else: a
// retry receipt must never get another chat's message.
func (c *client) messageForRetry(requester, to types.JID, id types.MessageID) *waE2E.Message {
	src := c.opts.Load().Messages
	if src == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(c.n.ctx, retryBuildTimeout)
	defer cancel()
	m, ok := src.Message(ctx, string(id))
	if !ok {
		c.log.Warn("retry receipt for a message the outbox does not have", "id", string(id), "from", requester.String())
		return nil
	}
	c.mu.Lock()
	wa := c.wa
	c.mu.Unlock()
	chat := to.ToNonAD()
	digits, _ := phoneDigits(m.To)
	switch chat.Server {
	case types.DefaultUserServer:
		ok = digits != "" && chat.User == digits
	case types.HiddenUserServer:
		pn, err := wa.Store.LIDs.GetPNForLID(ctx, chat)
		ok = digits != "" && err == nil && pn.User == digits
	case types.GroupServer:
		ok = chat.String() == m.To
	default:
		ok = false
	}
	if !ok {
		c.log.Warn("retry receipt names another chat than the message's; ignored",
			"id", string(id), "chat", chat.String(), "from", requester.String())
		return nil
	}
	m, err := c.n.prepareAudio(ctx, m)
	if err != nil {
		c.log.Warn("could not convert a voice note for a retry receipt", "id", string(id), "error", err)
		return nil
	}
	m.Typing = false // the recipient saw it typed once
	msg, err := c.compose(ctx, wa, chat, m, time.Now())
	if err != nil {
		c.log.Warn("could not rebuild a message for a retry receipt", "id", string(id), "error", err)
		return nil
	}
	c.log.Info("answering a retry receipt from the outbox", "id", string(id), "from", requester.String())
	return msg
}
