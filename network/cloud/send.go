package cloud

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/gateway/gateway/cloudapi"
	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// Backoffs of Meta's rate limits: 130429 (the number's throughput) doubles from a second to a
// minute; 131056 (the pair rate: about one message every 6 seconds to one contact) waits 6 s.
const (
	throttleFirst = time.Second
	throttleMax   = time.Minute
	pairRateWait  = 6 * time.Second
)

// Send sends a message through the Graph API and answers Meta's id. See the package doc for
// how a send whose answer was lost is kept from being made twice.
func (c *Client) Send(ctx context.Context, m domain.Message) (network.Receipt, error) {
	acct, sends, _ := c.state()
	now := c.n.o.Now()
	if sends != nil {
		rec, ok, err := sends.Get(m.ID)
		if err != nil {
			return network.Receipt{}, fmt.Errorf("%w: the send log: %v", network.ErrUnknownOutcome, err)
		}
		if ok && rec.NetworkID != "" {
			return network.Receipt{ID: rec.NetworkID, At: now}, nil // Meta took it before
		}
		if ok && now.Sub(rec.Begun) < c.n.o.InDoubt {
			return network.Receipt{}, fmt.Errorf("%w: sent at %s without an answer; waiting for Meta's status to say whether it took it",
				network.ErrUnknownOutcome, rec.Begun.UTC().Format(time.RFC3339))
		}
	}
	req, err := c.request(ctx, acct, sends, m)
	if err != nil {
		return network.Receipt{}, err
	}
	if m.Typing && m.ReplyTo != nil && !m.ReplyTo.FromMe {
		c.typing(ctx, acct, m)
	}
	if sends != nil {
		if _, err := sends.Begin(ctx, m.ID, now); err != nil {
			return network.Receipt{}, fmt.Errorf("%w: the send log: %v", network.ErrUnknownOutcome, err)
		}
	}
	var out cloudapi.SendResponse
	err = c.n.graph.postJSON(ctx, acct.AccessToken, acct.PhoneNumberID+"/messages", req, &out)
	if err == nil && (len(out.Messages) == 0 || out.Messages[0].ID == "") {
		err = errors.New("graph api: the answer names no message id")
	}
	if err != nil {
		return network.Receipt{}, c.sendError(ctx, sends, m.ID, err)
	}
	id := out.Messages[0].ID
	c.mu.Lock()
	c.slow = 0
	c.mu.Unlock()
	if sends != nil {
		if err := sends.Taken(ctx, m.ID, id); err != nil {
			// Meta's status for it will record it (its callback data names the message).
			c.n.log.Warn("cloud: send log", "session_id", c.sessionID, "message_id", m.ID, "err", err)
		}
	}
	return network.Receipt{ID: id, At: c.n.o.Now()}, nil
}

// request builds the Graph request of m: Meta's ids for the messages it names, its medium by
// link or uploaded.
func (c *Client) request(ctx context.Context, acct domain.CloudAccount, sends network.SendLog, m domain.Message) (cloudapi.SendRequest, error) {
	if m.ReplyTo != nil {
		ref := *m.ReplyTo
		ref.ID = c.metaID(sends, ref.ID)
		m.ReplyTo = &ref
	}
	if m.Target != nil {
		ref := *m.Target
		ref.ID = c.metaID(sends, ref.ID)
		m.Target = &ref
	}
	req, err := cloudapi.NewRequest(m)
	if err != nil {
		return req, err
	}
	if med := req.MediaOf(); med != nil && *med != nil && (*med).Link == "" {
		if len(m.Data) == 0 {
			return req, fmt.Errorf("%w: the medium's bytes are gone", domain.ErrInvalidMedia)
		}
		id, err := c.n.graph.upload(ctx, acct, m.Data, m.MimeType, m.FileName)
		if err != nil {
			return req, c.sendError(ctx, nil, m.ID, err)
		}
		(*med).ID = id
	}
	return req, nil
}

// metaID is Meta's id of a message the gateway names by its own id (one the session sent);
// other ids (incoming messages') are Meta's already.
func (c *Client) metaID(sends network.SendLog, id string) string {
	if sends == nil {
		return id
	}
	if rec, ok, err := sends.Get(id); err == nil && ok && rec.NetworkID != "" {
		return rec.NetworkID
	}
	return id
}

