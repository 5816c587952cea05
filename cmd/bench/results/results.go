// Package results owns the machine-readable form of one `make bench` run: the
// JSON that cmd/bench writes (BENCH_JSON) and cmd/benchchart reads, and the
// markdown results table docs/benchmarks.md shows, so the writer, the chart and
// the doc agree on one schema.
package results

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// The targets a scenario runs against, as cmd/bench names them.
const (
	Direct   = "direct"
	Baseline = "baseline"
	Gateway  = "gateway"
)

// Scenario kinds.
const (
	Open   = "open"   // non-streaming, fixed rate
	Closed = "closed" // non-streaming, fixed connections as fast as they go
	Stream = "stream" // streaming, fixed rate
)

// Run is one benchmark run.
type Run struct {
	Measured time.Time `json:"measured"`
	// Mode is "full" or "quick"; Only lists BENCH_ONLY's phases (empty: all).
	Mode      string     `json:"mode"`
	Only      []string   `json:"only,omitempty"`
	Header    []string   `json:"header"`
	Scenarios []Scenario `json:"scenarios"`
	Hold      *Hold      `json:"hold,omitempty"`
	// Targets are the rows of the report's targets table, every phase's.
	Targets []Target `json:"targets"`
	Notes   []string `json:"notes,omitempty"`
}

// Complete reports whether the run is a full run of every phase: the only kind
// the doc's table and chart should show.
func (r *Run) Complete() bool { return r.Mode == "full" && len(r.Only) == 0 }

// Scenario is one load shape (open, closed or stream) run against every target.
type Scenario struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
	// Rate is requests (or streams) per second; 0 for the closed loop.
	Rate int `json:"rate,omitempty"`
	// Per is keyed by Direct, Baseline and Gateway.
	Per map[string]Side `json:"per"`
}

// Side is one scenario's figures for one target. Latencies are milliseconds,
// medians over rounds of each round's percentile; added ones are over direct,
// paired within a round, and absent for direct itself.
type Side struct {
	Requests int `json:"requests"`
	Errors   int `json:"errors"`
	// Throughput is successful requests per second (median of rounds).
	Throughput float64 `json:"throughput_rps"`
	// Latency is the whole request (non-streaming) or to the last chunk (streams).
	Latency    Percentiles  `json:"latency_ms"`
	FirstChunk *Percentiles `json:"first_chunk_ms,omitempty"`
	Added      *Percentiles `json:"added_ms,omitempty"`
	AddedFirst *Percentiles `json:"added_first_chunk_ms,omitempty"`
	// CPU is the proxy's CPU per request in µs, PostgresCPU the gateway's
	// Postgres cluster's; nil when not measured.
	CPU         *float64 `json:"cpu_us_per_request,omitempty"`
	PostgresCPU *float64 `json:"postgres_cpu_us_per_request,omitempty"`
}

// Percentiles in milliseconds; added latency has no P90.
type Percentiles struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90,omitempty"`
	P99 float64 `json:"p99"`
}

// Hold is the open-streams run: how many streams, and per proxy what it held.
type Hold struct {
	Streams int                 `json:"streams"`
	Per     map[string]HoldSide `json:"per"`
}

// HoldSide is one proxy's figures with the streams open.
type HoldSide struct {
	PeakOpen int     `json:"peak_open"`
	Errors   int     `json:"errors"`
	PeakRSS  float64 `json:"peak_rss_mib"`
}

// Target is one row of the targets table.
type Target struct {
	Target   string `json:"target"`
	Measured string `json:"measured"`
	Result   string `json:"result"` // "met", "**missed**" or "not measured"
}

// Met reports whether the target was met.
func (t Target) Met() bool { return t.Result == "met" }

// Encode writes r as indented JSON.
func Encode(w io.Writer, r *Run) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Decode reads a run written by Encode.
func Decode(rd io.Reader) (*Run, error) {
	var r Run
	dec := json.NewDecoder(rd)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&r); err != nil {
		return nil, fmt.Errorf("bench results: %w", err)
	}
	return &r, nil
}

