package main

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/google/pprof/profile"
)

// CPU per message by component (DESIGN.md section 8): a CPU profile of the gateway taken while
// a case runs is split by what each sample was doing. A sample belongs to the first component
// one of its frames names, from the leaf up: an allocation, a JSON encoding or a syscall is
// charged to the code that asked for it, a mailbox push to the actors' mailboxes, the work the
// store's writer goroutine does for every caller to the storage writer.

// component is one row of the table.
type component struct {
	Name    string  `json:"name"`
	Seconds float64 `json:"cpu_seconds"` // in the profile
	Share   float64 `json:"share"`       // of the profile's samples
	// MicrosPerMsg is Share × the gateway's CPU per message of the window (set by the caller).
	MicrosPerMsg float64 `json:"us_per_msg,omitempty"`
	Sim          bool    `json:"sim,omitempty"` // the simulated network's own share, shown apart
}

// componentRules map a frame's function name to a component; the first rule that matches a
// frame decides, and frames are tried from the leaf up.
var componentRules = []struct {
	name     string
	anywhere bool
	prefixes []string
}{
	{"sim (the simulated network itself)", false, []string{
		"github.com/gateway/gateway/network/sim.(*deliveries)", "github.com/gateway/gateway/network/sim.(*journal)",
		"github.com/gateway/gateway/network/sim.(*client).drain", "github.com/gateway/gateway/network/sim.(*client).emit",
		"github.com/gateway/gateway/network/sim.(*Network)"}},
	{"network adapter", false, []string{"github.com/gateway/gateway/network/"}},
	{"access log", true, []string{"github.com/gateway/gateway/httpapi.(*accessLog)"}},
	{"access log", false, []string{"github.com/gateway/gateway/httpapi.(*accessLog)"}},
	{"events (publish, webhooks out)", false, []string{
		"github.com/gateway/gateway/engine.(*publisher)", "github.com/gateway/gateway/engine.(*Events)",
		"github.com/gateway/gateway/engine.messageEvent", "github.com/gateway/gateway/actors/webhook."}},
	{"outcome write (outcomes, receipts)", true, []string{"github.com/gateway/gateway/persist.(*OutcomeWriter)"}},
	{"outcome write (outcomes, receipts)", false, []string{
		"github.com/gateway/gateway/persist.(*Outbox).prepareBatch", "github.com/gateway/gateway/persist.(*Outbox).Settle", "github.com/gateway/gateway/persist.(*Outbox).Receipt",
		"github.com/gateway/gateway/persist.(*LogOutbox).Settle", "github.com/gateway/gateway/persist.(*LogOutbox).Receipt",
		"github.com/gateway/gateway/engine.(*messages).Outcome", "github.com/gateway/gateway/engine.(*messages).Receipt",
		"github.com/gateway/gateway/engine.(*messages).receiptOf"}},
	{"store events (parse, render, inbox)", false, []string{
		"github.com/gateway/gateway/ecom.", "github.com/gateway/gateway/actors/storeevents.",
		"github.com/gateway/gateway/persist.(*Inbox)", "github.com/gateway/gateway/engine.(*Stores)",
		"github.com/gateway/gateway/engine.(*storeEntry)", "github.com/gateway/gateway/engine.storeSender"}},
	{"key and allowance", false, []string{
		"github.com/gateway/gateway/actors/key.", "github.com/gateway/gateway/actors/account.",
		"github.com/gateway/gateway/actors/internal/", "github.com/gateway/gateway/engine.(*Keys)",
		"github.com/gateway/gateway/engine.(*Messages).reserve", "github.com/gateway/gateway/engine.(*Reservation)",
		"github.com/gateway/gateway/engine.(*accountEntry)", "github.com/gateway/gateway/engine.(*keyEntry)",
		"github.com/gateway/gateway/persist.Accounts", "github.com/gateway/gateway/persist.(*Store)"}},
	{"accept commit", false, []string{
		"github.com/gateway/gateway/persist.(*Outbox).Accept", "github.com/gateway/gateway/persist.(*Outbox).AcceptMany",
		"github.com/gateway/gateway/persist.(*LogOutbox).Accept", "github.com/gateway/gateway/persist.(*LogOutbox).AcceptMany",
		"github.com/gateway/gateway/engine.(*Messages).Send", "github.com/gateway/gateway/engine.(*Messages).SendGroups",
		"github.com/gateway/gateway/engine.queuedEntry"}},
	{"deliverer (session actors)", false, []string{
		"github.com/gateway/gateway/actors/session.", "github.com/gateway/gateway/engine.(*Messages).enqueue",
		"github.com/gateway/gateway/engine.(*messages).track"}},
	{"actor mailboxes (hollywood)", false, []string{"github.com/anthdm/hollywood/"}},
	{"storage background (flushes, compactions, sync)", true, []string{
		"github.com/dgraph-io/badger/v4.(*DB).flushMemtable", "github.com/dgraph-io/badger/v4.(*DB).handleMemTableFlush",
		"github.com/dgraph-io/badger/v4.(*levelsController)", "github.com/dgraph-io/badger/v4.(*valueLog)",
		"github.com/dgraph-io/badger/v4.(*DB).Sync", "github.com/gateway/gateway/persist.(*Badger).syncLoop",
		"github.com/gateway/gateway/persist.(*Badger).gcLoop", "github.com/gateway/gateway/persist.(*diskGuard)",
		"github.com/dgraph-io/ristretto/"}},
	{"storage writer (group commits of every caller)", false, []string{
		"github.com/dgraph-io/badger/v4.", "github.com/gateway/gateway/persist.(*Badger).write",
		"github.com/gateway/gateway/persist.(*Badger).commitGroup", "github.com/gateway/gateway/persist.stage",
		"github.com/gateway/gateway/persist/outlog.", // --outbox log: its writer and its callers' queueing
		"github.com/gateway/gateway/persist/natskv.", "github.com/nats-io/"}},
	{"HTTP (fasthttp, routing, handlers, JSON)", false, []string{
		"github.com/gateway/gateway/httpapi.", "github.com/valyala/fasthttp", "github.com/fasthttp/router"}},
	{"runtime: garbage collection", true, []string{"runtime.gcBgMarkWorker", "runtime.bgsweep", "runtime.bgscavenge", "runtime.gcMarkDone", "runtime.forEachP"}},
}

