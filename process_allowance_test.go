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
	load := &killedSends{prefix: "1555770"}
	for kill := range 3 {
		if kill > 0 {
			p = startProc(t, data, args...)
			tg = p.gw(t, data)
			tg.waitStatus(s.tok, "CONNECTED")
		}
		// Killed with sends answered since its last flush, and more in flight.
		load.untilKilled(t, p, s.key, 2, int64(150+50*kill))
	}
	p = startProc(t, data, args...)
	tg = p.gw(t, data)
	tg.waitStatus(s.tok, "CONNECTED")
	delivered := load.delivered(t, tg)
	// A message the last boot sent again is delivered and off gateway_outbox_pending at its
	// outcome, and counted once its outcome's record is durable (engine messages.settled),
	// a store write later: read at once, messagesSent was one or two short. The count only
	// grows; it must reach delivered and stay there.
	var a map[string]any
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		a = tg.account(s.key)
		sent := int(a["messagesSent"].(float64))
		if sent == delivered {
			break
		}
		if sent > delivered || time.Now().After(deadline) {
			t.Fatalf("messagesSent %d after 3 kill -9, want %d (every message delivered, counted once)", sent, delivered)
		}
	}
	if rem := int(a["remaining_month"].(float64)); rem > 100000-delivered {
		t.Fatalf("remaining_month %d after %d messages: the crash gave allowance back", rem, delivered)
	}
	t.Logf("%d messages delivered across 3 kill -9, all counted", delivered)
}

// killedSends are sends to a new number each (prefix and four digits), made as fast as the
// gateway answers until it is killed -9.
type killedSends struct {
	prefix   string
	mu       sync.Mutex
	tried    []string
	answered int // 200s, over every process
}

// untilKilled sends from clients goroutines with key until want answered 200, then kills p
// with requests in flight.
func (k *killedSends) untilKilled(t *testing.T, p *proc, key string, clients int, want int64) {
	t.Helper()
	var ok atomic.Int64
	var wg sync.WaitGroup
	done := make(chan struct{})
	client := &http.Client{Timeout: 5 * time.Second}
	for range clients {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				k.mu.Lock()
				to := fmt.Sprintf("%s%04d", k.prefix, len(k.tried))
				k.tried = append(k.tried, to)
				k.mu.Unlock()
				req, _ := http.NewRequest("POST", p.url+"/api/v1/messages/send", strings.NewReader(`{"phone":"`+to+`","message":"hi"}`))
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("x-api-key", key)
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
	eventually(t, 30*time.Second, "sends answered", func() bool { return ok.Load() >= want })
	p.kill9(t)
	close(done)
	wg.Wait()
	k.answered += int(ok.Load())
}

// delivered waits for tg's outbox to drain and returns how many of the numbers tried received
// a message (each at most one).
func (k *killedSends) delivered(t *testing.T, tg *testGW) int {
	t.Helper()
	eventually(t, 30*time.Second, "the outbox drained", func() bool { return tg.metric("gateway_outbox_pending") == 0 })
	n := 0
	for _, to := range k.tried {
		got := len(tg.simMessages(to))
		if got > 1 {
			t.Fatalf("%s got %d messages", to, got)
		}
		n += got
	}
	return n
}