// Of returns the scenarios of one kind, in run order.
func (r *Run) Of(kind string) []Scenario {
	var out []Scenario
	for _, sc := range r.Scenarios {
		if sc.Kind == kind {
			out = append(out, sc)
		}
	}
	return out
}

// WriteTable writes the doc's results table: per scenario, what the bare proxy
// and the gateway add and cost, then one line naming the targets missed.
func WriteTable(w io.Writer, r *Run) {
	row := func(cells ...string) { fmt.Fprintf(w, "| %s |\n", strings.Join(cells, " | ")) }
	row("scenario", "figure", "bare proxy", "gateway", "gateway / bare proxy")
	fmt.Fprintln(w, "|---|---|---:|---:|---:|")
	for _, sc := range r.Scenarios {
		b, g := sc.Per[Baseline], sc.Per[Gateway]
		switch sc.Kind {
		case Open:
			row(sc.Name, "added latency p50 / p99 (ms)", added(b.Added), added(g.Added), addedRatio(b.Added, g.Added))
		case Closed:
			row(sc.Name, "throughput (req/s)", fmt.Sprintf("%.0f", b.Throughput), fmt.Sprintf("%.0f", g.Throughput), ratio(g.Throughput, b.Throughput))
		case Stream:
			row(sc.Name, "added first chunk p50 / p99 (ms)", added(b.AddedFirst), added(g.AddedFirst), addedRatio(b.AddedFirst, g.AddedFirst))
		}
		row(sc.Name, "CPU per request (µs), gateway + its Postgres", us(b.CPU, nil), us(g.CPU, g.PostgresCPU), ratio(sum(g.CPU, g.PostgresCPU), sum(b.CPU, nil)))
		if errs := b.Errors + g.Errors; errs > 0 {
			row(sc.Name, "errors", fmt.Sprint(b.Errors), fmt.Sprint(g.Errors), "")
		}
	}
	if h := r.Hold; h != nil {
		b, g := h.Per[Baseline], h.Per[Gateway]
		row(fmt.Sprintf("%d open streams", h.Streams), "peak RSS (MiB)", fmt.Sprintf("%.1f", b.PeakRSS), fmt.Sprintf("%.1f", g.PeakRSS), ratio(g.PeakRSS, b.PeakRSS))
	}
	var missed []string
	met := 0
	for _, t := range r.Targets {
		if t.Met() {
			met++
			continue
		}
		missed = append(missed, fmt.Sprintf("- %s: %s (%s)", t.Target, strings.Trim(t.Result, "*"), t.Measured))
	}
	fmt.Fprintf(w, "\nTargets met: %d of %d.", met, len(r.Targets))
	if len(missed) > 0 {
		fmt.Fprintf(w, " Not met:\n\n%s", strings.Join(missed, "\n"))
	}
	fmt.Fprintln(w)
}

func added(p *Percentiles) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprintf("%.3f / %.3f", p.P50, p.P99)
}

// addedRatio is the gateway's added latency over the bare proxy's, per
// percentile; a gateway below direct (noise) counts as adding nothing, as in
// the report.
func addedRatio(b, g *Percentiles) string {
	if b == nil || g == nil {
		return "–"
	}
	return ratio(max(0, g.P50), b.P50) + " / " + ratio(max(0, g.P99), b.P99)
}

func ratio(num, den float64) string {
	if den <= 0 || math.IsNaN(num) || math.IsNaN(den) {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", num/den)
}

func sum(a, b *float64) float64 {
	if a == nil {
		return math.NaN()
	}
	if b == nil {
		return *a
	}
	return *a + *b
}

func us(cpu, pg *float64) string {
	switch {
	case cpu == nil:
		return "–"
	case pg == nil:
		return fmt.Sprintf("%.0f", *cpu)
	}
	return fmt.Sprintf("%.0f + %.0f", *cpu, *pg)
}
