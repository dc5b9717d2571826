package httpapi

import (
	"errors"
	"net"
	"os"
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
