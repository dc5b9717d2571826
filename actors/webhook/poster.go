package webhook

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// Timeout is how long a receiver has to answer an attempt (DESIGN.md section 10: a 2xx within
// 10 s is success).
const Timeout = 10 * time.Second

// HTTPPoster sends deliveries over HTTP. It never follows redirects (a 3xx is a failure: the
// signed body must reach the address the user registered), and the dialer it is given decides
// which addresses may be reached (media.Guard: private ones only with --webhook-allow-private).
type HTTPPoster struct {
	client *http.Client
}

// NewHTTPPoster returns a poster that connects through dialer (nil: a plain dialer, for tests
// on loopback) with the given per-attempt timeout (0: Timeout). maxConnsPerHost bounds the
// connections kept to one receiver (0: 64), one per subscription sending at once.
func NewHTTPPoster(dialer *net.Dialer, timeout time.Duration, maxConnsPerHost int) *HTTPPoster {
	if dialer == nil {
		dialer = &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	}
	if timeout <= 0 {
		timeout = Timeout
	}
	if maxConnsPerHost <= 0 {
		maxConnsPerHost = 64
	}
	t := &http.Transport{
		// No proxy: a proxy would connect on our behalf and bypass the address check.
		Proxy:                  nil,
		DialContext:            dialer.DialContext,
		ForceAttemptHTTP2:      true,
		MaxIdleConns:           1024,
		MaxIdleConnsPerHost:    maxConnsPerHost,
		IdleConnTimeout:        90 * time.Second,
		TLSHandshakeTimeout:    timeout,
		ResponseHeaderTimeout:  timeout,
		ExpectContinueTimeout:  time.Second,
		MaxResponseHeaderBytes: 64 << 10,
	}
	return &HTTPPoster{client: &http.Client{
		Transport: t,
		Timeout:   timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}}
}

// Post sends body with the signature headers and returns the receiver's status. err is set when
// no status came back (address refused, connection, timeout).
func (p *HTTPPoster) Post(ctx context.Context, url string, h Headers, body []byte) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("webhook: request: %w", err)
	}
	req.Header = http.Header{
		"Content-Type":  {"application/json"},
		"User-Agent":    {"gateway-webhooks/1"},
		HeaderID:        {h.ID},
		HeaderTimestamp: {h.Timestamp},
		HeaderSignature: {h.Signature},
	}
	resp, err := p.client.Do(req)
	if err != nil {
		var ue interface{ Timeout() bool }
		if errors.As(err, &ue) && ue.Timeout() {
			return 0, fmt.Errorf("no answer within the timeout: %w", err)
		}
		return 0, err
	}
	// Read a little of the body so the connection can be reused; receivers answer small bodies.
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// Close drops idle connections.
func (p *HTTPPoster) Close() { p.client.CloseIdleConnections() }
