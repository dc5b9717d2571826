package outlog

import (
	"os"
	"testing"
	"time"
)

// Stats counts the writer's rounds, what they carried, and the appends that found it idle: an
// append while a round is being written joins the next round and wakes nobody. The writer's
// first write is held in pwrite (the test's), so the rounds are the test's, not the machine's.
func TestStatsCountRoundsAndWakes(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	orig := pwrite
	held := false
	pwrite = func(f *os.File, b []byte, off int64) (int, error) {
		if !held {
			held = true
			close(entered)
			<-release
		}
		return orig(f, b, off)
	}
	t.Cleanup(func() { pwrite = orig })
	l, _ := open(t, t.TempDir(), Options{Sync: SyncInterval})
	if s := l.Stats(); s != (Stats{}) {
		t.Fatalf("a new log's stats %+v, want none", s)
	}
	first := make(chan error, 1)
	go func() { _, err := l.Append(record(0, 100)); first <- err }()
	<-entered // the writer is in its first round's write
	answered := make(chan error, 3)
	for i := 1; i <= 3; i++ {
		l.AppendAsync(record(i, 100), func(_ Pos, err error) { answered <- err })
	}
	close(release)
	for range 4 {
		var err error
		select {
		case err = <-first:
		case err = <-answered:
		case <-time.After(10 * time.Second):
			t.Fatal("appends not answered")
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		l.mu.Lock()
		idle := !l.busy
		l.mu.Unlock()
		if idle {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer never went idle")
		}
		time.Sleep(time.Millisecond)
	}
	if s, want := l.Stats(), (Stats{Rounds: 2, Carried: 4, Wakes: 1}); s != want {
		t.Fatalf("stats %+v, want %+v (the three appends made during the first write share the second round and wake nobody)", s, want)
	}
	// An append to the idle writer wakes it, and is a round of its own.
	if _, err := l.Append(record(4, 100)); err != nil {
		t.Fatal(err)
	}
	if s := l.Stats(); s.Rounds != 3 || s.Carried != 5 || s.Wakes != 2 {
		t.Fatalf("after an append to the idle writer: %+v, want 3 rounds, 5 carried, 2 wakes", s)
	}
}
