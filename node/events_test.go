package node

import (
	"bufio"
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/gateway/gateway/persist/natstest"
)

// sse reads an event stream in the background: the ids of its events, in order.
type sse struct {
	mu     sync.Mutex
	ids    []string
	data   []string // each event's data line
	skip   string   // got leaves out the events whose data holds it
	cancel context.CancelFunc
	done   chan struct{}
}

func openSSE(t *testing.T, url, tok, lastID string) *sse {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", url+"/api/client/events/stream", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil || res.StatusCode != 200 {
		cancel()
		t.Fatalf("stream: %v %v", res, err)
	}
	s := &sse{cancel: cancel, done: make(chan struct{})}
	t.Cleanup(s.close)
	connected := make(chan struct{})
	go func() {
		defer close(s.done)
		defer res.Body.Close()
		sc := bufio.NewScanner(res.Body)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == ": connected":
				close(connected)
			case strings.HasPrefix(line, "id: "):
				s.mu.Lock()
				s.ids, s.data = append(s.ids, line[4:]), append(s.data, "")
				s.mu.Unlock()
			case strings.HasPrefix(line, "event: resync"):
				s.mu.Lock()
				s.ids, s.data = append(s.ids, "resync"), append(s.data, "")
				s.mu.Unlock()
			case strings.HasPrefix(line, "data: "):
				s.mu.Lock()
				if n := len(s.data); n > 0 {
					s.data[n-1] = line
				}
				s.mu.Unlock()
			}
		}
	}()
	select {
	case <-connected:
	case <-time.After(10 * time.Second):
		t.Fatal("the stream did not start")
	}
	return s
}

// got is the ids of the events seen, less those whose data holds what ignore named.
func (s *sse) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for i, id := range s.ids {
		if s.skip == "" || !strings.Contains(s.data[i], s.skip) {
			out = append(out, id)
		}
	}
	return out
}

// ignore leaves the events whose data holds text out of got.
func (s *sse) ignore(text string) *sse {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.skip = text
	return s
}

func (s *sse) close() {
	s.cancel()
	<-s.done
}

// streamIDs reads every event id (Gateway-Event-Id: a message's status has a Nats-Msg-Id of its
// own) of the events stream from its start.
func streamIDs(t *testing.T, url, stream string) []string {
	t.Helper()
	var out []string
	for _, m := range natstest.Messages(t, url, stream, jetstream.OrderedConsumerConfig{}) {
		out = append(out, m.Headers().Get("Gateway-Event-Id"))
	}
	return out
}

// onNATS tells whether every id of want is on the events stream "ev" of url.
func onNATS(t *testing.T, url string, want []string) func() bool {
	return func() bool {
		ids := streamIDs(t, url, "ev")
		for _, id := range want {
			if !slices.Contains(ids, id) {
				return false
			}
		}
		return true
	}
}
