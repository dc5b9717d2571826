package webhook

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/cloudapi"
)

// Timeout is how long a receiver has to answer an attempt (DESIGN.md section 10: a 2xx within
// 10 s is success).
const Timeout = 10 * time.Second

// idleConnDuration is how long an idle connection to a receiver is kept: under the 5 s after
// which Node.js (http.Server keepAliveTimeout) closes one, the shortest common default among
// receivers (Go's net/http keeps 3 min, nginx 75 s). A receiver that closes sooner is covered by
// retryClosedConn.
const idleConnDuration = 4 * time.Second

// retryClosedConn sends a delivery again at once, on another connection, when the one it was
// written to turned out to be closed by the receiver before any byte of an answer came back
// (a kept-alive connection the receiver dropped while idle). Each retry closes the dead
// connection, so a few cover every idle one the pool may hold; the receiver dedupes by
// webhook-id should it have read the request after all. Timeouts are never retried here: the
// actor's backoff decides.
func retryClosedConn(_ *fasthttp.Request, attempts int, err error) (resetTimeout, retry bool) {
	if attempts > 3 {
		return false, false
	}
	return false, errors.Is(err, fasthttp.ErrConnectionClosed) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// maxResponseBody is what is read of a receiver's answer; receivers answer small bodies, and a
// larger one only costs the connection.
const maxResponseBody = 64 << 10

// HTTPPoster sends deliveries over HTTP(S) with fasthttp's client. It never follows redirects
// (a 3xx is a failure: the signed body must reach the address the user registered), and the
// dialer it is given decides which addresses may be reached (media.Guard: private ones only
// with --webhook-allow-private).
//
// fasthttp rather than net/http: it is the HTTP stack of the rest of the gateway, and on the
// 2-core machine here (shared, load average about 30 at the time) net/http's client made 4-7k
// posts/s with 16 requests in flight to a loopback receiver, with stalls of seconds, where
// fasthttp's made 9-19k (BenchmarkPost).
type HTTPPoster struct {
	client  *fasthttp.Client
	timeout time.Duration
}

// NewHTTPPoster returns a poster that connects through dialer (nil: a plain dialer, for tests
// on loopback) with the given per-attempt timeout (0: Timeout). maxConnsPerHost bounds the
// connections to one receiver (0: 512); each subscription has at most one request in flight.
func NewHTTPPoster(dialer *net.Dialer, timeout time.Duration, maxConnsPerHost int) *HTTPPoster {
	if dialer == nil {
		dialer = &net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}
	}
	if timeout <= 0 {
		timeout = Timeout
	}
	if maxConnsPerHost <= 0 {
		maxConnsPerHost = 512
	}
	return &HTTPPoster{timeout: timeout, client: &fasthttp.Client{
		Name: "gateway-webhooks/1",
		// The net.Dialer resolves the name and its Control function judges every address it
		// is about to connect to (no proxy: one would connect on our behalf).
		Dial: func(addr string) (net.Conn, error) {
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			defer cancel()
			return dialer.DialContext(ctx, "tcp", addr)
		},
		MaxConnsPerHost:               maxConnsPerHost,
		MaxIdleConnDuration:           idleConnDuration,
		RetryIfErr:                    retryClosedConn,
		ReadTimeout:                   timeout,
		WriteTimeout:                  timeout,
		MaxResponseBodySize:           maxResponseBody,
		DisableHeaderNamesNormalizing: true, // the webhook-* headers go out in lower case, as the spec writes them
		DisablePathNormalizing:        true, // the URL the user registered, byte for byte
	}}
}

// Post sends body with the signature headers and returns the receiver's status. err is set when
// no status came back (address refused, connection, timeout).
func (p *HTTPPoster) Post(ctx context.Context, url string, h Headers, body []byte) (int, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI(url)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.Header.SetContentType("application/json")
	req.Header.Set(HeaderID, h.ID)
	req.Header.Set(HeaderTimestamp, h.Timestamp)
	req.Header.Set(HeaderSignature, h.Signature)
	if h.HubSignature != "" {
		req.Header.Set(cloudapi.SignatureHeader, h.HubSignature)
	}
	req.SetBodyRaw(body)
	deadline := time.Now().Add(p.timeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	err := p.client.DoDeadline(req, resp, deadline)
	status := resp.StatusCode()
	switch {
	case err == nil:
		return status, nil
	case errors.Is(err, fasthttp.ErrBodyTooLarge) && status > 0:
		return status, nil // the answer came; only its body was cut
	case errors.Is(err, fasthttp.ErrTimeout), errors.Is(err, fasthttp.ErrDialTimeout):
		return 0, fmt.Errorf("no answer within %s: %w", p.timeout, err)
	}
	return 0, err
}

// Close drops idle connections.
func (p *HTTPPoster) Close() { p.client.CloseIdleConnections() }
