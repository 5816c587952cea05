package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// The three ways a request reaches the mock, in the order of the table's columns.
const (
	direct   = "direct"
	baseline = "baseline"
	gateway  = "gateway"
)

var targetNames = []string{direct, baseline, gateway}

type scenarioKind int

const (
	openKind scenarioKind = iota
	closedKind
	streamKind
)

// roundStats is one run (one round) of a scenario against one target.
type roundStats struct {
	requests, ok int
	total, first []time.Duration // successful requests only, sorted
	elapsed      time.Duration
}

// agg holds the rounds of one scenario against one target. Latency figures are
// medians over rounds of each round's percentile, so one run disturbed by a
// neighbour on the machine moves them little; counts and CPU are sums.
type agg struct {
	rounds       []roundStats
	requests, ok int
	errs         map[string]int
	lag          []time.Duration // open loop: how late the driver sent
	cpu, pgCPU   time.Duration   // the proxy's process, the Postgres cluster
	allCPU       time.Duration   // every process of the benchmark: driver, mock, proxy, Postgres
	cpuKnown     bool
	spooled      float64   // gateway: records that went to the disk spool (queue full)
	foreign      []float64 // per round: CPUs' worth used by processes not in the benchmark
}

func (a *agg) add(r runResult) {
	if a.errs == nil {
		a.errs = map[string]int{}
	}
	var rs roundStats
	for _, s := range r.samples {
		rs.requests++
		if s.err != "" {
			a.errs[s.err]++
			continue
		}
		rs.ok++
		rs.total = append(rs.total, s.total)
		if s.first > 0 {
			rs.first = append(rs.first, s.first)
		}
	}
	slices.Sort(rs.total)
	slices.Sort(rs.first)
	rs.elapsed = r.elapsed
	a.rounds = append(a.rounds, rs)
	a.requests += rs.requests
	a.ok += rs.ok
	a.lag = append(a.lag, r.lag...)
}

func (a *agg) errors() int { return a.requests - a.ok }

// pctOf is percentile p of round i, of the total latency or the first chunk.
func (a *agg) pctOf(i int, p float64, first bool) time.Duration {
	if first {
		return pct(a.rounds[i].first, p)
	}
	return pct(a.rounds[i].total, p)
}

// median is the median over rounds of percentile p.
func (a *agg) median(p float64, first bool) time.Duration {
	var v []time.Duration
	for i := range a.rounds {
		v = append(v, a.pctOf(i, p, first))
	}
	return median(v)
}

func median(v []time.Duration) time.Duration {
	if len(v) == 0 {
		return 0
	}
	s := sorted(v)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// scenario is one load shape run against every target.
type scenario struct {
	name string
	kind scenarioKind
	rate int // open loop and streams: requests per second
	per  map[string]*agg
}

func newScenario(name string, kind scenarioKind, rate int) *scenario {
	sc := &scenario{name: name, kind: kind, rate: rate, per: map[string]*agg{}}
	for _, t := range targetNames {
		sc.per[t] = &agg{}
	}
	return sc
}

// report collects everything the table shows.
type report struct {
	header    []string // environment lines
	scenarios []*scenario
	hold      map[string]holdResult
	holdN     int
	peakLoad  map[string]uint64 // VmHWM before the open-streams run
	peakFinal map[string]uint64 // VmHWM at the end
	records   map[string]float64
	hanging   *hangingResult // nil when the phase did not run
	tail      *tailResult    // nil when the phase did not run
	translate *translateResult
	replicas  *replicasResult // nil when the phase did not run
	budget    *budgetResult   // nil when the phase did not run
	tracing   *traceResult    // nil when the phase did not run
	cache     *cacheResult    // nil when the phase did not run
	notes     []string
}

// pct is the nearest-rank percentile of sorted d.
func pct(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	i := int(math.Ceil(p*float64(len(d)))) - 1
	return d[max(0, min(i, len(d)-1))]
}

func sorted(d []time.Duration) []time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/1e6) }

