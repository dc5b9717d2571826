//go:build faults || fakewa

package engine

// Fault points of the test builds (go build -tags faults, or the process tests' fakewa build,
// node/fakewa.go, which they share so that make test builds one test binary of the gateway, not
// two), switched on through GATEWAY_TEST_FAULT, to land a kill -9 in a window too short to hit
// from outside. Never part of a release build.

import "os"

func init() {
	// "outcome-unrecorded": an outcome's events are committed and its record is never written,
	// as when a kill -9 lands between the two (TestKill9BetweenOutcomeEventAndRecord).
	outcomeRecordHeld = os.Getenv("GATEWAY_TEST_FAULT") == "outcome-unrecorded"
}
