package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"
)

// The tail-rescue phase: a primary that answers a small share of streams after a long
// first byte, in front of a healthy backup, through one route without hedging and one
// with `hedge: {after: p95, max: 1}`. What hedging buys is the first chunk's p99; what
// it costs is the upstream requests it adds.
const (
	tailSlowRate  = 0.05
	tailSlowDelay = 2 * time.Second
	// A first chunk this late waited out the slow primary: the hedge did not rescue it.
	tailSlowMark = time.Second

	tailBackup        = "tail-backup"
	tailPrimaryOff    = "tail-primary"
	tailPrimaryHedged = "tail-primary-hedged"
	tailModelOff      = "tail-unhedged"
	tailModelHedged   = "tail-hedged"
)

// tailSpec sizes the phase: streams at rate for duration, per run; each round runs
// hedging off and on, back to back. warmup is run once on each route first.
type tailSpec struct {
	rate     int
	duration time.Duration
	rounds   int
	warmup   time.Duration
}

// tailRoutes returns the routes file's providers and models for the phase. Every
// provider is the one mock; the primaries' extra headers make it slow on its share.
// The hedged route has a primary provider of its own: hedging reads the percentile
// from the target's last 64 first-byte samples, and the unhedged route's primary
// feeds that window with 2 s samples that the hedged one never does (its slow
// attempts are cancelled before their first byte). A shared primary would measure
// the two routes' traffic mixed, not hedging.
func tailRoutes(mockURL string) (providers, models string) {
	var p, m strings.Builder
	fmt.Fprintf(&p, `  - name: %s
    format: openai
    base_url: %s/v1
    api_keys: ["${BENCH_UPSTREAM_KEY}"]
    max_concurrency: 4096
    timeouts: { connect: 2s, first_byte: 10s, total: 60s }
    forward_headers: [X-Mock-Chunks, X-Mock-Chunk-Interval]
`, tailBackup, mockURL)
	for _, name := range []string{tailPrimaryOff, tailPrimaryHedged} {
		fmt.Fprintf(&p, `  - name: %s
    format: openai
    base_url: %s/v1
    api_keys: ["${BENCH_UPSTREAM_KEY}"]
    max_concurrency: 4096
    timeouts: { connect: 2s, first_byte: 10s, total: 60s }
    headers: { X-Mock-Slow-Rate: "%g", X-Mock-Slow-Delay: "%s" }
    forward_headers: [X-Mock-Chunks, X-Mock-Chunk-Interval]
`, name, mockURL, tailSlowRate, tailSlowDelay)
	}
	for _, r := range []struct{ model, primary, hedge string }{
		{tailModelOff, tailPrimaryOff, ""},
		{tailModelHedged, tailPrimaryHedged, "    hedge: { after: p95, max: 1 }\n"},
	} {
		fmt.Fprintf(&m, `  - name: %s
%s    candidates:
      - { provider: %s, model: %s, priority: 0 }
      - { provider: %s, model: %s, priority: 1 }
`, r.model, r.hedge, r.primary, benchModel, tailBackup, benchModel)
	}
	return p.String(), m.String()
}

// tailRun is one run of one route: the client's view, and what the mock and the
// gateway counted meanwhile.
type tailRun struct {
	r runResult
	// Chat requests the mock received, and those it saw cancelled (the hedges'
	// losers), during the run.
	upstream, cancelled float64
	// gateway_hedges_total on the backup during the run, by result.
	hedges  map[string]float64
	foreign float64 // CPUs' worth used by processes outside the benchmark
}

// sent is how many requests the driver sent (a run cut short sends fewer).
func (t tailRun) sent() int { return len(t.r.lag) }

// extra is the upstream requests per client request beyond the first.
func (t tailRun) extra() float64 {
	if t.sent() == 0 {
		return math.NaN()
	}
	return t.upstream/float64(t.sent()) - 1
}

// firsts is the successful requests' times to the first chunk, sorted.
func (t tailRun) firsts() []time.Duration {
	var out []time.Duration
	for _, s := range t.r.samples {
		if s.err == "" {
			out = append(out, s.first)
		}
	}
	slices.Sort(out)
	return out
}