// msAdded prints an added latency with more precision: it is often a fraction of a
// millisecond, and noise can make it negative.
func msAdded(d time.Duration) string { return fmt.Sprintf("%.3f", float64(d)/1e6) }

func ratio(num, den float64) string {
	if den <= 0 || math.IsNaN(num) {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", num/den)
}

func mib(b uint64) string { return fmt.Sprintf("%.1f", float64(b)/(1<<20)) }

// cpuPerReq is microseconds of CPU per request, or -1 when not measured.
func (a *agg) cpuPerReq() float64 {
	if !a.cpuKnown || a.requests == 0 {
		return -1
	}
	return float64(a.cpu) / 1e3 / float64(a.requests)
}

// totalCPUPerReq is the proxy's CPU plus the Postgres cluster's, in
// microseconds per request, or -1 when not measured: what a deployment pays for
// the request, the ledger included. The bare proxy writes no ledger, so its
// figure is its own CPU.
func (a *agg) totalCPUPerReq(t string) float64 {
	v := a.cpuPerReq()
	if v < 0 || t != gateway {
		return v
	}
	return v + float64(a.pgCPU)/1e3/float64(a.requests)
}

func us(v float64) string {
	if v < 0 {
		return "–"
	}
	return fmt.Sprintf("%.0f", v)
}

// addedRounds is, per round, percentile p of target t minus direct's in the same
// round (the runs of one round are adjacent in time, so they share the machine's
// mood).
func (sc *scenario) addedRounds(t string, p float64, first bool) []time.Duration {
	a, d := sc.per[t], sc.per[direct]
	var out []time.Duration
	for i := range min(len(a.rounds), len(d.rounds)) {
		out = append(out, a.pctOf(i, p, first)-d.pctOf(i, p, first))
	}
	return out
}

// added is the median over rounds of the latency target t adds over direct.
func (sc *scenario) added(t string, p float64, first bool) time.Duration {
	return median(sc.addedRounds(t, p, first))
}

// addedRatio is gateway's added latency over baseline's, NaN when baseline adds
// nothing measurable; a gateway below direct (noise) counts as adding nothing.
func (sc *scenario) addedRatio(p float64, first bool) float64 {
	b := sc.added(baseline, p, first)
	if b <= 0 {
		return math.NaN()
	}
	return float64(max(0, sc.added(gateway, p, first))) / float64(b)
}

// roundRatios lists gateway/baseline added latency per round, to show the spread.
func (sc *scenario) roundRatios(p float64, first bool) string {
	g, b := sc.addedRounds(gateway, p, first), sc.addedRounds(baseline, p, first)
	var parts []string
	for i := range min(len(g), len(b)) {
		if b[i] <= 0 {
			parts = append(parts, "n/a")
			continue
		}
		parts = append(parts, fmt.Sprintf("%.2f", float64(max(0, g[i]))/float64(b[i])))
	}
	return strings.Join(parts, ", ")
}

// throughput is the median over rounds of successful requests per second.
func (sc *scenario) throughput(t string) float64 {
	var v []float64
	for _, r := range sc.per[t].rounds {
		if r.elapsed > 0 {
			v = append(v, float64(r.ok)/r.elapsed.Seconds())
		}
	}
	if len(v) == 0 {
		return 0
	}
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// table is a markdown table under construction.
type table struct{ rows [][]string }

func (tb *table) add(cells ...string) { tb.rows = append(tb.rows, cells) }

func (tb *table) write(w io.Writer) {
	for i, r := range tb.rows {
		fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
		if i == 0 {
			fmt.Fprintf(w, "|%s\n", strings.Repeat("---|", len(r)))
		}
	}
}

// row adds one metric of a scenario, one cell per target, then the ratio cell.
func (tb *table) row(sc *scenario, metric string, cell func(t string) string, ratioCell string) {
	cells := []string{sc.name, metric}
	for _, t := range targetNames {
		cells = append(cells, cell(t))
	}
	tb.add(append(cells, ratioCell)...)
}

func latencies(a *agg, first bool) string {
	return ms(a.median(0.50, first)) + " / " + ms(a.median(0.90, first)) + " / " + ms(a.median(0.99, first))
}

func (r *report) write(w io.Writer) {
	for _, h := range r.header {
		fmt.Fprintln(w, h)
	}
	fmt.Fprintln(w)
	tb := &table{}
	tb.add("scenario", "metric", direct, baseline, gateway, "gateway / baseline")
	for _, sc := range r.scenarios {
		tb.row(sc, "requests / errors", func(t string) string {
			return fmt.Sprintf("%d / %d", sc.per[t].requests, sc.per[t].errors())
		}, "")
		switch sc.kind {
		case openKind, closedKind:
			if sc.kind == closedKind {
				tb.row(sc, "throughput (req/s)", func(t string) string {
					return fmt.Sprintf("%.0f", sc.throughput(t))
				}, ratio(sc.throughput(gateway), sc.throughput(baseline)))
			}
			tb.row(sc, "latency p50 / p90 / p99 (ms)", func(t string) string { return latencies(sc.per[t], false) }, "")
			r.addedRows(tb, sc, "added", false)
		case streamKind:
			tb.row(sc, "first chunk p50 / p90 / p99 (ms)", func(t string) string { return latencies(sc.per[t], true) }, "")
			r.addedRows(tb, sc, "added first chunk", true)
			tb.row(sc, "last chunk p50 / p90 / p99 (ms)", func(t string) string { return latencies(sc.per[t], false) }, "")
			r.addedRows(tb, sc, "added last chunk", false)
		}
		tb.row(sc, "proxy CPU per request (µs)", func(t string) string { return us(sc.per[t].cpuPerReq()) },
			ratio(sc.per[gateway].cpuPerReq(), sc.per[baseline].cpuPerReq()))
		if sc.per[gateway].pgCPU > 0 {
			tb.row(sc, "Postgres CPU per request (µs)", func(t string) string {
				a := sc.per[t]
				if a.requests == 0 {
					return "–"
				}
				return fmt.Sprintf("%.0f", float64(a.pgCPU)/1e3/float64(a.requests))
			}, "")
			tb.row(sc, "proxy + its Postgres CPU per request (µs)", func(t string) string {
				if t == direct {
					return "–"
				}
				return us(sc.per[t].totalCPUPerReq(t))
			}, ratio(sc.per[gateway].totalCPUPerReq(gateway), sc.per[baseline].totalCPUPerReq(baseline)))
		}
		if sp := sc.per[gateway].spooled; sp > 0 {
			tb.row(sc, "records spooled to disk, queue full", func(t string) string {
				if t != gateway {
					return "–"
				}
				return fmt.Sprintf("%.0f", sp)
			}, "")
		}
		all := func(t string) float64 {
			a := sc.per[t]
			if a.requests == 0 || a.allCPU <= 0 {
				return -1
			}
			return float64(a.allCPU) / 1e3 / float64(a.requests)
		}
		tb.row(sc, "CPU per request, all processes (µs)", func(t string) string { return us(all(t)) },
			ratio(all(gateway), all(baseline)))
		tb.row(sc, "CPUs used by other processes, median / max of rounds", func(t string) string {
			f := slices.Clone(sc.per[t].foreign)
			if len(f) == 0 {
				return "–"
			}
			slices.Sort(f)
			return fmt.Sprintf("%.2f / %.2f", f[len(f)/2], f[len(f)-1])
		}, "")
	}
	if r.hold != nil {
		name := fmt.Sprintf("%d open streams", r.holdN)
		cell := func(f func(h holdResult) string) func(string) string {
			return func(t string) string {
				h, ok := r.hold[t]
				if !ok {
					return "–"
				}
				return f(h)
			}
		}
		hs := &scenario{name: name}
		tb.row(hs, "streams open at peak / errors", cell(func(h holdResult) string {
			return fmt.Sprintf("%d / %d", h.peakOpen, sumErrs(h.errs))
		}), "")
		tb.row(hs, "RSS while all open, peak sample (MiB)", cell(func(h holdResult) string { return mib(h.peakRSS) }),
			ratio(float64(r.hold[gateway].peakRSS), float64(r.hold[baseline].peakRSS)))
	}
	whole := &scenario{name: "whole run"}
	peak := func(m map[string]uint64) func(string) string {
		return func(t string) string {
			if v, ok := m[t]; ok {
				return mib(v)
			}
			return "–"
		}
	}
	tb.row(whole, "peak RSS during load runs, VmHWM (MiB)", peak(r.peakLoad),
		ratio(float64(r.peakLoad[gateway]), float64(r.peakLoad[baseline])))
	tb.row(whole, "peak RSS incl. open streams, VmHWM (MiB)", peak(r.peakFinal),
		ratio(float64(r.peakFinal[gateway]), float64(r.peakFinal[baseline])))
	tb.write(w)
	if r.hanging != nil {
		r.hanging.write(w)
	}
	if r.tail != nil {
		r.tail.write(w)
	}
	if r.replicas != nil {
		r.replicas.write(w)
	}
	if r.translate != nil {
		r.translate.write(w)
	}
	if r.budget != nil {
		r.budget.write(w)
	}
	if r.tracing != nil {
		r.tracing.write(w)
	}
	if r.cache != nil {
		r.cache.write(w)
	}

	fmt.Fprintln(w)
	r.writeTargets(w)
	if errs := r.errorKinds(); len(errs) > 0 {
		fmt.Fprintln(w, "\nErrors by kind:")
		for _, e := range errs {
			fmt.Fprintln(w, "- "+e)
		}
	}
	if len(r.notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range r.notes {
			fmt.Fprintln(w, "- "+n)
		}
	}
}

func (r *report) addedRows(tb *table, sc *scenario, what string, first bool) {
	tb.row(sc, what+" p50 / p99 (ms)", func(t string) string {
		if t == direct {
			return "–"
		}
		return msAdded(sc.added(t, 0.50, first)) + " / " + msAdded(sc.added(t, 0.99, first))
	}, ratioOrNA(sc.addedRatio(0.50, first))+" / "+ratioOrNA(sc.addedRatio(0.99, first)))
	if len(sc.per[gateway].rounds) > 1 {
		tb.row(sc, what+" p50 ratio, per round", func(string) string { return "" }, sc.roundRatios(0.50, first))
	}
}

func ratioOrNA(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.2fx", v)
}

func sumErrs(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// errorKinds lists every error category with its count, per scenario and target.
func (r *report) errorKinds() []string {
	var out []string
	for _, sc := range r.scenarios {
		for _, t := range targetNames {
			for k, v := range sc.per[t].errs {
				out = append(out, fmt.Sprintf("%s, %s: %d × %s", sc.name, t, v, k))
			}
		}
	}
	for _, t := range targetNames {
		for k, v := range r.hold[t].errs {
			out = append(out, fmt.Sprintf("open streams, %s: %d × %s", t, v, k))
		}
	}
	if r.hanging != nil {
		for k, v := range r.hanging.errs() {
			out = append(out, fmt.Sprintf("hanging primary, gateway, %s: %d", k, v))
		}
	}
	if r.tail != nil {
		for k, v := range r.tail.errs() {
			out = append(out, fmt.Sprintf("tail rescue, gateway, %s: %d", k, v))
		}
	}
	if r.replicas != nil {
		for k, v := range r.replicas.errs() {
			out = append(out, fmt.Sprintf("gateway replicas, %s: %d", k, v))
		}
	}
	if r.translate != nil {
		for k, v := range r.translate.errs() {
			out = append(out, fmt.Sprintf("gateway, %s: %d", k, v))
		}
	}
	if r.budget != nil {
		for k, v := range r.budget.errs() {
			out = append(out, fmt.Sprintf("gateway with budgets, %s: %d", k, v))
		}
	}
	if r.tracing != nil {
		for k, v := range r.tracing.errs() {
			out = append(out, fmt.Sprintf("gateway, %s: %d", k, v))
		}
	}
	if r.cache != nil {
		for k, v := range r.cache.errs() {
			out = append(out, fmt.Sprintf("gateway, %s: %d", k, v))
		}
	}
	sort.Strings(out)
	return out
}
