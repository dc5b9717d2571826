package httpapi

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"
)

// Request bodies. The server streams them (fasthttp's StreamRequestBody) and readBody reads
// each one before any handler runs, against its route's limit:
//   - a Content-Length over the limit is refused from the header, before any byte of the body
//     is read (headerReceived);
//   - a known length within it is read into a buffer of exactly that size;
//   - a chunked body is read in pooled 64 KiB blocks and refused as soon as it passes the
//     limit, so it costs at most the limit (fasthttp's own reader doubles its buffer past the
//     limit, about 3-4 MiB for a 1 MiB route), and is put together only when it fits.
//
// A body refused unread leaves bytes on the connection: the answer is sent with Connection:
// close and the connection is closed the way nginx's lingering close does it (lingerConn): our
// side is shut for writing, what the client still sends is read and dropped for a while, and
// only then is the socket closed. A client that sends its whole body before reading the answer
// (Python's http.client, curl without Expect) reads the 413 instead of a connection reset.

const (
	bodyBlock = 64 << 10
	// lingerRead and lingerTotal bound the draining of a connection closed with its body
	// unread: each read waits at most lingerRead, and the whole drain at most lingerTotal.
	lingerRead  = 2 * time.Second
	lingerTotal = 10 * time.Second
	// bodyPrefetched: a streamed body of a known length up to this is read whole before the
	// handler runs (fasthttp's readBodyWithStreaming reads min(length, limit, 8 KiB) ahead; the
	// limit is at least the length here, or the request was refused from its header).
	bodyPrefetched = 8 << 10
)

var bodyBlocks = sync.Pool{New: func() any { b := make([]byte, bodyBlock); return &b }}

// bodyRefusedHeader marks a request whose Content-Length was over its route's limit
// (headerReceived).
const bodyRefusedHeader = "X-Gateway-Body-Over-Limit"

// bodyRefusedKey is bodyRefusedHeader as fasthttp keeps it (PeekCanonical: no copy per call).
var bodyRefusedKey = []byte(bodyRefusedHeader)

// readBody replaces a streamed request body by the body itself, read within the route's limit.
func (s *Server) readBody(ctx *fasthttp.RequestCtx) error {
	if len(ctx.Request.Header.PeekCanonical(bodyRefusedKey)) > 0 {
		return fmt.Errorf("%w: the limit is %d bytes", errBodyTooLarge, s.bodyLimit(&ctx.Request.Header))
	}
	if !ctx.Request.IsBodyStream() {
		return nil
	}
	// A known length over the route's limit was refused from the header (headerReceived); the
	// limit is looked up again only for a length over the smallest any route has, or a chunked
	// body.
	n := ctx.Request.Header.ContentLength()
	limit := s.cfg.BodyLimit
	if n < 0 || n > s.minLimit {
		limit = s.bodyLimit(&ctx.Request.Header)
	}
	stream := ctx.RequestBodyStream()
	var body []byte
	switch {
	case n > limit:
		return fmt.Errorf("%w: the limit is %d bytes", errBodyTooLarge, limit)
	case n >= 0 && n <= bodyPrefetched:
		// fasthttp has read the whole body already, into the request's own body buffer, which
		// the stream only replays: the stream is closed and that buffer is the body (no pool,
		// no copy; about 0.1 µs of a small body's request in process). The length is checked:
		// a fasthttp that read ahead less would be answered 400, not given a short body
		// (TestBodyPrefetched pins it).
		_ = ctx.Request.CloseBodyStream()
		if len(ctx.Request.Body()) != n {
			return fmt.Errorf("%w: %d of %d bytes read ahead", errBodyRead, len(ctx.Request.Body()), n)
		}
		return nil
	case n >= 0 && n <= bodyBlock:
		// Read into a pooled block and copied into the request's own (pooled) body buffer: no
		// allocation per request.
		bp := bodyBlocks.Get().(*[]byte)
		defer bodyBlocks.Put(bp)
		if _, err := io.ReadFull(stream, (*bp)[:n]); err != nil {
			return fmt.Errorf("%w: %w", errBodyRead, err)
		}
		ctx.Request.SetBody((*bp)[:n])
		return nil
	case n >= 0:
		body = make([]byte, n)
		if _, err := io.ReadFull(stream, body); err != nil {
			return fmt.Errorf("%w: %w", errBodyRead, err)
		}
	default:
		var err error
		if body, err = readChunked(stream, limit); err != nil {
			return err
		}
	}
	ctx.Request.SetBodyRaw(body)
	return nil
}

// errBodyRead: the client's body ended early or broke (answered 400, the connection closed).
var errBodyRead = errors.New("the request body could not be read")

// readChunked reads a body of unknown length in pooled blocks, refusing it once it passes
// limit.
func readChunked(r io.Reader, limit int) ([]byte, error) {
	type block struct {
		b *[]byte
		n int
	}
	var blocks []block
	defer func() {
		for _, b := range blocks {
			bodyBlocks.Put(b.b)
		}
	}()
	total := 0
	for {
		bp := bodyBlocks.Get().(*[]byte)
		n, err := io.ReadFull(r, *bp)
		blocks = append(blocks, block{bp, n})
		total += n
		if total > limit {
			return nil, fmt.Errorf("%w: the limit is %d bytes", errBodyTooLarge, limit)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errBodyRead, err)
		}
	}
	body := make([]byte, 0, total)
	for _, b := range blocks {
		body = append(body, (*b.b)[:b.n]...)
	}
	return body, nil
}

// refuseUnread answers a request whose body was not read (too large, broken): the connection
// closes after the answer, lingering so that the client reads it.
func (s *Server) refuseUnread(ctx *fasthttp.RequestCtx, err error) {
	s.requestID(ctx)
	ctx.SetConnectionClose()
	if lc, ok := ctx.Conn().(*lingerConn); ok {
		lc.linger.Store(true)
	}
	if errors.Is(err, errBodyRead) {
		s.writeError(ctx, badInput("bad_request", "%s", err.Error()))
		return
	}
	s.writeError(ctx, err)
}

