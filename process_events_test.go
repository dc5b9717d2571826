package main

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/goccy/go-json"
)

// The receiver is down (answers 500, then refuses connections) while messages go out and the
// gateway is killed (-9) in the middle; once the receiver is back, every event arrives, none
// missing, in order per subscription; a repeat only ever carries the same webhook-id.
// GATEWAY_TEST_OUTAGE sets how long the receiver stays down (the 30s; 3s by default to
// keep make test short).
func TestKill9EventsSurviveReceiverOutage(t *testing.T) {
	sideBySide(t)
	outage := 3 * time.Second
	if v := os.Getenv("GATEWAY_TEST_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		outage = d
	}
	var down atomic.Bool
	var mu sync.Mutex
	type got struct{ id, typ, msg, status string }
	var recv []got
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			w.WriteHeader(500)
			return
		}
		var env struct {
			Type string         `json:"type"`
			Data map[string]any `json:"data"`
		}
		_ = json.NewDecoder(r.Body).Decode(&env)
		mu.Lock()
		recv = append(recv, got{r.Header.Get("webhook-id"), env.Type, fmt.Sprint(env.Data["messageId"]), fmt.Sprint(env.Data["status"])})
		mu.Unlock()
	}))
	defer srv.Close()

	data := t.TempDir()
	p := startProc(t, data, "--webhook-allow-private")
	tg := p.gw(t, data)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)
	want(t, tg.do("POST", "/api/client/webhooks", bearerAuth(s.tok), map[string]any{"url": srv.URL + "/hook", "events": []string{"message.status"}}), 201, "")

	down.Store(true)
	const n = 8
	var ids []string
	for i := range n {
		r := tg.do("POST", "/api/v1/messages/send", keyAuth(s.key), map[string]any{"phone": fmt.Sprintf("1555080%04d", i), "message": "m"})
		want(t, r, 200, "")
		ids = append(ids, r.str("message_id"))
	}
	eventually(t, 10*time.Second, "every message delivered by the sim", func() bool {
		for i := range n {
			if len(tg.simMessages(fmt.Sprintf("1555080%04d", i))) != 1 {
				return false
			}
		}
		return true
	})
	time.Sleep(outage / 2) // the receiver stays down: retries pile up (the outage itself is the point)
	p.kill9(t)
	srv.Listener.Close() // refuses connections while the gateway restarts
	p2 := startProc(t, data, "--webhook-allow-private")
	time.Sleep(outage / 2)
	// Back: a new listener on the same address.
	srv2 := httptest.NewUnstartedServer(srv.Config.Handler)
	ln, err := listenOn(srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	srv2.Listener = ln
	srv2.Start()
	defer srv2.Close()
	down.Store(false)

	eventually(t, 90*time.Second, "every event of every message", func() bool {
		mu.Lock()
		defer mu.Unlock()
		seen := map[string]bool{}
		for _, g := range recv {
			seen[g.msg+"/"+g.status] = true
		}
		for _, id := range ids {
			for _, st := range []string{"queued", "sent", "delivered"} {
				if !seen[id+"/"+st] {
					return false
				}
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	// In order per message (the subscription's order), repeats only under the same webhook-id.
	byWebhookID := map[string]got{}
	steps := map[string][]string{}
	for _, g := range recv {
		if prev, ok := byWebhookID[g.id]; ok {
			if prev != g {
				t.Fatalf("webhook-id %s carried two events", g.id)
			}
			continue
		}
		byWebhookID[g.id] = g
		steps[g.msg] = append(steps[g.msg], g.status)
	}
	for _, id := range ids {
		if s := steps[id]; !slices.Equal(s[:3], []string{"queued", "sent", "delivered"}) {
			for _, g := range recv {
				if g.msg == id {
					t.Logf("got %+v", g)
				}
			}
			p.mu.Lock()
			t.Logf("first:\n%s", p.stderr.String())
			p.mu.Unlock()
			p2.mu.Lock()
			t.Logf("second:\n%s", p2.stderr.String())
			p2.mu.Unlock()
			t.Fatalf("message %s events in order %v", id, s)
		}
	}
}

// listenOn listens on addr again (the receiver coming back on its old address).
func listenOn(addr string) (net.Listener, error) {
	var err error
	for range 50 {
		var ln net.Listener
		if ln, err = net.Listen("tcp", addr); err == nil {
			return ln, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil, err
}
