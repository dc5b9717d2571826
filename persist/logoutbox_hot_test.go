package persist

import (
	"testing"
)

// A kept pending record is reused with no allocation: newPending took v's address, which moved
// v to the heap at each call (inlined into queueAccept), so the kept records saved nothing and
// every accept allocated one (issue 32: one allocation a message in the send path's profile).
func TestPendingRecordReused(t *testing.T) {
	lo := &LogOutbox{}
	kept := &logPending{}
	lo.freePending = []*logPending{kept}
	var got *logPending
	allocs := testing.AllocsPerRun(200, func() {
		got = lo.newPending(logPending{pos: 7, state: accepting})
		lo.freePending = append(lo.freePending[:0], got)
	})
	if got != kept || got.pos != 7 || got.state != accepting {
		t.Fatalf("newPending = %p %+v, want the kept record %p holding the value", got, *got, kept)
	}
	if allocs != 0 {
		t.Fatalf("newPending with a kept record: %.1f allocations, want 0", allocs)
	}
}
