//go:build race

package engine

// raceEnabled: the race detector slows every goroutine several times over.
const raceEnabled = true
