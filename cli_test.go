package main

import (
	"strings"
	"testing"
)

// The command line's help: every command has one, --help exits 0, defaults read as people
// write them.
func TestCLIHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"help", "serve"}, {"serve", "--help"}, {"token", "--help"}, {"sim", "--help"}, {"healthcheck", "--help"}, {"healthcheck", "-h"}} {
		var out, errOut strings.Builder
		if err := run(args, &out, &errOut); err != nil {
			t.Fatalf("gateway %v: %v", args, err)
		}
		text := out.String() + errOut.String()
		if !strings.Contains(text, "usage:") && !strings.Contains(text, "Usage:") {
			t.Fatalf("gateway %v printed no usage:\n%s", args, text)
		}
	}
	var out strings.Builder
	_ = run([]string{"--help"}, &out, &out)
	for _, want := range []string{"gateway token --uid UID", "gateway healthcheck", "gateway serve --help", "GATEWAY_<NAME>"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("gateway --help lacks %q:\n%s", want, out.String())
		}
	}
	out.Reset()
	_ = run([]string{"serve", "--help"}, &out, &out)
	for _, want := range []string{"--media-max-bytes, GATEWAY_MEDIA_MAX_BYTES (default: 16 MiB)", "--min-free-disk, GATEWAY_MIN_FREE_DISK (default: 588 MiB)", "--memtable-size, GATEWAY_MEMTABLE_SIZE (default: 32 MiB)",
		"--pace-jitter, GATEWAY_PACE_JITTER (default: the network's own)", "--shutdown-timeout, GATEWAY_SHUTDOWN_TIMEOUT (default: 30s)", "GATEWAY_SECRET_KEY"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("serve --help lacks %q", want)
		}
	}
	if strings.Contains(out.String(), "-1ns") || strings.Contains(out.String(), "1048576") {
		t.Errorf("serve --help prints raw defaults:\n%s", out.String())
	}
	out.Reset()
	_ = run([]string{"token", "--help"}, &out, &out)
	if !strings.Contains(out.String(), "(default: 1h)") || !strings.Contains(out.String(), "--uid, GATEWAY_UID\n      the user id") {
		t.Errorf("token --help:\n%s", out.String())
	}
	out.Reset()
	_ = run([]string{"sim", "--help"}, &out, &out)
	if !strings.Contains(out.String(), "--sim-latency, GATEWAY_SIM_LATENCY") || !strings.Contains(out.String(), "--addr, GATEWAY_SIM_ADDR (default: :8090)") {
		t.Errorf("sim --help:\n%s", out.String())
	}
	// A mistake is one line naming the flag as the help spells it.
	err := run([]string{"serve", "--adr", ":1"}, &out, &out)
	if err == nil || !strings.Contains(err.Error(), "--adr") || !strings.Contains(err.Error(), "gateway serve --help") {
		t.Fatalf("a wrong flag: %v", err)
	}
	if err := run([]string{"sevre"}, &out, &out); err == nil || !strings.Contains(err.Error(), "gateway --help") {
		t.Fatalf("a wrong command: %v", err)
	}
}
