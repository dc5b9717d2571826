package network

import (
	"context"
	"math/rand/v2"
	"time"
)

// DefaultBootWindow is the window over which linked sessions reconnect after a restart when
// the gateway is not told otherwise: hundreds of devices logging in from one address in the
// same second looks like a bot farm, and a restart should not look different from a day.
const DefaultBootWindow = 2 * time.Minute

// StaggerDelay is when the i-th of n connects (0-based) should start, counted from boot: the
// window is cut into n equal slots and each connect starts at a random point of its own slot
// (rnd is in [0, 1)). So the connects are spread evenly over the window, never two in one
// slot, and their spacing is not regular. n <= 1 or window <= 0: start at once.
func StaggerDelay(i, n int, window time.Duration, rnd float64) time.Duration {
	if n <= 1 || window <= 0 || i < 0 {
		return 0
	}
	if i >= n {
		i = n - 1
	}
	slot := window / time.Duration(n)
	return time.Duration(i)*slot + time.Duration(rnd*float64(slot))
}

// Stagger returns the start delays of n connects spread over window (StaggerDelay for each i,
// with math/rand/v2 jitter).
func Stagger(n int, window time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = StaggerDelay(i, n, window, rand.Float64())
	}
	return out
}

// ConnectStaggered connects clients spread over window (see StaggerDelay), each Connect on its
// own goroutine at its time, and returns when every Connect has returned or ctx ends (the
// ones not started by then are skipped). onErr, if not nil, hears each Connect error. The core
// may call it in a goroutine at boot with the clients of its linked sessions, or schedule
// StaggerDelay itself per session actor.
func ConnectStaggered(ctx context.Context, clients []Client, window time.Duration, onErr func(i int, err error)) {
	delays := Stagger(len(clients), window)
	done := make(chan struct{}, len(clients))
	started := 0
	start := time.Now()
	for i, c := range clients {
		wait := time.Until(start.Add(delays[i]))
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
			}
		}
		if ctx.Err() != nil {
			break
		}
		started++
		go func() {
			if err := c.Connect(ctx); err != nil && onErr != nil {
				onErr(i, err)
			}
			done <- struct{}{}
		}()
	}
	for range started {
		<-done
	}
}