type tailRound struct{ off, on tailRun }

// tailResult is the phase's measurements, for the report.
type tailResult struct {
	spec   tailSpec
	rounds []tailRound
	// Hedges started during the warm-up of the hedged route: none would mean the
	// percentile never had its samples.
	warmHedges float64
}

// tailRescue runs the phase into rep.tail.
func (b *bencher) tailRescue(ctx context.Context, rep *report) {
	spec := b.s.tail
	res := &tailResult{spec: spec}
	rep.tail = res
	c, url := b.clients[gateway], b.urls[gateway]+chatPath
	off, on := b.hangingRequest(tailModelOff), b.hangingRequest(tailModelHedged)
	// Warm both routes' pools and records, and give the hedged primary its first-byte
	// samples: no percentile, and so no hedge, before it has 20. openLoop returns when
	// the last answer is in, so the warm-up's slow answers (the ones sent before the
	// percentile existed) land in the window now, not during the first measured run.
	warm := openLoopSpec{rate: spec.rate, duration: spec.warmup, maxInFlight: maxInFlight, timeout: requestTimeout}
	openLoop(ctx, c, url, off, warm)
	h0 := b.tailHedges(ctx)
	openLoop(ctx, c, url, on, warm)
	res.warmHedges = sumValues(b.tailHedges(ctx)) - sumValues(h0)
	b.st.waitRecordsWritten(ctx, 10*time.Second)

	run := openLoopSpec{rate: spec.rate, duration: spec.duration, maxInFlight: maxInFlight, timeout: requestTimeout}
	for round := range spec.rounds {
		var tr tailRound
		for _, which := range rotate([]string{"off", "on"}, round) {
			if ctx.Err() != nil {
				return
			}
			rq, dst := off, &tr.off
			if which == "on" {
				rq, dst = on, &tr.on
			}
			*dst = b.tailMeasure(ctx, func() runResult { return openLoop(ctx, c, url, rq, run) })
			b.st.waitRecordsWritten(ctx, 10*time.Second)
			sleepCtx(ctx, 200*time.Millisecond)
		}
		res.rounds = append(res.rounds, tr)
		fOff, fOn := tr.off.firsts(), tr.on.firsts()
		logf("tail rescue      round %d: first chunk p99 %s ms off, %s ms on; %+.1f%% upstream requests with hedging (%.0f hedges)",
			round+1, ms(pct(fOff, 0.99)), ms(pct(fOn, 0.99)), 100*tr.on.extra(), sumValues(tr.on.hedges))
	}
}

// tailMeasure runs fn and counts what the mock and the gateway saw meanwhile.
func (b *bencher) tailMeasure(ctx context.Context, fn func() runResult) tailRun {
	var t tailRun
	m0, err0 := b.st.mockStats(ctx)
	h0 := b.tailHedges(ctx)
	busy0, own0, wall0 := machineBusy(), b.ownCPU(), time.Now()
	t.r = fn()
	t.foreign = max(0, float64(machineBusy()-busy0-(b.ownCPU()-own0))/float64(time.Since(wall0)))
	m1, err1 := b.st.mockStats(ctx)
	t.upstream, t.cancelled = float64(m1.Requests-m0.Requests), float64(m1.Cancelled-m0.Cancelled)
	if err := errors.Join(err0, err1); err != nil {
		logf("tail rescue: %v", err)
		t.upstream, t.cancelled = math.NaN(), math.NaN() // the target says not measured
	}
	t.hedges = map[string]float64{}
	for k, v := range b.tailHedges(ctx) {
		t.hedges[k] = v - h0[k]
	}
	return t
}

// hedgeResults are gateway_hedges_total's result labels.
var hedgeResults = []string{"won", "lost", "failed"}

