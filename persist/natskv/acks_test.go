package natskv

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/gateway/gateway/persist/natstest"
)

// TestPipelinedAcks: a group of pipelined publishes gets each its own answer, read from the
// store's one ack subscription: the stored ones their sequences, one refused on its condition
// the server's API error (wrong last sequence), one to a subject no stream takes a
// no-responders error (nothing stored: sent again by sendPiped), one nobody answers a timeout
// within the store's Timeout; and a connection that starts to move ends the group at once
// with nats.ErrDisconnected, as nats.go's own async publishes are.
func TestPipelinedAcks(t *testing.T) {
	srv := natstest.Start(t)
	s, err := Open(context.Background(), Options{URL: srv.URL, Prefix: "acks", Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rs := s.streams[0]
	subj := func(k string) string { return s.prefix + ".t.0." + k }
	silent, err := s.nc.SubscribeSync("acks-silent")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Unsubscribe()
	wrong := nats.NewMsg(subj("b"))
	wrong.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "999")
	msgs := []*nats.Msg{nats.NewMsg(subj("a")), wrong, nats.NewMsg("acks-nostream"), nats.NewMsg("acks-silent"), nats.NewMsg(subj("c"))}
	began := time.Now()
	out := rs.publishAll(msgs, earlyAnswers{})
	if out[0].err != nil || out[4].err != nil || out[0].seq == 0 || out[4].seq != out[0].seq+1 {
		t.Fatalf("stored: %+v, %+v", out[0], out[4])
	}
	var apiErr *jetstream.APIError
	if !errors.As(out[1].err, &apiErr) || !errors.Is(rs.publishErr(out[1].err), errWrongSequence) {
		t.Fatalf("a broken condition: %v", out[1].err)
	}
	if !notSent(out[2].err) {
		t.Fatalf("no stream: %v, want a no-responders error", out[2].err)
	}
	if !timedOut(out[3].err) {
		t.Fatalf("no answer: %v, want a timeout", out[3].err)
	}
	if d := time.Since(began); d < 2*time.Second || d > 6*time.Second {
		t.Fatalf("the group waited %v for its last answer, want the store's Timeout (2s)", d)
	}
	if len(s.acks.groups) != 0 {
		t.Fatalf("%d groups left registered", len(s.acks.groups))
	}

	// A connection that starts to move: the group in flight ends at once.
	done := make(chan []pubResult)
	go func() { done <- rs.publishAll([]*nats.Msg{nats.NewMsg("acks-silent")}, earlyAnswers{}) }()
	for !waitGroups(s, 1) {
	}
	began = time.Now()
	srv.Stop()
	defer srv.Restart()
	got := <-done
	if !errors.Is(got[0].err, nats.ErrDisconnected) || time.Since(began) > time.Second {
		t.Fatalf("after the server stopped: %v in %v, want nats.ErrDisconnected at once", got[0].err, time.Since(began))
	}
}

// waitGroups polls until n groups are registered (false: not yet).
func waitGroups(s *Store, n int) bool {
	s.acks.mu.Lock()
	defer s.acks.mu.Unlock()
	if len(s.acks.groups) == n {
		return true
	}
	time.Sleep(time.Millisecond)
	return false
}

// TestParseAck: the hand parser reads what the server answers, and leaves anything else to
// the JSON decoder.
func TestParseAck(t *testing.T) {
	for _, c := range []struct {
		data string
		seq  uint64
		err  bool
	}{
		{`{"stream":"acks_records","seq":42}`, 42, false},
		{`{"stream":"acks_records","domain":"x","seq":7,"duplicate":true}`, 7, false},
		{`{"stream":"acks_records", "seq": 18446744073709551615}`, 18446744073709551615, false},
		{`{"error":{"code":400,"err_code":10071,"description":"wrong last sequence: 3"},"stream":"s","seq":0}`, 0, true},
		{`{"stream":""}`, 0, true},
		{`not json`, 0, true},
	} {
		seq, err := parseAck(&nats.Msg{Data: []byte(c.data)})
		if seq != c.seq || (err != nil) != c.err {
			t.Errorf("%s: %d, %v", c.data, seq, err)
		}
	}
	if _, err := parseAck(&nats.Msg{Header: nats.Header{"Status": {"503"}}}); !errors.Is(err, jetstream.ErrNoStreamResponse) {
		t.Errorf("no responders: %v", err)
	}
}