// lingerListener hands out lingerConns, and keeps those a client opened without sending a
// request yet (fresh): fasthttp's shutdown closes idle connections but waits for those (Go's
// http.Transport parks a connection it dialed for a request another connection served, for up
// to 90 s), so Server.Shutdown closes them itself (closeFresh).
type lingerListener struct {
	net.Listener
	fresh *sync.Map // *lingerConn → struct{}, until its first byte or its close
}

func (l lingerListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	lc := &lingerConn{Conn: c, fresh: l.fresh}
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok && a.IP != nil {
		lc.remote = a.IP.String()
	}
	l.fresh.Store(lc, struct{}{})
	return lc, nil
}

// closeFresh closes the connections that never sent a byte (a shutdown).
func closeFresh(fresh *sync.Map) {
	fresh.Range(func(k, _ any) bool {
		if c := k.(*lingerConn); c.used.CompareAndSwap(false, true) {
			_ = c.Conn.Close()
		}
		fresh.Delete(k)
		return true
	})
}

// lingerConn closes a connection whose request body was left unread gracefully: see the top of
// this file. It also sets the deadlines fasthttp asks for lazily (lazyDeadline).
type lingerConn struct {
	net.Conn
	linger atomic.Bool
	once   sync.Once
	used   atomic.Bool // a byte came (or closeFresh closed it)
	fresh  *sync.Map
	// rd and wd are the read and write deadlines, used only by the goroutine serving the
	// connection (fasthttp's, then a hijacker's, which it starts after its last use).
	rd, wd lazyDeadline
	// remote is the client's address as the access log writes it (fasthttp's RemoteIP, as
	// text), formatted once as the connection is accepted (remoteText): RemoteIP per request
	// went through two interfaces to the socket's address, lines no other part of a request
	// touches, and each line formatted it again.
	remote string
}

// remoteText is the client's address as the access log writes it, when the connection is a
// lingerConn; else "" (the record keeps ctx.RemoteIP() instead).
func remoteText(ctx *fasthttp.RequestCtx) string {
	if lc, ok := ctx.Conn().(*lingerConn); ok {
		return lc.remote
	}
	return ""
}

// deadlineSlack is how much earlier than asked a deadline may fire (lazyDeadline).
const deadlineSlack = 100 * time.Millisecond

// lazyDeadline is one direction's deadline as fasthttp asked for it and as set on the socket.
// fasthttp sets three per keep-alive request (the idle timeout before the next request, the
// read timeout after its first byte, the write timeout before the answer), each one a runtime
// timer moved under the poller's lock: about 300 ns of CPU a request, profiled under load. The
// one asked for is set only before a Read or Write that could wait on it, and not at all when
// the one set is earlier by at most deadlineSlack: no wait ever outlives its deadline, and one
// fires at most 100 ms early (of 30 s, 2 min and the write timeout). On a busy connection that
// is one set per direction every 100 ms instead of three per request; a request read whole in
// its first read never sets its read timeout, and a slow client's next read does.
type lazyDeadline struct{ asked, set time.Time }

// due tells whether the deadline asked for must be set before the next wait.
func (d *lazyDeadline) due() bool {
	switch {
	case d.asked.Equal(d.set):
		return false
	case d.asked.IsZero() || d.set.IsZero():
		return true // a deadline removed, or the first one
	}
	return d.asked.Before(d.set) || d.asked.Sub(d.set) > deadlineSlack
}

func (c *lingerConn) SetReadDeadline(t time.Time) error  { c.rd.asked = t; return nil }
func (c *lingerConn) SetWriteDeadline(t time.Time) error { c.wd.asked = t; return nil }

// SetDeadline sets both at once, now (fasthttp clears them before it hands a connection over).
func (c *lingerConn) SetDeadline(t time.Time) error {
	c.rd, c.wd = lazyDeadline{t, t}, lazyDeadline{t, t}
	return c.Conn.SetDeadline(t)
}

func (c *lingerConn) Read(b []byte) (int, error) {
	if c.rd.due() {
		if err := c.Conn.SetReadDeadline(c.rd.asked); err != nil {
			return 0, err
		}
		c.rd.set = c.rd.asked
	}
	n, err := c.Conn.Read(b)
	if n > 0 && !c.used.Load() && c.used.CompareAndSwap(false, true) {
		c.fresh.Delete(c)
	}
	return n, err
}

func (c *lingerConn) Write(b []byte) (int, error) {
	if c.wd.due() {
		if err := c.Conn.SetWriteDeadline(c.wd.asked); err != nil {
			return 0, err
		}
		c.wd.set = c.wd.asked
	}
	return c.Conn.Write(b)
}

func (c *lingerConn) Close() error {
	c.fresh.Delete(c)
	if !c.linger.Load() {
		return c.Conn.Close()
	}
	c.once.Do(func() {
		if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite() // the answer is complete: the client sees its end
		}
		go c.drain()
	})
	return nil
}

// drain reads and drops what the client still sends, then closes.
func (c *lingerConn) drain() {
	defer c.Conn.Close()
	bp := bodyBlocks.Get().(*[]byte)
	defer bodyBlocks.Put(bp)
	end := time.Now().Add(lingerTotal)
	for now := time.Now(); now.Before(end); now = time.Now() {
		deadline := now.Add(lingerRead)
		if deadline.After(end) {
			deadline = end
		}
		_ = c.Conn.SetReadDeadline(deadline)
		if _, err := c.Conn.Read(*bp); err != nil {
			return
		}
	}
}
