package httpapi

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/internal/cputime"
)

// BenchmarkServedRoutes is validate, client status and the v1 send through the gateway's own fasthttp.Server
// (its options, HeaderReceived, the streamed body, the listener's connection wrapper, the
// router and every middleware), against a server with bench/bare.go's options that answers
// with the gateway's captured answer, as the load test's bare server does. The connection is
// in memory (replayConn): one request per read, its answer written and dropped, so what is
// measured is each server's own CPU per request beside the kernel's, which the load test adds
// (bench/README.md). cpu-ns/op is the process's CPU time (the access log's writer included).
//
//	go test -run X -bench ServedRoutes -benchtime 200000x ./httpapi
func BenchmarkServedRoutes(b *testing.B) {
	a, raw, tok := hotFixture(b)
	// The load test's plan (caps of 10^9: the key's day and the allowance count every send).
	if r := a.do(b, "PATCH", "/api/admin/users", "root", nil, map[string]any{"id": "alice", "plan": "bench"}); r.status != 200 {
		b.Fatalf("plan: %d %s", r.status, r.body)
	}
	body := `{"rawKey":"` + raw + `"}`
	send := `{"phone":"15550001234","message":"hello from the bench"}`
	cases := []struct{ name, req string }{
		{"validate", "POST /api/admin/apikeys/validate HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nContent-Length: " +
			itoa(len(body)) + "\r\n\r\n" + body},
		{"status", "GET /api/client/status HTTP/1.1\r\nHost: bench\r\nAuthorization: Bearer " + tok + "\r\n\r\n"},
		// The v1 send as the load test sends it (x-api-key); the engine's accept runs on the
		// in-memory store and the sim, so the HTTP layer's share is read off its profile.
		{"send", "POST /api/v1/messages/send HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\nx-api-key: " + raw +
			"\r\nContent-Length: " + itoa(len(send)) + "\r\n\r\n" + send},
	}
	for _, c := range cases {
		answer := serveOnce(b, a.srv.srv, c.req)
		if !bytes.HasPrefix(answer, []byte("HTTP/1.1 200 OK\r\n")) {
			b.Fatalf("%s: %s", c.name, answer)
		}
		bare := bareLike(answer)
		for _, srv := range []struct {
			name string
			s    *fasthttp.Server
		}{{"gateway", a.srv.srv}, {"bare", bare}} {
			// One connection at a time, then one per core at once (as the load test's 64
			// connections keep both cores busy: what the requests share, a lock, a counter,
			// costs more when each core takes it in turn).
			for _, conns := range []int{1, runtime.GOMAXPROCS(0)} {
				b.Run(fmt.Sprintf("%s/%s/conns=%d", c.name, srv.name, conns), func(b *testing.B) {
					b.ReportAllocs()
					per := max(1, b.N/conns)
					cs := make([]*replayConn, conns)
					for i := range cs {
						cs[i] = &replayConn{req: []byte(c.req), left: per}
					}
					start := cputime.Process()
					b.ResetTimer()
					var wg sync.WaitGroup
					for _, conn := range cs {
						wg.Go(func() {
							if err := srv.s.ServeConn(&lingerConn{Conn: conn, fresh: &a.srv.fresh}); err != nil {
								b.Error(err)
							}
						})
					}
					wg.Wait()
					b.StopTimer()
					b.ReportMetric(float64((cputime.Process()-start).Nanoseconds())/float64(per*conns), "cpu-ns/op")
					for _, conn := range cs {
						if conn.answers < per || !bytes.HasPrefix(conn.last, []byte("HTTP/1.1 200 OK\r\n")) {
							b.Fatalf("%d answers of %d, the last %q", conn.answers, per, conn.last)
						}
					}
				})
			}
		}
	}
}

// serveOnce is the server's answer to req, whole.
func serveOnce(t testing.TB, s *fasthttp.Server, req string) []byte {
	conn := &replayConn{req: []byte(req), left: 1}
	if err := s.ServeConn(conn); err != nil {
		t.Fatal(err)
	}
	return conn.last
}

// bareLike is bench/bare.go's server answering every request with answer's status, headers
// (but Date and Server, which fasthttp adds) and body.
func bareLike(answer []byte) *fasthttp.Server {
	var resp fasthttp.Response
	if err := resp.Read(bufio.NewReader(bytes.NewReader(answer))); err != nil {
		panic(err)
	}
	status, body := resp.StatusCode(), append([]byte(nil), resp.Body()...)
	var headers [][2]string
	for k, v := range resp.Header.All() {
		switch string(k) {
		case "Date", "Server", "Content-Length":
		default:
			headers = append(headers, [2]string{string(k), string(v)})
		}
	}
	return &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			ctx.SetStatusCode(status)
			for _, h := range headers {
				ctx.Response.Header.Set(h[0], h[1])
			}
			ctx.Response.SetBodyRaw(body)
		},
		Name: "gateway", ReadTimeout: 30 * time.Second, WriteTimeout: 2 * time.Hour,
		IdleTimeout: 2 * time.Minute, NoDefaultServerHeader: true, NoDefaultContentType: true,
		MaxRequestBodySize: 1 << 20,
	}
}

// The replayed connection's addresses (a TCP connection's are made once, as these).
var (
	replayLocal  = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	replayRemote = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 40000}
)

// replayConn is a client connection that sends req left times, one per read (as a client
// that waits for each answer would), then ends; it keeps the last answer.
type replayConn struct {
	req     []byte
	left    int
	off     int
	answers int
	last    []byte
}

func (c *replayConn) Read(p []byte) (int, error) {
	if c.off == 0 {
		if c.left == 0 {
			return 0, io.EOF
		}
		c.left--
	}
	n := copy(p, c.req[c.off:])
	if c.off += n; c.off == len(c.req) {
		c.off = 0
	}
	return n, nil
}

func (c *replayConn) Write(p []byte) (int, error) {
	c.answers += bytes.Count(p, []byte("HTTP/1.1 "))
	c.last = append(c.last[:0], p...)
	return len(p), nil
}

func (c *replayConn) Close() error                     { return nil }
func (c *replayConn) LocalAddr() net.Addr              { return replayLocal }
func (c *replayConn) RemoteAddr() net.Addr             { return replayRemote }
func (c *replayConn) SetDeadline(time.Time) error      { return nil }
func (c *replayConn) SetReadDeadline(time.Time) error  { return nil }
func (c *replayConn) SetWriteDeadline(time.Time) error { return nil }
