package whatsapp

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.mau.fi/whatsmeow"
	waBinary "go.mau.fi/whatsmeow/binary"
	"go.mau.fi/whatsmeow/store"
)

// The patched whatsmeow (third_party/README.md): a request given up (its timeout, its context)
// while its answer is being handed to it must not close the waiter the answer is sent on. In
// upstream whatsmeow cancelResponse closed it unconditionally, so the socket's read goroutine,
// which has no recover, panicked with "send on closed channel" and took the process down.
func TestResponseWaiterGivenUpAsItsAnswerArrives(t *testing.T) {
	cli := whatsmeow.NewClient(&store.Device{}, nil)
	//lint:ignore SA1019 the internals are how a test reaches the patched request waiters
	in := cli.DangerousInternals()
	ctx, cancel := context.WithCancel(context.Background())
	ch := in.WaitResponse("req1")
	ch <- &waBinary.Node{Tag: "iq"} // the waiter's one slot taken: the answer's send waits
	received := make(chan bool)
	go func() {
		received <- in.ReceiveResponse(ctx, &waBinary.Node{Tag: "iq", Attrs: waBinary.Attrs{"id": "req1"}})
	}()
	// The read goroutine has taken the waiter out of the map and waits to send on it (blocked
	// in its select: only entering the function is too early, the waiter still in the map).
	deadline := time.Now().Add(10 * time.Second)
	for !goroutineIn("whatsmeow.(*Client).receiveResponse", "select") {
		if time.Now().After(deadline) {
			t.Fatal("the answer's send never started")
		}
		time.Sleep(time.Millisecond)
	}
	in.CancelResponse("req1", ch) // upstream: close(ch), and the send above panics
	cancel()
	if !<-received {
		t.Fatal("the answer was not taken as a response")
	}
	if n, open := <-ch; !open || n.Tag != "iq" {
		t.Fatalf("the waiter was closed under its answer (%v, %v)", n, open)
	}
}

// goroutineIn says whether some goroutine is blocked in state (a stack header's "[select",
// "[chan send") with fn in its stack.
func goroutineIn(fn, state string) bool {
	buf := make([]byte, 1<<20)
	for _, g := range strings.Split(string(buf[:runtime.Stack(buf, true)]), "\n\n") {
		header, _, _ := strings.Cut(g, "\n")
		if strings.Contains(header, "["+state) && strings.Contains(g, fn) {
			return true
		}
	}
	return false
}
