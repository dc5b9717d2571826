package main

// The real binary on a full disk and under kill -9, for what the second reliability review
// found: a campaign running when the disk fills goes on by itself once space returns, reads
// go on meanwhile, the log stays quiet, and a small monthly plan loses almost nothing to
// crashes.

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gateway/gateway/persist"
)

// fillDisk grows a filler file in dir until at most leave bytes are free.
func fillDisk(t *testing.T, dir string, leave uint64) string {
	t.Helper()
	filler := filepath.Join(dir, "filler")
	f, err := os.OpenFile(filler, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for {
		var st syscall.Statfs_t
		if err := syscall.Statfs(dir, &st); err != nil {
			t.Fatal(err)
		}
		if st.Bavail*uint64(st.Bsize) <= leave {
			return filler
		}
		if _, err := f.Write(chunk); err != nil {
			return filler
		}
	}
}

// startOnSmallDisk starts the gateway on Badger with its data dir on a 192 MiB tmpfs (root on
// Linux only, else the test is skipped), with small memtables and the least free-disk floor
// they allow (88 MiB), so that 192 MiB is enough. Badger's full disk; JetStream's: TestNATSFullStream.
func startOnSmallDisk(t *testing.T) (p *proc, data string, floor uint64) {
	t.Helper()
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		t.Skip("needs root on Linux to mount a tmpfs")
	}
	data = t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=192m", "tmpfs", data).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", data).Run() })
	floor = uint64(persist.MinFreeDiskFor(4 << 20))
	p = startProc(t, data, "--store", "badger", "--memtable-size", "4MiB", "--min-free-disk", strconv.FormatUint(floor, 10))
	return p, data, floor
}

