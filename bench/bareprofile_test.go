package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// The bare server's profile path gives its CPU profile over the seconds asked for, taken while
// it answers the load (as the harness's bare profile window does), and refuses a bad length.
func TestBareProfileUnderLoad(t *testing.T) {
	addr := serveBare(t, "/x", 200, `{"ok":true}`)
	b := &bareProc{addr: addr, api: newAPIClient(addr)}
	defer b.api.close()
	if st, body, err := b.api.do("GET", bareProfilePath+"?seconds=0", nil, nil); err != nil || st != 400 || !strings.Contains(string(body), "seconds must be 1 to") {
		t.Fatalf("seconds=0 answered %d %s %v, want 400", st, body, err)
	}
	type fetched struct {
		raw []byte
		err error
	}
	got := make(chan fetched, 1)
	l := load{addr: addr, conns: 4, duration: time.Second, timeout: 5 * time.Second}
	l.onWindow = func(start bool) {
		if start {
			go func() {
				raw, err := b.profile(l.duration)
				got <- fetched{raw, err}
			}()
		}
	}
	s := measure(context.Background(), l, getTarget("/x"))
	if s.Requests == 0 || s.Errors != 0 {
		t.Fatalf("requests %d errors %d: want answers and no errors", s.Requests, s.Errors)
	}
	f := <-got
	if f.err != nil {
		t.Fatal(f.err)
	}
	p, err := profile.ParseData(f.raw)
	if err != nil {
		t.Fatalf("not a profile: %v", err)
	}
	if p.DurationNanos < int64(900*time.Millisecond) || len(p.Sample) == 0 {
		t.Fatalf("profile of %v with %d samples: want about a second of the server's work", time.Duration(p.DurationNanos), len(p.Sample))
	}
	handled := false
	for _, s := range p.Sample {
		for _, loc := range s.Location {
			for _, ln := range loc.Line {
				handled = handled || strings.HasSuffix(ln.Function.Name, "fasthttp.(*Server).serveConn")
			}
		}
	}
	if !handled {
		t.Fatal("no sample of the server serving connections: the profile did not cover the load")
	}
}
