package main

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"slices"
	"strings"
	"testing"
)

func TestRunRoundsRotateTheServers(t *testing.T) {
	three := []string{srvGateway, srvBare, srvFloor}
	firsts := map[string]int{}
	for i, want := range [][]string{
		{srvGateway, srvBare, srvFloor}, {srvBare, srvFloor, srvGateway}, {srvFloor, srvGateway, srvBare}, {srvGateway, srvBare, srvFloor},
	} {
		got := rotation(three, i)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: %v, want %v", i, got, want)
		}
		if i < 3 {
			firsts[got[0]]++
		}
	}
	if len(firsts) != 3 {
		t.Fatalf("in 3 rounds each server goes first once: %v", firsts)
	}
	if got := rotation([]string{srvGateway, srvBare}, 1); !slices.Equal(got, []string{srvBare, srvGateway}) {
		t.Fatalf("two servers, round 2: %v", got)
	}
	if rotation(three, 0)[0] != srvGateway || &rotation(three, 0)[0] == &three[0] {
		t.Fatal("rotation must copy")
	}

	h := &harness{o: runOptions{conns: 64, rounds: 3, roundsCases: []string{"send", "validate"}}}
	for _, c := range []struct {
		id    string
		conns int
		want  int
	}{{"send", 64, 3}, {"validate", 64, 3}, {"send", 256, 1}, {"account", 64, 1}} {
		if got := h.roundsFor(caseByID(c.id), c.conns); got != c.want {
			t.Errorf("%s at %d conns: %d rounds, want %d", c.id, c.conns, got, c.want)
		}
	}
}

// threeRounds: the gateway at 0.9, 1.1 and 1.0 of bare (the last with both twice as fast), so
// the median of the rounds' ratios (1.0) is not the ratio of the medians (1100/1000); the
// floor at 0.8, 0.5 and 0.6 of the gateway's rate; round 2 disturbed.
func threeRounds() []round {
	mk := func(order []string, g, b, fl, other float64, errs int64) round {
		rd := round{Order: order, Load: "2.00", figures: figures{
			Gateway: &stats{RPS: g, Requests: int64(g * 10), P99: g / 1000, OK: int64(g * 13), Errors: errs, OtherCPU: other, ServerCPUUS: 20},
			Bare:    &stats{RPS: b, Requests: int64(b * 10), OK: int64(b * 13), OtherCPU: 0.02},
			Floor:   &stats{RPS: fl, Requests: int64(fl * 10), OK: int64(fl * 13), OtherCPU: 0.01},
			// delivered as fast as accepted, drained in 0.1, 0.3 and 0.2 s
			DeliveredRPS: g, DrainSeconds: g / 1e4,
		}}
		rd.finish()
		return rd
	}
	return []round{
		mk(rotation([]string{srvGateway, srvBare, srvFloor}, 0), 900, 1000, 1125, 0.05, 0),
		mk(rotation([]string{srvGateway, srvBare, srvFloor}, 1), 1100, 1000, 2200, 0.40, 2),
		mk(rotation([]string{srvGateway, srvBare, srvFloor}, 2), 2000, 2000, 3333.3333333333335, -1, 0),
	}
}

