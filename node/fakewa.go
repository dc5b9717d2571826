//go:build fakewa

package node

// A test build (go build -tags fakewa) that can point the WhatsApp adapter at the fake server
// of network/whatsapp/fakewa running in another process: the process tests start such a
// binary with GATEWAY_TEST_FAKEWA_ADDR (host:port) and GATEWAY_TEST_FAKEWA_CERT (a PEM file).
// Never part of a release build: it swaps whatsmeow's root key for the fake's.

import (
	"fmt"
	"os"

	"go.mau.fi/whatsmeow"

	"github.com/gateway/gateway/network/whatsapp/fakewa"
)

// testBuild points the node's WhatsApp connections at the fake server when the environment
// names one: it sets Config.WhatsAppHTTPClient (Open calls it first).
func testBuild(c *Config) error {
	addr := os.Getenv("GATEWAY_TEST_FAKEWA_ADDR")
	if addr == "" {
		return nil
	}
	pem, err := os.ReadFile(os.Getenv("GATEWAY_TEST_FAKEWA_CERT"))
	if err == nil {
		c.WhatsAppHTTPClient, err = fakewa.ClientFor(addr, pem)
	}
	if err != nil {
		return fmt.Errorf("fakewa test build: %w", err)
	}
	whatsmeow.WACertPubKey = fakewa.RootPublicKey()
	return nil
}
