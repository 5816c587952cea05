package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmgw/gateway/cmd/bench/results"
)

// TestResultsJSON writes a full run's results the way run does and reads them
// back as cmd/benchchart will: every scenario with its added latency, the open
// streams, and every target's row.
func TestResultsJSON(t *testing.T) {
	s := loadSettings()
	rep := fakeFullReport(t)
	started := time.Date(2026, 12, 1, 22, 10, 0, 0, time.UTC)
	path := filepath.Join(t.TempDir(), "sub", "bench-results.json")
	if err := writeJSON(path, rep.results(s, started)); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	run, err := results.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	if !run.Complete() || !run.Measured.Equal(started) {
		t.Errorf("mode %q only %v measured %v: want a complete run measured %v", run.Mode, run.Only, run.Measured, started)
	}
	if got, want := len(run.Of(results.Open)), len(s.rates); got != want {
		t.Errorf("%d open scenarios, want %d", got, want)
	}
	if got, want := len(run.Of(results.Stream)), len(s.streamRates); got != want {
		t.Errorf("%d stream scenarios, want %d", got, want)
	}
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	open := run.Of(results.Open)[0]
	if open.Rate != s.rates[0] || open.Per[results.Direct].Added != nil {
		t.Errorf("first open scenario: rate %d, direct added %v: want rate %d and no added latency for direct", open.Rate, open.Per[results.Direct].Added, s.rates[0])
	}
	g, b := open.Per[results.Gateway], open.Per[results.Baseline]
	near("gateway added p50 (ms)", g.Added.P50, 0.3)
	near("baseline added p99 (ms)", b.Added.P99, 0.2)
	near("gateway CPU per request (µs)", *g.CPU, 330) // 3 runs of 33 ms over 300 requests
	near("gateway Postgres CPU per request (µs)", *g.PostgresCPU, 20)
	st := run.Of(results.Stream)[0].Per[results.Gateway]
	if st.AddedFirst == nil || st.FirstChunk == nil {
		t.Fatalf("stream scenario: no first chunk figures: %+v", st)
	}
	near("gateway added first chunk p50 (ms)", st.AddedFirst.P50, 0.15)
	if run.Hold == nil || run.Hold.Streams != s.hold.streams {
		t.Fatalf("hold: %+v, want %d streams", run.Hold, s.hold.streams)
	}
	near("gateway peak RSS (MiB)", run.Hold.Per[results.Gateway].PeakRSS, 120)
	if len(run.Targets) != len(targetList) {
		t.Fatalf("%d targets in the JSON, want %d", len(run.Targets), len(targetList))
	}
	for i, tg := range run.Targets {
		if tg.Target != targetList[i].target || tg.Result == "" || tg.Measured == "" {
			t.Errorf("target %d: %+v, want %q with a measurement and a result", i, tg, targetList[i].target)
		}
	}
	var table strings.Builder
	results.WriteTable(&table, run)
	for _, want := range []string{"| open 1000 rps | added latency p50 / p99 (ms) | 0.200 / 0.200 | 0.300 / 0.300 | 1.50x / 1.50x |", "| 2000 open streams | peak RSS (MiB) | 100.0 | 120.0 | 1.20x |", "| open 500 rps | CPU per request (µs), gateway + its Postgres | 300 | 330 + 20 | 1.17x |"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table has no row %q:\n%s", want, table.String())
		}
	}
}

// TestJSONPath: BENCH_JSON names the file; without it the results go under
// ./data, which git ignores, never the repository's root.
func TestJSONPath(t *testing.T) {
	t.Setenv("BENCH_JSON", "")
	if got := jsonPath(); got != "data/bench-results.json" {
		t.Errorf("default path %q", got)
	}
	t.Setenv("BENCH_JSON", "/tmp/x.json")
	if got := jsonPath(); got != "/tmp/x.json" {
		t.Errorf("BENCH_JSON path %q", got)
	}
}
