//go:build faults

package engine

// A test build (go build -tags faults) with fault points the process tests switch on through
// GATEWAY_TEST_FAULT, to land a kill -9 in a window too short to hit from outside. Never part
// of a release build.

import "os"

func init() {
	// "outcome-unrecorded": an outcome's events are committed and its record is never written,
	// as when a kill -9 lands between the two (TestKill9BetweenOutcomeEventAndRecord).
	outcomeRecordHeld = os.Getenv("GATEWAY_TEST_FAULT") == "outcome-unrecorded"
}