const (
	otherComponent = "other (scheduler, idle work, unattributed)"
	otherGateway   = "other gateway code"
)

// components splits a CPU profile's samples by component, largest first, the sim's share last.
func components(p *profile.Profile) []component {
	vi := len(p.SampleType) - 1 // cpu nanoseconds
	for i, st := range p.SampleType {
		if st.Type == "cpu" {
			vi = i
		}
	}
	sums := map[string]float64{}
	var total float64
	for _, s := range p.Sample {
		v := float64(s.Value[vi]) / 1e9
		total += v
		sums[classify(s)] += v
	}
	var out []component
	for name, sec := range sums {
		c := component{Name: name, Seconds: sec, Sim: strings.HasPrefix(name, "sim ")}
		if total > 0 {
			c.Share = sec / total
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b component) int {
		switch {
		case a.Sim != b.Sim:
			if a.Sim {
				return 1
			}
			return -1
		case a.Seconds > b.Seconds:
			return -1
		case a.Seconds < b.Seconds:
			return 1
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}

// classify names the component of one sample: a rule marked anywhere (a goroutine of its own:
// background storage work, the outcome writer, the collector) wins wherever its frame is;
// otherwise the frame nearest the leaf that a rule names decides.
func classify(s *profile.Sample) string {
	name, _ := classifyFrame(s)
	return name
}

func classifyFrame(s *profile.Sample) (string, string) {
	for _, r := range componentRules {
		if !r.anywhere {
			continue
		}
		for _, loc := range s.Location {
			for _, ln := range loc.Line {
				if ln.Function != nil && hasAnyPrefix(ln.Function.Name, r.prefixes) {
					return r.name, ln.Function.Name
				}
			}
		}
	}
	for _, loc := range s.Location {
		// A location's lines are innermost first (inlined calls).
		for _, ln := range loc.Line {
			if ln.Function == nil {
				continue
			}
			name := ln.Function.Name
			for _, r := range componentRules {
				if !r.anywhere && hasAnyPrefix(name, r.prefixes) {
					return r.name, name
				}
			}
		}
	}
	// Gateway code no rule names (a helper shared by several parts).
	for _, loc := range s.Location {
		for _, ln := range loc.Line {
			if ln.Function != nil && strings.HasPrefix(ln.Function.Name, "github.com/gateway/gateway/") {
				return otherGateway, ln.Function.Name
			}
		}
	}
	return otherComponent, ""
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}

// readComponents parses a CPU profile file.
func readComponents(path string) ([]component, float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, 0, err
	}
	defer f.Close()
	p, err := profile.Parse(f)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	cs := components(p)
	var total float64
	for _, c := range cs {
		total += c.Seconds
	}
	return cs, total, nil
}

// withPerMessage sets each component's µs per message from the process's CPU per message
// (the sim included: its row is its own share of it).
func withPerMessage(cs []component, perMsgUS float64) []component {
	out := slices.Clone(cs)
	for i := range out {
		out[i].MicrosPerMsg = out[i].Share * perMsgUS
	}
	return out
}

// printComponents writes the table; the sim's row is set apart.
func printComponents(w io.Writer, cs []component, indent string) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "%scomponent\tshare\tµs/msg\t\n", indent)
	var gw, sim float64
	for _, c := range cs {
		if c.Sim {
			continue
		}
		gw += c.MicrosPerMsg
		fmt.Fprintf(tw, "%s%s\t%.1f%%\t%.1f\t\n", indent, c.Name, c.Share*100, c.MicrosPerMsg)
	}
	fmt.Fprintf(tw, "%sgateway (without the sim)\t\t%.1f\t\n", indent, gw)
	for _, c := range cs {
		if c.Sim {
			sim += c.MicrosPerMsg
			fmt.Fprintf(tw, "%s%s (apart)\t%.1f%%\t%.1f\t\n", indent, c.Name, c.Share*100, c.MicrosPerMsg)
		}
	}
	tw.Flush()
}

