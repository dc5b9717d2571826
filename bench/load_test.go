package main

import (
	"context"
	"net"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestMain lets the test binary act as the bare server when the harness re-executes it
// (startBare), as the real binary does.
func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == "bare" {
		os.Exit(exitCode(bareMain(os.Args[1:], os.Stdout, os.Stderr)))
	}
	os.Exit(m.Run())
}

// serve runs handler on a loopback port for the test's lifetime and returns the address.
func serve(t *testing.T, handler fasthttp.RequestHandler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: handler}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return ln.Addr().String()
}

// serveBare runs an in-process bare server answering path with body.
func serveBare(t *testing.T, path string, status int, body string) string {
	t.Helper()
	b := newBareServer("", "")
	if path != "" {
		if err := b.set(bareResponse{Path: path, Status: status, Body: body, Headers: [][2]string{{"Content-Type", "application/json"}}}); err != nil {
			t.Fatal(err)
		}
	}
	return serve(t, b.handle)
}

func getTarget(path string) target {
	return target{method: "GET", uri: path, prepare: func(*fasthttp.Request, *worker) {}}
}

func TestClosedLoopMeasuresAnswers(t *testing.T) {
	addr := serveBare(t, "/x", 200, `{"ok":true}`)
	l := load{addr: addr, conns: 4, warmup: 100 * time.Millisecond, duration: 400 * time.Millisecond, timeout: 5 * time.Second}
	s := measure(context.Background(), l, getTarget("/x"))
	if s.Requests < 20 || s.Errors != 0 || len(s.ErrorSamples) != 0 {
		t.Fatalf("requests %d errors %d %v: want many answers and no errors", s.Requests, s.Errors, s.ErrorSamples)
	}
	if s.OK <= s.Requests {
		t.Fatalf("ok %d must count the warm-up too (measured %d)", s.OK, s.Requests)
	}
	if want := float64(s.Requests) / 0.4; s.RPS < want*0.99 || s.RPS > want*1.01 {
		t.Fatalf("rps %.0f, want requests/duration %.0f", s.RPS, want)
	}
	if !(s.P50 > 0 && s.P50 <= s.P90 && s.P90 <= s.P99 && s.P99 <= s.P999 && s.P999 <= s.Max) {
		t.Fatalf("percentiles out of order: %+v", s)
	}
}

