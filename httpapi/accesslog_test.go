package httpapi

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fasthttp/router"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/gateway/gateway/internal/cputime"
)

// syncBuffer is a buffer safe for the access log's goroutine and the test.
type syncBuffer struct {
	mu     sync.Mutex
	b      bytes.Buffer
	writes int
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes++
	return s.b.Write(p)
}

func (s *syncBuffer) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Split(strings.TrimSuffix(s.b.String(), "\n"), "\n")
}

// testReqPfx is the request id prefix of the tests' access logs.
const testReqPfx = "ab12cd34"

// slogLine is the line slog's own handler writes for the same request, at the same time.
func slogLine(text bool, r accessRecord) string {
	var b bytes.Buffer
	opts := &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			a.Value = slog.TimeValue(r.at)
		}
		return a
	}}
	var h slog.Handler = slog.NewJSONHandler(&b, opts)
	if text {
		h = slog.NewTextHandler(&b, opts)
	}
	id := r.id
	if id == "" {
		id = string(appendRequestID(nil, testReqPfx, r.seq))
	}
	slog.New(h).With("component", "http").Info("request", "request_id", id, "method", r.route.method, "route", r.route.path,
		"status", r.status, "duration_ms", float64(r.duration.Microseconds())/1000, "remote", r.remote.String())
	return strings.TrimSuffix(b.String(), "\n")
}

// The access log writes what slog's handlers write, byte for byte, in both formats, quoting
// and escaping included.
func TestAccessLogLinesAreSlogs(t *testing.T) {
	at := time.Date(2026, 11, 26, 17, 3, 22, 123456789, time.UTC)
	records := []accessRecord{
		{at: at, id: "ab12cd34-1", route: newAccessRoute("POST", "/api/v1/messages/send"), status: 200, duration: 1234567 * time.Nanosecond, remote: net.IPv4(127, 0, 0, 1)},
		{at: at.Truncate(time.Second).Add(time.Second), id: `a "quoted" id=x`, route: newAccessRoute("GET", "/api/v1/messages/{id}"), status: 404, duration: 5 * time.Millisecond, remote: net.ParseIP("::1")},
		{at: at.Truncate(time.Second).Add(2500 * time.Millisecond), id: "tab\tand\nnewline é \xff", route: newAccessRoute("GET", "/"), status: 503, duration: 0, remote: net.IPv4(10, 1, 2, 3)},
		// The server's own id (no id of the caller's): its prefix and the request's number.
		{at: at.Add(3 * time.Second), seq: 123456789, route: newAccessRoute("GET", `/odd "route"`), status: 200, remote: net.IPv4(10, 1, 2, 4)},
		// The address as its connection gave it, formatted as it was accepted (remoteText;
		// slogLine reads remote).
		{at: at.Add(4 * time.Second), seq: 7, route: newAccessRoute("GET", "/"), status: 200, remote: net.IPv4(192, 168, 1, 20), remoteText: "192.168.1.20"},
		{at: at.Add(5 * time.Second), seq: 8, route: newAccessRoute("GET", "/"), status: 200, remote: net.ParseIP("2001:db8::1"), remoteText: "2001:db8::1"},
		// Fractions with inner and leading zeros; statuses outside three digits.
		{at: at.Truncate(time.Second).Add(6*time.Second + 1002030), seq: 9, route: newAccessRoute("GET", "/"), status: 1000, remote: net.IPv4(10, 0, 0, 1)},
		{at: at.Truncate(time.Second).Add(7*time.Second + 7), seq: 10, route: newAccessRoute("GET", "/"), status: 99, remote: net.IPv4(10, 0, 0, 1)},
		{at: at.Truncate(time.Second).Add(8*time.Second + 90000000), seq: 11, route: newAccessRoute("GET", "/"), status: 100, remote: net.IPv4(10, 0, 0, 1)},
	}
	for _, text := range []bool{false, true} {
		out := &syncBuffer{}
		l := newAccessLog(AccessLogConfig{Output: out, Text: text, Attrs: [][2]string{{"component", "http"}}}, testReqPfx)
		for i, r := range records {
			l.add(uint64(i), r) // each on a connection of its own: the shards' lines merged in order
		}
		l.close()
		got := out.lines()
		if len(got) != len(records) {
			t.Fatalf("text=%v: %d lines, want %d:\n%s", text, len(got), len(records), strings.Join(got, "\n"))
		}
		for i, r := range records {
			want := slogLine(text, r)
			if !text {
				// JSON: the same object (slog escapes a few more characters the same way).
				var g, w map[string]any
				if err := json.Unmarshal([]byte(got[i]), &g); err != nil {
					t.Fatalf("line %d is not JSON: %v\n%s", i, err, got[i])
				}
				if err := json.Unmarshal([]byte(want), &w); err != nil {
					t.Fatal(err)
				}
				gb, _ := json.Marshal(g)
				wb, _ := json.Marshal(w)
				if !bytes.Equal(gb, wb) || !strings.HasPrefix(got[i], `{"time":`) {
					t.Fatalf("line %d:\n got %s\nwant %s", i, got[i], want)
				}
				continue
			}
			if got[i] != want {
				t.Fatalf("text line %d:\n got %s\nwant %s", i, got[i], want)
			}
		}
	}
}