// profileMain is `bench profile FILE [messages]`: the table of a saved CPU profile; with the
// number of messages the profile's window carried, in µs per message.
func profileMain(args []string, stdout io.Writer) error {
	if len(args) == 3 && args[1] == "-frames" {
		f, err := os.Open(args[0])
		if err != nil {
			return err
		}
		defer f.Close()
		p, err := profile.Parse(f)
		if err != nil {
			return err
		}
		for _, l := range topFrames(p, args[2], 40) {
			fmt.Fprintln(stdout, l)
		}
		return nil
	}
	if len(args) < 1 || len(args) > 2 {
		return fmt.Errorf("usage: bench profile CPU.prof [messages]")
	}
	cs, total, err := readComponents(args[0])
	if err != nil {
		return err
	}
	msgs := 0.0
	if len(args) == 2 {
		if _, err := fmt.Sscan(args[1], &msgs); err != nil || msgs <= 0 {
			return fmt.Errorf("messages: want a positive number, got %q", args[1])
		}
	}
	perMsg := 0.0
	if msgs > 0 {
		perMsg = total / msgs * 1e6
	}
	fmt.Fprintf(stdout, "%s: %.2f s of CPU", args[0], total)
	if msgs > 0 {
		fmt.Fprintf(stdout, " over %.0f messages: %.1f µs per message, the sim included", msgs, perMsg)
	}
	fmt.Fprintln(stdout)
	printComponents(stdout, withPerMessage(cs, perMsg), "  ")
	return nil
}

// topFrames lists, for one component, the frames that decided its samples, largest first (to
// refine the rules: `bench profile FILE -frames NAME`).
func topFrames(p *profile.Profile, comp string, n int) []string {
	vi := len(p.SampleType) - 1
	sums := map[string]float64{}
	for _, s := range p.Sample {
		name, frame := classifyFrame(s)
		if name != comp {
			continue
		}
		if frame == "" && len(s.Location) > 0 && len(s.Location[0].Line) > 0 && s.Location[0].Line[0].Function != nil {
			frame = "leaf " + s.Location[0].Line[0].Function.Name
		}
		sums[frame] += float64(s.Value[vi]) / 1e9
	}
	keys := make([]string, 0, len(sums))
	for k := range sums {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		if sums[a] > sums[b] {
			return -1
		}
		if sums[a] < sums[b] {
			return 1
		}
		return 0
	})
	var out []string
	for _, k := range keys[:min(n, len(keys))] {
		out = append(out, fmt.Sprintf("%.3fs %s", sums[k], k))
	}
	return out
}
