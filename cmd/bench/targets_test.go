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
