package main

// Operations behaviour of the HTTP layer, in process: per-route body limits from the headers,
// failed-guess limits, CORS, request ids on router errors, long subjects, build info.

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawStatus sends only a request's headers (announcing a body of length bytes) and returns the
// status line the server answers with before any body byte is sent.
func rawStatus(t *testing.T, url, method, path string, length int, wait time.Duration) string {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(wait))
	_, err = c.Write([]byte(method + " " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " + strconv.Itoa(length) + "\r\n\r\n"))
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return "no answer before the body: " + err.Error()
	}
	return strings.TrimSpace(line)
}

func TestBodyLimitsFromHeaders(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	// A 1 MiB route refuses a 2 MiB body from its Content-Length alone.
	if got := rawStatus(t, tg.url, "POST", "/api/admin/apikeys/validate", 2<<20, 5*time.Second); !strings.Contains(got, " 413 ") {
		t.Fatalf("2 MiB to a 1 MiB route: %q, want 413 before the body", got)
	}
	if got := rawStatus(t, tg.url, "POST", "/api/v1/messages/send-bulk?x=1", 2<<20, 5*time.Second); !strings.Contains(got, " 413 ") {
		t.Fatalf("2 MiB to send-bulk (with a query): %q, want 413", got)
	}
	// A media route waits for its body (its limit is larger): no answer within 300 ms. The v1
	// send is one: it takes every kind, media inline.
	for _, path := range []string{"/api/v1/messages/send-image", "/api/v1/messages/send"} {
		if got := rawStatus(t, tg.url, "POST", path, 2<<20, 300*time.Millisecond); strings.Contains(got, " 413 ") {
			t.Fatalf("2 MiB to %s refused: %q", path, got)
		}
	}
	// The 413 is the JSON error model, names the route's limit and carries a request id.
	c, err := net.Dial("tcp", strings.TrimPrefix(tg.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Write([]byte("POST /api/admin/apikeys/validate HTTP/1.1\r\nHost: x\r\nContent-Length: 2097152\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	r := resp{status: res.StatusCode, header: res.Header, raw: body}
	want(t, r, 413, "body_too_large")
	if !strings.Contains(r.str("error"), strconv.Itoa(1<<20)) || r.header.Get("X-Request-Id") == "" {
		t.Fatalf("413 names the wrong limit or has no request id: %s %v", r.raw, r.header)
	}
}

func TestGuessLimits(t *testing.T) {
	tg := startGW(t)
	admin := tg.token("root", "admin")
	tg.newClient("alice")
	good := tg.newKey(admin, "alice", nil).str("rawKey")
	statuses := map[int]int{}
	for range 30 {
		statuses[tg.do("POST", "/api/admin/apikeys/validate", nil, map[string]any{"rawKey": "svc_live_guess"}).status]++
	}
	if statuses[401] != guessBurstForTest || statuses[429] != 30-guessBurstForTest {
		t.Fatalf("30 wrong keys: %v, want %d × 401 then 429", statuses, guessBurstForTest)
	}
	r := tg.do("POST", "/api/admin/apikeys/validate", nil, map[string]any{"rawKey": good})
	want(t, r, 429, "too_many_attempts")
	if r.header.Get("Retry-After") == "" {
		t.Fatal("429 without Retry-After")
	}
	// Refills: 2 failures per second.
	eventually(t, 3*time.Second, "a refilled attempt", func() bool {
		return tg.do("POST", "/api/admin/apikeys/validate", nil, map[string]any{"rawKey": good}).status == 200
	})
	// A right key never costs an attempt.
	for range 40 {
		want(t, tg.do("POST", "/api/admin/apikeys/validate", nil, map[string]any{"rawKey": good}), 200, "")
	}
	// The webhook receiver counts failures (bad signatures, unknown stores) per shop.
	body := []byte(`{"id":1}`)
	hook := func(shop string) int {
		return tg.webhook("uid=alice&shop="+shop, shopifyHook("orders/create", shop, "wrong-secret", "w-"+shop, body), body).status
	}
	for range guessBurstForTest {
		hook("guessed.myshopify.com")
	}
	if s := hook("guessed.myshopify.com"); s != 429 {
		t.Fatalf("webhook after %d bad signatures: %d, want 429", guessBurstForTest, s)
	}
	if s := hook("other.myshopify.com"); s == 429 {
		t.Fatal("another shop was limited too")
	}
}

// guessBurstForTest mirrors httpapi's guessBurst.
const guessBurstForTest = 20

func TestCORS(t *testing.T) {
	sideBySide(t)
	tg := startGW(t, "--cors-origins", "https://app.example.com")
	req, _ := http.NewRequest("OPTIONS", tg.url+"/api/client/status", nil)
	req.Header.Set("Origin", "https://app.example.com")
	req.Header.Set("Access-Control-Request-Method", "GET")
	res, err := tg.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 204 || res.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		!strings.Contains(res.Header.Get("Access-Control-Allow-Headers"), "Authorization") {
		t.Fatalf("preflight: %d %v", res.StatusCode, res.Header)
	}
	r := tg.do("GET", "/healthz", auth{"Origin": "https://app.example.com"}, nil)
	if r.header.Get("Access-Control-Allow-Origin") != "https://app.example.com" {
		t.Fatalf("no CORS header on a simple request: %v", r.header)
	}
	r = tg.do("GET", "/healthz", auth{"Origin": "https://evil.example.com"}, nil)
	if r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Fatalf("CORS header for an origin not allowed: %v", r.header)
	}
}

func TestRouterErrorsCarryRequestIDs(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	for _, c := range []struct {
		method, path string
		status       int
	}{{"GET", "/api/nothing", 404}, {"DELETE", "/api/v1/account", 405}} {
		r := tg.do(c.method, c.path, nil, nil)
		want(t, r, c.status, "")
		if r.header.Get("X-Request-Id") == "" {
			t.Fatalf("%s %s: %d without X-Request-Id", c.method, c.path, c.status)
		}
	}
}

// A subject of up to 255 characters (the OIDC limit) is a user id; a longer one is refused
// with 403 unsupported_subject, not a 401 that would send the dashboard back to sign-in.
func TestLongSubjects(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	long := strings.Repeat("s", 255)
	want(t, tg.do("GET", "/api/client/status", bearerAuth(tg.token(long, "")), nil), 200, "")
	want(t, tg.do("GET", "/api/client/status", bearerAuth(tg.token(long+"x", "")), nil), 403, "unsupported_subject")
}

func TestBuildInfoMetric(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	r := tg.do("GET", "/metrics", nil, nil)
	for _, name := range []string{`gateway_build_info{goversion="go`} {
		if !strings.Contains(string(r.raw), name) {
			t.Errorf("/metrics lacks %s", name)
		}
	}
}

// A client that sends its whole body before it reads (Python's http.client, curl without
// Expect) reads the 413 of a body over the route's limit, by length or chunked, instead of a
// connection reset: the server closes after the answer, reading and dropping the rest.
func TestRefusedBodyIsReadBySendFirstClients(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	host := strings.TrimPrefix(tg.url, "http://")
	const size = 21 << 20
	chunk := make([]byte, 64<<10)
	for _, chunked := range []bool{false, true} {
		c, err := net.Dial("tcp", host)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(20 * time.Second))
		hdr := "POST /api/admin/apikeys/validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
		if chunked {
			hdr += "Transfer-Encoding: chunked\r\n\r\n"
		} else {
			hdr += "Content-Length: " + strconv.Itoa(size) + "\r\n\r\n"
		}
		if _, err := c.Write([]byte(hdr)); err != nil {
			t.Fatal(err)
		}
		for sent := 0; sent < size; sent += len(chunk) {
			if chunked {
				_, err = c.Write([]byte(strconv.FormatInt(int64(len(chunk)), 16) + "\r\n" + string(chunk) + "\r\n"))
			} else {
				_, err = c.Write(chunk)
			}
			if err != nil {
				t.Fatalf("chunked %v: sending the body after %d bytes: %v (the server reset the connection)", chunked, sent, err)
			}
		}
		if chunked {
			_, _ = c.Write([]byte("0\r\n\r\n"))
		}
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("chunked %v: reading the answer: %v", chunked, err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		c.Close()
		want(t, resp{status: res.StatusCode, header: res.Header, raw: body}, 413, "body_too_large")
		if !res.Close {
			t.Fatalf("chunked %v: the 413 keeps the connection open, with the body unread", chunked)
		}
	}

	// The same with Python's own client, when there is one.
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Log("python3 not found: the send-first client above stands for it")
		return
	}
	script := `
import http.client, sys
c = http.client.HTTPConnection(sys.argv[1], timeout=20)
c.request("POST", "/api/admin/apikeys/validate", body=b"x" * (21 << 20), headers={"Content-Type": "application/json"})
r = c.getresponse()
print(r.status, r.read().decode())
`
	out, err := exec.Command(py, "-c", script, host).CombinedOutput()
	if err != nil || !strings.HasPrefix(string(out), "413 ") || !strings.Contains(string(out), "body_too_large") {
		t.Fatalf("python3 http.client: %v\n%s", err, out)
	}
}

// GET /api/admin/cluster on a single node: admins only, cluster false, empty lists (the
// dashboard hides its cluster panel).
func TestAdminClusterOnSingleNode(t *testing.T) {
	sideBySide(t)
	tg := startGW(t)
	admin := tg.token("root", "admin")
	r := tg.do("GET", "/api/admin/cluster", bearerAuth(admin), nil)
	want(t, r, 200, "")
	if o := r.obj(); o["cluster"] != false || len(o["nodes"].([]any)) != 0 || len(o["partitions"].([]any)) != 0 {
		t.Fatalf("single node: %s", r.raw)
	}
	want(t, tg.do("GET", "/api/admin/cluster", bearerAuth(tg.token("alice", "client")), nil), 403, "")
	want(t, tg.do("GET", "/api/admin/cluster", nil, nil), 401, "")
}
