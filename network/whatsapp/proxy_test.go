package whatsapp

// The session's proxy (proxy.go) against a local HTTP CONNECT proxy: everything goes through
// it, a refused proxy never means a direct connection, a changed proxy applies at the next
// reconnect, and the version fetch goes through it too.

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.mau.fi/whatsmeow/store"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
)

// connectProxy is an HTTP CONNECT proxy on loopback that tunnels every CONNECT to the fake
// server (whatever host it names), or refuses with 403.
type connectProxy struct {
	srv    *http.Server
	url    string
	refuse atomic.Bool
	mu     sync.Mutex
	hosts  []string
}

func newConnectProxy(t testing.TB, fake string) *connectProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &connectProxy{url: "http://" + ln.Addr().String()}
	p.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
			return
		}
		p.mu.Lock()
		p.hosts = append(p.hosts, r.Host)
		p.mu.Unlock()
		if p.refuse.Load() {
			http.Error(w, "refused", http.StatusForbidden)
			return
		}
		up, err := net.Dial("tcp", fake)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		// Hijack first, then answer on the raw connection: a 200 written through w goes out
		// before Hijack stops the server's background read of the connection, which can then
		// take the first byte of the client's TLS hello into the buffered reader (read from
		// it here too), and a handler preempted in between lost it (the client saw EOF).
		conn, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			up.Close()
			return
		}
		if _, err := conn.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
			conn.Close()
			up.Close()
			return
		}
		go func() { _, _ = io.Copy(up, buf.Reader); up.Close() }()
		go func() { _, _ = io.Copy(conn, up); conn.Close() }()
	})}
	go func() { _ = p.srv.Serve(ln) }()
	t.Cleanup(func() { _ = p.srv.Close() })
	return p
}

func (p *connectProxy) tunnels() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.hosts)
}

// proxiedHarness is a harness whose transport reaches loopback addresses (the proxies) as
// they are and any other host at the fake server, counting those direct connections.
func proxiedHarness(t *testing.T) (*harness, *atomic.Int64) {
	h := newHarness(t)
	var direct atomic.Int64
	tr := h.srv.HTTPClient().Transport.(*http.Transport).Clone()
	fake := h.srv.Addr()
	tr.DialContext = func(ctx context.Context, _, addr string) (net.Conn, error) {
		var d net.Dialer
		if strings.HasPrefix(addr, "127.0.0.1:") {
			return d.DialContext(ctx, "tcp", addr)
		}
		direct.Add(1)
		return d.DialContext(ctx, "tcp", fake)
	}
	h.net.httpClient = &http.Client{Transport: tr}
	return h, &direct
}

func (h *harness) openProxied(id, proxy string) *session {
	h.t.Helper()
	rec := newRecorder()
	c, err := h.net.Open(id, rec.sink, network.WithProxy(proxy))
	if err != nil {
		h.t.Fatal(err)
	}
	return &session{t: h.t, c: c.(*client), rec: rec}
}

func TestProxyCarriesTheSessionAndFailsClosed(t *testing.T) {
	t.Parallel()
	h, direct := proxiedHarness(t)
	p1 := newConnectProxy(t, h.srv.Addr())
	s := h.openProxied("s1", p1.url)
	h.link(s, phoneA)
	h.srv.AddAccount(phoneB)
	if _, err := s.c.Send(ctxT(t), domain.Message{ID: "P1", To: phoneB, Kind: domain.KindDocument, Data: []byte("%PDF-1.7"), FileName: "a.pdf", MimeType: "application/pdf"}); err != nil {
		t.Fatal(err)
	}
	if p1.tunnels() < 2 || direct.Load() != 0 {
		t.Fatalf("%d tunnels through the proxy, %d direct connections; want the websocket and media through the proxy only", p1.tunnels(), direct.Load())
	}

	// The proxy refuses: the session stays down rather than connecting directly.
	p1.refuse.Store(true)
	before := p1.tunnels()
	if n := h.srv.StreamError(phoneA, "503"); n != 1 {
		t.Fatalf("dropped %d connections", n)
	}
	s.expect("Disconnected", isDisconnected(true))
	waitFor(t, "a refused reconnect through the proxy", func() bool { return p1.tunnels() > before })
	s.expectNone("Connected through a refused proxy", 500*time.Millisecond, isConnected)
	if direct.Load() != 0 || h.srv.Online(phoneA) != 0 {
		t.Fatalf("%d direct connections, %d online: a refused proxy fell back to a direct connection", direct.Load(), h.srv.Online(phoneA))
	}

	// A new proxy (a later Open, as the admin API does) applies at the next reconnect.
	p2 := newConnectProxy(t, h.srv.Addr())
	if _, err := h.net.Open("s1", s.rec.sink, network.WithProxy(p2.url)); err != nil {
		t.Fatal(err)
	}
	s.expect("Connected through the new proxy", isConnected)
	if p2.tunnels() == 0 || direct.Load() != 0 {
		t.Fatalf("new proxy: %d tunnels, %d direct", p2.tunnels(), direct.Load())
	}
}

// The version fetch before a connection goes through the session's proxy. Not parallel: the
// version is process-wide.
func TestVersionFetchThroughTheProxy(t *testing.T) {
	builtIn := store.GetWAVersion()
	t.Cleanup(func() { store.SetWAVersion(builtIn) })
	h, direct := proxiedHarness(t)
	h.net.version = newClientVersion(h.net, true)
	h.srv.SetWebVersion(builtIn[2] + 1)
	p := newConnectProxy(t, h.srv.Addr())
	s := h.openProxied("s1", p.url)
	s.connect()
	s.expect("QRCode", isQR)
	if h.srv.WebVersionFetches() != 1 || direct.Load() != 0 || p.tunnels() < 2 {
		t.Fatalf("%d fetches, %d direct connections, %d tunnels: want the fetch and the websocket through the proxy",
			h.srv.WebVersionFetches(), direct.Load(), p.tunnels())
	}
}