// tailHedges reads gateway_hedges_total for the backup, the only candidate a hedge
// of the phase can start, by result.
func (b *bencher) tailHedges(ctx context.Context) map[string]float64 {
	out := map[string]float64{}
	for _, r := range hedgeResults {
		out[r], _ = b.st.gatewaySeries(ctx, "gateway_hedges_total", `provider="`+tailBackup+`"`, `result="`+r+`"`)
	}
	return out
}

func sumValues(m map[string]float64) float64 {
	var s float64
	for _, v := range m {
		s += v
	}
	return s
}

// mockCounts is the part of the mock's /mock/stats the phase reads.
type mockCounts struct {
	Requests  uint64 `json:"requests"`
	Cancelled uint64 `json:"cancelled"`
}

// mockStats reads the mock's counters.
func (st *stack) mockStats(ctx context.Context) (mockCounts, error) {
	var m mockCounts
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, st.mockURL+"/mock/stats", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return m, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return m, fmt.Errorf("mock stats: status %d", resp.StatusCode)
	}
	return m, json.NewDecoder(resp.Body).Decode(&m)
}

// p99Ratios is, per round, hedging off's first-chunk p99 over hedging on's: how many
// times lower hedging makes it. The two runs of a round are back to back, so they
// share the machine's mood.
func (t *tailResult) p99Ratios() []float64 {
	var out []float64
	for _, r := range t.rounds {
		if on := pct(r.on.firsts(), 0.99); on > 0 {
			out = append(out, float64(pct(r.off.firsts(), 0.99))/float64(on))
		}
	}
	return out
}

// p99Ratio is the median of p99Ratios, NaN without any.
func (t *tailResult) p99Ratio() float64 { return medianFloat(t.p99Ratios()) }

func medianFloat(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if n := len(v); n%2 == 0 {
		return (v[n/2-1] + v[n/2]) / 2
	}
	return v[len(v)/2]
}

// extra is the upstream requests per client request beyond the first over every
// round's run of one side (on: hedging on).
func (t *tailResult) extra(on bool) float64 {
	var up float64
	var sent int
	for _, r := range t.rounds {
		run := r.off
		if on {
			run = r.on
		}
		up += run.upstream
		sent += run.sent()
	}
	if sent == 0 {
		return math.NaN()
	}
	return up/float64(sent) - 1
}

// medianPct is the median over rounds of percentile p of one side's first chunks.
func (t *tailResult) medianPct(on bool, p float64) time.Duration {
	var v []time.Duration
	for _, r := range t.rounds {
		run := r.off
		if on {
			run = r.on
		}
		v = append(v, pct(run.firsts(), p))
	}
	return median(v)
}

// errs is the phase's failed requests by kind, both runs of every round.
func (t *tailResult) errs() map[string]int {
	out := map[string]int{}
	for _, r := range t.rounds {
		for _, s := range r.off.r.samples {
			if s.err != "" {
				out["hedging off: "+s.err]++
			}
		}
		for _, s := range r.on.r.samples {
			if s.err != "" {
				out["hedging on: "+s.err]++
			}
		}
	}
	return out
}

