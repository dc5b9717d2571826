package outlog

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Under SyncInterval and a steady load (the writer never finds its queue empty after a round:
// each append's answer queues the next, as callers answering one another do), every tick of
// the interval still syncs, at the end of the round in flight: Durable reaches what was written
// before the tick within one round or two, not at the next pause of the load or Sync (review17
// L3: the tick was read only between bursts). The tick is the test's, so the machine's speed
// does not matter.
func TestIntervalSyncUnderSteadyLoad(t *testing.T) {
	ticks := make(chan time.Time, 1)
	orig := newTicker
	newTicker = func(time.Duration) (<-chan time.Time, func()) { return ticks, func() {} }
	t.Cleanup(func() { newTicker = orig })
	l, _ := open(t, t.TempDir(), Options{Sync: SyncInterval})
	const size = 200
	frame := Pos(frameSize(size, 0))
	var stop atomic.Bool
	var rounds atomic.Int64
	failed := make(chan error, 1)
	var next func(Pos, error)
	next = func(_ Pos, err error) {
		if err != nil {
			select {
			case failed <- err:
			default:
			}
			return
		}
		if n := rounds.Add(1); !stop.Load() {
			l.AppendAsync(record(int(n), size), next)
		}
	}
	l.AppendAsync(record(0, size), next)
	t.Cleanup(func() { stop.Store(true) }) // before the log's Close (cleanups run last first)
	wait := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			select {
			case err := <-failed:
				t.Fatalf("an append failed: %v", err)
			default:
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: not in 10 s (durable %v, written %v, %d rounds)", what, l.Durable(), l.Written(), rounds.Load())
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
	for k := range 5 {
		r := rounds.Load()
		wait("the load going on", func() bool { return rounds.Load() > r+2 })
		// Written read on both sides of the tick's send: the writer may finish rounds between
		// the two statements (review18 O1); the sync must cover what was written before the
		// send and come within two rounds of what was written once it was sent.
		w0 := l.Written()
		ticks <- time.Time{}
		w1 := l.Written()
		wait(fmt.Sprintf("tick %d's sync", k+1), func() bool { return l.Durable() >= w0 })
		if d := l.Durable(); d > w1+2*frame {
			t.Fatalf("tick %d synced at %v, more than two rounds after %v", k+1, d, w1)
		}
	}
	if r := rounds.Load(); r < 15 {
		t.Fatalf("%d rounds: the load was not steady", r)
	}
}

// A write that fails (a full disk) cuts the records queued behind it; the slot writes queued
// with them are answered with its error and dropped, not written next round (review17 L4): an
// outcome's slot (AppendSlotted) whose record was cut stays empty and its caller is told the
// failure, and a slot of the cut record itself (WriteSlot) is refused with it too.
func TestRewindFailsTheSlotsOfCutRecords(t *testing.T) {
	dir := t.TempDir()
	l, _ := open(t, dir, Options{})
	acc := record(1, 300)
	ap := queueSlots(t, l, acc, 3)
	type answer struct {
		pos Pos
		err error
	}
	slotted := make(chan answer, 1)
	slot := make(chan error, 1)
	lost := l.End() // where the failing round's record goes
	payload := make([]byte, SlotPayload)
	payload[0] = 'x'
	failing := true
	pwrite = func(f *os.File, b []byte, off int64) (int, error) {
		if !failing {
			return f.WriteAt(b, off)
		}
		failing = false
		// While the round writes, behind it: an outcome and its slot in the accept, and a slot
		// of the record being written.
		l.AppendSlotted(record(3, 90), ap, 1, func(_ Pos, dst []byte) { copy(dst, payload) },
			func(p Pos, err error) { slotted <- answer{p, err} })
		l.WriteSlot(lost, 0, payload, func(err error) { slot <- err })
		n, _ := f.WriteAt(b[:len(b)/2], off)
		return n, syscall.ENOSPC
	}
	t.Cleanup(func() { pwrite = (*os.File).WriteAt })
	tk, err := l.QueueWithSlots(record(2, 500), 2)
	if err != nil {
		t.Fatal(err)
	}
	if tk.Pos != lost {
		t.Fatalf("queued at %v, want %v", tk.Pos, lost)
	}
	if err := tk.Wait(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("append on a full disk: %v", err)
	}
	if a := <-slotted; !errors.Is(a.err, syscall.ENOSPC) {
		t.Fatalf("the outcome whose record was cut: %v at %v, want the full disk's error", a.err, a.pos)
	}
	if err := <-slot; !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("the slot of the cut record: %v, want the full disk's error", err)
	}
	// The log goes on at the cut, and a round after it writes no slot of the cut outcome.
	p, err := l.Append(record(4, 100))
	if err != nil || p != lost {
		t.Fatalf("append after the failed write: %v at %v, want %v", err, p, lost)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}
	wantSlots(t, l, ap, acc, nil, nil, nil)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	l2, _ := open(t, dir, Options{})
	wantSlots(t, l2, ap, acc, nil, nil, nil)
	mustRead(t, l2, lost, record(4, 100))
}
