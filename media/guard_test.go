package media

import (
	"context"
	"errors"
	"net/netip"
	"testing"
)

func TestCheckURL(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, url    string
		allowPrivate bool
		want         error
	}{
		{"public IP", "https://8.8.8.8/hook", false, nil},
		{"loopback", "http://127.0.0.1:9000/hook", false, ErrBlocked},
		{"loopback allowed", "http://127.0.0.1:9000/hook", true, nil},
		{"private", "http://10.1.2.3/hook", false, ErrBlocked},
		{"link-local metadata", "http://169.254.169.254/latest", false, ErrBlocked},
		{"IPv6 loopback", "http://[::1]:8080/", false, ErrBlocked},
		{"IPv4-mapped private", "http://[::ffff:192.168.1.1]/", false, ErrBlocked},
		{"NAT64 of loopback", "http://[64:ff9b::7f00:1]/", false, ErrBlocked},
		{"localhost name", "http://localhost:8080/", false, ErrBlocked},
		{"scheme", "ftp://8.8.8.8/", false, ErrBadURL},
		{"no scheme", "8.8.8.8/hook", false, ErrBadURL},
		{"credentials", "https://u:p@8.8.8.8/", false, ErrBadURL},
		{"no host", "https:///x", false, ErrBadURL},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Guard{AllowPrivate: tc.allowPrivate}.CheckURL(ctx, nil, tc.url)
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("CheckURL(%q) = %v, want %v", tc.url, err, tc.want)
			}
		})
	}
}

func TestControlRefusesResolvedPrivateAddress(t *testing.T) {
	g := Guard{}
	if err := g.Control("tcp", "127.0.0.1:80", nil); !errors.Is(err, ErrBlocked) {
		t.Fatalf("Control(loopback) = %v", err)
	}
	if err := g.Control("tcp", "1.1.1.1:443", nil); err != nil {
		t.Fatalf("Control(public) = %v", err)
	}
	if err := (Guard{AllowPrivate: true}).Control("tcp", "127.0.0.1:80", nil); err != nil {
		t.Fatalf("Control(loopback, allowed) = %v", err)
	}
	if !AddrBlocked(netip.Addr{}) {
		t.Fatal("the zero address must be blocked")
	}
}
