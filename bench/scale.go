package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// scaleReport is a `bench scale` run, as written to bench/results/<date>-scale.json.
type scaleReport struct {
	Started            time.Time      `json:"started"`
	Finished           time.Time      `json:"finished"`
	Command            string         `json:"command"`
	Gateway            string         `json:"gateway_version"`
	Machine            machine        `json:"machine"`
	Config             map[string]any `json:"config"`
	Sessions           int            `json:"sessions"`
	ProvisionSeconds   float64        `json:"provision_seconds"`
	Baseline           procMetrics    `json:"baseline"`    // booted, empty
	Linked             procMetrics    `json:"linked"`      // every session linked
	PerSession         procMetrics    `json:"per_session"` // (linked - baseline) / sessions
	Campaigns          *campaignScale `json:"campaigns,omitempty"`
	StopSeconds        float64        `json:"stop_seconds"`      // SIGTERM to exit
	BootSeconds        float64        `json:"boot_seconds"`      // start to /readyz, everything persisted
	ReconnectSeconds   float64        `json:"reconnect_seconds"` // /readyz to every session CONNECTED
	ConnectedAfterBoot int            `json:"connected_after_boot"`
	AfterBoot          procMetrics    `json:"after_boot"`
	Failures           []string       `json:"failures,omitempty"`
	OK                 bool           `json:"ok"`
}

// campaignScale is the campaign half of the scale item: running campaigns held in one
// process. It is measured once POST /api/v1/messages/send-bulk with "async": true is served;
// until then Skipped says why.
type campaignScale struct {
	Requested         int            `json:"requested"`
	Skipped           string         `json:"skipped,omitempty"`
	Started           int            `json:"started"`
	CreateSeconds     float64        `json:"create_seconds"`
	Before            procMetrics    `json:"before"` // after the keys that start them were made
	After             procMetrics    `json:"after"`
	PerCampaign       procMetrics    `json:"per_campaign"`
	RunningBeforeStop campaignSample `json:"running_before_stop"`
	RunningAfterBoot  campaignSample `json:"running_after_boot"`
	ids               []string
	key               map[string]string // campaign id → the raw key that started it
}

func (r *scaleReport) fail(msg string) {
	r.Failures = append(r.Failures, msg)
	r.OK = false
}

// runScale is `bench scale`: N users each with a session linked through the sim (the gateway
// runs --sim-autopair 1ms, so GET /api/client/qr is enough), memory and goroutines before and
// after, then running campaigns (the hook: measured once the route is served), then a graceful
// stop and a timed boot with everything persisted.
func runScale(ctx context.Context, o scaleOptions, out io.Writer) error {
	work, cleanup, err := workDir(o.gateway, "gateway-scale-", o.keep, out)
	if err != nil {
		return err
	}
	defer cleanup()
	rep := &scaleReport{Started: time.Now().UTC(), Command: o.command, Gateway: gatewayVersion(o.gateway), Machine: thisMachine(),
		Sessions: o.sessions, OK: true, Config: map[string]any{"sessions": o.sessions, "campaigns": o.campaigns, "fsync": o.fsync, "gogc": o.gogc}}
	err = scale(ctx, o, work, rep, out)
	if err != nil {
		rep.fail(err.Error())
	}
	rep.Finished = time.Now().UTC()
	fmt.Fprintln(out)
	printScale(out, rep)
	if o.results != "" {
		path, err := writeJSONFile(o.results, rep.Started, "-scale", rep)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "results: %s\n", path)
	}
	if o.readme != "" {
		var b strings.Builder
		fmt.Fprintf(&b, "Run %s UTC, gateway `%s`, on %s; Go %s.\n\nCommand: `%s`\n\n```\n", rep.Started.Format("2006-01-02 15:04"),
			rep.Gateway, rep.Machine, rep.Machine.Go, strings.TrimSpace(rep.Command))
		printScale(&b, rep)
		fmt.Fprintf(&b, "```\n\nFull results: `bench/results/%s`\n", filepath.Base(resultsPath("", rep.Started, "-scale")))
		if err := replaceBlock(o.readme, readmeScaleBegin, readmeScaleEnd, b.String()); err != nil {
			return err
		}
		fmt.Fprintf(out, "figures updated in %s\n", o.readme)
	}
	if !rep.OK {
		return errFailed
	}
	return nil
}

