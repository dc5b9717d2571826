package sim

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/gateway/gateway/network"
)

// goroutineID is the calling goroutine's id, from its stack's first line.
func goroutineID() string {
	var b [64]byte
	s := string(b[:runtime.Stack(b[:], false)])
	s = strings.TrimPrefix(s, "goroutine ")
	id, _, _ := strings.Cut(s, " ")
	return id
}

// A receipt a message reaches the sink from the network's kept event goroutines, not from a
// new goroutine each (issue 32): a hundred sends, each receipt its own burst, are delivered by
// at most keptDrainers goroutines. The sim that started a goroutine per burst used a hundred.
func TestEventGoroutinesKept(t *testing.T) {
	n := openSim(t, Options{})
	c, r := paired(t, n, "s1", "15550000001")
	var mu sync.Mutex
	seen := map[string]bool{}
	if _, err := n.Open("s1", func(ev network.Event) {
		mu.Lock()
		seen[goroutineID()] = true
		mu.Unlock()
		r.sink(ev)
	}); err != nil {
		t.Fatal(err)
	}
	for i := range 100 {
		id := fmt.Sprintf("m%d", i)
		if _, err := c.Send(ctx, text(id, "15550000002", "hi")); err != nil {
			t.Fatal(err)
		}
		ev, ok := r.next(t).(network.MessageReceipt)
		if !ok || ev.IDs[0] != id {
			t.Fatalf("event = %#v, want the receipt of %s", ev, id)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) > keptDrainers {
		t.Fatalf("%d goroutines delivered 100 receipts, want at most %d", len(seen), keptDrainers)
	}
}

// Many clients sending at once: each one's receipts reach its sink in order, from one
// goroutine at a time (the sink below would race otherwise: -race), and Close leaves no event
// goroutine behind.
func TestEventsInOrderAcrossClients(t *testing.T) {
	n := openSim(t, Options{})
	const clients, sends = 8, 200
	var wg sync.WaitGroup
	recs := make([]*recorder, clients)
	for k := range clients {
		c, r := paired(t, n, fmt.Sprintf("s%d", k), fmt.Sprintf("1555000%04d", k))
		recs[k] = r
		var got []string // the sink's alone: no lock
		if _, err := n.Open(fmt.Sprintf("s%d", k), func(ev network.Event) {
			got = append(got, ev.(network.MessageReceipt).IDs[0])
			if len(got) == sends {
				for i, id := range got {
					if id != fmt.Sprintf("m%d-%d", k, i) {
						t.Errorf("client %d: receipt %d is %s", k, i, id)
						break
					}
				}
			}
			r.sink(ev)
		}); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range sends {
				if _, err := c.Send(ctx, text(fmt.Sprintf("m%d-%d", k, i), "15559999999", "hi")); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for k, r := range recs {
		waitFor(t, fmt.Sprintf("client %d's receipts", k), func() bool { return r.pending() == sends })
	}
	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	if st := buf[:runtime.Stack(buf, true)]; bytes.Contains(st, []byte("runq.(*Q[...]).loop")) {
		t.Fatalf("an event goroutine outlived Close:\n%s", st)
	}
}
