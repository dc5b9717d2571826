package clocktest

import (
	"testing"
	"time"
)

func TestTimersFireInDeadlineOrderWhenTheClockPasses(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := New(start)
	var got []string
	c.AfterFunc(2*time.Second, func() { got = append(got, "b") })
	c.AfterFunc(time.Second, func() {
		got = append(got, "a")
		c.AfterFunc(0, func() { got = append(got, "a-next") })
	})
	stopped := c.AfterFunc(1500*time.Millisecond, func() { got = append(got, "never") })
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop reports pending once")
	}
	c.Advance(999 * time.Millisecond)
	if len(got) != 0 {
		t.Fatalf("fired early: %v", got)
	}
	c.Advance(time.Millisecond)
	if len(got) != 2 || got[0] != "a" || got[1] != "a-next" {
		t.Fatalf("after 1 s: %v", got)
	}
	c.Set(start) // never backwards
	if !c.Now().Equal(start.Add(time.Second)) {
		t.Fatalf("clock moved back to %v", c.Now())
	}
	c.Set(start.Add(time.Hour))
	if len(got) != 3 || got[2] != "b" || c.Pending() != 0 {
		t.Fatalf("after an hour: %v, %d pending", got, c.Pending())
	}
}