func scale(ctx context.Context, o scaleOptions, work string, rep *scaleReport, out io.Writer) error {
	spec := gatewaySpec{bin: o.gateway, data: dataDir(work, "gateway"), log: dataDir(work, "gateway.log"),
		fsync: o.fsync, extra: []string{"--sim-autopair", "1ms"}}
	if o.gogc > 0 {
		spec.env = []string{"GOGC=" + strconv.Itoa(o.gogc)}
	}
	g, boot, err := startGateway(ctx, spec)
	if err != nil {
		return err
	}
	defer func() {
		if g != nil {
			g.kill()
		}
	}()
	fmt.Fprintf(out, "gateway %s ready in %v (GOGC=%d while measuring; 0 = default)\n", rep.Gateway, boot.Round(time.Millisecond), o.gogc)
	if rep.Baseline, err = liveScrape(g.api, 3, 20*time.Second); err != nil {
		return err
	}

	t0 := time.Now()
	fl, err := provision(ctx, g, provisionOptions{users: o.sessions, concurrency: o.concurrency})
	if err != nil {
		return fmt.Errorf("provision: %w (gateway log %s)", err, spec.log)
	}
	rep.ProvisionSeconds = time.Since(t0).Seconds()
	fmt.Fprintf(out, "%d sessions linked in %.1fs\n", o.sessions, rep.ProvisionSeconds)
	if rep.Linked, err = liveScrape(g.api, 3, 20*time.Second); err != nil {
		return err
	}
	rep.PerSession = perItem(rep.Baseline, rep.Linked, o.sessions)

	if o.campaigns > 0 {
		rep.Campaigns = &campaignScale{Requested: o.campaigns}
		if err := startCampaigns(ctx, g, fl, o, rep.Campaigns); err != nil {
			return fmt.Errorf("campaigns: %w", err)
		}
	}

	stop, err := g.stop(5 * time.Minute)
	g = nil
	rep.StopSeconds = stop.Seconds()
	if err != nil {
		return err
	}
	spec.env = nil // boot with the runtime's defaults
	g, boot, err = startGateway(ctx, spec)
	if err != nil {
		return fmt.Errorf("restart: %w", err)
	}
	rep.BootSeconds = boot.Seconds()
	fmt.Fprintf(out, "restarted: stop %.2fs, boot to /readyz %.2fs\n", rep.StopSeconds, rep.BootSeconds)
	t1 := time.Now()
	if rep.ConnectedAfterBoot, err = waitAllConnected(ctx, g, o.sessions, 5*time.Minute); err != nil {
		return err
	}
	rep.ReconnectSeconds = time.Since(t1).Seconds()
	// At the default GOGC a collection needs far more scraping than this; the figure is then
	// marked as including garbage.
	if rep.AfterBoot, err = liveScrape(g.api, 1, 5*time.Second); err != nil {
		return err
	}
	if c := rep.Campaigns; c != nil && c.Skipped == "" {
		c.RunningAfterBoot = sampleCampaigns(g, c)
		if c.RunningAfterBoot.Running < c.RunningAfterBoot.Sampled {
			rep.fail("campaigns after reboot: " + c.RunningAfterBoot.String())
		}
	}
	if _, err := g.stop(5 * time.Minute); err != nil {
		return err
	}
	g = nil
	return nil
}

