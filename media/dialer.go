package media

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"syscall"
	"time"
)

// The address guard: what outbound connections to an address a user chose (a media URL, a
// webhook URL) may reach. The fetcher uses it; other adapters dial through Guard.Dialer.

// ErrBlocked: the address is outside the public internet (private, loopback, link-local,
// reserved) and private addresses are not allowed.
var ErrBlocked = errors.New("address not allowed")

// Guard decides which addresses outbound requests may reach. The zero value refuses every
// non-public address. Read-only after construction; safe for concurrent use.
type Guard struct {
	// AllowPrivate lets requests reach private, loopback, link-local, unspecified and multicast
	// addresses (--media-allow-private: tests and local setups).
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

// Dialer returns a dialer that refuses what the guard refuses. Use it without a proxy: a proxy
// would connect on our behalf and bypass the check.
func (g Guard) Dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second, Control: g.Control}
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
