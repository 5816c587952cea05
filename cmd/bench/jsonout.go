package main

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/llmgw/gateway/cmd/bench/results"
)

// defaultJSON is where the run's results go without BENCH_JSON: under ./data,
// which git ignores, for `make bench-chart` to read.
const defaultJSON = "data/bench-results.json"

// jsonPath is BENCH_JSON, or defaultJSON.
func jsonPath() string {
	if v := os.Getenv("BENCH_JSON"); v != "" {
		return v
	}
	return defaultJSON
}

// writeJSON writes the run's results to path, creating its directory.
func writeJSON(path string, run *results.Run) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := results.Encode(f, run); err != nil {
		f.Close()
		return fmt.Errorf("%s: %w", path, err)
	}
	return f.Close()
}

// results is the report in its machine-readable form: the figures the markdown
// table and the chart are drawn from, and every target's row.
func (r *report) results(s settings, started time.Time) *results.Run {
	mode := "full"
	if s.quick {
		mode = "quick"
	}
	run := &results.Run{Measured: started.UTC(), Mode: mode, Header: r.header, Notes: r.notes}
	for p := range s.only {
		run.Only = append(run.Only, p)
	}
	slices.Sort(run.Only)
	for _, sc := range r.scenarios {
		run.Scenarios = append(run.Scenarios, sc.results())
	}
	if r.hold != nil {
		h := &results.Hold{Streams: r.holdN, Per: map[string]results.HoldSide{}}
		for t, v := range r.hold {
			h.Per[t] = results.HoldSide{PeakOpen: v.peakOpen, Errors: sumErrs(v.errs), PeakRSS: float64(v.peakRSS) / (1 << 20)}
		}
		run.Hold = h
	}
	for _, row := range r.targetRows().rows[1:] {
		run.Targets = append(run.Targets, results.Target{Target: row[0], Measured: row[1], Result: row[2]})
	}
	return run
}

func (sc *scenario) results() results.Scenario {
	kind := map[scenarioKind]string{openKind: results.Open, closedKind: results.Closed, streamKind: results.Stream}[sc.kind]
	out := results.Scenario{Name: sc.name, Kind: kind, Rate: sc.rate, Per: map[string]results.Side{}}
	msOf := func(d time.Duration) float64 { return float64(d) / 1e6 }
	pcts := func(a *agg, first bool) results.Percentiles {
		return results.Percentiles{P50: msOf(a.median(0.50, first)), P90: msOf(a.median(0.90, first)), P99: msOf(a.median(0.99, first))}
	}
	addedOf := func(t string, first bool) *results.Percentiles {
		return &results.Percentiles{P50: msOf(sc.added(t, 0.50, first)), P99: msOf(sc.added(t, 0.99, first))}
	}
	for _, t := range targetNames {
		a := sc.per[t]
		side := results.Side{Requests: a.requests, Errors: a.errors(), Throughput: sc.throughput(t), Latency: pcts(a, false)}
		if sc.kind == streamKind {
			f := pcts(a, true)
			side.FirstChunk = &f
		}
		if t != direct {
			side.Added = addedOf(t, false)
			if sc.kind == streamKind {
				side.AddedFirst = addedOf(t, true)
			}
		}
		if v := a.cpuPerReq(); v >= 0 {
			side.CPU = &v
			if t == gateway && a.requests > 0 {
				pg := float64(a.pgCPU) / 1e3 / float64(a.requests)
				side.PostgresCPU = &pg
			}
		}
		out.Per[t] = side
	}
	return out
}