// write prints the phase's table.
func (t *tailResult) write(w io.Writer) {
	if len(t.rounds) == 0 {
		return
	}
	fmt.Fprintf(w, "\nTail rescue (gateway only): streams at %d/s for %v per run, %d rounds. The primary (priority 0) sends the first byte of %.0f%% of streams after %v (X-Mock-Slow-Rate, every %.0fth stream), the backup (priority 1) at once; hedging off is a route without a hedge block, hedging on the same two candidates with `hedge: {after: p95, max: 1}` and a primary provider of its own (its first-byte samples stay its own); %v of warm-up on each route first (%.0f hedges during the hedged one). Latencies are medians over rounds; upstream requests are the mock's count.\n\n",
		t.spec.rate, t.spec.duration, len(t.rounds), 100*tailSlowRate, tailSlowDelay, 1/tailSlowRate, t.spec.warmup, t.warmHedges)
	tb := &table{}
	tb.add("tail rescue", "hedging off", "hedging on", "off / on")
	var reqOff, reqOn, errOff, errOn int
	var slowOff, slowOn, upOff, upOn, hedges, cancelled, foreignOff, foreignOn []string
	for _, r := range t.rounds {
		reqOff, reqOn = reqOff+r.off.sent(), reqOn+r.on.sent()
		errOff, errOn = errOff+len(r.off.r.samples)-len(r.off.firsts()), errOn+len(r.on.r.samples)-len(r.on.firsts())
		slow := func(f []time.Duration) string {
			i, _ := slices.BinarySearch(f, tailSlowMark)
			return fmt.Sprint(len(f) - i)
		}
		slowOff, slowOn = append(slowOff, slow(r.off.firsts())), append(slowOn, slow(r.on.firsts()))
		upOff = append(upOff, fmt.Sprintf("%.0f (%+.1f%%)", r.off.upstream, 100*r.off.extra()))
		upOn = append(upOn, fmt.Sprintf("%.0f (%+.1f%%)", r.on.upstream, 100*r.on.extra()))
		hedges = append(hedges, fmt.Sprintf("%.0f / %.0f / %.0f / %.0f", sumValues(r.on.hedges), r.on.hedges["won"], r.on.hedges["lost"], r.on.hedges["failed"]))
		cancelled = append(cancelled, fmt.Sprintf("%.0f", r.on.cancelled))
		foreignOff, foreignOn = append(foreignOff, fmt.Sprintf("%.2f", r.off.foreign)), append(foreignOn, fmt.Sprintf("%.2f", r.on.foreign))
	}
	tb.add("requests / errors, all rounds", fmt.Sprintf("%d / %d", reqOff, errOff), fmt.Sprintf("%d / %d", reqOn, errOn), "")
	lat := func(on bool) string {
		return ms(t.medianPct(on, 0.50)) + " / " + ms(t.medianPct(on, 0.95)) + " / " + ms(t.medianPct(on, 0.99))
	}
	var per []string
	for _, v := range t.p99Ratios() {
		per = append(per, fmt.Sprintf("%.1f", v))
	}
	tb.add("first chunk p50 / p95 / p99 (ms)", lat(false), lat(true),
		"p99 "+ratioOrNA(t.p99Ratio())+" (rounds: "+strings.Join(per, ", ")+")")
	tb.add(fmt.Sprintf("first chunk ≥ %v (not rescued), per round", tailSlowMark), strings.Join(slowOff, ", "), strings.Join(slowOn, ", "), "")
	tb.add("upstream requests (extra per client request), per round", strings.Join(upOff, "; "), strings.Join(upOn, "; "),
		fmt.Sprintf("all rounds: %+.1f%% / %+.1f%%", 100*t.extra(false), 100*t.extra(true)))
	tb.add("hedges started / won / lost / failed (gateway_hedges_total), per round", "–", strings.Join(hedges, "; "), "")
	tb.add("upstream requests cancelled (mock's count: the hedges' losers), per round", "–", strings.Join(cancelled, ", "), "")
	tb.add("CPUs used by other processes, per round", strings.Join(foreignOff, ", "), strings.Join(foreignOn, ", "), "")
	tb.write(w)
}

// writeTargets adds the phase's targets to tb.
func (t *tailResult) writeTargets(tb *table, verdict func(ok, measured bool) string) {
	if len(t.rounds) == 0 {
		return
	}
	// A stream that failed never had a first chunk: with any, the percentiles of the
	// ones that succeeded cannot stand for the run.
	failed := sumErrs(t.errs())
	v := t.p99Ratio()
	measured := ratioOrNA(v)
	if failed > 0 {
		measured += fmt.Sprintf(" over the successful streams only: %d failed", failed)
	}
	tb.add("tail rescue: first chunk p99 at least 5x lower with hedging on (after: p95)", measured, verdict(v >= 5 && failed == 0, !math.IsNaN(v) || failed > 0))
	e := t.extra(true)
	tb.add("tail rescue: fewer than 10% extra upstream requests with hedging on", fmt.Sprintf("%+.1f%%", 100*e), verdict(e < 0.10, !math.IsNaN(e)))
}
