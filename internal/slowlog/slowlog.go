// Package slowlog is what the gateway's slow-path reports share (persist's slow commits,
// httpapi's slow sends; bench/README.md, issue 32's fourteenth and fifteenth passes): the rule
// that keeps their lines few, Go's GC pauses over a span, and the machine's load and pressure.
// Standard library only.
package slowlog

import (
	"os"
	"runtime/debug"
	"strings"
	"time"
)

// Every is the least time between two lines of one report, unless a slow event lasted twice
// as long as the longest logged in that time (Gate).
const Every = 10 * time.Second

// Gate decides which slow events of a report are logged: one line every Every at most, unless
// an event lasted twice as long as the longest logged since that line began its window (a long
// stall never hides behind a short one, and each extra line in a window doubles: a handful at
// most). The events not logged are counted for the next line. Not safe for concurrent use: the
// report holds its lock.
type Gate struct {
	lastLog  time.Time     // when the window began: its first line
	longest  time.Duration // the longest event logged in that window
	unlogged int           // events since the last line, not logged
}

// Allow says whether an event of length d seen at now is logged; when it is, unlogged is how
// many were not since the last line (then reset).
func (g *Gate) Allow(now time.Time, d time.Duration) (ok bool, unlogged int) {
	switch {
	case g.lastLog.IsZero() || now.Sub(g.lastLog) >= Every:
		g.lastLog, g.longest = now, d
	case d >= 2*g.longest:
		g.longest = d
	default:
		g.unlogged++
		return false, 0
	}
	unlogged, g.unlogged = g.unlogged, 0
	return true, unlogged
}

// GCPauses counts Go's stop-the-world pauses that ended between from and to (of the last 256
// the runtime keeps), their total and the longest.
func GCPauses(from, to time.Time) (n int, total, longest time.Duration) {
	var st debug.GCStats
	debug.ReadGCStats(&st)
	for i, end := range st.PauseEnd {
		if end.Before(from) {
			break // newest first
		}
		if end.After(to) || i >= len(st.Pause) {
			continue
		}
		n++
		total += st.Pause[i]
		longest = max(longest, st.Pause[i])
	}
	return n, total, longest
}

// Machine reads the load average and the CPU and I/O pressure (PSI, the last 10 s' share of
// time some or all tasks waited) as log fields: load1, cpu_some10, io_some10, io_full10 (Linux;
// absent elsewhere). A slow event with the machine waiting on I/O or on a core is not the
// gateway's alone.
func Machine() []any {
	var out []any
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			out = append(out, "load1", f[0])
		}
	}
	for _, p := range []struct{ file, some, full string }{{"/proc/pressure/cpu", "cpu_some10", ""}, {"/proc/pressure/io", "io_some10", "io_full10"}} {
		b, err := os.ReadFile(p.file)
		if err != nil {
			continue
		}
		for line := range strings.SplitSeq(string(b), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || !strings.HasPrefix(f[1], "avg10=") {
				continue
			}
			v := strings.TrimPrefix(f[1], "avg10=")
			switch {
			case f[0] == "some":
				out = append(out, p.some, v)
			case f[0] == "full" && p.full != "":
				out = append(out, p.full, v)
			}
		}
	}
	return out
}

// Ms is d in milliseconds, to a tenth.
func Ms(d time.Duration) float64 {
	return float64(d.Round(100*time.Microsecond)) / float64(time.Millisecond)
}
