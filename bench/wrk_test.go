package main

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

func TestParseWrkResult(t *testing.T) {
	out := "Running 1s test @ http://x/\n  1 threads and 4 connections\nWRKJSON {\"requests\":120,\"duration_us\":1000000,\"connect\":0,\"read\":1,\"write\":0,\"status\":2,\"timeout\":0,\"p50\":150,\"p90\":300,\"p99\":900,\"p999\":1200,\"max\":2000,\"mean\":180.5}\n"
	r, err := parseWrk([]byte(out))
	if err != nil || r.Requests != 120 || r.Status != 2 || r.Read != 1 || r.P99 != 900 || r.Mean != 180.5 {
		t.Fatalf("%+v %v", r, err)
	}
	if _, err := parseWrk([]byte("wrk: invalid option")); err == nil {
		t.Fatal("no result line: want an error")
	}
}

// The pool holds the case's own requests, whole (request line, Host, Content-Length, body),
// and wrk sends them: every request of the pool reaches the server as prepared, a pool of
// unique requests is not cycled (a request past its end is an error), and the figures come
// back as stats.
func TestWrkSendsThePoolsRequests(t *testing.T) {
	needWrk(t)
	var (
		mu   sync.Mutex
		seen []string
	)
	addr := serve(t, func(ctx *fasthttp.RequestCtx) {
		if string(ctx.Path()) != "/send" || string(ctx.Request.Header.Peek("x-n")) == "" {
			ctx.SetStatusCode(404)
			return
		}
		mu.Lock()
		seen = append(seen, string(ctx.Request.Header.Peek("x-n"))+"="+string(ctx.PostBody()))
		mu.Unlock()
		ctx.SetStatusCode(200)
	})
	w, err := findWrk("auto", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tgt := target{method: "POST", uri: "/send", prepare: func(req *fasthttp.Request, wk *worker) {
		n := appendUniqueID(nil, wk)
		req.Header.SetBytesV("x-n", n)
		req.SetBody(append([]byte("body-"), n...))
	}}
	pool, err := w.writePool(tgt, addr, 7, wrkWorker, 50, "t")
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := os.ReadFile(pool)
	if !strings.HasPrefix(string(raw[8:]), "POST /send HTTP/1.1\r\nHost: ") || !strings.Contains(string(raw), "Content-Length: ") {
		t.Fatalf("pool record: %q", raw[:min(len(raw), 200)])
	}
	s, err := w.measure(context.Background(), wrkLoad{addr: addr, conns: 2, duration: time.Second, timeout: 5 * time.Second, pool: pool, pid: os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	served := seen
	mu.Unlock()
	got := map[string]bool{}
	for _, v := range served {
		n, body, _ := strings.Cut(v, "=")
		if body != "body-"+n || got[n] {
			t.Fatalf("request %q: body %q or repeated", n, body)
		}
		got[n] = true
	}
	// The pool's unique requests (wrk draws the first once to check it, and does not send it),
	// then the exhausted pool's requests, answered 404: errors.
	if len(got) != 49 || !got["7-992-1"] || !got["7-992-49"] || s.OK != 49 || s.Errors == 0 || s.RPS <= 0 || s.P50 <= 0 {
		t.Fatalf("%d distinct requests served, stats %+v", len(got), s)
	}
	cyc, err := w.measure(context.Background(), wrkLoad{addr: addr, conns: 2, duration: time.Second, timeout: 5 * time.Second, pool: pool, cycle: true, pid: os.Getpid()})
	if err != nil || cyc.Errors != 0 || cyc.OK <= 50 {
		t.Fatalf("cycling pool: %+v %v", cyc, err)
	}
}
