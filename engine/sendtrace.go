package engine

import "time"

// SendTrace is when an accept's steps began, for the HTTP layer's slow-send report (httpapi
// slowsend.go; bench/README.md, issue 32's fifteenth pass): Send fills it when the request
// carries one. Read from the monotonic clock (time.Now), not the engine's: a test's clock may
// stand still. Zero: the step was not reached (an error before it, or none to make).
type SendTrace struct {
	// Reserve: the session resolved and the message built; the allowance's reservation
	// begins (a reservation past the account's durable mark waits for the mark's commit). On
	// the wall clock it is the accept's own clock read, taken before the opt-out check: a
	// user's first send after a boot or a handover reads its opt-out list there, and that read
	// is counted in the allowance's step, not before it.
	Reserve time.Time
	// Commit: the outbox's commit begins (the group commit; with --fsync batch, its sync).
	Commit time.Time
	// Committed: the commit is durable; the message is then handed to its session.
	Committed time.Time
}
