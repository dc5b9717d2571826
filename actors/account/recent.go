package account

import (
	"time"

	"github.com/gateway/gateway/domain"
)

// recentWindow: a message is counted (its outcome durable) within this long of being sent. A
// snapshot says how many of the messages it counts were sent within it before it was read
// (domain.Allowance Since, Recent), so that a boot after a kill -9 counts the messages the
// outbox holds sent since then that it does not (persist.Accounts.Recount). 10 s: an outcome
// is written in milliseconds, its events first; a store that stalls longer (a NATS election)
// makes a kill -9 in that stall undercount, as every kill did before.
const recentWindow = 10 * time.Second

// recentSlots seconds are kept: more than recentWindow, so that every second a snapshot's
// Since covers is still held.
const recentSlots = 16

// recent counts the messages counted this period by the second they were sent, over the last
// recentSlots seconds (a ring: slot sec mod recentSlots holds second secs[slot]).
type recent struct {
	secs [recentSlots]int64
	n    [recentSlots]int64
}

// note counts n messages sent at ms (0: unknown, not noted: its outcome carries no send
// time, so no recount would find it either).
func (r *recent) note(ms int64, n int64) {
	if ms <= 0 {
		return
	}
	sec := ms / 1000
	i := sec % recentSlots
	switch {
	case r.secs[i] == sec:
	case r.secs[i] > sec:
		return // older than the ring: before any snapshot's Since to come
	default:
		r.secs[i], r.n[i] = sec, 0
	}
	r.n[i] += n
}

// since is how many messages noted were sent at or after second sec.
func (r *recent) since(sec int64) int64 {
	var n int64
	for i, s := range r.secs {
		if s >= sec {
			n += r.n[i]
		}
	}
	return n
}

// stamp sets a snapshot's At, Since and Recent, read at now. Called under mu.
func (a *Counter) stamp(st *domain.Allowance, now time.Time) {
	since := max(now.Add(-recentWindow).Unix(), a.periodStart.Unix())
	st.At, st.Since, st.Recent = now.UnixMilli(), since*1000, a.recent.since(since)
}

// Seeds is a Store that knows, at the first load after a kill -9, the send times of the
// messages of a user's recount (persist.Accounts.Recount, through the engine): counted in the
// snapshot it returns, they are noted as sent then.
type Seeds interface {
	SentSeeds(userID string) []domain.Millis
}
