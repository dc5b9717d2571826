package engine

import (
	"testing"

	"github.com/gateway/gateway/domain"
)

// The session index's per-user lookups (defaultOf, cloudOf) read the published entries
// without a lock and without an allocation, follow each change of byUser and byID, and trust
// the session's own view about who owns it.
func TestSessionIndexLookups(t *testing.T) {
	var x sessionIndex
	x.init()
	entry := func(owner, kind string) *sessionEntry {
		e := &sessionEntry{}
		e.Publish(domain.Session{AssignedTo: owner, Kind: kind})
		return e
	}
	linked, linked2, cloud := entry("u1", domain.SessionLinked), entry("u1", domain.SessionLinked), entry("u1", domain.SessionCloud)
	x.put("s1", linked)
	x.assign("s1", "", "u1")
	if x.defaultOf("u1") != linked || x.cloudOf("u1") != nil || x.defaultOf("u2") != nil {
		t.Fatal("one linked session: want it as the default and no cloud session")
	}
	// Assigned before its entry is put: not seen until it is.
	x.assign("c1", "", "u1")
	if x.cloudOf("u1") != nil {
		t.Fatal("a cloud session with no entry yet was found")
	}
	x.put("c1", cloud)
	x.put("s2", linked2)
	x.assign("s2", "", "u1")
	if x.cloudOf("u1") != cloud || x.defaultOf("u1") != linked2 {
		t.Fatal("want the cloud session and the linked session assigned last")
	}
	// The view says who owns a session, even before the index follows a move.
	linked2.Publish(domain.Session{AssignedTo: "u2", Kind: domain.SessionLinked})
	if x.defaultOf("u1") != linked {
		t.Fatal("a session whose view names another owner was returned")
	}
	x.assign("s2", "u1", "u2")
	if x.defaultOf("u2") != linked2 || x.defaultOf("u1") != linked {
		t.Fatal("after the move: want each user's own")
	}
	x.remove("c1", "u1")
	if x.cloudOf("u1") != nil {
		t.Fatal("a removed cloud session was found")
	}
	x.remove("s1", "u1")
	if x.defaultOf("u1") != nil {
		t.Fatal("a user with no session left has a default")
	}

	// Lock-free: the lookups answer while a writer holds the index's lock (an RLock would
	// block here for good), and allocate nothing.
	x.mu.Lock()
	if x.defaultOf("u2") != linked2 || x.cloudOf("u2") != nil {
		x.mu.Unlock()
		t.Fatal("lookups under a held lock")
	}
	x.mu.Unlock()
	if n := testing.AllocsPerRun(100, func() { _, _ = x.defaultOf("u2"), x.cloudOf("u2") }); n != 0 {
		t.Fatalf("%v allocations per lookup", n)
	}
}

// BenchmarkCloudOfWithoutCloud is what every send asks of a user with no cloud number, from
// every core at once (RunParallel): whether the user has a cloud session.
//
//	go test -run X -bench CloudOf -cpu 2 ./engine
func BenchmarkCloudOfWithoutCloud(b *testing.B) {
	var x sessionIndex
	x.init()
	e := &sessionEntry{}
	e.Publish(domain.Session{AssignedTo: "u1", Kind: domain.SessionLinked})
	x.put("s1", e)
	x.assign("s1", "", "u1")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if x.cloudOf("u1") != nil || x.defaultOf("u1") != e {
				b.Fatal("wrong entry")
			}
		}
	})
}
