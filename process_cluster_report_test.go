//go:build cluster

package main

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
)

// ctT is the cluster test's *testing.T that also keeps a one-line summary of every failed
// check, printed again after everything else (the processes' logs included) when the test
// fails: a CI log's tail says why.
type ctT struct {
	*testing.T
	mu    sync.Mutex
	fails []string
}

// newCtT wraps t; call it before anything else registers a cleanup, so the summary comes last.
func newCtT(t *testing.T) *ctT {
	c := &ctT{T: t}
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		if len(c.fails) == 0 {
			c.fails = []string{"(failed outside the test's own checks: see above)"}
		}
		t.Logf("FAILED CHECKS (%d):\n  %s", len(c.fails), strings.Join(c.fails, "\n  "))
	})
	return c
}

func (c *ctT) note(msg string) {
	if i := strings.IndexByte(msg, '\n'); i >= 0 {
		msg = msg[:i] + " …"
	}
	if len(msg) > 300 {
		msg = msg[:300] + " …"
	}
	c.mu.Lock()
	c.fails = append(c.fails, msg)
	c.mu.Unlock()
}

func (c *ctT) Errorf(format string, args ...any) {
	c.Helper()
	c.note(fmt.Sprintf(format, args...))
	c.T.Errorf(format, args...)
}

func (c *ctT) Error(args ...any) {
	c.Helper()
	c.note(fmt.Sprint(args...))
	c.T.Error(args...)
}

func (c *ctT) Fatalf(format string, args ...any) {
	c.Helper()
	c.note(fmt.Sprintf(format, args...))
	c.T.Fatalf(format, args...)
}

func (c *ctT) Fatal(args ...any) {
	c.Helper()
	c.note(fmt.Sprint(args...))
	c.T.Fatal(args...)
}

// logDigest is what a failure prints of a process's log: its errors (at most 30), then its
// last lines, or its panic and the first stack when it crashed.
func logDigest(path string) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	var errs []string
	for _, l := range lines {
		if (strings.Contains(l, `"level":"ERROR"`) || strings.Contains(l, "level=ERROR")) && len(errs) < 30 {
			errs = append(errs, l)
		}
	}
	end := lines[max(0, len(lines)-8):]
	for i, l := range lines {
		if strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "fatal error:") {
			end = lines[i:min(len(lines), i+40)]
			break
		}
	}
	return fmt.Sprintf("errors:\n%s\nend:\n%s", strings.Join(errs, "\n"), strings.Join(end, "\n"))
}
