package main

import (
	"testing"

	"github.com/google/pprof/profile"
)

// sample is a profile sample of cpu nanoseconds with the given stack, leaf first.
func sample(ns int64, stack ...string) *profile.Sample {
	s := &profile.Sample{Value: []int64{1, ns}}
	for _, fn := range stack {
		s.Location = append(s.Location, &profile.Location{Line: []profile.Line{{Function: &profile.Function{Name: fn}}}})
	}
	return s
}

// A sample goes to the first component its frames name from the leaf up (an allocation to its
// caller), a goroutine of its own wherever its frame is; the sim is apart and last.
func TestComponentsSplitAProfile(t *testing.T) {
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples"}, {Type: "cpu"}}, Sample: []*profile.Sample{
		sample(40e6, "runtime.mallocgc", "github.com/goccy/go-json.Marshal", "github.com/gateway/gateway/persist.(*Outbox).Accept",
			"github.com/gateway/gateway/engine.(*Messages).Send", "github.com/gateway/gateway/httpapi.(*Server).send", "github.com/valyala/fasthttp.(*Server).serveConn"),
		sample(30e6, "internal/runtime/syscall/linux.Syscall6", "github.com/valyala/fasthttp.(*Server).serveConn"),
		sample(20e6, "github.com/dgraph-io/badger/v4/skl.(*node).key", "github.com/dgraph-io/badger/v4.(*DB).flushMemtable"),
		sample(10e6, "github.com/dgraph-io/badger/v4/skl.(*node).key", "github.com/dgraph-io/badger/v4.(*DB).writeRequests"),
		sample(5e6, "runtime.memmove", "github.com/gateway/gateway/network/sim.(*journal).append", "github.com/gateway/gateway/network/sim.(*client).Send",
			"github.com/gateway/gateway/actors/session.deliver"),
		sample(5e6, "runtime.futex", "runtime.schedule"),
	}}
	want := map[string]float64{
		"accept commit": 0.36, "HTTP (fasthttp, routing, handlers, JSON)": 0.27,
		"storage background (flushes, compactions, sync)": 0.18, "storage writer (group commits of every caller)": 0.09,
		"sim (the simulated network itself)": 0.05, otherComponent: 0.05,
	}
	cs := checkComponents(t, p, want)
	if last := cs[len(cs)-1]; !last.Sim {
		t.Errorf("the sim's row is not last: %+v", cs)
	}
	per := withPerMessage(cs, 100)
	if per[0].MicrosPerMsg != per[0].Share*100 {
		t.Errorf("µs per message: %+v", per[0])
	}
}

// The outbox on its own log (--outbox log) is split like Badger's: its accept, its outcomes and
// the log's writer each go where the Badger outbox's do.
func TestComponentsOfTheLogOutbox(t *testing.T) {
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "samples"}, {Type: "cpu"}}, Sample: []*profile.Sample{
		sample(50e6, "runtime.memmove", "github.com/gateway/gateway/persist.(*LogOutbox).queueAccept", "github.com/gateway/gateway/persist.(*LogOutbox).Accept",
			"github.com/gateway/gateway/engine.(*Messages).Send"),
		sample(30e6, "internal/runtime/syscall/linux.Syscall6", "github.com/gateway/gateway/persist/outlog.(*Log).writer"),
		sample(20e6, "github.com/gateway/gateway/persist.appendOutcome", "github.com/gateway/gateway/persist.(*LogOutbox).Settle",
			"github.com/gateway/gateway/engine.(*messages).Outcome"),
	}}
	checkComponents(t, p, map[string]float64{
		"accept commit": 0.5, "storage writer (group commits of every caller)": 0.3, "outcome write (outcomes, receipts)": 0.2,
	})
}

// checkComponents splits p and checks each named component's share.
func checkComponents(t *testing.T, p *profile.Profile, want map[string]float64) []component {
	t.Helper()
	cs := components(p)
	got := map[string]float64{}
	for _, c := range cs {
		got[c.Name] = c.Share
	}
	for name, share := range want {
		if g := got[name]; g < share-0.01 || g > share+0.01 {
			t.Errorf("%s: %.3f, want %.2f (all: %v)", name, g, share, got)
		}
	}
	return cs
}
