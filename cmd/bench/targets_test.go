package main

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

// fakeFullReport is a report with every phase of a full run present, sized by
// the default (full) settings, with made-up figures: direct answers in 1 ms,
// the bare proxy adds 0.2 ms and the gateway 0.3 ms (streams: 0.1 and 0.15 ms
// to the first chunk).
func fakeFullReport(t *testing.T) *report {
	t.Helper()
	for _, k := range []string{"BENCH_QUICK", "BENCH_ONLY", "BENCH_PPROF", "BENCH_PROMPT"} {
		t.Setenv(k, "")
	}
	s := loadSettings()
	r := &report{header: []string{"Measured by a test."}, records: map[string]float64{}}
	addRun := func(sc *scenario, tgt string, extra, extraFirst time.Duration) {
		var rr runResult
		for i := range 100 {
			d := time.Millisecond + time.Duration(i)*time.Microsecond + extra
			rr.samples = append(rr.samples, sample{total: d + 5*time.Millisecond, first: d - extra + extraFirst})
		}
		rr.elapsed = time.Second
		a := sc.per[tgt]
		a.add(rr)
		a.cpuKnown = true
		a.cpu += 30 * time.Millisecond
		if tgt == gateway {
			a.cpu += 3 * time.Millisecond
			a.pgCPU += 2 * time.Millisecond
		}
	}
	fill := func(sc *scenario) {
		for range 3 {
			addRun(sc, direct, 0, 0)
			addRun(sc, baseline, 200*time.Microsecond, 100*time.Microsecond)
			addRun(sc, gateway, 300*time.Microsecond, 150*time.Microsecond)
		}
		r.scenarios = append(r.scenarios, sc)
	}
	for _, rate := range s.rates {
		fill(newScenario(fmt.Sprintf("open %d rps", rate), openKind, rate))
	}
	fill(newScenario(fmt.Sprintf("closed %d conns", s.closedConns), closedKind, 0))
	for _, rate := range s.streamRates {
		fill(newScenario(fmt.Sprintf("stream %d/s", rate), streamKind, rate))
	}
	r.hold, r.holdN = map[string]holdResult{
		baseline: {opened: s.hold.streams, peakOpen: s.hold.streams, peakRSS: 100 << 20},
		gateway:  {opened: s.hold.streams, peakOpen: s.hold.streams, peakRSS: 120 << 20},
	}, s.hold.streams
	r.hanging = &hangingResult{spec: s.hanging, rounds: []hangingRound{{coolAt: time.Second}}}
	r.tail = &tailResult{spec: s.tail, rounds: []tailRound{{}}}
	r.replicas = &replicasResult{spec: s.replicas}
	r.translate = &translateResult{spec: s.translate}
	r.budget = &budgetResult{spec: s.budgetPhase}
	r.tracing = &traceResult{spec: s.tracePhase}
	return r
}

// TestTargetListMatchesReport holds targetList to the rows targetRows writes
// after a full run: a target added to (or dropped from) the report without the
// list, or a threshold changed in a label, fails here.
func TestTargetListMatchesReport(t *testing.T) {
	rows := fakeFullReport(t).targetRows().rows[1:]
	var got, want []string
	for _, row := range rows {
		got = append(got, row[0])
	}
	for _, ts := range targetList {
		want = append(want, ts.target)
	}
	if !slices.Equal(got, want) {
		t.Errorf("targetRows writes:\n  %s\ntargetList has:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	for _, ts := range targetList {
		if !slices.Contains(append(phaseNames, "all"), ts.phase) {
			t.Errorf("%q: phase %q is not a BENCH_ONLY phase", ts.target, ts.phase)
		}
	}
}

// TestDocTargetsTable holds the targets table of docs/benchmarks.md to
// targetList, row for row.
func TestDocTargetsTable(t *testing.T) {
	got := docTargets(t, "../../docs/benchmarks.md")
	var want []targetSpec
	want = append(want, targetList...)
	if !slices.Equal(got, want) {
		var b strings.Builder
		b.WriteString("docs/benchmarks.md's targets table should read (phase | target | threshold):\n")
		for _, ts := range targetList {
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", ts.phase, ts.target, ts.threshold)
		}
		fmt.Fprintf(&b, "it has %d rows:\n", len(got))
		for _, ts := range got {
			fmt.Fprintf(&b, "| `%s` | %s | %s |\n", ts.phase, ts.target, ts.threshold)
		}
		t.Error(b.String())
	}
}

// docTargets reads the first table under the doc's "## Targets" heading.
func docTargets(t *testing.T, path string) []targetSpec {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []targetSpec
	in, table := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "## "):
			if table {
				return out
			}
			in = line == "## Targets"
		case in && strings.HasPrefix(line, "|"):
			cells := strings.Split(strings.Trim(line, "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			if !table { // the header; the separator follows
				table = true
				sc.Scan()
				continue
			}
			if len(cells) != 3 {
				t.Fatalf("%s: targets row %q: want 3 cells (phase, target, threshold)", path, line)
			}
			out = append(out, targetSpec{strings.Trim(cells[0], "`"), cells[1], cells[2]})
		case table:
			return out
		}
	}
	if !table {
		t.Fatalf("%s: no table under a \"## Targets\" heading", path)
	}
	return out
}

