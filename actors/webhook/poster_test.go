package webhook_test

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/gateway/gateway/actors/webhook"
)

// idleReceiver is an HTTP receiver that closes a kept-alive connection after idle of being
// unused (Node.js does after 5 s), and counts connections and requests.
type idleReceiver struct {
	*httptest.Server
	mu                     sync.Mutex
	opened, closed, served int
}

func newIdleReceiver(t *testing.T, idle time.Duration) *idleReceiver {
	r := &idleReceiver{}
	r.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		r.mu.Lock()
		r.served++
		r.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	r.Config.IdleTimeout = idle
	r.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		r.mu.Lock()
		defer r.mu.Unlock()
		switch s {
		case http.StateNew:
			r.opened++
		case http.StateClosed, http.StateHijacked:
			r.closed++
		}
	}
	r.Start()
	t.Cleanup(r.Close)
	return r
}

func (r *idleReceiver) counts() (opened, closed, served int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.opened, r.closed, r.served
}

// A receiver that drops idle connections after 1 s gets every delivery on the first try: the
// poster's Post succeeds each time, though the connection it kept was closed under it.
func TestPostAfterReceiverClosedIdleConnection(t *testing.T) {
	rcv := newIdleReceiver(t, time.Second)
	p := webhook.NewHTTPPoster(nil, 5*time.Second, 0)
	defer p.Close()
	h := webhook.Headers{ID: "msg_1", Timestamp: "1767225600", Signature: "v1,x"}
	const n = 3
	for i := range n {
		status, err := p.Post(context.Background(), rcv.URL+"/hook", h, []byte(`{"type":"webhook.test"}`))
		if err != nil || status != http.StatusNoContent {
			t.Fatalf("delivery %d: status %d, err %v", i+1, status, err)
		}
		// The receiver closes the connection once it has been idle for its second.
		deadline := time.Now().Add(5 * time.Second)
		for {
			if _, closed, _ := rcv.counts(); closed == i+1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the receiver did not close the idle connection after delivery %d", i+1)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	if opened, _, served := rcv.counts(); served != n || opened != n {
		t.Fatalf("the receiver served %d requests on %d connections, want %d on %d", served, opened, n, n)
	}

	// A receiver that keeps the connection: deliveries in a row share it.
	keep := newIdleReceiver(t, time.Minute)
	for range 3 {
		if _, err := p.Post(context.Background(), keep.URL+"/hook", h, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	if opened, _, served := keep.counts(); opened != 1 || served != 3 {
		t.Fatalf("%d connections for %d deliveries in a row, want 1", opened, served)
	}
}
