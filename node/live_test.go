package node

import (
	"testing"
	"time"

	"github.com/goccy/go-json"
	"github.com/nats-io/nats.go"
)

// An owner keeps publishing a user's live events while any node streams them: one node's last
// stream of the user ending does not stop the events another node's stream still waits for.
func TestLiveInterestPerNode(t *testing.T) {
	l := &liveEvents{listening: map[string]map[string]time.Time{}}
	say := func(m liveInterest) {
		data, err := json.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		l.onInterest(&nats.Msg{Data: data})
	}
	say(liveInterest{Node: "a", Users: []string{"u"}, On: true})
	say(liveInterest{Node: "b", Users: []string{"u"}, On: true})
	say(liveInterest{Node: "a", Users: []string{"u"}})
	if !l.Listening("u") {
		t.Fatal("a's stream ended and the owner stopped the events b still streams")
	}
	say(liveInterest{Node: "b", Users: []string{"u"}})
	if l.Listening("u") {
		t.Fatal("no node streams the user and the owner still publishes their events")
	}
	// A node that says again it streams a user is one node, not two.
	say(liveInterest{Node: "a", Users: []string{"u"}, On: true})
	say(liveInterest{Node: "a", Users: []string{"u"}, On: true})
	say(liveInterest{Node: "a", Users: []string{"u"}})
	if l.Listening("u") {
		t.Fatal("a announced twice, ended once, and the owner still publishes")
	}
}