// blockedWriter blocks every Write until release is closed.
type blockedWriter struct {
	release chan struct{}
	syncBuffer
}

func (w *blockedWriter) Write(p []byte) (int, error) {
	<-w.release
	return w.syncBuffer.Write(p)
}

// A request never waits for the log's output: while the output is blocked, records queue up to
// a bound and the rest are dropped and counted in a line of their own; many lines go out in
// one write; close writes what is left.
func TestAccessLogNeverBlocksARequest(t *testing.T) {
	out := &blockedWriter{release: make(chan struct{})}
	l := newAccessLog(AccessLogConfig{Output: out}, "")
	r := accessRecord{at: time.Now(), id: "x", route: newAccessRoute("GET", "/"), status: 200, remote: net.IPv4(127, 0, 0, 1)}
	const n = 3 * accessMaxQueued
	// Every add returns while the output stays blocked: one that waited for the output would
	// wait forever here (the bound is a hang's, not a speed's: under -race on a loaded machine
	// the adds take seconds).
	added := make(chan struct{})
	go func() {
		for i := range n {
			l.add(uint64(i), r) // over every shard: together they hold accessMaxQueued
		}
		close(added)
	}()
	select {
	case <-added:
	case <-time.After(60 * time.Second):
		t.Fatalf("%d records not added in 60 s with the output blocked: an add waits for the output", n)
	}
	close(out.release)
	done := make(chan struct{})
	go func() { l.close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("close did not return")
	}
	lines := out.lines()
	requests := 0
	dropped := ""
	for _, line := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("not JSON: %s", line)
		}
		if m["msg"] == "request" {
			requests++
		} else if d, ok := m["dropped"]; ok {
			dropped += string(must(json.Marshal(d)))
		}
	}
	// One batch may have been taken before the output blocked; the queue held the bound.
	if requests < accessMaxQueued || requests >= n || dropped == "" {
		t.Fatalf("%d request lines, dropped %q (of %d)", requests, dropped, n)
	}
	if out.writes > 4+len(lines)/1000 { // writes of accessWriteChunk: over a thousand lines each
		t.Fatalf("%d writes for %d lines", out.writes, len(lines))
	}
	l.add(0, r) // after close: dropped, no panic
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// Through a route: every request gets its line (the route, the status, the request id the
// response carries), and the lines go out in few writes.
func TestAccessLogThroughARoute(t *testing.T) {
	out := &syncBuffer{}
	metrics, err := newHTTPMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{cfg: Config{LogRequests: true, BodyLimit: 1 << 20}, log: slog.New(slog.DiscardHandler), router: router.New(), metrics: metrics,
		reqPfx: "test", access: newAccessLog(AccessLogConfig{Output: out, Attrs: [][2]string{{"component", "http"}}}, "test")}
	s.route("GET", "/things/{id}", 0, here, func(ctx *fasthttp.RequestCtx) error {
		ctx.SetStatusCode(204)
		return nil
	})
	const n = 200
	var ids []string
	for range n {
		var ctx fasthttp.RequestCtx
		ctx.Request.Header.SetMethod("GET")
		ctx.Request.SetRequestURI("/things/7")
		s.router.Handler(&ctx)
		ids = append(ids, string(ctx.Response.Header.Peek("X-Request-Id")))
	}
	s.access.close()
	lines := out.lines()
	if len(lines) != n {
		t.Fatalf("%d lines for %d requests", len(lines), n)
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(lines[n-1]), &m); err != nil || m["route"] != "/things/{id}" || m["status"] != 204.0 ||
		m["component"] != "http" || m["request_id"] != ids[n-1] || m["level"] != "INFO" || m["msg"] != "request" {
		t.Fatalf("line: %s (%v), request id %s", lines[n-1], err, ids[n-1])
	}
	if out.writes >= n/2 {
		t.Fatalf("%d writes for %d lines: not batched", out.writes, n)
	}
}