func TestRunRoundsMedianAndSpread(t *testing.T) {
	rounds := threeRounds()
	if rounds[0].Disturbed || !rounds[1].Disturbed || rounds[2].Disturbed || rounds[1].OtherCPU != 0.40 {
		t.Fatalf("DISTURBED per round: %v %v %v", rounds[0].Disturbed, rounds[1].Disturbed, rounds[2].Disturbed)
	}
	var f figures
	f.fromRounds(rounds)
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: %v, want %v", name, got, want)
		}
	}
	near("ratio (median of the rounds' ratios)", f.Ratio, 1.0)
	near("gateway/floor", f.GatewayFloorRatio, 0.6)
	near("sustained over the floor", f.SustainedFloorRatio, 0.6)
	near("gateway req/s (median)", f.Gateway.RPS, 1100)
	near("bare req/s (median)", f.Bare.RPS, 1000)
	near("gateway p99 (median)", f.Gateway.P99, 1.1)
	near("drain (median)", f.DrainSeconds, 0.11)
	if rg := f.RatioRanges["ratio"]; math.Abs(rg[0]-0.9) > 1e-9 || math.Abs(rg[1]-1.1) > 1e-9 {
		t.Errorf("ratio range %v", rg)
	}
	if rg := f.RatioRanges["gateway_floor_ratio"]; math.Abs(rg[0]-0.5) > 1e-9 || math.Abs(rg[1]-0.8) > 1e-9 {
		t.Errorf("gateway/floor range %v", rg)
	}
	// Counts are the rounds' totals, the other processes' share the largest: every round's
	// errors fail the run and a disturbed round shows.
	if f.Gateway.Errors != 2 || f.Gateway.OK != (900+1100+2000)*13 || f.Gateway.Requests != 11000 || f.Gateway.OtherCPU != 0.40 {
		t.Errorf("gateway counts: %+v", *f.Gateway)
	}
	if len(f.Rounds) != 3 {
		t.Fatalf("rounds kept: %d", len(f.Rounds))
	}

	// One round: its figures as they are, no rounds in the JSON.
	var one figures
	one.fromRounds(rounds[:1])
	if one.Ratio != rounds[0].Ratio || one.Gateway != rounds[0].Gateway || one.Rounds != nil || one.RatioRanges != nil {
		t.Errorf("one round: %+v", one)
	}
	if b, _ := json.Marshal(one); strings.Contains(string(b), `"rounds"`) {
		t.Errorf("one round's JSON has rounds: %s", b)
	}

	// The results JSON: the existing fields hold the medians, the rounds beside them.
	r := &result{Phase: "fsync=interval", Case: "v1 send", CaseID: "send", Conns: 64, Mode: "closed", figures: f, Wrk: &figures{}}
	r.Wrk.fromRounds(threeRounds())
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var back struct {
		Ratio       float64               `json:"ratio"`
		Gateway     stats                 `json:"gateway"`
		RatioRanges map[string][2]float64 `json:"ratio_ranges"`
		Rounds      []struct {
			Order     []string `json:"order"`
			Ratio     float64  `json:"ratio"`
			Disturbed bool     `json:"disturbed"`
			Load      string   `json:"load"`
		} `json:"rounds"`
		Wrk struct {
			Rounds []json.RawMessage `json:"rounds"`
		} `json:"wrk"`
	}
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.Ratio != 1.0 || back.Gateway.RPS != 1100 || len(back.Rounds) != 3 || !back.Rounds[1].Disturbed || back.Rounds[1].Order[0] != srvBare ||
		back.Rounds[0].Load != "2.00" || len(back.Wrk.Rounds) != 3 || back.RatioRanges["ratio"][1] != 1.1 {
		t.Errorf("JSON: %s", b)
	}

	// The printed lines: every round, in the order measured, DISTURBED where it was.
	var out bytes.Buffer
	printResult(&out, r)
	s := out.String()
	for _, want := range []string{
		"medians of 3 rounds", "ratio 1.000 (0.900-1.100, 3 rounds)",
		"rounds, the bench's generator: #1 gateway 900, bare 1000, floor 1125: ratio 0.900, of the floor 0.800",
		"#2 bare 1000, floor 2200, gateway 1100: ratio 1.100, of the floor 0.500, sustained of the floor 0.500, load 2.00, DISTURBED (other processes 40%)",
		"#3 floor 3333, gateway 2000, bare 2000: ratio 1.000",
		"rounds, wrk: #1",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output lacks %q:\n%s", want, s)
		}
	}

	// The targets: the median, its rounds' range; the summary's cells the same.
	rep := newReport("bench run", false, "gateway v1")
	rep.add(r)
	rep.Targets = checkTargets(rep)
	var floorT *targetCheck
	for i := range rep.Targets {
		if strings.Contains(rep.Targets[i].Target, "of the floor") {
			floorT = &rep.Targets[i]
		}
	}
	if floorT == nil || floorT.Got != 0.6 || floorT.Rounds != 3 || floorT.Lowest != 0.5 || floorT.Highest != 0.8 || floorT.Met {
		t.Fatalf("targets: %+v", rep.Targets)
	}
	if lines := strings.Join(targetLines(rep), "\n"); !strings.Contains(lines, "0.600 (median of 3 rounds, lowest-highest 0.500-0.800; NOT met") {
		t.Errorf("target lines:\n%s", lines)
	}
	if table := summaryTable(rep, true); !strings.Contains(table, "| 1.000 (0.90-1.10) |") || !strings.Contains(table, "| 0.600 (0.50-0.80) |") {
		t.Errorf("summary:\n%s", table)
	}
}

func TestRunRoundsFlags(t *testing.T) {
	o, err := parseRun(nil, io.Discard)
	if err != nil || o.rounds != 3 || !slices.Equal(o.roundsCases, []string{"send", "validate", "status"}) {
		t.Fatalf("defaults: rounds %d of %v, %v", o.rounds, o.roundsCases, err)
	}
	if o, err = parseRun([]string{"--quick"}, io.Discard); err != nil || o.rounds != 1 {
		t.Fatalf("quick: %d rounds, %v", o.rounds, err)
	}
	if o, err = parseRun([]string{"--quick", "--rounds", "2"}, io.Discard); err != nil || o.rounds != 2 {
		t.Fatalf("quick with --rounds 2: %d rounds, %v", o.rounds, err)
	}
	for _, bad := range [][]string{{"--rounds", "0"}, {"--rounds", "21"}, {"--rounds-cases", "nope"}} {
		if _, err := parseRun(bad, io.Discard); err == nil {
			t.Errorf("%v: want an error", bad)
		}
	}
	// maxRounds rounds of a window's sequences stay below the profile window's.
	if maxRounds*roundSeq >= profileSeq0 {
		t.Fatal("round sequences reach the profile window's")
	}
}
