package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/google/pprof/profile"
)

// windowProfile measures the gateway's CPU over one window: its process's CPU time (/proc),
// the messages the network took (gateway_messages_sent_total), its storage writes, and, unless
// counting, a CPU profile (the gateway's --pprof) for the split by component. The profiler's
// signals cost the gateway CPU that bare's and wrk's windows do not pay, so the harness takes
// the profile in a window of its own, before the measured one, which only counts.
type windowProfile struct {
	g        *gatewayProc
	duration time.Duration
	// perRequest: a case that sends no message (validate): CPU per answered request.
	perRequest bool
	// counting: no profile is taken (the measured window's /proc figures only).
	counting bool

	mu                sync.Mutex
	at                [2]time.Time
	cpu               [2]float64
	sent, writes, wb  [2]float64
	profile           chan []byte
	profileErr        error
	started, finished bool
}

// mark is called by measure when the window starts and when it ends.
func (p *windowProfile) mark(start bool) {
	i := 1
	if start {
		i = 0
	}
	cpu, _ := procCPU(p.g.cmd.Process.Pid)
	m, _ := scrapeCounters(p.g.api, "gateway_messages_sent_total", "gateway_storage_writes_total", "gateway_storage_write_bytes_total")
	p.mu.Lock()
	p.at[i], p.cpu[i] = time.Now(), cpu
	p.sent[i], p.writes[i], p.wb[i] = m[0], m[1], m[2]
	if start {
		p.started = true
	} else {
		p.finished = true
	}
	p.mu.Unlock()
	if start && !p.counting {
		// A channel per window: a fetch of an earlier window still running writes to its own.
		ch := make(chan []byte, 1)
		p.mu.Lock()
		p.profile = ch
		p.mu.Unlock()
		go p.fetch(ch)
	}
}

// fetch takes a CPU profile of the window from the gateway's pprof endpoint.
func (p *windowProfile) fetch(out chan<- []byte) {
	secs := max(1, int(p.duration.Round(time.Second)/time.Second))
	c := &http.Client{Timeout: p.duration + 30*time.Second}
	res, err := c.Get("http://" + p.g.pprof + "/debug/pprof/profile?seconds=" + strconv.Itoa(secs))
	var body []byte
	if err == nil {
		body, err = io.ReadAll(res.Body)
		res.Body.Close()
		if err == nil && res.StatusCode != 200 {
			err = fmt.Errorf("pprof answered %d: %.200s", res.StatusCode, body)
		}
	}
	if err != nil {
		p.mu.Lock()
		p.profileErr = err
		p.mu.Unlock()
		body = nil
	}
	out <- body
}

// finish computes the figures once the window is over: accepted is the 2xx answers in it; the
// profile is kept at path.
func (p *windowProfile) finish(accepted int64, path string) (*cpuFigures, error) {
	p.mu.Lock()
	ok, window := p.started && p.finished, p.profile
	p.mu.Unlock()
	if !ok {
		return nil, errors.New("the window was not marked")
	}
	var raw []byte
	if !p.counting {
		raw = <-window
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	c := &cpuFigures{
		WindowSeconds: p.at[1].Sub(p.at[0]).Seconds(), CPUSeconds: p.cpu[1] - p.cpu[0],
		Accepted: accepted, Sent: int64(p.sent[1] - p.sent[0]),
	}
	msgs := float64(min(c.Accepted, c.Sent))
	if p.perRequest {
		msgs = float64(c.Accepted)
	}
	if msgs <= 0 {
		return c, fmt.Errorf("%d accepted and %d sent in the window", c.Accepted, c.Sent)
	}
	c.PerMessageUS = c.CPUSeconds / msgs * 1e6
	c.Writes = (p.writes[1] - p.writes[0]) / msgs
	c.WriteBytes = (p.wb[1] - p.wb[0]) / msgs
	c.GatewayUS = c.PerMessageUS
	if p.counting {
		return c, nil
	}
	if raw == nil {
		return c, fmt.Errorf("profile: %v", p.profileErr)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return c, err
	}
	if err := os.WriteFile(path, raw, 0o644); err != nil {
		return c, err
	}
	c.Profile = filepath.Base(path)
	prof, err := profile.ParseData(raw)
	if err != nil {
		return c, fmt.Errorf("profile: %w", err)
	}
	c.Components = components(prof)
	c.split()
	return c, nil
}

// split lays the CPU per message over the components (their shares of a profile), the sim's
// apart.
func (c *cpuFigures) split() {
	c.Components = withPerMessage(c.Components, c.PerMessageUS)
	c.SimUS = 0
	for _, comp := range c.Components {
		if comp.Sim {
			c.SimUS += comp.MicrosPerMsg
		}
	}
	c.GatewayUS = c.PerMessageUS - c.SimUS
}
