package mark

import (
	"testing"
	"time"
)

func TestBlock(t *testing.T) {
	for _, c := range []struct{ limit, div, most, want int64 }{
		{0, 100, 100, 100}, // no limit: the largest block
		{300, 100, 100, 3}, // a 300-a-day key: 1 %
		{50, 100, 100, 1},  // never under 1
		{1_000_000, 100, 100, 100},
		{500, 500, 1000, 1}, // a 500-message month: 0.2 %
		{100_000, 500, 1000, 200},
	} {
		if got := Block(c.limit, c.div, c.most); got != c.want {
			t.Errorf("Block(%d, %d, %d) = %d, want %d", c.limit, c.div, c.most, got, c.want)
		}
	}
}

// TestWriteNeverWaitsBehindAnother: a write that does not return (a stalled store) holds up
// no other write, and the writer a finished write leaves takes the next one.
func TestWriteNeverWaitsBehindAnother(t *testing.T) {
	stalled, release := make(chan struct{}), make(chan struct{})
	runWrite(func() { close(stalled); <-release })
	<-stalled
	for i := range 3 {
		done := make(chan struct{})
		runWrite(func() { close(done) })
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("write %d waited behind the stalled one", i)
		}
	}
	close(release)
	done := make(chan struct{})
	runWrite(func() { close(done) })
	<-done
}