// sendError maps a failed send to the port's errors (network.go): what Meta refused is
// forgotten in the send log (nothing was taken, a later try goes anew); an answer that never
// came is left begun (in doubt).
func (c *Client) sendError(ctx context.Context, sends network.SendLog, id string, err error) error {
	forget := func() {
		if sends != nil {
			if ferr := sends.Forget(ctx, id); ferr != nil {
				c.n.log.Warn("cloud: send log", "session_id", c.sessionID, "message_id", id, "err", ferr)
			}
		}
	}
	ge, ok := cloudapi.AsError(err)
	if !ok {
		if errors.Is(err, errNotSent) {
			forget()
			return fmt.Errorf("%w: %v", domain.ErrNotConnected, err)
		}
		return fmt.Errorf("%w: %v", network.ErrUnknownOutcome, err)
	}
	if ge.HTTPStatus >= 500 && ge.Code != cloudapi.CodeThroughput {
		return fmt.Errorf("%w: %v", network.ErrUnknownOutcome, ge)
	}
	forget()
	return c.refusal(ge)
}

// refusal is a Graph error that refused a message, as the port's error.
func (c *Client) refusal(ge *cloudapi.Error) error {
	switch ge.Code {
	case cloudapi.CodeAccessToken:
		c.tokenInvalid(ge)
		return fmt.Errorf("%w: Meta refused the access token", domain.ErrNotConnected)
	case cloudapi.CodeThroughput:
		return &network.RetryLaterError{Err: network.ErrRateLimited, Code: ge.Code, After: c.slower(), Detail: ge}
	case cloudapi.CodePairRate:
		return &network.RetryLaterError{Err: network.ErrRateLimited, Code: ge.Code, After: pairRateWait, Detail: ge}
	}
	return failure(ge)
}

// failure is a Graph error that fails a message for good (on a send's answer or in a failed
// status), with the gateway's code where it has one.
func failure(ge *cloudapi.Error) error {
	switch ge.Code {
	case cloudapi.CodeOutsideWindow:
		return fmt.Errorf("%w: %w", domain.ErrOutsideServiceWindow, ge)
	case cloudapi.CodeUndeliverable:
		return fmt.Errorf("%w: %w", domain.ErrRecipientNotReachable, ge)
	case cloudapi.CodeUnsupportedType:
		return fmt.Errorf("%w: %w", network.ErrUnsupported, ge)
	case cloudapi.CodeTemplateParams, cloudapi.CodeTemplateMissing, cloudapi.CodeTemplatePaused, cloudapi.CodeTemplateDisabled:
		return fmt.Errorf("%w: %w", domain.ErrTemplateNotApproved, ge)
	}
	return fmt.Errorf("%w: %w", domain.ErrNetwork, ge)
}

// retryable tells whether a failed status is one to send again (Meta's rate limits).
func retryable(code int) bool {
	return code == cloudapi.CodeThroughput || code == cloudapi.CodePairRate
}

// typing shows "typing…" before a reply: the Cloud API's typing indicator goes with a read
// mark of the contact's message it answers (it has none without one), for network.TypingFor.
// A failure costs only the indicator.
func (c *Client) typing(ctx context.Context, acct domain.CloudAccount, m domain.Message) {
	req := cloudapi.SendRequest{MessagingProduct: cloudapi.Product, Status: cloudapi.StatusRead, MessageID: m.ReplyTo.ID,
		TypingIndicator: &cloudapi.TypingIndicator{Type: "text"}}
	if err := c.n.graph.postJSON(ctx, acct.AccessToken, acct.PhoneNumberID+"/messages", req, nil); err != nil {
		c.n.log.Debug("cloud: typing indicator", "session_id", c.sessionID, "err", err)
		return
	}
	t := time.NewTimer(network.TypingFor(m))
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// slower doubles the wait after Meta's throughput limit (throttleFirst to throttleMax) and
// returns it.
func (c *Client) slower() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.slow = min(max(2*c.slow, throttleFirst), throttleMax)
	return c.slow
}
