package main

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A lone gateway on its log outbox (the default), killed -9 three times while two clients of
// one user send as fast as they can, counts every message it sent exactly: messagesSent after
// the restarts is the number of messages the network received. Its count is written behind,
// at most once a second (a boot recounts from the log what a kill left out:
// persist.LogRecount); with it written every 20 ms and no recount a kill lost the messages
// counted since the last write. On NATS the node's recount holds the same.
func TestKill9AllowanceCountExactOnTheLog(t *testing.T) {
	data := t.TempDir()
	plans := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(plans, []byte(`{"big": {"rate_limit": 0, "monthly_messages": 100000}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--plans", plans, "--default-plan", "big"}
	if testStore == "nats" {
		args = append(args, "--lease-ttl", "2s")
	} else {
		args = append(args, "--outbox", "log") // whatever GATEWAY_OUTBOX says: the log's recount
	}
	p := startProc(t, data, args...)
	tg := p.gw(t, data)
	s := tg.newSender(tg.token("root", "admin"), "alice", "447700900001", nil)

	var (
		mu    sync.Mutex
		tried []string
	)
	next := 0
	number := func() string {
		mu.Lock()
		defer mu.Unlock()
		to := fmt.Sprintf("1555770%04d", next)
		next++
		tried = append(tried, to)
		return to
	}
	for kill := range 3 {
		if kill > 0 {
			p = startProc(t, data, args...)
			tg = p.gw(t, data)
			tg.waitStatus(s.tok, "CONNECTED")
		}
		var ok atomic.Int64
		var wg sync.WaitGroup
		done := make(chan struct{})
		client := &http.Client{Timeout: 5 * time.Second}
		for range 2 {
			wg.Go(func() {
				for {
					select {
					case <-done:
						return
					default:
					}
					body := strings.NewReader(`{"phone":"` + number() + `","message":"hi"}`)
					req, _ := http.NewRequest("POST", p.url+"/api/v1/messages/send", body)
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("x-api-key", s.key)
					res, err := client.Do(req)
					if err != nil {
						return // killed
					}
					res.Body.Close()
					if res.StatusCode == 200 {
						ok.Add(1)
					}
				}
			})
		}
		// Killed with sends answered since its last flush, and more in flight.
		eventually(t, 30*time.Second, "sends answered", func() bool { return ok.Load() >= int64(150+50*kill) })
		p.kill9(t)
		close(done)
		wg.Wait()
	}
	p = startProc(t, data, args...)
	tg = p.gw(t, data)
	tg.waitStatus(s.tok, "CONNECTED")
	eventually(t, 30*time.Second, "the outbox drained", func() bool { return tg.metric("gateway_outbox_pending") == 0 })
	delivered := 0
	for _, to := range tried {
		n := len(tg.simMessages(to))
		if n > 1 {
			t.Fatalf("%s got %d messages", to, n)
		}
		delivered += n
	}
	a := tg.account(s.key)
	if sent := int(a["messagesSent"].(float64)); sent != delivered {
		t.Fatalf("messagesSent %d after 3 kill -9, want %d (every message delivered, counted once)", sent, delivered)
	}
	if rem := int(a["remaining_month"].(float64)); rem > 100000-delivered {
		t.Fatalf("remaining_month %d after %d messages: the crash gave allowance back", rem, delivered)
	}
	t.Logf("%d messages delivered across 3 kill -9, all counted", delivered)
}
