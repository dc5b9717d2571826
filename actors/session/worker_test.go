package session

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gateway/gateway/domain"
	"github.com/gateway/gateway/internal/cputime"
)

// entryTo is an accepted entry from the rig's linked phone (id is also its text).
func (r *rig) entryTo(id, to string) domain.OutboxEntry {
	phone, _ := r.client().Paired()
	e := domain.OutboxEntry{ID: id, UserID: "u1", From: phone, Message: domain.Message{ID: id, To: to, Kind: domain.KindText, Text: id}, CreatedAt: domain.MillisOf(t0)}
	e.SetStatus(domain.MsgQueued, t0)
	return e
}

// A push in the window between the worker's last step and its parking (the wake finds the
// queue still scheduled, so it schedules nothing): the worker sees it and sends the message,
// every time (a worker that parked without looking again left it unsent for good).
func TestWakeWhileParkingIsSeen(t *testing.T) {
	r := newRig(t, "447700900001", domain.Pacing{})
	var pushed atomic.Int32
	hook := func(x *Queue) {
		if x == r.queue {
			if n := pushed.Add(1); n <= 3 {
				r.queue.Push(r.entryTo(fmt.Sprintf("w%d", n), "15550000001"))
			}
		}
	}
	beforePark.Store(&hook)
	t.Cleanup(func() { beforePark.Store(nil) })
	r.queue.Push(r.entryTo("w0", "15550000001"))
	for _, id := range []string{"w0", "w1", "w2", "w3"} {
		if o := r.waitOutcome(id); o.e.Status != domain.MsgSent {
			t.Fatalf("%s: %s %v", id, o.e.Status, o.err)
		}
	}
}

// Pushes race the worker's parking (the queue made ready, run, left parked) from many
// goroutines into many sessions, some through the actor (Enqueue: its own wake), in rounds
// that each end with every session's last push: a lost wake leaves a round's last message
// unsent. Every message is sent once and reported once, each recipient's in the order they
// were pushed, and no session has two sends under way at once. Run under -race.
func TestWakesNeverLost(t *testing.T) {
	const sessions, producers, rounds, per = 8, 4, 150, 3
	rigs := make([]*rig, sessions)
	for i := range rigs {
		rigs[i] = newRig(t, "447700900001", domain.Pacing{})
	}
	for n := range rounds {
		var wg sync.WaitGroup
		for p := range producers {
			wg.Go(func() {
				for i := range per {
					for _, r := range rigs {
						e := r.entryTo(fmt.Sprintf("p%d-%03d-%d", p, n, i), fmt.Sprint("1555000000", p))
						if p == producers-1 {
							r.hw.Send(r.pid, &Enqueue{Entry: e}) // the actor's own wake
						} else {
							r.queue.Push(e)
						}
					}
					runtime.Gosched()
				}
			})
		}
		wg.Wait()
		want := int64((n + 1) * producers * per)
		for k, r := range rigs {
			deadline := time.Now().Add(3 * time.Second)
			for r.out.n.Load() < want {
				if time.Now().After(deadline) {
					t.Fatalf("round %d, session %d: %d outcomes, want %d (a wake lost)", n, k, r.out.n.Load(), want)
				}
				time.Sleep(50 * time.Microsecond)
			}
		}
	}
	for k, r := range rigs {
		r.settle()
		reported := map[string]int{}
		for _, o := range r.out.all() {
			if o.err != nil {
				t.Fatalf("session %d: %s failed: %v", k, o.e.ID, o.err)
			}
			reported[o.e.ID]++
		}
		sent := map[string]int{}
		last := map[string]string{}
		for _, s := range r.client().sent() {
			sent[s.id]++
			if s.id <= last[s.to] {
				t.Fatalf("session %d: %s sent after %s to %s", k, s.id, last[s.to], s.to)
			}
			last[s.to] = s.id
		}
		if len(sent) != rounds*producers*per || len(reported) != rounds*producers*per {
			t.Fatalf("session %d: %d sent, %d reported, want %d", k, len(sent), len(reported), rounds*producers*per)
		}
		for id, c := range sent {
			if c != 1 || reported[id] != 1 {
				t.Fatalf("session %d: %s sent %d times, reported %d times", k, id, c, reported[id])
			}
		}
		if r.client().overlap.Load() {
			t.Fatalf("session %d: two sends under way at once", k)
		}
	}
}

