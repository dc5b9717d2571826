package whatsapp

// The session's proxy (network.WithProxy) carries everything of the session that reaches
// WhatsApp: the websocket, media, and the version fetch its Connect makes. The proxy is read
// at every new connection, so a proxy changed by a later Open applies at the next reconnect
// (whatsmeow's, or the next Connect) without a restart. A proxy that cannot be used fails the
// connection: the transport never falls back to a direct one (that would show the server's
// address to WhatsApp, the thing the proxy is there to hide).

import (
	"fmt"
	"net/http"
	"net/url"
)

// proxyFor is the http.Transport Proxy of the client's connections.
func (c *client) proxyFor(r *http.Request) (*url.URL, error) {
	raw := c.opts.Load().Proxy
	if raw == "" {
		if c.n.httpClient != nil {
			return nil, nil // a test's transport: nothing from the environment
		}
		return http.ProxyFromEnvironment(r)
	}
	if err := checkProxy(raw); err != nil {
		return nil, fmt.Errorf("proxy refused, not connecting directly: %w", err)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("proxy refused, not connecting directly: %w", err)
	}
	return u, nil
}

// newHTTPClient makes the client's HTTP client: the Network's transport (the default one, or a
// test's) with the session's proxy.
func (c *client) newHTTPClient() *http.Client {
	var t *http.Transport
	if h := c.n.httpClient; h != nil {
		ht, ok := h.Transport.(*http.Transport)
		if !ok {
			return h
		}
		t = ht.Clone()
	} else {
		t = http.DefaultTransport.(*http.Transport).Clone()
	}
	t.Proxy = c.proxyFor
	return &http.Client{Transport: t}
}
