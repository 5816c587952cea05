package main

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// traceRunOf is a run of n requests of latency d that cost the gateway cpu.
func traceRunOf(n int, d, cpu time.Duration) traceRun {
	var r runResult
	for range n {
		r.samples = append(r.samples, sample{total: d})
	}
	return traceRun{run: r, cpu: cpu}
}

// TestTraceTargets: the tracing phase's targets are the ratios,
// CPU over the whole phase and p50 paired per round: off against the build
// before tracing (1.02x), on at 1.0 against off (1.15x); without the build
// before tracing its two rows say not measured.
func TestTraceTargets(t *testing.T) {
	round := map[string]traceRun{
		traceBase:  traceRunOf(100, 2000*time.Microsecond, 100*time.Millisecond),
		"off":      traceRunOf(100, 2010*time.Microsecond, 101*time.Millisecond),
		"on, 1.0":  traceRunOf(100, 2400*time.Microsecond, 120*time.Millisecond),
		"on, 0.01": traceRunOf(100, 2020*time.Microsecond, 102*time.Millisecond),
	}
	r := &report{records: map[string]float64{}, tracing: &traceResult{rounds: []map[string]traceRun{round, round}}}
	rows := r.targetRows().rows[1:]
	for prefix, want := range map[string]string{
		"tracing off: gateway CPU":      "1.010x met",
		"tracing off: p50":              "1.005x met",
		"tracing on at 1.0: gateway CP": "1.188x **missed**",
		"tracing on at 1.0: p50":        "1.194x **missed**",
	} {
		row := rowOf(t, rows, prefix)
		if got := row[1] + " " + row[2]; got != want {
			t.Errorf("%s: %s, want %s", row[0], got, want)
		}
	}

	delete(round, traceBase)
	r.tracing.baseErr = "no git"
	rows = r.targetRows().rows[1:]
	if row := rowOf(t, rows, "tracing off: gateway CPU"); row[2] != "not measured" {
		t.Errorf("without the build before tracing: %v", row)
	}
	if row := rowOf(t, rows, "tracing on at 1.0: gateway CPU"); row[1] != "1.188x" {
		t.Errorf("on at 1.0 over off without the build before tracing: %v", row)
	}
}

// TestOutageReport: the outage's report gives the start, the first and
// last samples, the peaks, each end's lowest sample within a minute (the
// heap's nearest to live), the requests and the spans dropped under load.
func TestOutageReport(t *testing.T) {
	o := &outageResult{duration: 2 * time.Minute}
	for i, heap := range []float64{10, 20, 12, 30, 14, 25, 16, 22, 18, 26, 15, 21, 17} {
		s := outageSample{at: time.Duration(i) * outageSlice, heap: heap * (1 << 20), rss: uint64(50+i) << 20,
			dropped: float64(2000 * i)}
		if i > 0 {
			s.requests = 1000
		}
		o.samples = append(o.samples, s)
	}
	var b bytes.Buffer
	o.write(&b)
	out := b.String()
	for _, want := range []string{
		"| start | 10.0 | 50.0 | 0 |",
		"| end, 120s | 17.0 | 62.0 | 24000 |",
		"| peak of the samples | 30.0 | 62.0 |",
		"| lowest, first minute / last minute | 12.0 / 15.0 | 51.0 / 57.0 |",
		"12000 requests, 0 errors; 24000 spans dropped",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