func TestNon2xxAndTransportFailuresAreErrors(t *testing.T) {
	addr := serveBare(t, "", 0, "") // every path is a 404
	l := load{addr: addr, conns: 2, duration: 100 * time.Millisecond, timeout: time.Second}
	s := measure(context.Background(), l, getTarget("/missing"))
	if s.Errors == 0 || s.OK != 0 || len(s.ErrorSamples) == 0 || !strings.HasPrefix(s.ErrorSamples[0], "status 404") {
		t.Fatalf("errors %d ok %d samples %v: want every answer counted as an error", s.Errors, s.OK, s.ErrorSamples)
	}
	if len(s.ErrorSamples) > 5 {
		t.Fatalf("%d error samples kept, want at most 5", len(s.ErrorSamples))
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	s = measure(context.Background(), load{addr: dead, conns: 1, duration: 50 * time.Millisecond, timeout: time.Second}, getTarget("/"))
	if s.Errors == 0 || !strings.HasPrefix(s.ErrorSamples[0], "transport:") {
		t.Fatalf("nothing listening: errors %d samples %v, want transport errors", s.Errors, s.ErrorSamples)
	}
}

// A server that needs 20 ms per request on one connection manages 50 req/s. Asked for 100/s
// in an open loop, the requests queue behind each other and their latency, counted from when
// each was due, grows far past the 20 ms a closed loop would report.
func TestOpenLoopCountsQueueingDelay(t *testing.T) {
	slow := serve(t, func(ctx *fasthttp.RequestCtx) {
		time.Sleep(20 * time.Millisecond) // the service time being modelled
		ctx.SetBodyString("{}")
	})
	l := load{addr: slow, conns: 1, duration: time.Second, rate: 100, timeout: 5 * time.Second}
	s := measure(context.Background(), l, getTarget("/"))
	if s.Errors != 0 {
		t.Fatalf("errors: %v", s.ErrorSamples)
	}
	if s.P99 < 200 {
		t.Fatalf("p99 %.1f ms: queueing delay not counted (coordinated omission)", s.P99)
	}
	if s.Missed == 0 || s.RPS > 70 {
		t.Fatalf("rps %.0f missed %d: an overloaded schedule must show as missed requests", s.RPS, s.Missed)
	}
	if s.TargetRPS != 100 {
		t.Fatalf("target rps %v", s.TargetRPS)
	}

	closed := measure(context.Background(), load{addr: slow, conns: 1, duration: 300 * time.Millisecond, timeout: 5 * time.Second}, getTarget("/"))
	if closed.P50 > 60 {
		t.Fatalf("closed loop p50 %.1f ms, want about the 20 ms service time", closed.P50)
	}
}

func TestOpenLoopKeepsTheSchedule(t *testing.T) {
	addr := serveBare(t, "/x", 200, "{}")
	l := load{addr: addr, conns: 4, warmup: 200 * time.Millisecond, duration: time.Second, rate: 400, timeout: 5 * time.Second}
	s := measure(context.Background(), l, getTarget("/x"))
	if s.Errors != 0 || s.Missed != 0 {
		t.Fatalf("errors %d missed %d", s.Errors, s.Missed)
	}
	if s.Requests < 340 || s.Requests > 410 {
		t.Fatalf("%d requests measured in 1s at 400/s", s.Requests)
	}
	if s.OK < s.Requests+60 {
		t.Fatalf("ok %d: the warm-up's 80 requests are sent but not measured", s.OK)
	}
}

// One answer that takes 300 ms: with the schedule split between the connections, the requests
// due on its connection meanwhile wait for it (a dozen of them over 100 ms); with the next
// request going out on the first connection free, the other connections carry them and only
// that one is slow. Either way the latency splits into late (due to sent) and round trip.
func TestOpenLoopSendsOnTheFirstConnectionFree(t *testing.T) {
	slowOne := func() string {
		var n atomic.Int64
		return serve(t, func(ctx *fasthttp.RequestCtx) {
			if n.Add(1) == 10 {
				time.Sleep(300 * time.Millisecond)
			}
			ctx.SetBodyString("{}")
		})
	}
	l := load{addr: slowOne(), conns: 4, duration: 500 * time.Millisecond, rate: 200, timeout: 5 * time.Second}
	pooled := measure(context.Background(), l, getTarget("/"))
	l.addr, l.perConn = slowOne(), true
	perConn := measure(context.Background(), l, getTarget("/"))
	if pooled.Errors+perConn.Errors != 0 {
		t.Fatalf("errors: %v %v", pooled.ErrorSamples, perConn.ErrorSamples)
	}
	if perConn.Slow < 8 || perConn.SlowTrip > 3 || perConn.LateP99 < 100 {
		t.Errorf("split between the connections: %d slow, %d with a slow round trip, late p99 %.1f ms; want 8 or more slow, nearly all late",
			perConn.Slow, perConn.SlowTrip, perConn.LateP99)
	}
	// A loaded machine may delay a few more requests either way: the split must show, not a
	// count of exactly one.
	if pooled.Slow+4 > perConn.Slow || pooled.SlowTrip < 1 || pooled.TripMax < 300 {
		t.Errorf("the first connection free: %d slow (split between the connections: %d), %d with a slow round trip (max %.0f ms); want the slow answer, not those behind it",
			pooled.Slow, perConn.Slow, pooled.SlowTrip, pooled.TripMax)
	}
}

func TestWorkerRequestSpreadCoversAllUsers(t *testing.T) {
	seen := map[int]bool{}
	for id := range 3 {
		w := &worker{id: id}
		for range 10 {
			seen[pick(w, 7)] = true
			w.seq++
		}
	}
	if len(seen) != 7 {
		t.Fatalf("picked %d of 7 users", len(seen))
	}
}
