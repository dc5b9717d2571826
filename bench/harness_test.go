package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
	"github.com/valyala/fasthttp"
)

// The bare server process answers with the captured status, headers and body bytes.
func TestBareProcessReplaysCapturedAnswer(t *testing.T) {
	gw := serve(t, func(ctx *fasthttp.RequestCtx) {
		ctx.SetStatusCode(201)
		ctx.SetContentType("application/json")
		ctx.Response.Header.Set("X-RateLimit-Limit", "1000")
		ctx.SetBodyString(`{"success":true,"message_id":"m-1"}`)
	})
	captured, err := capture(newAPIClient(gw), getTarget("/api/v1/messages/send"), 1)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range captured.Headers {
		if n := strings.ToLower(h[0]); n == "date" || n == "content-length" || n == "server" {
			t.Fatalf("captured header %q would be sent twice by the bare server", h[0])
		}
	}
	captured.Path = "/api/v1/messages/send"

	bare, err := startBare("", "")
	if err != nil {
		t.Fatal(err)
	}
	defer bare.stop()
	if err := bare.set(captured); err != nil {
		t.Fatal(err)
	}
	st, body, err := bare.api.do("POST", "/api/v1/messages/send", nil, []byte(`{"phone":"1"}`))
	if err != nil || st != 201 || string(body) != `{"success":true,"message_id":"m-1"}` {
		t.Fatalf("bare answered %d %s %v", st, body, err)
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	bare.api.fill(req, "GET", "/api/v1/messages/send", nil, nil)
	if err := bare.api.hc.Do(req, resp); err != nil {
		t.Fatal(err)
	}
	if string(resp.Header.Peek("X-RateLimit-Limit")) != "1000" || string(resp.Header.ContentType()) != "application/json" {
		t.Fatalf("headers not replayed: %s", resp.Header.String())
	}
	if st, body, _ := bare.api.do("GET", "/other", nil, nil); !routeMissing(st, body) {
		t.Fatalf("an unset path answers %d %s, want the gateway's no-such-route", st, body)
	}
}

// fakeSim answers GET /api/dev/sim/messages from a map of recipient → message ids.
func fakeSim(t *testing.T, delivered map[string][]string) *apiClient {
	addr := serve(t, func(ctx *fasthttp.RequestCtx) {
		type msg struct {
			ID string `json:"id"`
		}
		var out struct {
			Messages []msg `json:"messages"`
		}
		out.Messages = []msg{}
		for _, id := range delivered[string(ctx.QueryArgs().Peek("to"))] {
			out.Messages = append(out.Messages, msg{id})
		}
		b, _ := json.Marshal(out)
		ctx.SetBody(b)
	})
	return newAPIClient(addr)
}

func TestCheckDeliveries(t *testing.T) {
	api := fakeSim(t, map[string][]string{"1": {"a", "b"}, "2": {"c"}, "3": {"d", "d"}})
	ctx := context.Background()
	d, err := checkDeliveries(ctx, api, []string{"1", "2"}, 3, 0, 0, time.Second)
	if err != nil || d.Delivered != 3 || d.Lost != 0 {
		t.Fatalf("all delivered: %+v %v", d, err)
	}
	d, err = checkDeliveries(ctx, api, []string{"1", "2"}, 5, 0, 0, 150*time.Millisecond)
	if err == nil || d.Lost != 2 {
		t.Fatalf("two lost: %+v %v", d, err)
	}
	d, err = checkDeliveries(ctx, api, []string{"3"}, 2, 0, 0, time.Second)
	if err == nil || d.Duplicates != 1 {
		t.Fatalf("delivered twice: %+v %v", d, err)
	}
	if _, err = checkDeliveries(ctx, api, []string{"1", "2"}, 2, 0, 0, time.Second); err == nil {
		t.Fatal("more delivered than sent, with no errors: want an error")
	}
	if _, err = checkDeliveries(ctx, api, []string{"1", "2"}, 2, 1, 0, time.Second); err != nil {
		t.Fatalf("more delivered than answered after a transport error is expected: %v", err)
	}
	// A generator that stopped with requests in flight (wrk) may leave as many accepted
	// messages unanswered, no more.
	if _, err = checkDeliveries(ctx, api, []string{"1", "2"}, 2, 0, 1, time.Second); err != nil {
		t.Fatalf("one more delivered than answered, one left in flight: %v", err)
	}
	if _, err = checkDeliveries(ctx, api, []string{"1", "2"}, 1, 0, 1, time.Second); err == nil {
		t.Fatal("two more delivered than answered, one left in flight: want an error")
	}
}

// TestQuickRunAgainstTheGateway builds the gateway and runs the harness end to end in a very
// short quick mode: every case the gateway serves must finish with no error and no message
// lost; the cases it does not serve yet are reported as skipped.
func TestQuickRunAgainstTheGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the gateway")
	}
	bin := filepath.Join(t.TempDir(), "gateway")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	o, err := parseRun([]string{"--quick", "--gateway", bin, "--users", "3", "--duration", "300ms", "--warmup", "100ms",
		"--conns", "4", "--sweep", "1,4,8", "--settle", "50ms", "--rounds", "2", "--rounds-cases", "send-idem"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	needWrk(t)
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := runBench(ctx, o, &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, c := range benchCases {
		if !strings.Contains(s, "fsync=batch  "+c.name+"  (4 conns)") {
			t.Errorf("no result for %s", c.name)
		}
	}
	for _, want := range []string{"== summary", "OK: no errors, no message lost", "fsync=interval", "(8 conns)", "(1 conns)", "open loop",
		"   floor", "of bare, gateway", "gateway/floor", "gateway (wrk)", "floor (wrk)", "wrk: ratio",
		"CPU: ", "µs per message", "storage writer", "access-log lines (request logging on",
		// send-idem in 2 rounds (its requests unique across them): each round's windows listed
		"rounds, the bench's generator: #1 gateway", "#2 bare", "rounds, wrk: #1 gateway"} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// validate, account and client status are served by every gateway build.
	for _, c := range []string{"validate", "v1 account", "client status"} {
		if strings.Contains(s, fmt.Sprintf("%s  (4 conns)\n   skipped", c)) {
			t.Errorf("%s was skipped", c)
		}
	}
	if t.Failed() {
		t.Log(s)
	}
}

// settle waits while the gateway's CPU counter climbs fast and returns once it is quiet.
func TestSettleWaitsForAnIdleGateway(t *testing.T) {
	var polls, busyPolls atomic.Int64
	busyPolls.Store(4)
	addr := serve(t, func(ctx *fasthttp.RequestCtx) {
		n := polls.Add(1)
		cpu := float64(min(n, busyPolls.Load())) // one CPU-second per poll while busy, then none
		fmt.Fprintf(ctx, "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %g\n", cpu)
	})
	waited, idle, err := settle(context.Background(), newAPIClient(addr), 20*time.Millisecond, 5*time.Second)
	if err != nil || !idle {
		t.Fatalf("idle %v err %v", idle, err)
	}
	if polls.Load() < busyPolls.Load()+1 || waited < 60*time.Millisecond {
		t.Fatalf("returned after %d polls (%v) while the counter was still climbing", polls.Load(), waited)
	}

	busyPolls.Store(1 << 40)
	polls.Store(0)
	_, idle, err = settle(context.Background(), newAPIClient(addr), 20*time.Millisecond, 100*time.Millisecond)
	if err != nil || idle {
		t.Fatalf("always busy: idle %v err %v, want not idle after the limit", idle, err)
	}
}

// liveScrape drives collections by scraping and keeps the heap seen just after one.
func TestLiveScrapeKeepsTheHeapAfterACollection(t *testing.T) {
	var scrapes, collects atomic.Int64
	collects.Store(1)
	addr := serve(t, func(ctx *fasthttp.RequestCtx) {
		n := scrapes.Add(1)
		gcs := n / 3 * collects.Load() // a collection every third scrape (never when collects is 0)
		heap := 1000 + 100*(n%3)       // grows between collections, back to 1000 after one
		if gcs == 0 {
			heap = 5000 // garbage from before: only a collection clears it
		}
		fmt.Fprintf(ctx, "go_memstats_heap_alloc_bytes %d\ngo_memstats_heap_inuse_bytes %d\nprocess_resident_memory_bytes 9000\ngo_goroutines 7\ngo_gc_duration_seconds_count %d\n", heap, heap+50, gcs)
	})
	m, err := liveScrape(newAPIClient(addr), 2, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if !m.AfterGC || m.HeapAlloc != 1000 || m.HeapInuse != 1050 || m.Goroutines != 7 {
		t.Fatalf("got %+v, want the heap just after a collection", m)
	}

	collects.Store(0)
	scrapes.Store(0)
	m, err = liveScrape(newAPIClient(addr), 2, 50*time.Millisecond)
	if err != nil || m.AfterGC || m.HeapAlloc != 5000 {
		t.Fatalf("no collection: got %+v %v, want the figures marked as including garbage", m, err)
	}
}

// A Commit-flagged path makes one durable write per request (its body under a new key) before
// the canned answer; other paths write nothing; the floor's directory goes with close.
func TestBareCommitRouteWritesOneKeyPerRequest(t *testing.T) {
	parent := t.TempDir()
	b := newBareServer(parent, "")
	defer b.close()
	for _, r := range []bareResponse{
		{Path: "/send", Status: 202, Body: `{"ok":true}`, Commit: "batch"},
		{Path: "/hook", Status: 200, Body: `{}`, Commit: "interval"},
		{Path: "/plain", Status: 200, Body: `{}`},
	} {
		if err := b.set(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.set(bareResponse{Path: "/x", Status: 200, Commit: "sometimes"}); err == nil {
		t.Fatal("commit mode sometimes: want an error")
	}
	api := newAPIClient(serve(t, b.handle))
	defer api.close()
	bodies := []string{`{"n":1}`, `{"n":2}`, `{"n":3}`}
	for _, body := range bodies {
		if st, got, err := api.do("POST", "/send", nil, []byte(body)); err != nil || st != 202 || string(got) != `{"ok":true}` {
			t.Fatalf("commit route answered %d %s %v", st, got, err)
		}
	}
	if st, _, err := api.do("POST", "/plain", nil, []byte(`{"n":0}`)); err != nil || st != 200 {
		t.Fatalf("plain route answered %d %v", st, err)
	}
	if st, _, err := api.do("POST", "/hook", nil, []byte(`{"n":4}`)); err != nil || st != 200 {
		t.Fatalf("interval route answered %d %v", st, err)
	}
	if n := b.commits.Load(); n != 4 {
		t.Fatalf("%d commits, want 4 (3 batch, 1 interval, none for the plain route)", n)
	}
	var got []string
	db := b.stores["batch"].(plainBadger).db
	if err := db.View(func(txn *badger.Txn) error {
		it := txn.NewIterator(badger.IteratorOptions{Prefix: []byte(floorKeyPrefix)})
		defer it.Close()
		for it.Rewind(); it.Valid(); it.Next() {
			v, err := it.Item().ValueCopy(nil)
			if err != nil {
				return err
			}
			got = append(got, string(v))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !db.Opts().SyncWrites || b.stores["interval"].(plainBadger).db.Opts().SyncWrites {
		t.Fatal("the batch floor must sync each commit, the interval floor none")
	}
	if strings.Join(got, " ") != strings.Join(bodies, " ") {
		t.Fatalf("batch store holds %q, want one key per request with its body %q", got, bodies)
	}
	if st, body, _ := api.do("GET", bareCommitsPath, nil, nil); st != 200 || string(body) != `{"commits":4}` {
		t.Fatalf("%s answered %d %s", bareCommitsPath, st, body)
	}
	tmp := b.tmp
	if filepath.Dir(tmp) != parent || len(b.stores) != 2 {
		t.Fatalf("floor dir %q (want under %q), %d stores (want one per mode)", tmp, parent, len(b.stores))
	}
	if err := b.close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Fatalf("floor dir still there after close: %v", err)
	}
	if st, _, _ := api.do("POST", "/send", nil, []byte(`{}`)); st != 500 {
		t.Fatalf("commit route after close answered %d, want 500", st)
	}
}

// The bare process counts its floor commits and removes its floor directory when it stops.
func TestBareProcessCommitsAndCleansUp(t *testing.T) {
	parent := t.TempDir()
	bare, err := startBare(parent, "")
	if err != nil {
		t.Fatal(err)
	}
	defer bare.stop()
	if err := bare.set(bareResponse{Path: "/api/v1/messages/send", Status: 201, Body: `{"success":true}`, Commit: "interval"}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if st, body, err := bare.api.do("POST", "/api/v1/messages/send", nil, []byte(`{"phone":"1"}`)); err != nil || st != 201 || string(body) != `{"success":true}` {
			t.Fatalf("bare answered %d %s %v", st, body, err)
		}
	}
	if n, err := bare.commits(); err != nil || n != 2 {
		t.Fatalf("commits %d %v, want 2", n, err)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 1 {
		t.Fatalf("%d entries under the floor's parent while serving, want its one temp dir", len(entries))
	}
	bare.stop()
	if entries, err := os.ReadDir(parent); err != nil || len(entries) != 0 {
		t.Fatalf("left behind after exit: %v %v", entries, err)
	}
}

// needWrk fails a test that measures with wrk when wrk is missing (.ci/run installs it).
func needWrk(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Fatal("wrk is not installed: apt-get install wrk (.ci/run and make bench install it)")
	}
}

// The drain is the time the gateway's sent counter reached the messages answered, not the
// per-recipient check's own reading; a message the counter counts but the sim does not have
// yet is waited for, and the drain is when it arrived.
func TestDrainTimedBySentCounter(t *testing.T) {
	var mu sync.Mutex
	sent := 10.0
	delivered := map[string][]string{"1": {"a"}, "2": {"b"}}
	addr := serve(t, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) != "/metrics" {
			time.Sleep(250 * time.Millisecond) // a listing of a whole phase's messages is slow
		}
		mu.Lock()
		defer mu.Unlock()
		if string(ctx.Path()) == "/metrics" {
			fmt.Fprintf(ctx, "# TYPE gateway_messages_sent_total counter\ngateway_messages_sent_total %g\n", sent)
			return
		}
		var out struct {
			Messages []map[string]string `json:"messages"`
		}
		out.Messages = []map[string]string{}
		for _, id := range delivered[string(ctx.QueryArgs().Peek("to"))] {
			out.Messages = append(out.Messages, map[string]string{"id": id})
		}
		b, _ := json.Marshal(out)
		ctx.SetBody(b)
	})
	h := &harness{o: runOptions{duration: time.Second}}
	g := &gatewayProc{api: newAPIClient(addr)}
	c := &benchCase{delivers: true}
	set := func(n float64, to, id string) {
		mu.Lock()
		defer mu.Unlock()
		sent = n
		if to != "" {
			delivered[to] = append(delivered[to], id)
		}
	}

	// The counter reaches base+3 100 ms after the window; the sim has every message by then.
	r := &result{sentBase: 10}
	ended := time.Now()
	time.AfterFunc(100*time.Millisecond, func() { set(13, "1", "c") })
	drain, _, err := h.checkDeliveries(context.Background(), g, c, r, []string{"1", "2"}, 3, 0, stats{}, ended)
	if err != nil || r.Delivery.Lost != 0 {
		t.Fatalf("all delivered: %v %+v", err, r.Delivery)
	}
	if drain < 0.1 || drain > 0.45 {
		t.Fatalf("drain %.3fs, want the counter's 0.1 s, not the 0.6 s or more of the listings", drain)
	}

	// Counted as sent, one not at the sim until 300 ms later: the drain waits for it.
	set(13, "1", "e")
	set(13, "2", "f")
	time.AfterFunc(300*time.Millisecond, func() { set(14, "2", "d") })
	r = &result{sentBase: 8} // 8 + 6 answered: the counter's 13 is past it already
	ended = time.Now()
	drain, _, err = h.checkDeliveries(context.Background(), g, c, r, []string{"1", "2"}, 6, 0, stats{}, ended)
	if err != nil || r.Delivery.Delivered != 6 {
		t.Fatalf("all delivered at last: %v %+v", err, r.Delivery)
	}
	if drain < 0.3 {
		t.Fatalf("drain %.3fs, want at least the 0.3 s the last message took", drain)
	}

	// A message delivered twice fails the check though the counter is reached.
	set(15, "2", "d")
	r = &result{sentBase: 8}
	if _, _, err = h.checkDeliveries(context.Background(), g, c, r, []string{"1", "2"}, 7, 0, stats{}, time.Now()); err == nil || r.Delivery.Duplicates != 1 {
		t.Fatalf("a duplicate: %v %+v", err, r.Delivery)
	}

	// A round before a case's last (rounds.go): the drain by the counter alone, no listing
	// read; the duplicate is the last round's check's to find.
	r = &result{sentBase: 8}
	drain, rate, err := h.deliveries(context.Background(), g, c, r, []string{"1", "2"}, 7, 0, 0, stats{Requests: 1000}, time.Now(), false)
	if err != nil || r.Delivery != nil || drain > 0.2 || rate < 800 {
		t.Fatalf("a round before the last: %v %+v, drain %.3fs, %.0f/s", err, r.Delivery, drain, rate)
	}
}