// A 60-number campaign running when the disk goes under the floor stalls, and finishes by
// itself once space returns: each number delivered once, its progress readable (200) with
// the API key all along, and the outage logged once, not once per request.
func TestFullDiskCampaignGoesOnByItself(t *testing.T) {
	sideBySide(t)
	p, data, _ := startOnSmallDisk(t)
	tg := p.gw(t, data)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)

	numbers := make([]string, 60)
	for i := range numbers {
		numbers[i] = fmt.Sprintf("1555770%04d", i)
	}
	r := tg.bulk(s.key, map[string]any{"numbers": numbers, "message": "sale", "delay": 0.1, "async": true})
	want(t, r, 202, "")
	id := r.str("campaign_id")

	// Its progress, read with the API key every 50 ms for the whole test.
	var (
		stop      atomic.Bool
		reads     atomic.Int64
		notOK     atomic.Int64
		lastNotOK atomic.Value
		processed atomic.Int64
		status    atomic.Value
		pollDone  = make(chan struct{})
	)
	status.Store("")
	go func() {
		defer close(pollDone)
		client := &http.Client{Timeout: 10 * time.Second}
		for !stop.Load() {
			req, _ := http.NewRequest("GET", p.url+"/api/v1/campaigns/"+id, nil)
			req.Header.Set("x-api-key", s.key)
			res, err := client.Do(req)
			reads.Add(1)
			if err != nil {
				notOK.Add(1)
				lastNotOK.Store(err.Error())
			} else {
				raw, _ := io.ReadAll(res.Body)
				res.Body.Close()
				rr := resp{status: res.StatusCode, raw: raw}
				if res.StatusCode != 200 {
					notOK.Add(1)
					lastNotOK.Store(fmt.Sprintf("%d %s", res.StatusCode, rr.raw))
				} else {
					if v, ok := rr.obj()["total_processed"].(float64); ok {
						processed.Store(int64(v))
					}
					status.Store(rr.str("status"))
				}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	defer func() { stop.Store(true); <-pollDone }()

	eventually(t, 20*time.Second, "10 numbers processed", func() bool { return processed.Load() >= 10 })
	filler := fillDisk(t, data, 8<<20)
	eventually(t, 10*time.Second, "/readyz not ready on the full disk", func() bool { return answers(p.url+"/readyz", 503) })
	stalledAt := processed.Load()
	time.Sleep(3 * time.Second)
	if got := processed.Load(); got > stalledAt+1 || status.Load() != "running" {
		t.Fatalf("on a full disk the campaign went from %d to %d numbers, status %v: want it waiting", stalledAt, got, status.Load())
	}
	// Reads with the API key go on meanwhile.
	want(t, tg.do("GET", "/api/v1/account", keyAuth(s.key), nil), 200, "")
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	eventually(t, 60*time.Second, "the campaign completed after space returned", func() bool { return status.Load() == "completed" })
	t.Logf("stalled at %d of 60; completed %v after space returned", stalledAt, time.Since(back).Round(time.Millisecond))
	final := tg.do("GET", "/api/v1/campaigns/"+id, keyAuth(s.key), nil)
	want(t, final, 200, "")
	if o := final.obj(); o["total_processed"] != 60.0 || o["successful"] != 60.0 || o["failed"] != 0.0 {
		t.Fatalf("final: %s", final.raw)
	}
	for _, n := range numbers {
		eventually(t, 10*time.Second, "delivery to "+n, func() bool {
			got := tg.simMessages(n)
			if len(got) > 1 {
				t.Fatalf("%s got %d messages", n, len(got))
			}
			return len(got) == 1
		})
	}
	stop.Store(true)
	<-pollDone
	if n := notOK.Load(); n > 0 {
		t.Fatalf("%d of %d progress reads were not 200 (last: %v)", n, reads.Load(), lastNotOK.Load())
	}
	p.mu.Lock()
	logs := p.stderr.String()
	p.mu.Unlock()
	warn := strings.Count(logs, `"level":"WARN"`) + strings.Count(logs, `"level":"ERROR"`)
	if c := strings.Count(logs, "campaign: storage refuses its writes"); c != 1 || warn > 30 {
		t.Fatalf("%d campaign stall lines and %d WARN/ERROR lines in all:\n%s", c, warn, logs)
	}
	t.Logf("%d progress reads, all 200; %d WARN/ERROR lines in the whole run", reads.Load(), warn)
}

// 20 kill -9 while a user of a 500-message month sends cost at most 5 % of the month: the
// allowance counted as used is at most 25 more than what was delivered.
func TestKill9CostsASmallMonthLittle(t *testing.T) {
	sideBySide(t)
	data := t.TempDir()
	plans := filepath.Join(t.TempDir(), "plans.json")
	if err := os.WriteFile(plans, []byte(`{"small": {"rate_limit": 0, "monthly_messages": 500}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--plans", plans, "--default-plan", "small"}
	if testStore == "nats" {
		// Each restart waits for the killed process's lease on the prefix to lapse.
		args = append(args, "--lease-ttl", "2s")
	}
	p := startProc(t, data, args...)
	tg := p.gw(t, data)
	admin := tg.token("root", "admin")
	s := tg.newSender(admin, "alice", "447700900001", nil)

	load := &killedSends{prefix: "1555880"}
	for kill := range 20 {
		if kill > 0 {
			p = startProc(t, data, args...)
			tg = p.gw(t, data)
			tg.waitStatus(s.tok, "CONNECTED")
		}
		// A sender sends as fast as it can; the process is killed once it has 3 + kill%5
		// answers, with requests in flight.
		load.untilKilled(t, p, s.key, 1, int64(3+kill%5))
	}
	p = startProc(t, data, args...)
	tg = p.gw(t, data)
	tg.waitStatus(s.tok, "CONNECTED")
	delivered, answered := load.delivered(t, tg), load.answered
	a := tg.account(s.key)
	used := 500 - int(a["remaining_month"].(float64))
	lost := used - delivered
	t.Logf("%d sends answered 200, %d delivered (in-flight ones included), %d counted as used: %d lost to 20 kill -9 (%.1f %%)",
		answered, delivered, used, lost, float64(lost)/5)
	if delivered < answered {
		t.Fatalf("%d answered 200 but %d delivered", answered, delivered)
	}
	if lost > 25 || lost < 0 {
		t.Fatalf("%d of a 500-message month lost to 20 kill -9 (want at most 25)", lost)
	}
}