// fakeBudgetRun is a run of n requests answered in p50 (all alike) during
// which Redis counted per request scripts script calls, reserves HSETs,
// settles HDELs and reads read events.
func fakeBudgetRun(n int, p50 time.Duration, scripts, reserves, settles, reads float64) budgetRun {
	var rr runResult
	for range n {
		rr.samples = append(rr.samples, sample{total: p50})
	}
	f := float64(n)
	return budgetRun{run: rr, redis: redisCounts{scripts: scripts * f, reserves: reserves * f, settles: settles * f, reads: reads * f}}
}

// TestBudgetTargets checks the budget phase's two targets against made-up
// rounds: the unbudgeted side pays one script call (the admission gate's
// take) and 1.3 round trips per request, the budgeted side that plus what
// each case says.
func TestBudgetTargets(t *testing.T) {
	cases := []struct {
		name                                string
		scripts, reserves, settles, reads   float64 // added per budgeted request
		p50                                 time.Duration
		wantCalls, wantLatency, wantMeasure string
	}{
		{"one reserve and one settle", 2, 1, 1, 2, 1050 * time.Microsecond, "met", "met", "2.000 round trips added"},
		{"settles batched by four", 1.25, 1, 1, 1.25, 1050 * time.Microsecond, "met", "met", "1.000 + 0.250"},
		{"a settle in two calls", 3, 1, 1, 3, 1050 * time.Microsecond, "**missed**", "met", "1.000 + 2.000"},
		{"a reserve retried every request", 3, 2, 1, 3, 1050 * time.Microsecond, "**missed**", "met", "2.000 + 1.000"},
		{"an extra plain command per request", 2, 1, 1, 3, 1050 * time.Microsecond, "**missed**", "met", "3.000 round trips added"},
		{"p50 1.2x", 2, 1, 1, 2, 1200 * time.Microsecond, "met", "**missed**", "1.000 + 1.000"},
		{"the unbudgeted side's calls moved", 2.05, 1, 1, 2.05, 1100 * time.Microsecond, "met", "met", "1.000 + 1.050"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			res := &budgetResult{redis: "test"}
			for range 3 {
				res.rounds = append(res.rounds, budgetRound{
					free:     fakeBudgetRun(1000, time.Millisecond, 1, 0, 0, 1.3),
					budgeted: fakeBudgetRun(1000, c.p50, 1+c.scripts, c.reserves, c.settles, 1.3+c.reads),
				})
			}
			r := &report{budget: res, records: map[string]float64{}}
			rows := r.targetRows().rows
			calls, latency := rowOf(t, rows, "budget in Redis: script calls"), rowOf(t, rows, "budget in Redis: p50 latency")
			if calls[2] != c.wantCalls || !strings.Contains(calls[1], c.wantMeasure) {
				t.Errorf("calls row %q, want %s with %q", calls, c.wantCalls, c.wantMeasure)
			}
			if latency[2] != c.wantLatency {
				t.Errorf("latency row %q, want %s", latency, c.wantLatency)
			}
		})
	}
	t.Run("not measured", func(t *testing.T) {
		r := &report{budget: &budgetResult{err: "no Redis"}, records: map[string]float64{}}
		rows := r.targetRows().rows
		for _, prefix := range []string{"budget in Redis: script calls", "budget in Redis: p50 latency"} {
			if row := rowOf(t, rows, prefix); row[2] != "not measured" {
				t.Errorf("row %q, want not measured", row)
			}
		}
	})
}

func rowOf(t *testing.T, rows [][]string, prefix string) []string {
	t.Helper()
	for _, row := range rows {
		if strings.HasPrefix(row[0], prefix) {
			return row
		}
	}
	t.Fatalf("no target row starts with %q", prefix)
	return nil
}

// TestParseRedisInfo reads the counters out of a Redis 7 INFO answer.
func TestParseRedisInfo(t *testing.T) {
	info := "# Stats\r\ntotal_commands_processed:900\r\ntotal_reads_processed:412\r\n\r\n# Commandstats\r\n" +
		"cmdstat_evalsha:calls=200,usec=900,usec_per_call=4.50,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_eval:calls=3,usec=90,usec_per_call=30.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_hset:calls=100,usec=100,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_hdel:calls=99,usec=99,usec_per_call=1.00,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_hget:calls=500,usec=99,usec_per_call=0.20,rejected_calls=0,failed_calls=0\r\n"
	got, want := parseRedisInfo(info), redisCounts{scripts: 203, reserves: 100, settles: 99, reads: 412, usec: 990}
	if got != want {
		t.Errorf("parseRedisInfo = %+v, want %+v", got, want)
	}
}