// waitAllConnected polls the internal GET /api/admin/sessions (public from loopback) until n
// sessions are CONNECTED.
func waitAllConnected(ctx context.Context, g *gatewayProc, n int, total time.Duration) (int, error) {
	deadline := time.Now().Add(total)
	for {
		st, body, err := g.api.do("GET", "/api/admin/sessions", nil, nil)
		if err := want2xx("GET /api/admin/sessions", st, body, err); err != nil {
			return 0, err
		}
		var sessions []struct {
			Status string `json:"status"`
		}
		if err := json.Unmarshal(body, &sessions); err != nil {
			return 0, fmt.Errorf("GET /api/admin/sessions: %w", err)
		}
		connected := 0
		for _, s := range sessions {
			if s.Status == "CONNECTED" {
				connected++
			}
		}
		if connected >= n {
			return connected, nil
		}
		if time.Now().After(deadline) {
			return connected, fmt.Errorf("after restart only %d of %d sessions CONNECTED within %v", connected, n, total)
		}
		select {
		case <-ctx.Done():
			return connected, ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startCampaigns is the campaign hook: keys for the users, then campaigns spread over them,
// each an async bulk send of two numbers with an hour between them, so it stays running.
func startCampaigns(ctx context.Context, g *gatewayProc, fl *fleet, o scaleOptions, c *campaignScale) error {
	key0, err := createKey(g.api, fl.adminToken, fl.users[0].id)
	if err != nil {
		return err
	}
	st, body, err := g.api.do("POST", "/api/v1/messages/send-bulk", []header{{"x-api-key", key0}}, []byte(`{}`))
	if err != nil {
		return err
	}
	if routeMissing(st, body) {
		c.Skipped = "POST /api/v1/messages/send-bulk is not served yet (404)"
		return nil
	}
	nkeys := min(len(fl.users), o.campaigns)
	keys := make([]string, nkeys)
	keys[0] = key0
	if err := parallel(ctx, nkeys-1, o.concurrency, func(i int) error {
		k, err := createKey(g.api, fl.adminToken, fl.users[i+1].id)
		keys[i+1] = k
		return err
	}); err != nil {
		return err
	}
	if c.Before, err = liveScrape(g.api, 3, 20*time.Second); err != nil {
		return err
	}
	t0 := time.Now()
	c.ids = make([]string, o.campaigns)
	c.key = map[string]string{}
	var mu sync.Mutex
	err = parallel(ctx, o.campaigns, o.concurrency, func(i int) error {
		key := keys[i%nkeys]
		body := mustJSON(map[string]any{"numbers": []string{fmt.Sprintf("4916%08d", i), fmt.Sprintf("4917%08d", i)},
			"message": message, "delay": 3600, "async": true})
		st, resp, err := g.api.do("POST", "/api/v1/messages/send-bulk", []header{{"x-api-key", key}}, body)
		if err := want2xx("POST /api/v1/messages/send-bulk", st, resp, err); err != nil {
			return err
		}
		var r struct {
			ID string `json:"campaign_id"`
		}
		if err := json.Unmarshal(resp, &r); err != nil || r.ID == "" {
			return fmt.Errorf("POST /api/v1/messages/send-bulk: no campaign_id in %.200s", resp)
		}
		mu.Lock()
		c.ids[i], c.key[r.ID] = r.ID, key
		mu.Unlock()
		return nil
	})
	if err != nil {
		return err
	}
	c.Started = o.campaigns
	c.CreateSeconds = time.Since(t0).Seconds()
	if c.After, err = liveScrape(g.api, 3, 20*time.Second); err != nil {
		return err
	}
	c.PerCampaign = perItem(c.Before, c.After, c.Started)
	c.RunningBeforeStop = sampleCampaigns(g, c)
	if c.RunningBeforeStop.Running < c.RunningBeforeStop.Sampled {
		return fmt.Errorf("campaigns are not running, so their memory is not a running campaign's: %s", c.RunningBeforeStop)
	}
	return nil
}

// campaignSample is how many of a sample of campaigns reported status running.
type campaignSample struct {
	Running    int    `json:"running"`
	Sampled    int    `json:"sampled"`
	NotRunning string `json:"not_running,omitempty"` // the first answer that was not running
}

func (s campaignSample) String() string {
	out := fmt.Sprintf("%d of %d sampled running", s.Running, s.Sampled)
	if s.NotRunning != "" {
		out += "; first not running: " + s.NotRunning
	}
	return out
}

// sampleCampaigns asks about 20 campaigns spread over all of them: each must be running
// (their second number is an hour away), or the memory figures are not about running ones.
func sampleCampaigns(g *gatewayProc, c *campaignScale) campaignSample {
	var s campaignSample
	for i := 0; i < len(c.ids) && s.Sampled < 20; i += max(1, len(c.ids)/20) {
		id := c.ids[i]
		st, body, err := g.api.do("GET", "/api/v1/campaigns/"+id, []header{{"x-api-key", c.key[id]}}, nil)
		s.Sampled++
		var r struct {
			Status string `json:"status"`
		}
		switch {
		case err == nil && st == 200 && json.Unmarshal(body, &r) == nil && r.Status == "running":
			s.Running++
		case s.NotRunning == "" && err != nil:
			s.NotRunning = err.Error()
		case s.NotRunning == "":
			s.NotRunning = fmt.Sprintf("%d %.300s", st, body)
		}
	}
	return s
}

func printScale(w io.Writer, r *scaleReport) {
	kb := func(b float64) string { return fmt.Sprintf("%.1f KB", b/1024) }
	mb := func(b float64) string { return fmt.Sprintf("%.1f MB", b/(1<<20)) }
	fmt.Fprintf(w, "== scale: %d linked sim sessions (gateway %s; %s)\n", r.Sessions, r.Gateway, r.Machine)
	fmt.Fprintf(w, "   %-22s %12s %12s %12s %12s\n", "", "heap alloc", "heap inuse", "RSS", "goroutines")
	marked := false
	row := func(name string, m procMetrics, f func(float64) string, gf string) {
		if !m.AfterGC {
			name += " *"
			marked = true
		}
		fmt.Fprintf(w, "   %-22s %12s %12s %12s %12s\n", name, f(m.HeapAlloc), f(m.HeapInuse), f(m.RSS), fmt.Sprintf(gf, m.Goroutines))
	}
	row("booted, empty", r.Baseline, mb, "%.0f")
	row("all linked", r.Linked, mb, "%.0f")
	row("per session", r.PerSession, kb, "%+.2f")
	if c := r.Campaigns; c != nil {
		if c.Skipped != "" {
			fmt.Fprintf(w, "   campaigns: skipped: %s\n", c.Skipped)
		} else {
			row("before campaigns", c.Before, mb, "%.0f")
			row(fmt.Sprintf("%d campaigns", c.Started), c.After, mb, "%.0f")
			row("per campaign", c.PerCampaign, kb, "%+.2f")
			fmt.Fprintf(w, "   campaigns started in %.1fs; before the stop %s; after reboot %s\n", c.CreateSeconds, c.RunningBeforeStop, c.RunningAfterBoot)
		}
	}
	row("after reboot", r.AfterBoot, mb, "%.0f")
	if r.Sessions > 0 && r.Linked.HeapAlloc > 0 {
		mark := "met"
		if r.PerSession.HeapAlloc >= 20*1024 {
			mark = "NOT met"
		}
		fmt.Fprintf(w, "   target (DESIGN.md section 8): under 20 KB heap per idle session: %s (%s)\n", kb(r.PerSession.HeapAlloc), mark)
	}
	if marked {
		fmt.Fprintln(w, "   * no garbage collection seen while sampling: these heap figures include garbage")
	}
	fmt.Fprintf(w, "   provisioning %.1fs; graceful stop %.2fs; boot to /readyz %.2fs; then all %d CONNECTED in %.2fs\n",
		r.ProvisionSeconds, r.StopSeconds, r.BootSeconds, r.ConnectedAfterBoot, r.ReconnectSeconds)
	for _, f := range r.Failures {
		fmt.Fprintf(w, "FAILED   %s\n", f)
	}
}
