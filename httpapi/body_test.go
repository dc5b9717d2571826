package httpapi

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The deadlines fasthttp asks for are set lazily (lazyDeadline), never later than asked: a wait
// ends at its deadline, an earlier one replaces a later one, a removed one is removed, and one
// asked less than deadlineSlack after the one set is not set again.
func TestLingerConnDeadlines(t *testing.T) {
	client, server := net.Pipe()
	defer client.Close()
	c := &lingerConn{Conn: server, fresh: new(sync.Map)}
	defer c.Close()
	buf := make([]byte, 8)
	timesOut := func(what string, op func() error, within time.Duration) {
		t.Helper()
		start := time.Now()
		if err := op(); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("%s: %v, want a timeout", what, err)
		}
		if took := time.Since(start); took > within {
			t.Fatalf("%s: timed out after %v, want within %v", what, took, within)
		}
	}
	read := func() error { _, err := c.Read(buf); return err }
	write := func() error { _, err := c.Write([]byte("x")); return err }

	// A far deadline set, then a near one asked: the near one is set before the read waits.
	_ = c.SetReadDeadline(time.Now().Add(time.Hour))
	go func() { _, _ = client.Write([]byte("a")) }()
	if _, err := c.Read(buf); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Millisecond))
	timesOut("near read deadline after a far one", read, 5*time.Second)

	// Removed: the read waits for data past the old deadline.
	_ = c.SetReadDeadline(time.Time{})
	go func() { time.Sleep(60 * time.Millisecond); _, _ = client.Write([]byte("b")) }()
	if n, err := c.Read(buf); err != nil || string(buf[:n]) != "b" {
		t.Fatalf("read with the deadline removed: %q %v", buf[:n], err)
	}

	// Within the slack of the one set: not set again, and the wait ends by the earlier one.
	d := time.Now().Add(40 * time.Millisecond)
	_ = c.SetReadDeadline(d)
	timesOut("read deadline", read, 5*time.Second)
	_ = c.SetReadDeadline(d.Add(deadlineSlack / 2))
	if c.rd.due() {
		t.Fatal("a deadline within the slack after the one set is due")
	}
	_ = c.SetReadDeadline(d.Add(2 * deadlineSlack))
	if !c.rd.due() {
		t.Fatal("a deadline past the slack is not due")
	}

	// The write side: nobody reads the pipe, so the write waits for its deadline.
	_ = c.SetWriteDeadline(time.Now().Add(30 * time.Millisecond))
	timesOut("write deadline", write, 5*time.Second)
	_ = c.SetWriteDeadline(time.Time{})
	go func() { _, _ = client.Read(buf) }()
	if _, err := c.Write([]byte("y")); err != nil {
		t.Fatalf("write with the deadline removed: %v", err)
	}

	// SetDeadline sets both at once.
	if err := c.SetDeadline(time.Now().Add(-time.Second)); err != nil {
		t.Fatal(err)
	}
	if c.rd.due() || c.wd.due() {
		t.Fatal("SetDeadline left a deadline to set")
	}
	timesOut("read after SetDeadline", read, time.Second)
}

// streamConn sends what it holds in reads of at most step bytes, then ends; it keeps every
// answer written.
type streamConn struct {
	replayConn
	in   []byte
	step int
	out  bytes.Buffer
}

func (c *streamConn) Read(p []byte) (int, error) {
	if len(c.in) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), c.step)], c.in)
	c.in = c.in[n:]
	return n, nil
}

func (c *streamConn) Write(p []byte) (int, error) { return c.out.Write(p) }

// A body of a known length is the bytes sent, whichever way readBody takes it: read ahead by
// fasthttp (up to bodyPrefetched) and taken as it is, read through the pooled block, or
// chunked; one request after another on a connection, in reads that split them anywhere. A
// fasthttp that read ahead less than bodyPrefetched fails this test (each answer 400).
func TestBodyPrefetched(t *testing.T) {
	a, raw, _ := hotFixture(t)
	a.srv.guesses = newGuessLimitsOf(1000, 1) // the wrong key's 401s are not held against the peer
	wrong := strings.Repeat("x", len(raw))
	post := func(key string, size int, chunked bool) string {
		body := `{"rawKey":"` + key + `"}`
		body += strings.Repeat(" ", max(0, size-len(body))) // JSON's whitespace after the value
		if chunked {
			return "POST /api/admin/apikeys/validate HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n" +
				strconv.FormatInt(int64(len(body)), 16) + "\r\n" + body + "\r\n0\r\n\r\n"
		}
		return "POST /api/admin/apikeys/validate HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: " +
			strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	var in strings.Builder
	var want []string
	for _, size := range []int{0, 100, bodyPrefetched - 1, bodyPrefetched, bodyPrefetched + 1, 3 * bodyPrefetched, bodyBlock + 1} {
		for _, chunked := range []bool{false, true} {
			in.WriteString(post(raw, size, chunked))
			in.WriteString(post(wrong, size, chunked))
			want = append(want, "200", "401")
		}
	}
	for _, step := range []int{1 << 20, 1000, 61} {
		c := &streamConn{in: []byte(in.String()), step: step}
		if err := a.srv.srv.ServeConn(c); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, answer := range strings.Split(c.out.String(), "HTTP/1.1 ")[1:] {
			got = append(got, answer[:3])
		}
		if !slices.Equal(got, want) {
			t.Fatalf("reads of %d bytes: answers %v, want %v\n%.2000s", step, got, want, c.out.String())
		}
	}
}