// BenchmarkAccessLog is the cost a request pays for its access-log line, on a route that does
// nothing else: none, the batched log (its writer's CPU included: the run ends with its last
// write) into /dev/null and into a regular file (the kernel's copy into the page cache
// included), and slog's JSON handler writing each line (the earlier way).
// `go test -run X -bench AccessLog ./httpapi`.
func BenchmarkAccessLog(b *testing.B) {
	for _, mode := range []string{"off", "batched", "file", "slog"} {
		b.Run(mode, func(b *testing.B) {
			metrics, _ := newHTTPMetrics(prometheus.NewRegistry())
			devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
			if err != nil {
				b.Fatal(err)
			}
			defer devNull.Close()
			s := &Server{cfg: Config{BodyLimit: 1 << 20}, log: slog.New(slog.NewJSONHandler(devNull, nil)), router: router.New(), metrics: metrics, reqPfx: "bench"}
			switch mode {
			case "batched":
				s.cfg.LogRequests = true
				s.access = newAccessLog(AccessLogConfig{Output: devNull, Attrs: [][2]string{{"component", "http"}}}, s.reqPfx)
			case "file":
				f, err := os.OpenFile(b.TempDir()+"/log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				s.cfg.LogRequests = true
				s.access = newAccessLog(AccessLogConfig{Output: &LockedWriter{W: f}, Attrs: [][2]string{{"component", "http"}}}, s.reqPfx)
			case "slog":
				s.cfg.LogRequests = true
			}
			s.route("GET", "/things/{id}", 0, here, func(ctx *fasthttp.RequestCtx) error { ctx.SetStatusCode(204); return nil })
			start := cputime.Process()
			b.RunParallel(func(pb *testing.PB) {
				var ctx fasthttp.RequestCtx
				ctx.Init(&fasthttp.Request{}, nil, nil) // a connection of its own (its id)
				ctx.Request.Header.SetMethod("GET")
				ctx.Request.SetRequestURI("/things/7")
				for pb.Next() {
					ctx.Response.Reset()
					ctx.ResetUserValues()
					s.router.Handler(&ctx)
				}
			})
			if s.access != nil {
				s.access.close()
			}
			b.ReportMetric(float64((cputime.Process()-start).Nanoseconds())/float64(b.N), "cpu-ns/op")
		})
	}
}

// The access log's duration is slog's number: AppendFloat's shortest 'g' form of the
// milliseconds, for every duration under 10^4 µs and a spread of larger ones.
func TestAppendMillis(t *testing.T) {
	check := func(us int64) {
		want := strconv.AppendFloat(nil, float64(us)/1000, 'g', -1, 64)
		if got := appendMillis(nil, us); string(got) != string(want) {
			t.Fatalf("%d µs: %s, want %s", us, got, want)
		}
	}
	for us := int64(0); us < 10000; us++ {
		check(us)
	}
	for us := int64(10000); us < 2e9; us = us*13/10 + 7 {
		check(us)
		check(us - us%1000)
	}
	for _, us := range []int64{999_999_999, 1e9, 1e9 + 1, 123_456_789_000, -1} {
		check(us)
	}
}

// A request id's number is strconv's base 36, at every length up to the largest uint64.
func TestAppendBase36(t *testing.T) {
	check := func(n uint64) {
		if got, want := appendBase36([]byte("x"), n), strconv.AppendUint([]byte("x"), n, 36); string(got) != string(want) {
			t.Fatalf("%d: %s, want %s", n, got, want)
		}
	}
	for n := uint64(0); n < 50000; n++ {
		check(n)
	}
	for n := uint64(50000); n < 1<<61; n = n/5*7 + 3 {
		check(n)
		check(n - 1)
	}
	for p, n := uint64(1), 0; n < 13; p, n = p*36, n+1 {
		check(p)
		check(p - 1)
	}
	check(1<<64 - 1)
}

// A served request's line names the client's address, as fasthttp's RemoteIP gives it: read
// once from the connection as it was accepted (lingerConn.remote).
func TestAccessLogRemoteIsTheConnections(t *testing.T) {
	out := &syncBuffer{}
	a := newAPI(t, func(c *Config) { c.LogRequests = true; c.AccessLog = AccessLogConfig{Output: out} })
	for range 3 {
		if r := a.do(t, "GET", "/healthz", "", nil, nil); r.status != 200 {
			t.Fatalf("healthz: %d", r.status)
		}
	}
	a.srv.access.close()
	n := 0
	for _, line := range out.lines() {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		if m["route"] == "/healthz" {
			n++
			if m["remote"] != "127.0.0.1" {
				t.Fatalf("remote %v: %s", m["remote"], line)
			}
		}
	}
	if n != 3 {
		t.Fatalf("%d lines of /healthz, want 3: %q", n, out.lines())
	}
}

// The access log writes to a regular file in batches of accessFileBatch records (the page
// cache's cost per byte falls with a write's size); to anything else, a pipe, in accessBatch.
func TestAccessLogBatchFollowsItsOutput(t *testing.T) {
	f, err := os.Create(t.TempDir() + "/log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	for _, c := range []struct {
		out  io.Writer
		want int
	}{
		{f, accessFileBatch}, {&LockedWriter{W: f}, accessFileBatch}, {w, accessBatch}, {&LockedWriter{W: w}, accessBatch}, {&syncBuffer{}, accessBatch},
	} {
		l := newAccessLog(AccessLogConfig{Output: c.out}, "x")
		if l.batch != c.want {
			t.Errorf("%T: batch %d, want %d", c.out, l.batch, c.want)
		}
		l.close()
	}
}

// ipText passes what an address's text holds and nothing a format would quote or escape.
func TestIPText(t *testing.T) {
	for s, want := range map[string]bool{
		"127.0.0.1": true, "2001:db8::1": true, "::FFFF:10.1.2.3": true, "fe80::abcd": true, "": true,
		"fe80::1%eth0": false, `1"2`: false, "1 2": false, "a=b": false, "g": false, "1\\2": false, "é": false, "1\n": false,
	} {
		if got := ipText(s); got != want {
			t.Errorf("ipText(%q) = %v, want %v", s, got, want)
		}
	}
}

// BenchmarkAccessLogLine is the writer's formatting of one request's line (JSON, the server's
// own request id, the connection's address). `go test -run X -bench AccessLogLine ./httpapi`.
func BenchmarkAccessLogLine(b *testing.B) {
	l := newAccessLog(AccessLogConfig{Output: discard{}, Attrs: [][2]string{{"component", "http"}}}, testReqPfx)
	defer l.close()
	r := accessRecord{at: time.Now(), seq: 1<<32 | 12345, route: newAccessRoute("POST", "/api/admin/apikeys/validate"), status: 200,
		duration: 2 * time.Microsecond, remoteText: "127.0.0.1"}
	buf := make([]byte, 0, 1<<20)
	for b.Loop() {
		if len(buf) > cap(buf)-512 {
			buf = buf[:0]
		}
		r.at = r.at.Add(17 * time.Microsecond)
		r.seq++
		buf = l.appendLine(buf, &r)
	}
}

// The writer is woken early once the shards hold a batch in all, whether one connection's
// shard holds it or many connections' shards share it, and not before.
func TestAccessLogFullAtABatchInAll(t *testing.T) {
	r := accessRecord{at: time.Now(), route: newAccessRoute("GET", "/"), status: 200, remoteText: "127.0.0.1"}
	for _, conns := range []int{1, 2, 3, 4, 64} {
		// No writer: the signals stay in their channels.
		l := &accessLog{wake: make(chan struct{}, 1), full: make(chan struct{}, 1), batch: accessBatch, shardBatch: accessBatch / accessShards}
		for i := range accessBatch - 1 {
			l.add(uint64(i%conns), r)
		}
		if len(l.wake) != 1 || len(l.full) != 0 {
			t.Fatalf("%d connections, %d records: wake %d, full %d; want 1 and 0", conns, accessBatch-1, len(l.wake), len(l.full))
		}
		for i := accessBatch - 1; len(l.full) == 0 && i < accessBatch+accessShards*accessCountEvery; i++ {
			l.add(uint64(i%conns), r)
			if len(l.full) == 1 && conns != 3 && i != accessBatch-1 {
				t.Fatalf("%d connections: full after %d records, want %d", conns, i+1, accessBatch)
			}
		}
		if len(l.full) != 1 {
			t.Fatalf("%d connections: no full signal after %d records", conns, accessBatch+accessShards*accessCountEvery)
		}
	}
}
