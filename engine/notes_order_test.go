package engine

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/network"
	"github.com/gateway/gateway/persist"
)

// voteOrderSink is a heldSink that names each poll.vote it commits by its options.
type voteOrderSink struct{ heldSink }

func (s *voteOrderSink) Prepare(uid string, ev domain.Event) (PreparedEvent, error) {
	p, err := s.heldSink.Prepare(uid, ev)
	if d, ok := ev.Data.(domain.PollVoteData); ok {
		p.rec.Type += domain.EventType("/" + strings.Join(d.Options, ","))
	}
	return p, err
}

// votes are the poll.vote events committed, in their order.
func (s *voteOrderSink) votes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, c := range s.committed {
		if v, ok := strings.CutPrefix(string(c), string(domain.EventPollVote)+"/"); ok {
			out = append(out, v)
		}
	}
	return out
}

// A voter who changes their vote again and again within one second (WhatsApp's timestamps are
// seconds): every vote is recorded in the order the network reported it, each with its event,
// and the poll ends with their last choice, whatever order the engine's goroutines run in.
// The first vote's event is held while the rest arrive, so they all wait on the same message.
func TestChangesToOneMessageKeepTheNetworksOrder(t *testing.T) {
	recs := persist.NewRecords(persist.NewMemory())
	sink := &voteOrderSink{}
	e, u, net := gatedEngine(t, recs, Config{Events: sink})
	ctx := context.Background()
	sid := e.Sessions.Status(u.ID).ID
	const voter = "4915100000007"
	options := []string{"Yes", "No", "Call me"}
	m, err := e.Messages.Send(ctx, SendRequest{UserID: u.ID, Origin: "api",
		Message: domain.Message{To: voter, Kind: domain.KindPoll, Question: "Confirm order 1001?", Options: options}})
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 10*time.Second, "the poll sent", func() bool {
		recs.Outbox.Flush()
		got, err := recs.Outbox.Get(m.ID)
		return err == nil && (got.Status == domain.MsgSent || got.Status == domain.MsgDelivered)
	})

	release := sink.shut()
	t.Cleanup(release)
	at := time.Now().Truncate(time.Second)
	const n = 40
	told := make([]chan error, n)
	var want []string
	for i := range n {
		d, ch := doneCh()
		told[i] = ch
		choice := options[i%len(options)]
		want = append(want, choice)
		net.emit(sid, network.PollVote{Origin: network.Origin{ID: fmt.Sprintf("VOTE%d", i), From: voter, At: at}, Poll: m.ID,
			Options: []string{choice}, Done: d})
		if i == 0 {
			waitUntil(t, 10*time.Second, "the first vote's event held", func() bool { return sink.waiting.Load() > 0 })
		}
	}
	release()
	for i, ch := range told {
		toldOnce(t, fmt.Sprintf("vote %d", i), ch)
	}
	if got := sink.votes(); strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("poll.vote events committed %q, want one a vote in the order cast %q", got, want)
	}
	p, err := e.Messages.Votes(u.ID, m.ID)
	if err != nil {
		t.Fatal(err)
	}
	last := want[n-1]
	for _, c := range p.Options {
		if (c.Name == last) != (c.Count == 1) {
			t.Fatalf("votes %+v, want the voter's last choice %q only", p.Options, last)
		}
	}
}
