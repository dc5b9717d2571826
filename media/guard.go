// Package media holds the gateway's outbound-address guard (and, after Core v2, the SSRF-safe
// media fetch): what may be reached when a user hands the gateway a URL. It imports only the
// standard library.
package media

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// ErrBlocked: the URL's host is, or resolves to, an address outside the public internet
// (private, loopback, link-local, reserved) and private addresses are not allowed.
var ErrBlocked = errors.New("address not allowed")

// ErrBadURL: not an absolute http(s) URL with a host and without credentials.
var ErrBadURL = errors.New("invalid URL")

// Guard decides which addresses outbound requests may reach. The zero value refuses every
// non-public address. Read-only after construction; safe for concurrent use.
type Guard struct {
	// AllowPrivate lets requests reach private, loopback, link-local, unspecified and multicast
	// addresses (--media-allow-private, --webhook-allow-private: tests and local setups).
	AllowPrivate bool
}

// Control is a net.Dialer Control function: it runs after DNS resolution, once per address
// tried and before connecting, so it judges the address actually used (DNS rebinding and
// redirects cannot get around it).
func (g Guard) Control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("%w: unrecognised address", ErrBlocked)
	}
	return g.CheckAddr(ap.Addr())
}

// CheckAddr refuses ip unless it is public or private addresses are allowed. The message names
// no address: a caller must not learn what internal names resolve to.
func (g Guard) CheckAddr(ip netip.Addr) error {
	if g.AllowPrivate || !AddrBlocked(ip) {
		return nil
	}
	return fmt.Errorf("%w: the host is or resolves to a private, loopback or link-local address", ErrBlocked)
}

// Dialer returns a dialer that refuses what the guard refuses.
func (g Guard) Dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Control: g.Control}
}

// CheckURL parses raw and checks it before it is stored or used: an absolute http(s) URL with a
// host, no credentials, and a host whose every address passes CheckAddr. The dial-time Control
// check still applies at every connection: a name may resolve differently later.
func (g Guard) CheckURL(ctx context.Context, r *net.Resolver, raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: not a URL", ErrBadURL)
	}
	switch u.Scheme {
	case "http", "https":
	default:
		return nil, fmt.Errorf("%w: the scheme must be http or https", ErrBadURL)
	}
	host := u.Hostname()
	switch {
	case host == "":
		return nil, fmt.Errorf("%w: no host", ErrBadURL)
	case u.User != nil:
		// Credentials would be sent to whatever the URL points at, and logged.
		return nil, fmt.Errorf("%w: the URL must not carry credentials", ErrBadURL)
	case u.Fragment != "":
		return nil, fmt.Errorf("%w: the URL must not carry a fragment", ErrBadURL)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return u, g.CheckAddr(ip)
	}
	if g.AllowPrivate {
		return u, nil
	}
	if r == nil {
		r = net.DefaultResolver
	}
	addrs, err := r.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("%w: the host does not resolve", ErrBadURL)
	}
	for _, a := range addrs {
		if err := g.CheckAddr(a); err != nil {
			return nil, err
		}
	}
	return u, nil
}

// reserved are ranges that are not the public internet but that netip's predicates do not
// cover. Read-only.
var reserved = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // carrier-grade NAT (shared address space)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // TEST-NET-1
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // TEST-NET-2
	netip.MustParsePrefix("203.0.113.0/24"),  // TEST-NET-3
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and broadcast
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("fec0::/10"),       // site-local (deprecated, still routed by some)
}

var (
	nat64     = netip.MustParsePrefix("64:ff9b::/96")
	sixToFour = netip.MustParsePrefix("2002::/16")
)

// AddrBlocked reports whether ip is not a public unicast address.
func AddrBlocked(ip netip.Addr) bool {
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() {
		return true
	}
	if ip.IsPrivate() || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return true
	}
	for _, p := range reserved {
		if p.Contains(ip) {
			return true
		}
	}
	// NAT64 and 6to4 addresses reach the IPv4 address they embed: judge that one.
	a := ip.As16()
	if nat64.Contains(ip) {
		return AddrBlocked(netip.AddrFrom4([4]byte(a[12:16])))
	}
	if sixToFour.Contains(ip) {
		return AddrBlocked(netip.AddrFrom4([4]byte(a[2:6])))
	}
	return false
}