// A burst of accepts, a message to each of 50 sessions, is sent on far fewer goroutine
// wake-ups than messages: the sessions made ready while a send goroutine is on its way wake
// none, and it takes them all (runq.go). A worker goroutine a session was woken once a
// message: more than one run a message. One P, so the burst is pushed before any worker runs.
func TestOneWakeCarriesABurst(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const sessions, rounds = 50, 40
	var outcomes atomic.Int64
	burst := make(chan struct{}, 1)
	rigs := make([]*rig, sessions)
	for i := range rigs {
		r := newRig(t, "447700900001", domain.Pacing{})
		r.client().lean = true
		r.out.countOnly = true
		r.out.at = func(int64) {
			if outcomes.Add(1)%sessions == 0 {
				burst <- struct{}{}
			}
		}
		rigs[i] = r
	}
	round := func(n int) {
		for _, r := range rigs {
			r.queue.Push(r.entryTo(fmt.Sprintf("m%03d", n), "15550000001"))
		}
		select {
		case <-burst:
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: %d outcomes", n, outcomes.Load())
		}
	}
	round(0) // the workers started
	runs0 := cputime.Runs()
	for n := 1; n <= rounds; n++ {
		round(n)
	}
	perMsg := float64(cputime.Runs()-runs0) / (sessions * rounds)
	t.Logf("%.3f goroutine runs a message", perMsg)
	if perMsg > 0.5 {
		t.Fatalf("%.3f goroutine runs a message, want at most 0.5 (a wake-up a burst, not a message)", perMsg)
	}
}

// The send goroutines are shared: a session whose send hangs on the network holds no other
// session's sends.
func TestSlowSendHoldsNoOtherSession(t *testing.T) {
	slow, fast := newRig(t, "447700900001", domain.Pacing{}), newRig(t, "447700900002", domain.Pacing{})
	release, sending := make(chan struct{}), make(chan struct{})
	slow.client().script(func(domain.Message) error {
		close(sending)
		<-release
		return nil
	})
	defer close(release)
	slow.queue.Push(slow.entryTo("s1", "15550000001"))
	<-sending
	for i := range 20 {
		id := fmt.Sprintf("f%02d", i)
		fast.queue.Push(fast.entryTo(id, "15550000002"))
		fast.waitOutcome(id)
	}
	// Two sessions made ready together, before a send goroutine looks (review22: the part
	// above passes with Spread off, a new goroutine starting either way): the one behind the
	// hanging send is sent all the same.
	slow2, fast2 := newRig(t, "447700900003", domain.Pacing{}), newRig(t, "447700900004", domain.Pacing{})
	slow2.client().script(func(domain.Message) error {
		<-release
		return nil
	})
	slow2.queue.Push(slow2.entryTo("s2", "15550000003"))
	fast2.queue.Push(fast2.entryTo("g1", "15550000004"))
	fast2.waitOutcome("g1")
}

// A network client whose send panics (a bug in the adapter or its library): that message
// settles as failed (not sent again: whether the network took it is not known), the session's
// next message and another session's go out, and the process lives (the panic on a send
// goroutine ended it, with every session in it).
func TestSendPanicFailsTheMessageOnly(t *testing.T) {
	r := newRig(t, "447700900001", domain.Pacing{})
	r.client().script(func(m domain.Message) error {
		if m.ID == "p1" {
			panic("the adapter's bug")
		}
		return nil
	})
	other := newRig(t, "447700900002", domain.Pacing{})
	r.queue.Push(r.entryTo("p1", "15550000001"))
	r.queue.Push(r.entryTo("p2", "15550000001"))
	other.queue.Push(other.entryTo("o1", "15550000002"))
	if o := r.waitOutcome("p1"); o.e.Status != domain.MsgFailed || !errors.Is(o.err, errSendPanicked) {
		t.Errorf("the panicked send: %s %v, want failed with errSendPanicked", o.e.Status, o.err)
	}
	if o := r.waitOutcome("p2"); o.e.Status != domain.MsgSent {
		t.Errorf("the session's next message: %s %v", o.e.Status, o.err)
	}
	if o := other.waitOutcome("o1"); o.e.Status != domain.MsgSent {
		t.Errorf("another session's message: %s %v", o.e.Status, o.err)
	}
	if n := len(r.client().sent()); n != 2 {
		t.Errorf("%d sends, want 2 (the panicked one not tried again)", n)
	}
}
