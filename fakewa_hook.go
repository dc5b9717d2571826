//go:build fakewa

package main

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

func init() {
	addr := os.Getenv("GATEWAY_TEST_FAKEWA_ADDR")
	if addr == "" {
		return
	}
	pem, err := os.ReadFile(os.Getenv("GATEWAY_TEST_FAKEWA_CERT"))
	if err == nil {
		whatsappHTTPClient, err = fakewa.ClientFor(addr, pem)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "fakewa test build:", err)
		os.Exit(2)
	}
	whatsmeow.WACertPubKey = fakewa.RootPublicKey()
}
