package media

import (
	"net"
	"net/netip"
	"testing"
	"time"
)

func TestAddrBlocked(t *testing.T) {
	t.Parallel()
	for addr, want := range map[string]bool{
		"127.0.0.1":          true,
		"127.8.9.10":         true,
		"10.1.2.3":           true,
		"172.16.0.1":         true,
		"172.31.255.255":     true,
		"192.168.1.1":        true,
		"169.254.169.254":    true, // cloud metadata
		"0.0.0.0":            true,
		"0.1.2.3":            true,
		"100.64.0.1":         true,
		"224.0.0.1":          true,
		"239.255.255.250":    true,
		"255.255.255.255":    true,
		"::":                 true,
		"::1":                true,
		"fe80::1":            true,
		"fe80::1%eth0":       true,
		"fc00::1":            true,
		"fd12:3456::1":       true,
		"ff02::1":            true,
		"::ffff:127.0.0.1":   true,
		"::ffff:10.0.0.1":    true,
		"64:ff9b::a00:1":     true, // NAT64 of 10.0.0.1
		"2002:c0a8:101::1":   true, // 6to4 of 192.168.1.1
		"2001:db8::1":        true,
		"8.8.8.8":            false,
		"1.1.1.1":            false,
		"172.32.0.1":         false,
		"100.128.0.1":        false,
		"2606:4700::1111":    false,
		"::ffff:8.8.8.8":     false,
		"64:ff9b::808:808":   false, // NAT64 of 8.8.8.8
		"2002:808:808::1":    false, // 6to4 of 8.8.8.8
		"2a00:1450:4001::1b": false,
	} {
		if got := AddrBlocked(netip.MustParseAddr(addr)); got != want {
			t.Errorf("AddrBlocked(%s) = %v, want %v", addr, got, want)
		}
	}
	if !AddrBlocked(netip.Addr{}) {
		t.Error("the zero address is not blocked")
	}
}

// The guard's dialer refuses what the fetcher refuses, before connecting.
func TestGuardDialerRefusesPrivate(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn, err := Guard{}.Dialer(time.Second).Dial("tcp", ln.Addr().String())
	if err == nil {
		conn.Close()
		t.Fatal("dialled a loopback address")
	}
	wantMediaErr(t, err, ErrBlocked)
	wantMediaErr(t, Guard{}.Control("tcp", "not an address", nil), ErrBlocked)
	if err := (Guard{}).CheckAddr(netip.MustParseAddr("8.8.8.8")); err != nil {
		t.Fatalf("a public address refused: %v", err)
	}
	conn, err = Guard{AllowPrivate: true}.Dialer(time.Second).Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatalf("AllowPrivate: %v", err)
	}
	conn.Close()
}
